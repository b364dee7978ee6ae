// The library as a user gets it: the package packed (npm pack), installed from the tarball into an empty folder
// outside the repository, and used there by a script that imports 'populora' only. A policy, a domain and a reward
// hook written in that folder (importing defineMatchPolicy, defineDomain, defineRewardHook and zod from 'populora')
// run, replay, sweep against a built-in and compare (through the library; test/api-init.test.ts runs the command's
// sweep); a changed plug-in is refused on replay by `npx populora replay`; and the shipped types
// type-check a plug-in. The install runs once (about 20 s from the local npm cache).
import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

const repo = join(import.meta.dirname, '..');
const root = mkdtempSync(join(tmpdir(), 'populora-api-'));
const app = join(root, 'app');

/** Runs a command in the app folder, with no path of the repository in its environment; stdout, stderr, status. */
function inApp(command: string, args: string[]) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key, value]) => key !== 'INIT_CWD' && !String(value).includes(repo)));
  const result = spawnSync(command, args, { cwd: app, env: { ...env, PATH: process.env['PATH']! }, encoding: 'utf8', timeout: 300_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

const write = (file: string, text: string) => {
  mkdirSync(join(app, file, '..'), { recursive: true });
  writeFileSync(join(app, file), text);
};

beforeAll(() => {
  execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', root], { cwd: repo, stdio: 'ignore' }); // dist/ is built (npm test builds first)
  const tarball = readdirSync(root).find((f) => f.endsWith('.tgz'))!;
  write('package.json', '{ "name": "experiment", "private": true, "type": "module" }\n');
  const install = inApp('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', join(root, tarball)]);
  expect(install.code, install.stderr).toBe(0);

  write('policies/rating-window.js', `import { defineMatchPolicy, z } from 'populora';
// students whose rating is within options.window of the teacher's (all of them if none is), drawn from the seeded stream
export default defineMatchPolicy({
  options: z.strictObject({ window: z.number().positive().default(400) }),
  choose: ({ teacher, students, count, rng, options }) => {
    const near = students.filter((s) => Math.abs(s.rating - teacher.rating) <= options.window);
    return rng.shuffle(near.length > 0 ? near : students).slice(0, count);
  },
});
`);
  write('domains/sorting/index.js', `import { defineDomain } from 'populora';
const validate = (text) => {
  const digits = text.replace(/[^0-9]/g, '').slice(0, 8);
  return digits.length === 0 ? { valid: false, reason: 'no-digits' } : { valid: true, task: { type: 'sort', digits }, fuelUsed: 1, metrics: { size: digits.length, depth: 1, operators: ['sort'], signature: String(digits.length) } };
};
export default defineDomain({
  name: 'sorting',
  taskTypes: ['sort'],
  alphabet: '0123456789 :\\nabcdefghijklmnopqrstuvwxyz',
  proposalPrompt: () => ({ prompt: 'digits:', given: '' }),
  solvePrompt: (task) => 'sort ' + task.digits + ':',
  minimumTokens: () => 4,
  verifierPool: () => ({
    verify: async (jobs) => jobs.map((job) => (job.kind === 'validate' ? { kind: 'validate', validation: validate(job.text) } : { kind: 'check', check: { correct: job.answer.trim() === [...job.task.digits].sort().join(''), reason: '' } })),
    close: async () => {},
  }),
});
`);
  write('rewards/bonus.js', `import { defineRewardHook, z } from 'populora';
export default defineRewardHook({ options: z.strictObject({ bonus: z.number().default(0.1) }), teacher: (proposal, { builtIn, options }) => builtIn + (proposal.valid ? options.bonus : 0) });
`);
  write('scenario.yaml', `name: experiment
seed: 3
steps: 2
backend: cpu
model: { preset: tiny, seed: 1 }
domain: ./domains/sorting/index.js
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 2 } }
tasks: { perTeacher: 2 }
matchmaking: { policy: ./policies/rating-window.js, studentsPerTask: 1, options: { window: 50 } }
sampling: { answersPerStudent: 2, maxTokens: 12 }
rewards: { hook: ./rewards/bonus.js }
`);
  write('sweep.yaml', `base: scenario.yaml
variants:
  window: {}
  random: { matchmaking: { policy: random, studentsPerTask: 1 } }
`);
  write('main.js', `import { loadScenario, replayRun, runScenario } from 'populora';
const scenario = await loadScenario('scenario.yaml');
const run = await runScenario(scenario, { outDir: 'runs/one' });
const replay = await replayRun('runs/one');
console.log(JSON.stringify({ hash: run.hash, events: run.events, identical: replay.identical, replayHash: replay.identical ? replay.hash : null, plugins: scenario.plugins.map((p) => p.field) }));
`);
  write('sweep.js', `import { compare, sweep, sweepPlugins } from 'populora';
const swept = await sweep('sweep.yaml', { out: 'runs/sweep', parallel: 2 });
const result = compare(['runs/sweep'], 'runs/compare.html');
console.log(JSON.stringify({ statuses: swept.state.runs.map((r) => r.status), planned: sweepPlugins(swept.plan), runs: result.runs.map((r) => r.name), plugins: result.plugins }));
`);
}, 300_000);

describe('the packed package, installed outside the repository', () => {
  it('runs a scenario whose policy, domain and reward hook live in the experiment folder, and replays it', () => {
    const main = inApp('node', ['main.js']);
    expect(main.code, main.stderr).toBe(0);
    const out = JSON.parse(main.stdout.trim().split('\n').at(-1)!);
    expect(out).toMatchObject({ identical: true, plugins: ['domain', 'matchmaking.policy', 'rewards.hook'] });
    expect(out.replayHash).toBe(out.hash);
    expect(out.events).toBeGreaterThan(20);
  });

  it('sweeps the plug-in policy against a built-in, and compares the runs naming each plug-in version', () => {
    const swept = inApp('node', ['sweep.js']);
    expect(swept.code, swept.stdout + swept.stderr).toBe(0);
    const { statuses, planned, runs, plugins } = JSON.parse(swept.stdout.trim().split('\n').at(-1)!);
    expect(statuses).toEqual(['finished', 'finished']);
    const label = expect.stringMatching(/^rating-window\.js@[0-9a-f]{12}$/);
    expect(planned.filter((p: { field: string }) => p.field === 'matchmaking.policy')).toEqual([{ field: 'matchmaking.policy', plugin: label, runs: ['window'] }]);
    expect(runs.sort()).toEqual(['sweep.random', 'sweep.window']);
    expect(plugins.filter((p: { field: string }) => p.field === 'matchmaking.policy')).toEqual([{ run: 'sweep.window', field: 'matchmaking.policy', plugin: label }]);
    expect(plugins.filter((p: { run: string }) => p.run === 'sweep.random').map((p: { field: string }) => p.field)).toEqual(['domain', 'rewards.hook']);
  });

  it('refuses to replay a run whose plug-in changed since, naming the file', () => {
    appendFileSync(join(app, 'rewards/bonus.js'), '// edited after the run\n');
    const replay = inApp('npx', ['populora', 'replay', 'runs/one']);
    expect(replay.code).toBe(1);
    expect(replay.stderr.trim()).toMatch(new RegExp(`^populora: runs/one/scenario\\.json: the plug-in ${join(app, 'rewards/bonus.js').replace(/\./g, '\\.')} \\(rewards\\.hook\\) is not the code this run recorded: .*bonus\\.js has changed since the run`));
  });

  it('ships types: a TypeScript plug-in type-checks against them, its options typed from its zod schema', () => {
    write('check.ts', `import { defineMatchPolicy, defineRewardHook, z, type Scenario, type RunResult } from 'populora';
export const policy = defineMatchPolicy({
  options: z.strictObject({ first: z.number().int().default(1) }),
  choose: ({ students, options }) => students.slice(0, options.first),
});
export const hook = defineRewardHook({ student: (answer, { builtIn }) => (answer.correct ? builtIn : -0.5) });
export const name = (s: Scenario, r: RunResult): string => s.name + r.hash;
`);
    write('wrong.ts', `import { defineMatchPolicy, z } from 'populora';
export const policy = defineMatchPolicy({ options: z.strictObject({ first: z.number() }), choose: ({ students, options }) => students.slice(0, options.frist) });
`);
    // one compiler run over both files: check.ts without an error, wrong.ts with exactly the misspelt option's
    const tsc = join(repo, 'node_modules', 'typescript', 'bin', 'tsc');
    const result = spawnSync('node', [tsc, '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--skipLibCheck', 'check.ts', 'wrong.ts'], { cwd: app, encoding: 'utf8' });
    const errors = result.stdout.split('\n').filter((line) => / error TS\d+/.test(line));
    expect(errors, result.stdout).toHaveLength(1);
    expect(errors[0]).toMatch(/^wrong\.ts\(2,\d+\): error TS\d+: Property 'frist' does not exist/);
  });
});
