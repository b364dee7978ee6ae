// The remedies a scenario can name (docs/science.md), each off unless named: the advantage groups (AZR's
// task-relative REINFORCE++ over the population, or GRPO's per-task groups of one student's answers, teachers
// still per task type), the advantage scaling, and AdamW's decay of the LoRA factors toward the base model. Held to
// hand-computed groups and to what a run does with them: the same samples, another update; and AZR's reference-task
// buffer in the arithmetic toy's teacher prompts (off unless asked for, as the shipped model was trained without it).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SEED_TASKS } from '../src/domains/arith/tasks.js';
import { readEventLog } from '../src/runtime/event-log.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { runScenario } from '../src/sim/run.js';
import { advantageGroup, groupAdvantages, type AdvantageGroups } from '../src/train/advantages.js';

describe('advantage groups', () => {
  // two students (slots 4 and 5) answer tasks "a" and "b"; a teacher proposes a deduce and an abduce task
  const samples = [
    { role: 'student', taskType: 'deduce', slot: 4, task: 'a', reward: 1 },
    { role: 'student', taskType: 'deduce', slot: 4, task: 'a', reward: 0 },
    { role: 'student', taskType: 'deduce', slot: 4, task: 'a', reward: 0 },
    { role: 'student', taskType: 'deduce', slot: 4, task: 'a', reward: 0 },
    { role: 'student', taskType: 'deduce', slot: 5, task: 'a', reward: 1 },
    { role: 'student', taskType: 'deduce', slot: 5, task: 'a', reward: 1 },
    { role: 'student', taskType: 'deduce', slot: 4, task: 'b', reward: 1 },
    { role: 'student', taskType: 'deduce', slot: 4, task: 'b', reward: 1 },
    { role: 'teacher', taskType: 'deduce', slot: 0, task: 'x', reward: 0.75 },
    { role: 'teacher', taskType: 'deduce', slot: 1, task: 'y', reward: -1 },
    { role: 'teacher', taskType: 'abduce', slot: 0, task: 'z', reward: 0.5 },
  ];
  const advantagesOf = (groups: AdvantageGroups, scaling: 'whiten' | 'center' = 'whiten') => groupAdvantages(samples.map((s) => s.reward), samples.map((s) => advantageGroup(groups, s)), scaling);

  it('task: one student\'s answers to one task; a task every answer gets right teaches nothing; teachers per task type', () => {
    const a = advantagesOf('task');
    const [high, low] = [(1 - 0.25) / (Math.sqrt(0.1875) + 1e-6), (0 - 0.25) / (Math.sqrt(0.1875) + 1e-6)]; // 1 of 4 right
    [high, low, low, low].forEach((v, i) => expect(a[i]).toBeCloseTo(v, 12));
    expect(a.slice(4, 8)).toEqual([0, 0, 0, 0]); // student 5 on a, student 4 on b: every answer right
    expect(a[8]).toBeCloseTo(1, 5); // the two teachers' deduce proposals: 0.75 and -1, whitened
    expect(a[9]).toBeCloseTo(-1, 5);
    expect(a[10]).toBe(0); // the only abduce proposal
  });

  it('role-and-task: every student\'s deduce answers in one group (AZR\'s TRR++ over the population)', () => {
    const a = advantagesOf('role-and-task');
    const rewards = samples.slice(0, 8).map((s) => s.reward);
    const mean = rewards.reduce((x, y) => x + y, 0) / 8; // 5 of 8
    const std = Math.sqrt(rewards.reduce((x, r) => x + (r - mean) ** 2, 0) / 8);
    rewards.forEach((r, i) => expect(a[i]).toBeCloseTo((r - mean) / (std + 1e-6), 12));
  });

  it('center: the reward less its group\'s mean, not divided', () => {
    const a = advantagesOf('task', 'center');
    expect(a.slice(0, 4)).toEqual([0.75, -0.25, -0.25, -0.25]);
    expect(a[8]).toBeCloseTo(0.875, 12);
  });
});

