// The benchmarks' command lines: node:util's parseArgs, with `--help` printing the script's header comment (what it
// measures and how to run it) and a bad option named in one line above that text, instead of a stack trace.

import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** The leading comment of the script at `scriptUrl`, without its `//`. */
function header(scriptUrl: string): string {
  const lines: string[] = [];
  for (const line of readFileSync(fileURLToPath(scriptUrl), 'utf8').split('\n')) {
    if (!line.startsWith('//')) break;
    lines.push(line.replace(/^\/\/ ?/, ''));
  }
  return lines.join('\n');
}

/** parseArgs(config).values for the script at `scriptUrl` (its import.meta.url); exits on --help or a bad option. */
export function benchArgs<T extends ParseArgsConfig>(scriptUrl: string, config: T): ReturnType<typeof parseArgs<T>>['values'] {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    console.log(header(scriptUrl));
    process.exit(0);
  }
  try {
    return parseArgs<T>({ ...config, args }).values;
  } catch (error) {
    console.error(`${basename(fileURLToPath(scriptUrl))}: ${(error as Error).message}\n\n${header(scriptUrl)}`);
    process.exit(2);
  }
}
