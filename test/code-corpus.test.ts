// The code domain's pretraining corpus: programs follow from the seed; every generated program passes the sandbox,
// and its recorded outputs are the host CPython's (an independent oracle); examples are the actors' own text, their
// answers judged right by the verifier's check jobs; held-out programs never appear in training text; the
// pretraining scenario names its bad fields; a very short pretraining on the code domain runs and repeats; and a model
// pretrained beside another (corpus.heldOutFrom) never sees that one's held-out programs and is scored on its tasks.

import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import type { VerifyOutcome } from '../src/domains/domain.js';
import { randomProgram } from '../src/domains/python/corpus.js';
import { TrainingPrograms, buildPool, corpusExample, poolTask, type PoolProgram, type ProgramPool } from '../src/domains/python/corpus-pool.js';
import { readHeldOutFile, type HeldOutTasks } from '../src/domains/python/pretraining.js';
import { proposalPrompt, solvePrompt } from '../src/domains/python/prompts.js';
import { proposalText, type CodeTask, type CodeTaskType } from '../src/domains/python/tasks.js';
import { PythonVerifierPool } from '../src/domains/python/verifier-pool.js';
import { Streams } from '../src/runtime/streams.js';
import { parsePretrainScenario, pretrain } from '../src/train/pretrain.js';
import { cpythonOutputs } from './cpython-reference.js';


const correct = (outcome: VerifyOutcome) => outcome.kind === 'check' && outcome.check.correct;

describe('the program generator', () => {
  it('follows from the seed: the same stream gives the same programs and inputs, another seed others', () => {
    const draw = (seed: number) => Array.from({ length: 60 }, ((rng) => () => randomProgram(rng))(new Streams(seed).stream('programs')));
    const [a, b, c] = [draw(3), draw(3), draw(4)];
    expect(a).toEqual(b);
    expect(a.filter((p, i) => p.program === c[i]!.program).length).toBeLessThan(10);
    for (const p of a) {
      expect(p.program).toMatch(/^def f\([a-z_, ]+\):\n( {4}.+\n?)+$/); // one function, a few indented lines
      expect(new Set(p.inputs).size).toBe(p.inputs.length);
      expect(p.inputs.length).toBeGreaterThanOrEqual(4);
    }
  });
});

