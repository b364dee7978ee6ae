// Completes package-lock.json with other platforms' optional packages, so that `npm ci` accepts it everywhere.
//
// Why: npm 11 leaves out of the lock the platform packages it could not resolve (npm/cli#8320), and the
// registry mirror this project is built against serves only some platforms' binaries; `npm ci` then refuses
// the lock on every machine ("Missing: @rollup/rollup-darwin-arm64@ from lock file"). Each missing package is
// added with its version (pinned by its parent), its registry URL and the os/cpu/libc fields of its own
// package.json (the table below, copied from the upstream repositories), so npm skips it on other platforms
// and fetches it on its own. Such entries carry no integrity hash (it cannot be read here); npm checks
// nothing then for those few binaries, and writes the hash on the next `npm install` where they resolve.
//
//   node scripts/complete-lock.mjs           add what is missing to package-lock.json
//   node scripts/complete-lock.mjs --check   exit 1 and name what is missing (CI)
//   ... bench/peers/package-lock.json        another lock: the peer benchmark's (node-llama-cpp, installed on demand)

import { readFileSync, writeFileSync } from 'node:fs';

// name → [os, cpu, libc] from each package's package.json (rollup/rollup npm/*, withcatai/node-llama-cpp
// packages/@node-llama-cpp/*, kriszyp/msgpackr-extract's prebuildify platform packages).
const PLATFORMS = {
  '@msgpackr-extract/msgpackr-extract-darwin-arm64': [['darwin'], ['arm64']],
  '@msgpackr-extract/msgpackr-extract-darwin-x64': [['darwin'], ['x64']],
  '@msgpackr-extract/msgpackr-extract-linux-arm': [['linux'], ['arm']],
  '@msgpackr-extract/msgpackr-extract-linux-arm64': [['linux'], ['arm64']],
  '@msgpackr-extract/msgpackr-extract-linux-x64': [['linux'], ['x64']],
  '@msgpackr-extract/msgpackr-extract-win32-x64': [['win32'], ['x64']],
  '@node-llama-cpp/linux-arm64': [['linux'], ['arm64', 'x64'], ['glibc']],
  '@node-llama-cpp/linux-armv7l': [['linux'], ['arm', 'x64'], ['glibc']],
  '@node-llama-cpp/linux-riscv64': [['linux'], ['riscv64'], ['glibc']],
  '@node-llama-cpp/linux-x64': [['linux'], ['x64'], ['glibc']],
  '@node-llama-cpp/linux-x64-cuda': [['linux'], ['x64'], ['glibc']],
  '@node-llama-cpp/linux-x64-cuda-ext': [['linux'], ['x64'], ['glibc']],
  '@node-llama-cpp/linux-x64-vulkan': [['linux'], ['x64'], ['glibc']],
  '@node-llama-cpp/mac-arm64-metal': [['darwin'], ['arm64', 'x64']],
  '@node-llama-cpp/mac-x64': [['darwin'], ['x64']],
  '@node-llama-cpp/win-arm64': [['win32'], ['arm64', 'x64']],
  '@node-llama-cpp/win-x64': [['win32'], ['x64']],
  '@node-llama-cpp/win-x64-cuda': [['win32'], ['x64']],
  '@node-llama-cpp/win-x64-cuda-ext': [['win32'], ['x64']],
  '@node-llama-cpp/win-x64-vulkan': [['win32'], ['x64']],
  '@rollup/rollup-android-arm-eabi': [['android'], ['arm']],
  '@rollup/rollup-android-arm64': [['android'], ['arm64']],
  '@rollup/rollup-android-x64': [['android'], ['x64']], // newer than the upstream snapshot read; named by rollup's convention
  '@rollup/rollup-darwin-arm64': [['darwin'], ['arm64']],
  '@rollup/rollup-darwin-x64': [['darwin'], ['x64']],
  '@rollup/rollup-freebsd-arm64': [['freebsd'], ['arm64']],
  '@rollup/rollup-freebsd-x64': [['freebsd'], ['x64']],
  '@rollup/rollup-linux-arm-gnueabihf': [['linux'], ['arm'], ['glibc']],
  '@rollup/rollup-linux-arm-musleabihf': [['linux'], ['arm'], ['musl']],
  '@rollup/rollup-linux-arm64-gnu': [['linux'], ['arm64'], ['glibc']],
  '@rollup/rollup-linux-arm64-musl': [['linux'], ['arm64'], ['musl']],
  '@rollup/rollup-linux-loong64-gnu': [['linux'], ['loong64'], ['glibc']],
  '@rollup/rollup-linux-loong64-musl': [['linux'], ['loong64'], ['musl']],
  '@rollup/rollup-linux-ppc64-gnu': [['linux'], ['ppc64'], ['glibc']],
  '@rollup/rollup-linux-ppc64-musl': [['linux'], ['ppc64'], ['musl']],
  '@rollup/rollup-linux-riscv64-gnu': [['linux'], ['riscv64'], ['glibc']],
  '@rollup/rollup-linux-riscv64-musl': [['linux'], ['riscv64'], ['musl']],
  '@rollup/rollup-linux-s390x-gnu': [['linux'], ['s390x'], ['glibc']],
  '@rollup/rollup-linux-x64-gnu': [['linux'], ['x64'], ['glibc']],
  '@rollup/rollup-linux-x64-musl': [['linux'], ['x64'], ['musl']],
  '@rollup/rollup-openbsd-x64': [['openbsd'], ['x64']],
  '@rollup/rollup-openharmony-arm64': [['openharmony'], ['arm64']],
  '@rollup/rollup-win32-arm64-msvc': [['win32'], ['arm64']],
  '@rollup/rollup-win32-ia32-msvc': [['win32'], ['ia32']],
  '@rollup/rollup-win32-x64-gnu': [['win32'], ['x64']],
  '@rollup/rollup-win32-x64-msvc': [['win32'], ['x64']],
};

