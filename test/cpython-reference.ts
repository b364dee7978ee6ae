// The host's CPython as the independent oracle of the code domain's tests: the outputs a program gives on each input.
import { spawnSync } from 'node:child_process';
import { expect } from 'vitest';

/** The host's CPython runs each program on each input (argument lists as text): the repr of each output. */
export function cpythonOutputs(cases: ReadonlyArray<{ program: string; inputs: string[] }>): string[][] {
  const script = `
import json, sys, ast
out = []
for case in json.load(sys.stdin):
    g = {}
    exec(case['program'], g)
    out.append([repr(g['f'](*ast.literal_eval('(' + i + ',)'))) for i in case['inputs']])
print(json.dumps(out))`;
  const run = spawnSync('python3', ['-c', script], { input: JSON.stringify(cases), encoding: 'utf8', env: { ...process.env, PYTHONHASHSEED: '0' } });
  expect(run.status, `python3 is needed as the reference: ${run.stderr}`).toBe(0);
  return JSON.parse(run.stdout) as string[][];
}
