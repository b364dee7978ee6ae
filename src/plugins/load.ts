// Loading a scenario's plug-ins: each module hashed with the local files it imports (files.ts), imported, its
// default export checked against its kind (kinds.ts) and registered under its absolute path, where the scenario
// schema and the actors find it. Node imports a module once a process: a plug-in whose files changed after this
// process imported it is refused (the code that would run is not the code the run would record).
//
// A plug-in may `import { defineMatchPolicy, z } from 'populora'` wherever it lives (resolve-hook.ts).

import { existsSync } from 'node:fs';
import { register } from 'node:module';
import { extname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import type { PluginKind, PluginRecord } from '../scenario/plugin-fields.js';
import { PluginError } from './errors.js';
import { hashPluginFiles, prepareHashing, type PluginFiles } from './files.js';
import { checkShape, registerPlugin } from './kinds.js';

/** What this process imported, by module path: its files as they were then, and the kinds it was registered as. */
const imported = new Map<string, { files: PluginFiles; value: object; kinds: Set<PluginKind> }>();

let resolverRegistered = false;

/** `import 'populora'` from a plug-in resolves to this populora where Node finds no other (resolve-hook.ts). */
function registerPopuloraResolver(): void {
  if (resolverRegistered) return;
  resolverRegistered = true;
  // the compiled files, also when this module runs from the TypeScript sources (vitest)
  const compiled = (name: string) => {
    const path = fileURLToPath(new URL(name, import.meta.url));
    return path.includes('/dist/') ? path : path.replace(/\/src\//, '/dist/src/');
  };
  const [hook, self] = [compiled('./resolve-hook.js'), compiled('../index.js')];
  if (existsSync(hook) && existsSync(self)) register(pathToFileURL(hook).href, { data: { self: pathToFileURL(self).href } });
}

async function importDefault(path: string, label: string): Promise<unknown> {
  registerPopuloraResolver();
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ERR_UNKNOWN_FILE_EXTENSION' && /\.[cm]?ts$/.test(extname(path))) {
      throw new PluginError(`${label}: this Node cannot import TypeScript; compile the plug-in to JavaScript (tsc, esbuild) and name the .js file, or run populora on a Node that strips types (node --experimental-strip-types, Node 22.6+) (docs/plugins.md, "TypeScript plug-ins")`);
    }
    const message = (error as Error).message ?? String(error);
    const hint = /Cannot use import statement outside a module|Unexpected token 'export'/.test(message) ? ' (Node took it for CommonJS: name it .mjs, or put a package.json with "type": "module" beside it)' : '';
    throw new PluginError(`${label}: cannot import it: ${message}${hint}`);
  }
  if (!('default' in module)) throw new PluginError(`${label}: the module has no default export; a plug-in exports its object as the default (export default defineMatchPolicy({ ... }): docs/plugins.md)`);
  return module['default'];
}

/** The files of the module at `path` as they are now; a problem is refused naming `label` (the scenario and field). */
export async function currentFiles(path: string, label: string): Promise<PluginFiles> {
  await prepareHashing();
  return filesNow(path, label);
}

function filesNow(path: string, label: string): PluginFiles {
  try {
    return hashPluginFiles(path);
  } catch (error) {
    if (error instanceof PluginError) throw new PluginError(`${label}: ${error.message}`);
    throw error;
  }
}

/** The first file of `before` whose hash differs in `now` (or that `now` no longer imports), or one `now` adds. */
export function changedFile(before: PluginFiles, now: PluginFiles): string | null {
  if (isDeepStrictEqual(before, now)) return null;
  const [a, b] = [[before.module, ...before.imports], [now.module, ...now.imports]];
  return (a.find((f) => b.find((g) => g.path === f.path)?.sha256 !== f.sha256) ?? b.find((g) => !a.some((f) => f.path === g.path)))?.path ?? before.module.path;
}

/** Refuses a plug-in whose files changed after this process imported it (Node would run the old code). */
function checkNotStale(before: PluginFiles, now: PluginFiles, label: string): void {
  const changed = changedFile(before, now);
  if (changed) throw new PluginError(`${label}: ${changed} changed after this process imported the plug-in, and Node cannot import a changed module again; run it in a new process`);
}

/** Imports the plug-in at `path`, checks it as a `kind` named by `field`, and registers it; its record for the run. */
export async function loadPlugin(kind: PluginKind, path: string, field: string, label: string): Promise<PluginRecord> {
  const files = await currentFiles(path, label);
  let entry = imported.get(path);
  if (entry) checkNotStale(entry.files, files, label);
  else {
    entry = { files, value: (await importDefault(path, label)) as object, kinds: new Set() };
    imported.set(path, entry);
  }
  checkShape(kind, entry.value, path, field); // per field: a module may serve two (mutation and crossover), or two kinds
  if (!entry.kinds.has(kind)) {
    registerPlugin(kind, entry.value, path);
    entry.kinds.add(kind);
  }
  return recordOf(field, files);
}

/** The record of a plug-in this process loaded, with its files as they are now (null: not loaded as a `kind`). */
export function loadedRecord(kind: PluginKind, path: string, field: string, label: string): PluginRecord | null {
  const entry = imported.get(path);
  if (!entry || !entry.kinds.has(kind)) return null;
  const files = filesNow(path, label);
  checkNotStale(entry.files, files, label);
  checkShape(kind, entry.value, path, field);
  return recordOf(field, files);
}

const recordOf = (field: string, files: PluginFiles): PluginRecord => ({ field, path: files.module.path, sha256: files.module.sha256, imports: files.imports });