const lockArgument = process.argv.slice(2).find((arg) => !arg.startsWith('--'));
const LOCK = lockArgument ?? new URL('../package-lock.json', import.meta.url);
const LOCK_NAME = lockArgument ?? 'package-lock.json';
const lock = JSON.parse(readFileSync(LOCK, 'utf8'));
const packages = lock.packages;

/** The lock key a dependency of the package at `parentKey` resolves to (Node's lookup: nearest node_modules up). */
function resolvedKey(parentKey, name) {
  for (let dir = parentKey; ; dir = dir.slice(0, Math.max(0, dir.lastIndexOf('/node_modules/')))) {
    const key = `${dir ? `${dir}/` : ''}node_modules/${name}`;
    if (packages[key]) return key;
    if (!dir) return null;
  }
}

const missing = new Map(); // lock key → entry
const unknown = [];
for (const [parentKey, parent] of Object.entries(packages)) {
  for (const [name, spec] of Object.entries(parent.optionalDependencies ?? {})) {
    if (resolvedKey(parentKey, name)) continue;
    const platform = PLATFORMS[name];
    if (!/^\d+\.\d+\.\d+$/.test(spec) || !platform) {
      unknown.push(`${name}@${spec} (optional dependency of ${parentKey || 'the project'})`);
      continue;
    }
    const [os, cpu, libc] = platform;
    const entry = { version: spec, resolved: `https://registry.npmjs.org/${name}/-/${name.split('/').pop()}-${spec}.tgz`, cpu, ...(parent.dev ? { dev: true } : {}), ...(libc ? { libc } : {}), optional: true, os };
    missing.set(`node_modules/${name}`, entry);
  }
}

if (unknown.length > 0) {
  console.error(`scripts/complete-lock.mjs: no platform fields known for:\n  ${unknown.join('\n  ')}\nadd each to PLATFORMS from its package.json's os/cpu/libc (a non-exact version: pin it in its parent first)`);
  process.exit(1);
}
if (process.argv.includes('--check')) {
  if (missing.size > 0) {
    console.error(`${LOCK_NAME} lacks ${missing.size} optional platform packages (${[...missing.keys()].slice(0, 3).join(', ')}, …): run node scripts/complete-lock.mjs${lockArgument ? ` ${lockArgument}` : ''} and commit the lock`);
    process.exit(1);
  }
  console.log(`${LOCK_NAME}: every optional platform package is locked`);
  process.exit(0);
}
lock.packages = Object.fromEntries(Object.entries({ ...packages, ...Object.fromEntries(missing) }).sort(([a], [b]) => a.localeCompare(b, 'en'))); // npm's order
writeFileSync(LOCK, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`${LOCK_NAME}: added ${missing.size} optional platform packages`);
