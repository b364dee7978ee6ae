// bench/args.ts through real benchmark scripts (built, as `npm test` builds first): --help prints the script's
// header comment; a bad option, or a bad option value, is named in one line with exit code 2 and no stack trace.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const run = (script: string, ...args: string[]) => spawnSync('node', [join(root, 'dist', 'bench', script), ...args], { encoding: 'utf8' });
const bench = (...args: string[]) => run('verifier.js', ...args);
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

  it('names a bad option value in one line, without a stack trace', () => {
    const result = run('inference.js', '--shapes', '1x0');
    expect(result.status).toBe(2);
    expect(result.stderr.trim()).toBe('inference.js: --shapes: "1x0" is not BATCHxADAPTERS with at least 1 adapters, e.g. 8x8 (each batch gets its base-only row too) (--help: its options)');
  });
});
