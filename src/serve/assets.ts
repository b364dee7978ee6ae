// The dashboard's static files: its own (src/serve/assets/: plain JavaScript and CSS, no build step), uPlot (the
// report's plotting library) and the report's page script (src/report/page.ts, the function report.html runs),
// served by a fixed name each: a request never names a file.

import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderPage } from '../report/page.js';

const require = createRequire(import.meta.url);

/** src/serve/assets/ in the package: found from this file, which runs from src/ (tests) or dist/src/ (the command). */
function assetsFolder(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    const candidate = join(dir, 'src', 'serve', 'assets');
    if (existsSync(join(candidate, 'run.js'))) return candidate;
  }
  throw new Error(`the dashboard's pages (src/serve/assets/) are missing from the package around ${fileURLToPath(import.meta.url)}`);
}

const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';
const own = (name: string, type: string) => () => ({ type, body: readFileSync(join(assetsFolder(), name)) });

const SOURCES: Record<string, () => { type: string; body: string | Buffer }> = {
  'dashboard.css': own('dashboard.css', CSS),
  'common.js': own('common.js', JS),
  'index.js': own('index.js', JS),
  'run.js': own('run.js', JS),
  'samples.js': own('samples.js', JS),
  'sweep.js': own('sweep.js', JS),
  'event.js': own('event.js', JS),
  'uplot.js': () => ({ type: JS, body: readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js')) }),
  'uplot.css': () => ({ type: CSS, body: readFileSync(require.resolve('uplot/dist/uPlot.min.css')) }),
  'report-page.js': () => ({ type: JS, body: `// src/report/page.ts, as report.html runs it\nwindow.renderReportPage = ${renderPage.toString()};\n` }),
};

export const ASSET_NAMES: ReadonlySet<string> = new Set(Object.keys(SOURCES));

const cache = new Map<string, { type: string; body: string | Buffer }>();

/** A static file by its name (one of ASSET_NAMES), read once. */
export function asset(name: string): { type: string; body: string | Buffer } {
  let found = cache.get(name);
  if (!found) cache.set(name, (found = SOURCES[name]!()));
  return found;
}