describe('the remedies in a run', () => {
  const text = (rl: string) => `name: remedy\nseed: 6\nsteps: 1\nbackend: cpu\nmodel: { path: models/arith-tiny }\npopulation: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }\ntasks: { perTeacher: 1 }\nmatchmaking: { policy: cross, studentsPerTask: 1 }\nsampling: { answersPerStudent: 4, maxTokens: 24 }\nrl: { lr: 0.01${rl} }\ncheckpointEvery: 1\n`;
  const run = async (rl: string) => {
    const scenario = parseScenario(text(rl), 'remedy.yaml');
    const result = await runScenario(scenario, { outDir: mkdtempSync(join(tmpdir(), 'populora-remedy-')) });
    const adapters = ['student-0-0', 'student-1-0', 'teacher-0-0', 'teacher-1-0'].map((id) => readFileSync(join(result.outDir, 'checkpoints', 'step-1', id, 'adapter_model.safetensors')));
    return { scenario, result, adapters };
  };

  it('are absent from a scenario that names none, and each changes the update of the same samples', async () => {
    const plain = await run('');
    for (const field of ['maskedLogProbs', 'advantageScaling', 'weightDecay']) expect(field in plain.scenario.rl, field).toBe(false);
    for (const rl of [', advantageGroups: task', ', advantageScaling: center', ', weightDecay: 10']) {
      const other = await run(rl);
      expect(other.result.hash, rl).toBe(plain.result.hash); // one step: the same proposals, answers and rewards
      expect(other.adapters.some((bytes, i) => !bytes.equals(plain.adapters[i]!)), rl).toBe(true);
    }
  });
});

describe('tasks.referenceBuffer', () => {
  /** Every prompt the teachers sent to the engine, by step. */
  const teacherPrompts = (dir: string) =>
    readEventLog(join(dir, 'events.msgpack')).events.filter((e) => e.actor.startsWith('teacher-') && e.type === 'generate').map((e) => ({ step: e.step, prompts: (e.payload as { message: { requests: Array<{ prompt: string }> } }).message.requests.map((r) => r.prompt) }));
  const text = (tasks: string) => `name: refs\nseed: 3\nsteps: 3\nbackend: cpu\nmodel: { path: models/arith-tiny }\npopulation: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }\ntasks: { perTeacher: 1${tasks} }\nmatchmaking: { policy: cross, studentsPerTask: 1 }\nsampling: { answersPerStudent: 2, maxTokens: 24 }\n`;
  const run = async (tasks: string) => teacherPrompts((await runScenario(parseScenario(text(tasks), 'refs.yaml'), { outDir: mkdtempSync(join(tmpdir(), 'populora-refs-')) })).outDir);

  it('is off for the arithmetic toy unless asked for: its teachers see the type\'s marker alone', async () => {
    for (const { prompts } of await run('')) expect(prompts.every((p) => ['=?\n', '?=\n', '??\n'].includes(p))).toBe(true);
  });

  it('on, shows each teacher `references` tasks of its buffer, each as its type\'s proposal, then the marker: the seed tasks first, its own valid proposals later', async () => {
    const steps = await run(', references: 2, referenceBuffer: true');
    const seeds = new Set(SEED_TASKS.map((t) => `${t.expr};${t.inputs.join(',')}`));
    const shown = (prompt: string) => prompt.split('\n').filter((line, i) => i % 2 === 1 && line !== '');
    for (const { step, prompts } of steps) {
      for (const prompt of prompts) {
        expect(prompt).toMatch(/^(([=?]{2}\n[^\n]+\n){2})[=?]{2}\n$/); // two references, then the marker
        if (step === 0) expect(shown(prompt).every((line) => seeds.has(line))).toBe(true);
      }
    }
    const last = steps.filter((s) => s.step === 2).flatMap((s) => s.prompts);
    expect(last.some((p) => shown(p).some((line) => !seeds.has(line)))).toBe(true); // its own proposals by step 2
  });
});
