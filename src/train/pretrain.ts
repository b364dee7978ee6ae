// `populora pretrain`: a tiny Llama-family base model trained from scratch (every weight: full-parameter mode) on
// text of one domain, so that self-play starts from a model that already solves some tasks: the toy domain's
// (src/domains/arith/corpus.ts) or the code domain's (src/domains/python/corpus-pool.ts, pretrain-python.ts).
// Seeded end to end: the same file gives the same weights on the same backend. Held-out tasks are drawn first and
// never appear in the training text; their scores are the model's (its model card records them).

import { z } from 'zod';
import type { Backend } from '../backend/backend.js';
import { randomTask, corpusExample } from '../domains/arith/corpus.js';
import { tokenMask, tokenTexts } from '../domains/arith/grammar.js';
import { answerFormat, checkAnswer, solvePrompt, type ArithTask } from '../domains/arith/tasks.js';
import { randomModel, saveModel, weightsFromNamed } from '../model/checkpoint.js';
import { TINY_CONFIGS, type LlamaConfig } from '../model/config.js';
import { generate } from '../model/generate.js';
import { LlamaModel } from '../model/llama.js';
import { ARITH_ALPHABET, characterTokenizer, vocabularyCovering, type TextTokenizer } from '../model/tokenizer.js';
import { Streams, type RandomStream } from '../runtime/streams.js';
import { parseYamlWith } from '../scenario/scenario.js';
import { AdamW } from './adamw.js';
import { LlamaTrainer } from './llama-backward.js';
import { pythonCorpus, pythonCorpusSchema, pythonEvalSchema } from './pretrain-python.js';
import { crossEntropyStep } from './steps.js';

const int = (min: number) => z.number({ error: 'expected a number' }).int({ error: 'expected an integer' }).min(min, { error: `expected an integer >= ${min}` });

const common = {
  name: z.string({ error: 'expected a name' }),
  seed: int(0),
  backend: z.enum(['webgpu', 'cpu', 'auto']).default('cpu'),
  model: z.strictObject({ preset: z.string({ error: 'expected a preset name such as tiny' }), seed: int(0).default(0) }),
  train: z.strictObject({
    steps: int(1),
    batch: int(1).default(32),
    lr: z.number().positive().default(3e-3),
    schedule: z.enum(['constant', 'cosine'], { error: 'expected constant or cosine' }).default('constant'), // cosine: down to a tenth of lr at the last step
    maxGradNorm: z.number().positive().default(1),
  }),
  out: z.string({ error: 'expected the output folder' }),
};
const PRETRAIN_DOMAINS = ['arith', 'python'] as const;
const withDefaultDomain = (value: unknown) => (typeof value === 'object' && value !== null && !Array.isArray(value) && !('domain' in value) ? { ...value, domain: 'arith' } : value);

/** A pretraining scenario: the fields every domain shares, and the corpus and evaluation fields of its domain. */
export const pretrainSchema = z.preprocess(
  withDefaultDomain,
  z.discriminatedUnion(
    'domain',
    [
      z.strictObject({
        ...common,
        domain: z.literal('arith'),
        corpus: z.strictObject({ maxDepth: int(1).default(2), inputAbs: int(1).default(9) }).prefault({}),
        eval: z.strictObject({ tasks: int(1).default(200), every: int(0).default(0) }).prefault({}),
      }),
      z.strictObject({ ...common, domain: z.literal('python'), corpus: pythonCorpusSchema.prefault({}), eval: pythonEvalSchema.prefault({}) }),
    ],
    { error: `expected one of ${PRETRAIN_DOMAINS.join(', ')}` },
  ),
);
export type PretrainScenario = z.infer<typeof pretrainSchema>;
export type ArithPretrainScenario = Extract<PretrainScenario, { domain: 'arith' }>;

export const parsePretrainScenario = (text: string, file: string): PretrainScenario => parseYamlWith(pretrainSchema, text, file);

/** Held-out scores by name (arith: deduce; python: code_o, code_i, proposals), each a share in [0, 1]. */
export type Scores = Record<string, number>;

/** What a domain gives pretraining: its tokenizer, training text, held-out evaluation. */
export interface PretrainCorpus {
  tokenizer: { json: Record<string, unknown>; tokenizer: TextTokenizer };
  /** A training example, or null to draw again (a held-out task, or one longer than the context). */
  example(rng: RandomStream): { prompt: string; completion: string } | null;
  evaluate(model: LlamaModel): Promise<Scores>;
  heldOut: unknown; // what the model folder records of the held-out set (held_out.json), null if nothing
  close(): Promise<void>;
}

export interface PretrainProgress {
  step: number; // steps done
  loss: number;
  scores: Scores | null; // at evaluation steps
}

export interface PretrainResult {
  config: LlamaConfig;
  losses: number[];
  evaluations: Array<{ step: number; scores: Scores }>;
  heldOut: unknown;
}

