// The domain extension point: the registry names every domain, and a domain registered here, in this file only
// (a word to reverse, its own token mask and an in-process verifier), is a scenario's `domain` and runs end to
// end: its mask shapes every proposal, its verdicts are the reversal the test computes itself, the run replays
// identically. The same run, given a clock, records each step's verifier throughput in metrics.jsonl, which the
// replay leaves out of what it compares (and only that). A domain that brings `pretraining` is one
// `populora pretrain` trains on: its own corpus fields, its examples, its scores at the steps asked.

import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CpuBackend } from '../src/backend/cpu.js';
import type { Domain, Task, VerifierPool, VerifyJob, VerifyOutcome } from '../src/domains/domain.js';
import { domainNamed, domainNames, registerDomain } from '../src/domains/index.js';
import type { DomainPretraining } from '../src/domains/pretraining.js';
import { characterTokenizer } from '../src/model/tokenizer.js';
import { readEventLog, type RunEvent } from '../src/runtime/event-log.js';
import type { StepMetrics } from '../src/sim/metrics.js';
import { replayRun } from '../src/sim/replay.js';
import { runScenario } from '../src/sim/run.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { parsePretrainScenario, pretrain } from '../src/train/pretrain.js';

interface WordTask extends Task {
  type: 'reverse';
  word: string;
}

const reverse = (word: string) => [...word].reverse().join('');

/** What the pools of this file were asked, in order: 'ready' and the batches' job kinds. */
const poolCalls: string[] = [];

/** Validates a word of 1 to 8 lowercase letters, checks an answer against its reversal; in process, in job order. */
class ReversePool implements VerifierPool {
  async ready(): Promise<void> {
    poolCalls.push('ready');
  }

  async verify(jobs: readonly VerifyJob[]): Promise<VerifyOutcome[]> {
    poolCalls.push(jobs[0]?.kind ?? 'none');
    return jobs.map((job): VerifyOutcome => {
      if (job.kind === 'check') {
        const word = (job.task as WordTask).word;
        return { kind: 'check', check: job.answer === reverse(word) ? { correct: true, reason: 'correct' } : { correct: false, reason: 'not the reversal' } };
      }
      if (!/^[a-z]{1,8}$/.test(job.text)) return { kind: 'validate', validation: { valid: false, reason: 'format: not a word' } };
      const task: WordTask = { type: 'reverse', word: job.text };
      return { kind: 'validate', validation: { valid: true, task, fuelUsed: job.text.length, metrics: { size: job.text.length, depth: 1, operators: [], signature: `reverse:${job.text.length}` } } };
    });
  }

  async close(): Promise<void> {}
}

const reverseDomain: Domain = {
  name: 'reverse-test',
  taskTypes: ['reverse'],
  alphabet: 'abcdefghijklmnopqrstuvwxyz>?',
  presetContext: 0,
  seedReferences: [],
  prompts: null,
  proposalPrompt: () => ({ prompt: '>', given: '' }),
  solvePrompt: (task) => `${(task as WordTask).word}?`,
  // Letters while there is room for the end-of-sequence after them; the end once there is a letter.
  tokenMask: (_format, vocab) => (text, remainingTokens) => {
    const mask = new Uint32Array(Math.ceil(vocab.texts.length / 32));
    const allow = (id: number) => (mask[id >>> 5]! |= 1 << (id & 31));
    if (text.length > 0) allow(vocab.eos);
    if (remainingTokens >= 2) vocab.texts.forEach((t, id) => /^[a-z]+$/.test(t) && id !== vocab.eos && allow(id));
    return mask;
  },
  minimumTokens: () => 2,
  tokenBudgetHint: 8,
  verifierPool: () => new ReversePool(),
};

const scenarioText = `
name: reverse
seed: 11
steps: 2
backend: cpu
model: { preset: tiny, seed: 2 }
domain: reverse-test
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 2 } }
tasks: { perTeacher: 3 }
sampling: { answersPerStudent: 2, maxTokens: 6 }
`;

const messagesOf = <T>(events: RunEvent[], type: string) => events.filter((e) => e.type === type).map((e) => ({ step: e.step, message: (e.payload as { message: T }).message }));

