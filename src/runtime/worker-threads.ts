// What the worker pools (the verifier's, the SVD crossover's) share: where a worker module is, and how a batch is
// cut so that results never depend on the number of workers.

import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';

/**
 * Worker threads (piscina) run plain JavaScript: a worker module is always loaded from the build output, also when
 * its caller runs from the TypeScript sources (vitest). `url` names the worker next to its caller, as a .js file.
 */
export function compiledWorker(url: URL): string {
  const here = fileURLToPath(url);
  const compiled = here.includes('/dist/') ? here : here.replace(/\/(src|actors)\//, '/dist/$1/');
  if (!existsSync(compiled)) throw new Error(`the worker ${compiled} is missing: run "npm run build" first`);
  return compiled;
}

/** At most `parts` contiguous chunks of the items, in order: their results, concatenated, are in item order. */
export function contiguousChunks<T>(items: readonly T[], parts: number): T[][] {
  if (items.length === 0) return [];
  const size = Math.ceil(items.length / parts);
  return Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));
}

/** Threads for a pool set to `auto`: one per core, less the main thread's, at most 8; a number is taken as it is. */
export function threadCount(setting: number | 'auto'): number {
  return setting === 'auto' ? Math.max(1, Math.min(8, availableParallelism() - 1)) : setting;
}
