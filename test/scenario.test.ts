// Scenario files: defaults filled in, every mistake named by file and field, and every count bounded against
// what exists, the model and this machine, at load.
import { describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync } from 'node:fs';
import { availableParallelism, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { threadCount } from '../src/runtime/worker-threads.js';
import { LIMITS, loadScenario, parseScenario } from '../src/scenario/scenario.js';
import { LORA_MODULES } from '../src/model/peft.js';

const minimal = 'name: t1\nseed: 3\nsteps: 5\nmodel: { preset: tiny }\npopulation: { subpopulations: 2 }\n';

describe('scenarios', () => {
  it('fill every default of a minimal file', () => {
    const s = parseScenario(minimal, 'min.yaml');
    expect(s.model).toEqual({ preset: 'tiny', seed: 0 });
    // Two sub-populations of one student: under "cross" a task can meet one student, so the default 2 becomes 1.
    expect(s.matchmaking).toEqual({ policy: 'cross', studentsPerTask: 1 });
    expect(parseScenario(minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 3 }'), 'min.yaml').matchmaking.studentsPerTask).toBe(2);
    expect(s.population.lora).toEqual({ rank: 8, modules: ['q_proj', 'v_proj'], init: 'peft' });
    expect(s.rl.entropyCoef).toBe(0.001);
    expect(s.evolution.every).toBe(0);
    expect(s.evolution.threads).toBe('auto');
    // auto: a core for each thread but the main one, at least one, at most 8; a number stays as it is.
    expect(threadCount('auto')).toBe(Math.max(1, Math.min(8, availableParallelism() - 1)));
    expect(threadCount(3)).toBe(3);
    expect(parseScenario(`${minimal}evolution: { threads: 2 }\n`, 'min.yaml').evolution.threads).toBe(2);
  });

  it('name the file and field of each mistake', () => {
    const cases: [string, RegExp][] = [
      [`${minimal}stepz: 3\n`, /^bad\.yaml: field "\(top level\)": unknown field\(s\) "stepz"$/],
      [minimal.replace('steps: 5', 'steps: -1'), /field "steps": expected an integer >= 1/],
      [`${minimal}matchmaking: { policy: elo }\n`, /field "matchmaking.policy": expected one of self, within, cross, random, rating, pfsp/],
      [`${minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 2, lora: { modules: [q_proj, lm_head] } }')}`, /field "population.lora.modules\[1\]"/],
      [minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 1 }'), /"cross" pairs teachers with students of other sub-populations/],
      ['name: [unclosed\n', /^bad\.yaml: not valid YAML/],
      [`${minimal}evolution: { threads: all }\n`, /field "evolution.threads": expected a whole number from 1 to 64, or auto/],
      [`${minimal}evolution: { threads: 0 }\n`, /field "evolution.threads": expected a whole number from 1 to 64, or auto/],
      [`${minimal}sampling: { temperature: -1 }\n`, /field "sampling.temperature": expected a number >= 0 \(0 = greedy\)/],
    ];
    for (const [text, message] of cases) expect(() => parseScenario(text, 'bad.yaml')).toThrow(message);
  });
});

describe('bounds', () => {
  /** The one-line message a scenario is refused with (the test's time limit catches a hang). */
  const refused = (text: string) => {
    try {
      parseScenario(text, 'big.yaml');
    } catch (error) {
      return (error as Error).message;
    }
    return 'accepted';
  };

  it('refuse every count past its bound, by file and field', () => {
    expect(refused(minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 2, teachers: 100000 }'))).toBe(`big.yaml: field "population.teachers": expected an integer from 1 to ${LIMITS.groupSize}`);
    expect(refused(minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 8, teachers: 100, students: 100 }'))).toBe(`big.yaml: field "population.teachers": 8 sub-population(s) of 100 teacher(s) and 100 student(s) make 1600 members, more than the ${LIMITS.members} a run holds`);
    expect(refused(`${minimal}tasks: { perTeacher: 1000000 }\n`)).toBe(`big.yaml: field "tasks.perTeacher": expected an integer from 1 to ${LIMITS.perTeacher}`);
    expect(refused(`${minimal}sampling: { answersPerStudent: 5000 }\n`)).toBe(`big.yaml: field "sampling.answersPerStudent": expected an integer from 1 to ${LIMITS.answersPerStudent}`);
    // 2 x 2 teachers x 3 types x 1000 proposals, each answered by 4 students 1000 times: far past a step's bound.
    const many = minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 2, teachers: 2, students: 4 }');
    expect(refused(`${many}tasks: { perTeacher: 1000 }\nmatchmaking: { studentsPerTask: 4 }\nsampling: { answersPerStudent: 1000 }\n`)).toMatch(/^big\.yaml: field "sampling\.answersPerStudent": a step would generate up to 48012000 sequences \(12000 proposals, each answered 4000 times\), more than 65536/);
  });

  it('refuse more students per task than the policy lets a task meet', () => {
    const three = minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 3, students: 2 }');
    expect(refused(`${three}matchmaking: { policy: cross, studentsPerTask: 5 }\n`)).toBe('big.yaml: field "matchmaking.studentsPerTask": 5 students per task, but under "cross" a task can go to 4 student(s) of this population; use at most 4, or add students');
    expect(refused(`${three}matchmaking: { policy: within, studentsPerTask: 3 }\n`)).toMatch(/under "within" a task can go to 2 student\(s\)/);
    expect(refused(`${three}matchmaking: { policy: random, studentsPerTask: 7 }\n`)).toMatch(/under "random" a task can go to 6 student\(s\)/);
    expect(() => parseScenario(`${three}matchmaking: { policy: pfsp, studentsPerTask: 6 }\n`, 'ok.yaml')).not.toThrow();
  });

  it('hold an answer\'s budget within a proposal\'s', () => {
    expect(refused(`${minimal}sampling: { maxTokens: 20, answerMaxTokens: 21 }\n`)).toBe('big.yaml: field "sampling.answerMaxTokens": 21 tokens an answer, more than the 20 of a proposal (sampling.maxTokens), which sizes the prompts\' room in the context; use at most 20');
    expect(() => parseScenario(`${minimal}sampling: { maxTokens: 20, answerMaxTokens: 4 }\n`, 'ok.yaml')).not.toThrow();
  });

  it('hold maxTokens against the model\'s context and the LoRA rank against its dimensions', () => {
    // The tiny preset: a 512-token context, hidden size 64, k_proj and v_proj of 64 x 32.
    expect(refused(`${minimal}sampling: { maxTokens: 510 }\n`)).toMatch(/^big\.yaml: field "sampling\.maxTokens": 510 tokens leave no room in the model's 512-token context for a \d+-token prompt; use at most \d+$/);
    expect(refused(minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 2, lora: { rank: 33, modules: [q_proj, v_proj] } }'))).toBe('big.yaml: field "population.lora.rank": rank 33 exceeds v_proj\'s 64 x 32 in this model (hidden size 64): a LoRA rank above the smaller dimension adds parameters and no capacity; use at most 32');
    expect(() => parseScenario(minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 2, lora: { rank: 32, modules: [q_proj, v_proj] } }'), 'ok.yaml')).not.toThrow();
  });

  it('hold the memory a step needs against this machine\'s: the whole step unbounded, else one micro-batch', () => {
    // Qwen2.5-0.5B's shape: 3 proposals answered 1024 times each, of up to 2048 tokens, cannot fit any machine at once.
    const big = `name: big\nseed: 1\nsteps: 1\nmodel: { preset: qwen2.5-0.5b-shape }\npopulation: { subpopulations: 2 }\nsampling: { answersPerStudent: 1024, maxTokens: 2048 }\n`;
    const machine = `more than this machine's ${(totalmem() / 2 ** 30).toFixed(1)} GiB`;
    expect(refused(`${big}batchTokens: unbounded\n`)).toMatch(new RegExp(`^big\\.yaml: field "sampling\\.answersPerStudent": a step needs at least [\\d.]+ GiB \\(\\d+ sequences of up to 2048 tokens at once \\(batchTokens: unbounded\\).*, ${machine}; give batchTokens a number of tokens`));
    expect(refused(`${big}batchTokens: 100000000\n`)).toMatch(new RegExp(`^big\\.yaml: field "batchTokens": a step needs at least [\\d.]+ GiB \\(100000000 tokens at once.*, ${machine}; lower batchTokens`));
    expect(() => parseScenario(big, 'ok.yaml')).not.toThrow(); // auto: micro-batches sized to the memory there is
    expect(() => parseScenario(`${big.replace('1024', '1').replace('2048', '64')}batchTokens: unbounded\n`, 'ok.yaml')).not.toThrow();
    expect(refused(`${big}batchTokens: 0\n`)).toBe('big.yaml: field "batchTokens": expected a whole number of tokens >= 1, auto or unbounded');
    expect(refused(`${big}batchTokens: lots\n`)).toBe('big.yaml: field "batchTokens": expected a whole number of tokens >= 1, auto or unbounded');
  });

  it('refuse a YAML alias bomb at once, and a model folder that does not exist by its field', () => {
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x]', ...'bcdefgh'.split('').map((k, i) => `${k}: &${k} [${Array(9).fill(`*${'abcdefg'[i]}`).join(', ')}]`)].join('\n');
    expect(refused(bomb)).toMatch(/^big\.yaml: not valid YAML: Excessive alias count indicates a resource exhaustion attack/);
    const nowhere = mkdtempSync(join(tmpdir(), 'populora-scenario-'));
    expect(() => parseScenario(minimal.replace('{ preset: tiny }', '{ path: no-model }'), 'm.yaml', { relativeTo: nowhere })).toThrow(`m.yaml: field "model.path": the model folder ${join(nowhere, 'no-model')} (no-model, taken relative to ${nowhere}) does not exist`);
  });
});

describe('shipped scenarios', () => {
  it('all validate', () => {
    const files = ['scenarios', 'scenarios/policies', 'scenarios/scale'].flatMap((dir) => readdirSync(dir).filter((f) => f.endsWith('.yaml')).map((f) => `${dir}/${f}`));
    expect(files.length).toBeGreaterThanOrEqual(10);
    for (const file of files) expect(() => loadScenario(file), file).not.toThrow();
  });

  it('include the real-size population the issue asks for', () => {
    const s = loadScenario('scenarios/scale/qwen2.5-0.5b.yaml');
    const { subpopulations, teachers, students, lora } = s.population;
    expect([subpopulations * (teachers + students), lora.rank, [...lora.modules].sort()]).toEqual([8, 16, [...LORA_MODULES].sort()]);
    expect([s.model, s.domain, s.sampling.maxTokens, s.sampling.answerMaxTokens, s.checkpointEvery]).toEqual([{ preset: 'qwen2.5-0.5b-shape', seed: 0 }, 'python', 256, 128, 1]);
  });
});