describe('the domain registry', () => {
  it('names the built-in domains, and refuses an unknown name or a second domain of a name', () => {
    expect(domainNames().slice(0, 2)).toEqual(['arith', 'python']);
    expect(domainNamed('python').taskTypes).toEqual(['code_o', 'code_i', 'code_f']);
    expect(() => domainNamed('chess')).toThrow(/^no domain named "chess" \(the domains are arith, python/);
    expect(() => registerDomain({ ...reverseDomain, name: 'arith' })).toThrow(/a domain named "arith" is already registered/);
    expect(() => parseScenario('name: x\nseed: 1\nsteps: 1\nmodel: { preset: tiny }\ndomain: chess\n', 'x.yaml')).toThrow(/^x\.yaml: field "domain": expected one of arith, python/);
  });

  it('takes a domain registered at run time: a scenario names it, and it runs end to end through its own mask and verifier', async () => {
    registerDomain(reverseDomain);
    const scenario = parseScenario(scenarioText, 'reverse.yaml');
    expect(scenario.tasks.types).toEqual(['reverse']);
    expect(scenario).not.toHaveProperty('prompts');
    expect(() => parseScenario(`${scenarioText}\n`.replace('tasks: { perTeacher: 3 }', 'tasks: { types: [deduce] }'), 'r.yaml')).toThrow(/field "tasks\.types": "deduce" is not a task type of the reverse-test domain \(use reverse\)/);
    expect(() => parseScenario(scenarioText.replace('maxTokens: 6', 'maxTokens: 1'), 'r.yaml')).toThrow(/field "sampling\.maxTokens": 1 tokens cannot hold the shortest reverse proposal; use at least 2 \(8 or more leaves room for real tasks\)/);

    let now = 0;
    const outDir = mkdtempSync(join(tmpdir(), 'populora-reverse-'));
    const result = await runScenario(scenario, { outDir, clock: () => (now += 5) }); // a clock that ticks 5 ms a read
    const { events } = readEventLog(join(outDir, 'events.msgpack'));

    // The mask: every proposal is a word of 1 to 5 letters (6 tokens, the last one the end).
    const proposals = messagesOf<{ results: Array<{ text: string }> }>(events.filter((e) => (e.payload as { to: string }).to.startsWith('teacher')), 'generated').flatMap((m) => m.message.results);
    expect(proposals).toHaveLength(2 * 2 * 3); // 2 teachers, 2 steps, 3 proposals each
    for (const { text } of proposals) expect(text).toMatch(/^[a-z]{1,5}$/);
    expect(poolCalls[0]).toBe('ready'); // the run waits for its verifier before the first step
    expect(poolCalls.filter((c) => c === 'ready')).toHaveLength(1);

    // The verifier: each answer is correct exactly when it is the word reversed.
    const asked = new Map(messagesOf<{ requests: Array<{ task: WordTask; answers: Array<{ requestId: number; answer: string }> }> }>(events, 'check').flatMap((m) => m.message.requests.flatMap((r) => r.answers.map((a) => [a.requestId, { word: r.task.word, answer: a.answer }] as const))));
    const verdicts = messagesOf<{ results: Array<{ requestId: number; check: { correct: boolean } }> }>(events, 'checked').flatMap((m) => m.message.results);
    expect(verdicts.length).toBe(asked.size);
    expect(verdicts.length).toBeGreaterThan(0);
    for (const v of verdicts) expect(v.check.correct).toBe(asked.get(v.requestId)!.answer === reverse(asked.get(v.requestId)!.word));

    // Timing: each step's validations and checks are the verifier's replies of that step.
    const metrics = readFileSync(join(outDir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StepMetrics);
    for (const m of metrics) {
      const count = (type: string) => messagesOf<{ results: unknown[] }>(events, type).filter((e) => e.step === m.step).reduce((n, e) => n + e.message.results.length, 0);
      expect(m.timing).toMatchObject({ validations: count('validated'), checks: count('checked') });
      expect(m.timing!.verifierMs).toBeGreaterThan(0); // each batch took one 5 ms tick
      expect(m.timing!.verifierShare).toBeCloseTo(m.timing!.verifierMs / m.timing!.stepMs, 12);
      expect(m.timing!.validationsPerSecond).toBeGreaterThan(0);
      // the engine's core timed: one update a step, one 5 ms tick; generation a tick a call (proposals, answers)
      expect(m.timing!.trainMs).toBe(5);
      expect([m.timing!.generateMs % 5, m.timing!.generateMs > 0]).toEqual([0, true]);
      expect(m.timing!.generateMs + m.timing!.trainMs).toBeLessThanOrEqual(m.timing!.engineMs);
    }

    // The replay has no clock, so no timing: still identical. A changed timing is not a difference; any other field is.
    expect(await replayRun(outDir)).toMatchObject({ identical: true, hash: result.hash });
    const metricsFile = join(outDir, 'metrics.jsonl');
    const original = readFileSync(metricsFile, 'utf8');
    const edited = (edit: (m: StepMetrics) => void) => original.trim().split('\n').map((l) => { const m = JSON.parse(l) as StepMetrics; edit(m); return JSON.stringify(m); }).join('\n') + '\n';
    writeFileSync(metricsFile, edited((m) => (m.timing!.stepMs *= 2)));
    expect((await replayRun(outDir)).identical).toBe(true);
    writeFileSync(metricsFile, edited((m) => (m.validity = 0.5)));
    const verdict = await replayRun(outDir);
    expect(verdict.differences).toEqual([expect.stringMatching(/metrics\.jsonl: line 1 \(step 0\), field "validity" is 0\.5, the replay has 1$/)]);
  });
});

/** Reversal text to pretrain on: "word?" then its reversal; words of `letters` letters, a step's examples seeded. */
const reversePretraining = (evaluatedAt: number[]): DomainPretraining => {
  const corpusSchema = z.strictObject({ letters: z.number().int().min(1).default(3) });
  return {
    corpusSchema,
    evalSchema: z.strictObject({ words: z.number().int().min(1).default(4) }),
    preparing: () => null,
    open: async (settings) => {
      const { letters } = corpusSchema.parse(settings.corpus);
      let steps = 0;
      return {
        tokenizer: characterTokenizer(reverseDomain.alphabet, 'letters'),
        example: (rng) => {
          const word = Array.from({ length: letters }, () => String.fromCharCode(97 + rng.int(26))).join('');
          return { prompt: `${word}?`, completion: reverse(word) };
        },
        evaluate: async () => {
          evaluatedAt.push(++steps);
          return { reversed: 0.5 };
        },
        heldOut: null,
        close: async () => {},
      };
    },
    modelCard: ({ name, scores }) => `# ${name}\nreversed ${scores['reversed']}\n`,
  };
};

describe('pretraining on a registered domain', () => {
  it('parses its own corpus and eval fields, trains on its text, scores at the steps asked, and writes its card', async () => {
    const evaluated: number[] = [];
    registerDomain({ ...reverseDomain, name: 'reverse-pretrain', pretraining: reversePretraining(evaluated) });
    const text = (extra: string) => `name: r\nseed: 4\ndomain: reverse-pretrain\nmodel: { preset: tiny }\ntrain: { steps: 4, batch: 4, lr: 0.01 }\nout: x\n${extra}`;
    expect(() => parsePretrainScenario(text('corpus: { maxDepth: 2 }\n'), 'r.yaml')).toThrow(/^r\.yaml: field "corpus": unknown field\(s\) "maxDepth"$/);
    expect(() => parsePretrainScenario(text('domain: chess\n').replace('domain: reverse-pretrain\n', ''), 'r.yaml')).toThrow(/field "domain": expected one of arith, python, .*reverse-pretrain/);
    const scenario = parsePretrainScenario(text('corpus: { letters: 2 }\neval: { every: 2 }\n'), 'r.yaml');
    expect(scenario).toMatchObject({ corpus: { letters: 2 }, eval: { words: 4, every: 2 } });

    const out = mkdtempSync(join(tmpdir(), 'populora-pretrain-reverse-'));
    const result = await pretrain({ ...scenario, out }, new CpuBackend());
    expect(result.evaluations).toEqual([{ step: 2, scores: { reversed: 0.5 } }, { step: 4, scores: { reversed: 0.5 } }]);
    expect(evaluated).toEqual([1, 2]);
    expect(result.losses).toHaveLength(4);
    expect(result.losses.at(-1)!).toBeLessThan(result.losses[0]!);
    expect(existsSync(join(out, 'model.safetensors'))).toBe(true);
    expect(domainNamed('reverse-pretrain').pretraining!.modelCard({ name: 'r', settings: { corpus: {}, eval: {} }, config: result.config, parametersMillions: 0, scores: { reversed: 0.5 }, reproduce: '' })).toBe('# r\nreversed 0.5\n');
  });
});
