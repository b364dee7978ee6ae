// What a plug-in's code is, as a run records it: the sha256 of its module file and of every local file it imports,
// directly or through another (relative or absolute specifiers, static or dynamic with a literal name, re-exports
// included), found by es-module-lexer. Packages it imports by name (`populora`, `zod`, a package of its own) are
// not hashed: their versions are the installation's. A dynamic import of a computed name cannot be followed and is
// refused, since the run could not say which code it ran.

import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { init, parse } from 'es-module-lexer';
import { PluginError } from './errors.js';

/** A file of a plug-in's code and its content hash. */
export interface HashedFile {
  path: string; // absolute
  sha256: string;
}

/** A plug-in's module and the local files it imports (in the order first met, depth first). */
export interface PluginFiles {
  module: HashedFile;
  imports: HashedFile[];
}

export class PluginFileError extends PluginError {}

/** Most local files one plug-in may import (a guard against a runaway import graph). */
const MAX_FILES = 1000;

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** Extensions whose imports are followed; other imported files (JSON, WebAssembly) are hashed as they are. */
const CODE = new Set(['.js', '.mjs', '.cjs', '.ts', '.mts', '.cts']);

const isLocal = (specifier: string) => specifier.startsWith('./') || specifier.startsWith('../') || specifier.startsWith('/') || specifier.startsWith('file:');

function localPath(specifier: string, from: string): string {
  const bare = specifier.replace(/[?#].*$/, '');
  return bare.startsWith('file:') ? fileURLToPath(bare) : isAbsolute(bare) ? bare : resolve(dirname(from), bare);
}

let lexerReady = false;

/** Readies the module lexer (WebAssembly, compiled once a process); hashPluginFiles needs it. */
export async function prepareHashing(): Promise<void> {
  await init;
  lexerReady = true;
}

/**
 * The module at `path` and every local file it imports, hashed (after prepareHashing). Throws a PluginFileError
 * naming the file that is wrong.
 */
export function hashPluginFiles(path: string): PluginFiles {
  if (!lexerReady) throw new Error('hashPluginFiles: await prepareHashing() first');
  const seen = new Map<string, string>(); // path → sha256, in the order first met
  const visit = (file: string, importedBy: string | null) => {
    if (seen.has(file)) return;
    if (!existsSync(file) || !statSync(file).isFile()) {
      throw new PluginFileError(importedBy === null ? `${file} does not exist` : `${importedBy} imports ${file}, which does not exist (an ES module names the file it imports whole, extension included)`);
    }
    if (seen.size >= MAX_FILES) throw new PluginFileError(`${path} imports more than ${MAX_FILES} local files`);
    const bytes = readFileSync(file);
    seen.set(file, sha256(bytes));
    if (!CODE.has(extname(file))) return;
    let imports: ReturnType<typeof parse>[0];
    try {
      [imports] = parse(bytes.toString('utf8'), file);
    } catch (error) {
      throw new PluginFileError(`${file} cannot be read as an ES module: ${(error as Error).message}`);
    }
    for (const entry of imports) {
      if (entry.n === undefined) {
        if (entry.d > -1) throw new PluginFileError(`${file} imports a module whose name is computed at run time: a run could not record which code it ran; import it by a literal name`);
        continue; // import.meta
      }
      if (isLocal(entry.n)) visit(localPath(entry.n, file), file);
    }
  };
  visit(path, null);
  const [module, ...imports] = [...seen].map(([file, hash]) => ({ path: file, sha256: hash }));
  return { module: module!, imports };
}
