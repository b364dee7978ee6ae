// The peer benchmark's install step: node-llama-cpp (llama.cpp's prebuilt CPU, Vulkan and CUDA binaries, about
// 700 MB) is not a dependency of populora. It is installed on demand, the first time a peer benchmark needs it,
// into bench/peers/node_modules from bench/peers/package.json and its own lock (`npm ci`: the same versions every
// time), so that a clone's `npm install` stays small. To install it ahead of time: npm ci --prefix bench/peers.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** bench/peers in the source tree (this file runs from dist/bench/peers once built). */
export const PEERS_DIR = dirname(fileURLToPath(import.meta.url)).replace(/[/\\]dist([/\\]bench[/\\]peers)$/, '$1');

const packageFile = join(PEERS_DIR, 'node_modules', 'node-llama-cpp', 'package.json');

/** Installs bench/peers' dependencies if they are not there yet (with a line saying so), and returns node-llama-cpp's folder. */
export function ensureNodeLlamaCpp(): string {
  if (!existsSync(packageFile)) {
    console.error(`node-llama-cpp is not installed: installing it now into ${join(PEERS_DIR, 'node_modules')} (npm ci from bench/peers/package-lock.json, about 700 MB, once)`);
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const result = spawnSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: PEERS_DIR, stdio: 'inherit' });
    if (result.error || result.status !== 0) throw new Error(`npm ci in ${PEERS_DIR} failed (${result.error?.message ?? `exit status ${result.status}`}); run it by hand: npm ci --prefix bench/peers`);
  }
  return dirname(packageFile);
}

/** node-llama-cpp's module, from bench/peers/node_modules (installed first if need be). */
export async function importNodeLlamaCpp(): Promise<typeof import('node-llama-cpp')> {
  ensureNodeLlamaCpp();
  const entry = createRequire(join(PEERS_DIR, 'package.json')).resolve('node-llama-cpp');
  return (await import(pathToFileURL(entry).href)) as typeof import('node-llama-cpp');
}
