// Files the code domain ships beside its source (sandbox/*.py, prompts/*.yaml, held-out-tasks.json): read from
// src/domains/python/, also when the code runs from dist/ (tsc copies no data files).

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The text of a file at `relative` beside this folder's source; a missing one names the incomplete package. */
export function readPackageFile(relative: string): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const path = [here, here.replace(/\/dist\/src\//, '/src/')].map((dir) => join(dir, relative)).find(existsSync);
  if (!path) throw new Error(`${relative} is missing beside ${here} (the package is incomplete)`);
  return readFileSync(path, 'utf8');
}