describe('the validated pool', () => {
  let verifier: PythonVerifierPool;
  let pool: ProgramPool;
  beforeAll(async () => {
    verifier = new PythonVerifierPool(2);
    const streams = new Streams(9);
    pool = await buildPool(verifier, streams.stream('programs'), streams.stream('held-out'), 150, 30);
  }, 120_000);
  afterAll(() => verifier.close());

  it('holds every generated program (the sandbox refuses none), with the outputs the host CPython gives', () => {
    expect(pool.refused).toEqual({});
    expect(pool.training.length + pool.heldOut.length).toBe(150);
    const programs = [...pool.training, ...pool.heldOut];
    const expected = cpythonOutputs(programs);
    programs.forEach((p, i) => expect(p.outputs, p.program).toEqual(expected[i]));
  });

  it('holds out 30 programs by text: no held-out program in the training part or in any training example', () => {
    expect(pool.heldOut.length).toBe(30);
    const heldOut = pool.heldOut.map((p) => p.program);
    expect(pool.training.filter((p) => heldOut.includes(p.program))).toEqual([]);
    const [rng, training] = [new Streams(9).stream('corpus', 0), new TrainingPrograms(pool.training)];
    for (let i = 0; i < 3000; i++) {
      const { prompt, completion } = corpusExample(rng, training, 2);
      for (const program of heldOut) expect(prompt.includes(program) || completion.includes(program)).toBe(false);
    }
  });

  it('keeps another model\'s held-out programs out: the same seed then validates others in their place', async () => {
    const heldOut = new Set(pool.heldOut.map((p) => p.program));
    const streams = new Streams(9);
    const beside = await buildPool(verifier, streams.stream('programs'), streams.stream('held-out'), 150, 0, heldOut);
    expect(beside.heldOut).toEqual([]);
    expect(beside.training.length).toBe(150);
    expect(beside.training.filter((p) => heldOut.has(p.program))).toEqual([]);
    const besideTexts = new Set(beside.training.map((p) => p.program));
    expect(pool.training.filter((p) => !besideTexts.has(p.program))).toEqual([]); // the same draws, less the excluded
  }, 120_000);

  it('writes the actors\' text, and the verifier marks every answer right and validates every proposal', async () => {
    const [rng, training] = [new Streams(9).stream('corpus', 1), new TrainingPrograms(pool.training)];
    const examples = Array.from({ length: 240 }, () => corpusExample(rng, training, 2));
    expect(new Set(examples.map((e) => e.kind)).size).toBe(6);
    const solves = examples.filter((e) => e.kind.startsWith('solve/'));
    const proposals = examples.filter((e) => e.kind.startsWith('propose/'));
    for (const e of solves) expect(e.prompt).toBe(solvePrompt(e.task));
    for (const e of proposals) {
      expect(e.prompt.endsWith(proposalPrompt(e.task.type, []).trimStart())).toBe(true);
      expect(e.prompt.match(/^## Reference \d+$/gm)?.length ?? 0).toBeLessThanOrEqual(2);
    }
    const checked = await verifier.verify(solves.map((e) => ({ kind: 'check', task: e.task, answer: e.completion })));
    expect(checked.filter((o) => !correct(o))).toEqual([]);
    const validated = await verifier.verify(proposals.map((e) => ({ kind: 'validate', taskType: e.task.type, text: e.completion })));
    validated.forEach((o, i) => expect(o.kind === 'validate' && o.validation.valid && (o.validation.task as CodeTask).outputs, proposals[i]!.completion).toEqual(proposals[i]!.task.outputs));
  });

  it('gives tasks whose answers the check jobs can also refuse: another input\'s output is wrong for code_o', async () => {
    const jobs = pool.training.slice(0, 40).flatMap((p) => {
      const k = p.outputs.findIndex((o) => o !== p.outputs[0]);
      if (k < 0) return [];
      const types: CodeTaskType[] = ['code_o', 'code_i'];
      return types.map((type) => ({ kind: 'check' as const, task: poolTask(p, type, 0), answer: type === 'code_o' ? p.outputs[k]! : p.inputs[k]! }));
    });
    expect(jobs.length).toBeGreaterThan(30);
    expect((await verifier.verify(jobs)).filter(correct)).toEqual([]);
  });

  it('has a code_f answer (the program in a python block) right, and a constant function wrong', async () => {
    const p = pool.training.find((q) => new Set(q.outputs).size > 1)!;
    const task = poolTask(p, 'code_f', 0, 6);
    const [right, wrong] = await verifier.verify([
      { kind: 'check', task, answer: proposalText(p.program, []) },
      { kind: 'check', task, answer: proposalText(`def f(*args):\n    return ${p.outputs[0]}`, []) },
    ]);
    expect([correct(right!), correct(wrong!)]).toEqual([true, false]);
  });
});

describe('the pretraining scenario', () => {
  const parse = (text: string) => () => parsePretrainScenario(`name: t\nseed: 1\nmodel: { preset: tiny }\ntrain: { steps: 1 }\nout: x\n${text}`, 'p.yaml');

  it('takes the domain\'s own corpus and eval fields, and refuses the other domain\'s, naming them', () => {
    expect(parse('domain: python\n')()).toMatchObject({ domain: 'python', corpus: { programs: 6000, heldOut: 300, references: 1 }, eval: { tasks: 200 } });
    expect(parse('')()).toMatchObject({ domain: 'arith', corpus: { maxDepth: 2, inputAbs: 9 } });
    expect(parse('domain: python\ncorpus: { maxDepth: 3 }\n')).toThrow(/^p\.yaml: field "corpus": unknown field\(s\) "maxDepth"$/);
    expect(parse('corpus: { programs: 10 }\n')).toThrow(/^p\.yaml: field "corpus": unknown field\(s\) "programs"$/);
    expect(parse('domain: pyhton\n')).toThrow(/^p\.yaml: field "domain": expected one of arith, python$/);
    expect(parse('domain: python\neval: { temperature: -1 }\n')).toThrow(/^p\.yaml: field "eval\.temperature": expected a number >= 0/);
  });
});

describe('pretraining on the code domain', () => {
  const scenario = (out: string) =>
    parsePretrainScenario(`name: t\nseed: 3\ndomain: python\nmodel: { preset: tiny }\ncorpus: { programs: 60, heldOut: 6, workers: 1 }\ntrain: { steps: 6, batch: 4, lr: 0.01 }\neval: { tasks: 4, proposals: 3, maxTokens: 16 }\nout: ${out}\n`, 't.yaml');

  it('runs end to end, scores the held-out tasks, and repeats bit for bit', async () => {
    const cpu = new CpuBackend();
    const [a, b] = [mkdtempSync(join(tmpdir(), 'populora-pretrain-code-')), mkdtempSync(join(tmpdir(), 'populora-pretrain-code-'))];
    const first = await pretrain(scenario(a), cpu);
    const second = await pretrain(scenario(b), cpu);
    expect(readFileSync(join(a, 'model.safetensors')).equals(readFileSync(join(b, 'model.safetensors')))).toBe(true);
    expect(second.losses).toEqual(first.losses);
    expect(first.losses.at(-1)!).toBeLessThan(first.losses[0]!);
    expect(first.evaluations.map((e) => e.step)).toEqual([6]);
    const scores = first.evaluations[0]!.scores;
    expect(Object.keys(scores)).toEqual(['code_o', 'code_i', 'proposals']);
    for (const share of Object.values(scores)) expect(share >= 0 && share <= 1).toBe(true);
    const heldOut = first.heldOut as { programs: PoolProgram[]; code_o: unknown[] };
    expect(heldOut.programs.length).toBe(6);
    expect(heldOut.code_o.length).toBe(4);

    // Another model pretrained beside this one (corpus.heldOutFrom) is scored on the same tasks and never sees their programs.
    const file = join(a, 'held_out.json');
    writeFileSync(file, JSON.stringify(first.heldOut));
    const besideText = `name: t\nseed: 4\ndomain: python\nmodel: { preset: tiny }\ncorpus: { programs: 60, heldOutFrom: ${file}, workers: 1 }\ntrain: { steps: 1, batch: 4 }\neval: { tasks: 3, proposals: 0, maxTokens: 16 }\nout: ${b}\n`;
    const beside = (await pretrain(parsePretrainScenario(besideText, 't.yaml'), cpu)).heldOut as HeldOutTasks & { training: number };
    expect(beside.programs).toEqual(heldOut.programs);
    expect(beside.code_o).toEqual(heldOut.code_o.slice(0, 3));
    expect(beside.training).toBe(60);
  }, 240_000);

  it('names the file and the field when corpus.heldOutFrom is not a held_out.json', () => {
    const dir = mkdtempSync(join(tmpdir(), 'populora-held-out-'));
    expect(() => readHeldOutFile(join(dir, 'missing.json'))).toThrow(/^field "corpus\.heldOutFrom": cannot read .*missing\.json as JSON/);
    writeFileSync(join(dir, 'bad.json'), JSON.stringify({ programs: [{ program: 'def f(x):\n    return x' }], code_o: [{ type: 'code_i', program: 'x' }], code_i: [] }));
    expect(() => readHeldOutFile(join(dir, 'bad.json'))).toThrow(/^field "corpus\.heldOutFrom": .*bad\.json: field "code_o\.0\.type"/);
  });
});
