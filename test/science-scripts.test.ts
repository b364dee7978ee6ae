// The science scripts' reading of a run (bench/science-runs.ts), held to what the run itself reported: each
// member's verdicts per held-out task, re-read from the event log, give the evaluator's own scores (metrics.jsonl)
// on the tasks never proposed; the tasks proposed by then are the evaluator's; the base model's verdicts, through
// the engine a run uses, give the score pretraining's own evaluation gives; and the reference answers a likelihood
// is taken of are right answers by the domains' verifiers.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { baseVerdicts, evaluations } from '../bench/science-runs.js';
import { referenceAnswer } from '../bench/science-likelihood.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { heldOutTasks } from '../src/domains/arith/held-out.js';
import { deduceSolveRate } from '../src/domains/arith/pretraining.js';
import { checkAnswer, type ArithTask } from '../src/domains/arith/tasks.js';
import { heldOutTasks as codeHeldOut } from '../src/domains/python/held-out.js';
import { loadModel } from '../src/model/checkpoint.js';
import { LlamaModel } from '../src/model/llama.js';
import { loadTokenizer } from '../src/model/tokenizer.js';
import { readEventLog } from '../src/runtime/event-log.js';
import { parseScenario } from '../src/scenario/scenario.js';
import type { StepMetrics } from '../src/sim/metrics.js';
import { runScenario } from '../src/sim/run.js';
import { PythonVerifierPool } from '../src/domains/python/verifier-pool.js';

const MODEL = 'models/arith-tiny';

describe('a run read back by the science scripts', () => {
  it('gives each member the evaluator\'s own score on the tasks never proposed, and the base the pretraining score', async () => {
    const scenario = parseScenario(
      `name: science\nseed: 5\nsteps: 3\nbackend: cpu\nmodel: { path: ${MODEL} }\npopulation: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }\ntasks: { perTeacher: 4 }\nmatchmaking: { policy: cross, studentsPerTask: 1 }\nsampling: { answersPerStudent: 2, maxTokens: 24 }\nrl: { lr: 0.02 }\nevaluation: { tasks: 60, every: 1, part: validation }\n`,
      'science.yaml',
    );
    const { outDir } = await runScenario(scenario, { outDir: mkdtempSync(join(tmpdir(), 'populora-science-')) });
    const metrics = readFileSync(join(outDir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StepMetrics);
    const read = evaluations(readEventLog(join(outDir, 'events.msgpack')).events);
    expect(read.map((e) => e.step)).toEqual(metrics.map((m) => m.step));
    for (const [k, evaluation] of read.entries()) {
      const heldOut = metrics[k]!.heldOut!;
      expect(evaluation.excluded.size).toBe(heldOut.excluded);
      for (const [id, verdicts] of evaluation.verdicts) {
        expect(verdicts).toHaveLength(60);
        const kept = verdicts.filter((_, i) => !evaluation.excluded.has(i));
        expect(kept.filter(Boolean).length / kept.length, `${id} at step ${evaluation.step}`).toBeCloseTo(heldOut.members[id]!, 12);
      }
    }
    expect(read.at(-1)!.excluded.size, 'some held-out task proposed by the last step (so the exclusion is exercised)').toBeGreaterThan(0);
    const base = await baseVerdicts(scenario);
    const { config, weights, tokenizerFile } = loadModel(MODEL);
    const model = LlamaModel.upload(new CpuBackend(), config, weights);
    expect(base.tasks).toEqual(heldOutTasks(1, 60, 'validation'));
    expect(base.verdicts.filter(Boolean).length / 60).toBeCloseTo(await deduceSolveRate(model, loadTokenizer(tokenizerFile!), base.tasks as ArithTask[]), 12);
  });

  it('takes likelihoods of answers that are right', async () => {
    for (const task of heldOutTasks(1, 50)) expect(checkAnswer(task, referenceAnswer(task)).correct).toBe(true);
    const tasks = codeHeldOut(1, 20);
    const pool = new PythonVerifierPool(1);
    try {
      const outcomes = await pool.verify(tasks.map((task) => ({ kind: 'check' as const, task, answer: referenceAnswer(task) })));
      expect(outcomes.every((o) => o.kind === 'check' && o.check.correct)).toBe(true);
    } finally {
      await pool.close();
    }
  });
});
