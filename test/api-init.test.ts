// `populora init DIR` as a new user meets it: the experiment folder it writes (outside the repository) runs at once
// with `populora sweep DIR/sweep.yaml`, its policy importing 'populora' from a folder where Node's own lookup finds
// none (as under npx); and init refuses a folder that holds files.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const bin = join(import.meta.dirname, '..', 'dist', 'src', 'cli', 'main.js');
const cwd = mkdtempSync(join(tmpdir(), 'populora-init-'));
const populora = (...args: string[]) => spawnSync('node', [bin, ...args], { cwd, encoding: 'utf8', timeout: 300_000 });

describe('populora init', () => {
  it('writes an experiment that `populora sweep` runs at once: the plug-in policy against a built-in, each run recording the policy it ran', () => {
    const init = populora('init', 'exp');
    expect(init.status, init.stderr).toBe(0);
    for (const file of ['scenario.yaml', 'policies/near-rating.js', 'sweep.yaml', 'README.md']) expect(existsSync(join(cwd, 'exp', file)), file).toBe(true);
    expect(readFileSync(join(cwd, 'exp', 'README.md'), 'utf8').trim().split('\n')).toHaveLength(4);
    expect(existsSync(join(cwd, 'node_modules'))).toBe(false); // nothing for Node to find 'populora' in

    const sweep = populora('sweep', 'exp/sweep.yaml', '--parallel', '2');
    expect(sweep.status, sweep.stdout + sweep.stderr).toBe(0);
    expect(sweep.stdout).toMatch(/plug-in matchmaking\.policy: near-rating\.js@[0-9a-f]{12} \(near-rating_seed-1, near-rating_seed-2\)/);
    const state = JSON.parse(readFileSync(join(cwd, 'runs', 'exp', 'sweep.json'), 'utf8')) as { runs: Array<{ dir: string; status: string }> };
    expect(state.runs.map((r) => `${r.dir} ${r.status}`).sort()).toEqual(['cross_seed-1 finished', 'cross_seed-2 finished', 'near-rating_seed-1 finished', 'near-rating_seed-2 finished']);
    const recorded = JSON.parse(readFileSync(join(cwd, 'runs', 'exp', 'near-rating_seed-1', 'scenario.json'), 'utf8'));
    expect(recorded.matchmaking).toEqual({ policy: join(cwd, 'exp', 'policies', 'near-rating.js'), studentsPerTask: 2, options: { spread: 50 } });
    expect(recorded.model.path).toBe(join(import.meta.dirname, '..', 'models', 'arith-tiny')); // model: { embedded: arith-tiny }
  });

  it('refuses a folder that holds files, by name', () => {
    writeFileSync(join(cwd, 'notes.txt'), 'mine\n');
    const init = populora('init', '.');
    expect(init.status).toBe(1);
    expect(init.stderr.trim()).toBe('populora: . is not empty: populora init makes a new experiment folder; give a new or empty one');
  });
});
