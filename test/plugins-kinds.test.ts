// The other kinds of plug-in, all in one run written outside src/: a domain (sorting digits, its verifier in
// process), a reward hook for both roles, a rating system, and an evolution operator giving both a mutation and a
// crossover. Each is checked by what it leaves in the run folder against what its code says it does; the run
// replays identically.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scenarioHash } from '../src/cluster/scenario-hash.js';
import { loadPeftAdapter } from '../src/model/peft.js';
import { readEventLog } from '../src/runtime/event-log.js';
import { openScenario } from '../src/scenario/scenario.js';
import type { StepMetrics } from '../src/sim/metrics.js';
import { replayRun } from '../src/sim/replay.js';
import { runScenario } from '../src/sim/run.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-plugin-kinds-'));
for (const sub of ['domains/sorting', 'rewards', 'ratings', 'ops']) mkdirSync(join(dir, sub), { recursive: true });
writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');

// A task is the digits of a proposal (any other character is dropped); an answer is right when it is them sorted.
writeFileSync(join(dir, 'domains/sorting/index.js'), `
const validate = (text) => {
  const digits = text.replace(/[^0-9]/g, '').slice(0, 8);
  if (digits.length === 0) return { valid: false, reason: 'no-digits: a task is a list of digits' };
  return { valid: true, task: { type: 'sort', digits }, fuelUsed: digits.length, metrics: { size: digits.length, depth: 1, operators: ['sort'], signature: 'len' + digits.length } };
};
const check = (task, answer) => ({ correct: answer.replace(/[^0-9]/g, '') === [...task.digits].sort().join(''), reason: 'compared' });
// a class instance: its methods live on the prototype (populora reads and binds each member)
class Sorting {
  name = 'sorting';
  taskTypes = ['sort'];
  alphabet = '0123456789 :\\nabcdefghijklmnopqrstuvwxyz';
  presetContext = 64;
  proposalPrompt() { return { prompt: 'digits:', given: '' }; }
  solvePrompt(task) { return 'sort ' + task.digits + ':'; }
  minimumTokens() { return 4; }
  verifierPool() {
    return {
      verify: async (jobs) => jobs.map((job) => (job.kind === 'validate' ? { kind: 'validate', validation: validate(job.text) } : { kind: 'check', check: check(job.task, job.answer) })),
      close: async () => {},
    };
  }
}
export default new Sorting();
`);
// Teachers: options.valid for a valid task, the built-in penalty otherwise; students: 2 right, -1 wrong.
writeFileSync(join(dir, 'rewards/flat.js'), `
export default {
  options: { '~standard': { version: 1, vendor: 'test', validate: (v) => ({ value: { valid: v.valid ?? 0.25 } }) } },
  teacher: (proposal, context) => (proposal.valid ? context.options.valid : context.builtIn),
  student: (answer) => (answer.correct ? 2 : -1),
};
`);
// Zero-sum steps of (score - 1/2) from 0: every rating stays a multiple of 1/2^k and the ratings sum to 0.
writeFileSync(join(dir, 'ratings/steps.js'), `
export default {
  create: () => ({
    initial: () => ({ rating: 0 }),
    winProbability: () => 0.5,
    update: (student, teacher, score) => ({ student: { rating: student.rating + (score - 0.5) }, teacher: { rating: teacher.rating - (score - 0.5) } }),
    fitness: (skill) => skill.rating,
  }),
};
`);
// mutate: B scaled by options.factor; crossover: A of the first parent, B the mean of both parents' B.
writeFileSync(join(dir, 'ops/scale-and-mean.js'), `
const map = (adapter, f) => ({ ...adapter, targetModules: [...adapter.targetModules], layers: adapter.layers.map((layer, l) => Object.fromEntries(Object.entries(layer).map(([m, x]) => [m, f(x, l, m)]))) });
export default {
  options: { '~standard': { version: 1, vendor: 'test', validate: (v) => ({ value: { factor: v.factor ?? 2 } }) } },
  mutate: (parent, { options }) => map(parent, (x) => ({ a: x.a.slice(), b: x.b.map((v) => v * options.factor) })),
  crossover: (first, second) => map(first, (x, l, m) => ({ a: x.a.slice(), b: x.b.map((v, i) => (v + second.layers[l][m].b[i]) / 2) })),
};
`);

const SCENARIO = `name: kinds
seed: 11
steps: 2
backend: cpu
model: { preset: tiny, seed: 2 }
domain: ./domains/sorting/index.js
population: { subpopulations: 2, teachers: 1, students: 2, lora: { rank: 2, init: gaussian } }
tasks: { perTeacher: 3 }
matchmaking: { policy: cross, studentsPerTask: 2 }
sampling: { answersPerStudent: 2, maxTokens: 12 }
rewards: { hook: ./rewards/flat.js, options: { valid: 0.75 } }
rating: { system: ./ratings/steps.js }
evolution: { every: 2, fraction: 0.5, crossoverProbability: 1, mutation: ./ops/scale-and-mean.js, mutationOptions: { factor: 3 }, crossover: ./ops/scale-and-mean.js }
checkpointEvery: 1
`;

