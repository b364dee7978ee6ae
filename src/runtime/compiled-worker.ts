// Worker threads (piscina) run plain JavaScript: a worker module is always loaded from the build output, also when
// its caller runs from the TypeScript sources (vitest). `url` names the worker next to its caller, as a .js file.

import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export function compiledWorker(url: URL): string {
  const here = fileURLToPath(url);
  const compiled = here.includes('/dist/') ? here : here.replace(/\/(src|actors)\//, '/dist/$1/');
  if (!existsSync(compiled)) throw new Error(`the worker ${compiled} is missing: run "npm run build" first`);
  return compiled;
}
