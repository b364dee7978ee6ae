// bench/args.ts through a real benchmark script (built, as `npm test` builds first): --help prints the script's
// header comment, a bad option is named in one line above that text with exit code 2 and no stack trace.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const bench = (...args: string[]) => spawnSync('node', [join(root, 'dist', 'bench', 'verifier.js'), ...args], { encoding: 'utf8' });
const firstHeaderLine = readFileSync(join(root, 'bench', 'verifier.ts'), 'utf8').split('\n')[0]!.replace(/^\/\/ /, '');

describe("the benchmarks' command lines", () => {
  it('--help prints what the script measures and how to run it', () => {
    const result = bench('--help');
    expect(result.status).toBe(0);
    expect(result.stdout.split('\n')[0]).toBe(firstHeaderLine);
    expect(result.stdout).toContain('node dist/bench/verifier.js [--jobs 240]');
  });

  it('names a bad option in one line, then the usage, without a stack trace', () => {
    const result = bench('--job', '3');
    expect(result.status).toBe(2);
    expect(result.stderr.split('\n')[0]).toMatch(/^verifier\.js: Unknown option '--job'/);
    expect(result.stderr).toContain(firstHeaderLine);
    expect(result.stderr).not.toMatch(/^\s+at /m);
  });
});
