// The benchmarks' command lines: node:util's parseArgs, with `--help` printing the script's header comment (what it
// measures and how to run it) and a bad option or value (BenchUsageError) named in one line, instead of a stack trace.

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

/** A bad option value, which the script names in one line (exit code 2) instead of a stack trace. */
export class BenchUsageError extends Error {}

/**
 * parseArgs(config).values for the script at `scriptUrl` (its import.meta.url); exits on --help or a bad option,
 * and from now on on a BenchUsageError thrown anywhere in the script (other errors: their stack, exit code 1).
 */
export function benchArgs<T extends ParseArgsConfig>(scriptUrl: string, config: T): ReturnType<typeof parseArgs<T>>['values'] {
  const script = basename(fileURLToPath(scriptUrl));
  const onFailure = (error: unknown) => {
    if (error instanceof BenchUsageError) console.error(`${script}: ${error.message} (--help: its options)`);
    else console.error(error); // as Node would: the stack
    process.exit(error instanceof BenchUsageError ? 2 : 1);
  };
  process.on('uncaughtException', onFailure).on('unhandledRejection', onFailure);
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    console.log(header(scriptUrl));
    process.exit(0);
  }
  try {
    return parseArgs<T>({ ...config, args }).values;
  } catch (error) {
    console.error(`${script}: ${(error as Error).message}\n\n${header(scriptUrl)}`);
    process.exit(2);
  }
}