describe('a domain, a reward hook, a rating system and an evolution operator written outside src/', () => {
  it('run together, each doing what its code says, and the run replays identically', async () => {
    writeFileSync(join(dir, 'kinds.yaml'), SCENARIO);
    const scenario = await openScenario(join(dir, 'kinds.yaml'));
    expect(scenario.plugins?.map((p) => p.field)).toEqual(['domain', 'evolution.mutation', 'evolution.crossover', 'rating.system', 'rewards.hook']);
    const out = join(dir, 'run');
    const result = await runScenario(scenario, { outDir: out });
    const { events } = readEventLog(join(out, 'events.msgpack'));
    const messages = <T>(type: string) => events.filter((e) => e.type === type).map((e) => (e.payload as { message: T }).message);

    // the domain: every validation is of a sorting task, and some were valid (a random model writes some digits)
    const validated = messages<{ results: Array<{ requestId: number; validation: { valid: boolean; task?: { type: string; digits: string } } }> }>('validated').flatMap((m) => m.results);
    expect(validated.some((r) => r.validation.valid)).toBe(true);
    for (const r of validated) if (r.validation.valid) expect(r.validation.task!.digits).toMatch(/^[0-9]{1,8}$/);

    // the reward hook: a teacher's valid task earns options.valid (0.75), an invalid one the built-in penalty (-1); a student 2 or -1
    const validById = new Map(validated.map((r) => [r.requestId, r.validation.valid]));
    const samples = messages<{ samples: Array<{ requestId: number; role: string; reward: number }> }>('train').flatMap((m) => m.samples);
    const teacherSamples = samples.filter((s) => s.role === 'teacher');
    expect(teacherSamples.length).toBeGreaterThan(0);
    for (const s of teacherSamples) expect(s.reward).toBe(validById.get(s.requestId) ? 0.75 : -1);
    const studentRewards = samples.filter((s) => s.role === 'student').map((s) => s.reward);
    expect(studentRewards.length).toBeGreaterThan(0);
    for (const r of studentRewards) expect([2, -1]).toContain(r);

    // the rating system: zero-sum from 0, in steps of (score - 1/2)
    const metrics = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StepMetrics);
    const ratings = Object.values(metrics[0]!.members).map((m) => m.rating);
    expect(ratings.reduce((a, b) => a + b, 0)).toBeCloseTo(0, 12);
    expect(ratings.some((r) => r !== 0)).toBe(true);

    // the operator: after step 2's evolution, a mutated child's B is its parent's times 3, a crossover child's the
    // mean of its parents' (parents as they were after that step's training: the step-2 checkpoint holds them)
    const lineage = JSON.parse(readFileSync(join(out, 'lineage.json'), 'utf8')) as Array<{ child: string; parents: string[]; operator: string; parameters: Record<string, unknown> }>;
    // one of the two teachers is replaced (by a mutation: one survivor), two of the four students (crossovers of the two survivors)
    expect(lineage.map((l) => l.operator).sort()).toEqual(['crossover', 'crossover', 'mutate']);
    const adapter = (name: string) => loadPeftAdapter(join(out, 'checkpoints', 'step-2', name.replace(/\.g\d+$/, '')));
    for (const record of lineage) {
      const child = adapter(record.child).layers[0]!.q_proj!.b;
      const parents = record.parents.map((p) => adapter(p).layers[0]!.q_proj!.b);
      const expected = record.operator === 'mutate' ? parents[0]!.map((v) => v * 3) : parents[0]!.map((v, i) => (v + parents[1]![i]!) / 2);
      expect(child).toEqual(expected);
      expect(record.parameters).toEqual(record.operator === 'mutate' ? { operator: expect.stringMatching(/^scale-and-mean\.js@[0-9a-f]{12}$/) } : { kind: expect.stringMatching(/^scale-and-mean\.js@[0-9a-f]{12}$/) });
    }

    expect(await replayRun(out)).toMatchObject({ identical: true, hash: result.hash });

    // the same experiment from another folder: another absolute path for every plug-in, the same run hash (the log
    // names an operator by file@sha256), and the same scenario hash a cluster's workers compare
    const elsewhere = mkdtempSync(join(tmpdir(), 'populora-plugin-kinds-moved-'));
    cpSync(dir, elsewhere, { recursive: true, filter: (path) => !path.includes('/run') });
    const moved = await openScenario(join(elsewhere, 'kinds.yaml'));
    expect(moved.plugins![0]!.path).toBe(join(elsewhere, 'domains/sorting/index.js'));
    expect(scenarioHash(moved)).toBe(scenarioHash(scenario));
    expect((await runScenario(moved, { outDir: join(elsewhere, 'run') })).hash).toBe(result.hash);
  });

  it('stops a run whose operator returns a child that would poison the bank, naming the operator and the value', async () => {
    writeFileSync(join(dir, 'ops/nan.js'), 'export default { mutate: (parent) => ({ ...parent, layers: parent.layers.map((layer) => Object.fromEntries(Object.entries(layer).map(([m, x]) => [m, { a: x.a.slice(), b: x.b.map(() => NaN) }]))) }) };\n');
    writeFileSync(join(dir, 'nan.yaml'), SCENARIO.replace('crossoverProbability: 1, mutation: ./ops/scale-and-mean.js, mutationOptions: { factor: 3 }, crossover: ./ops/scale-and-mean.js', 'crossoverProbability: 0, mutation: ./ops/nan.js'));
    const error = await runScenario(await openScenario(join(dir, 'nan.yaml')), { outDir: join(dir, 'nan-run') }).then(() => null, (e: Error) => e);
    const messages: string[] = [];
    for (let e: Error | undefined = error ?? undefined; e; e = e.cause as Error | undefined) messages.push(e.message);
    expect(messages.join(' / ')).toMatch(new RegExp(`the evolution operator ${join(dir, 'ops/nan.js')}, mutate\\(\\) returned a child whose layer 0 \\w+ B\\[0\\] is NaN: a child holds finite numbers only`));
  });
});