/** The character tokenizer of the toy domain (what a preset model of the arith domain uses). */
export const arithTokenizer = () => characterTokenizer(ARITH_ALPHABET, 'the arith character tokenizer');

/** Held-out deduce tasks: greedy answers under the grammar, the share right. */
export async function deduceSolveRate(model: LlamaModel, tokenizer: TextTokenizer, tasks: readonly ArithTask[]): Promise<number> {
  const vocab = tokenTexts(tokenizer, model.config.vocabSize);
  const format = answerFormat('deduce');
  const maxTokens = 8;
  const requests = tasks.map((task, i) => ({ requestId: i, prompt: tokenizer.encodePrompt(solvePrompt(task)), adapter: -1, maxTokens, seed: 0, temperature: 0, stopTokens: [vocab.eos] }));
  const textOf = (tokens: readonly number[]) => tokens.map((t) => vocab.texts[t]).join('');
  const results = await generate(model, requests, { mask: (r, generated) => tokenMask(format, vocab, textOf(generated), r.maxTokens - generated.length) });
  return results.filter((r, i) => checkAnswer(tasks[i]!, textOf(r.tokens)).correct).length / tasks.length;
}

/** The toy domain: random expressions; held-out deduce tasks drawn first, from their own stream. */
function arithCorpus(scenario: ArithPretrainScenario, streams: Streams): PretrainCorpus {
  const tokenizer = arithTokenizer();
  const heldOutStream = streams.stream('held-out');
  const heldOut = Array.from({ length: scenario.eval.tasks }, () => randomTask(heldOutStream, 'deduce', scenario.corpus));
  const heldOutPrompts = new Set(heldOut.map(solvePrompt));
  return {
    tokenizer,
    example: (rng) => {
      const example = corpusExample(rng, scenario.corpus);
      return heldOutPrompts.has(example.prompt) ? null : example; // held-out tasks are never trained on
    },
    evaluate: async (model) => ({ deduce: await deduceSolveRate(model, tokenizer.tokenizer, heldOut) }),
    heldOut: null,
    close: async () => {},
  };
}

/** The step's learning rate: constant, or a cosine from lr down to lr / 10 over the steps. */
export function learningRate(train: PretrainScenario['train'], step: number): number {
  if (train.schedule === 'constant') return train.lr;
  const progress = train.steps === 1 ? 0 : step / (train.steps - 1);
  return train.lr * (0.1 + 0.45 * (1 + Math.cos(Math.PI * progress)));
}

export async function pretrain(scenario: PretrainScenario, backend: Backend, onStep: (p: PretrainProgress) => void = () => {}): Promise<PretrainResult> {
  const preset = TINY_CONFIGS[scenario.model.preset];
  if (!preset) throw new RangeError(`field "model.preset": unknown preset "${scenario.model.preset}" (one of ${Object.keys(TINY_CONFIGS).join(', ')})`);
  const streams = new Streams(scenario.seed);
  const corpus = scenario.domain === 'arith' ? arithCorpus(scenario, streams) : await pythonCorpus(scenario, streams, preset.maxPositionEmbeddings);
  const { json, tokenizer } = corpus.tokenizer;
  const config: LlamaConfig = { ...preset, vocabSize: vocabularyCovering(preset.vocabSize, tokenizer) };

  const model = LlamaModel.upload(backend, config, randomModel(config, scenario.model.seed), { storage: 'f32' });
  const trainer = new LlamaTrainer(model);
  const optimizer = AdamW.forTensors(backend, trainer.parameters(), { lr: scenario.train.lr, maxGradNorm: scenario.train.maxGradNorm });
  const losses: number[] = [];
  const evaluations: PretrainResult['evaluations'] = [];
  try {
    for (let step = 0; step < scenario.train.steps; step++) {
      const rng = streams.stream('corpus', step);
      const batch = [];
      while (batch.length < scenario.train.batch) {
        const example = corpus.example(rng);
        if (example === null) continue;
        batch.push({ tokens: [...tokenizer.encodePrompt(example.prompt + example.completion), tokenizer.eosTokenId!], adapter: -1 });
      }
      const { loss } = await crossEntropyStep(trainer, optimizer, batch, 'full', learningRate(scenario.train, step));
      losses.push(loss);
      const done = step + 1;
      const evaluate = done === scenario.train.steps || (scenario.eval.every > 0 && done % scenario.eval.every === 0);
      const scores = evaluate ? await corpus.evaluate(model) : null;
      if (scores !== null) evaluations.push({ step: done, scores });
      onStep({ step: done, loss, scores });
    }
    const named = new Map<string, Float32Array>();
    for (const [name, tensor] of trainer.parameters()) named.set(name, await backend.readF32(tensor));
    saveModel(scenario.out, config, weightsFromNamed(config, named), { tokenizerJson: json });
    return { config, losses, evaluations, heldOut: corpus.heldOut };
  } finally {
    await corpus.close();
    optimizer.destroy();
    trainer.destroy();
    model.destroy();
  }
}
