// `populora pretrain`: a tiny Llama-family base model trained from scratch (every weight: full-parameter mode) on
// text of the toy domain (src/domains/arith/corpus.ts), so that self-play starts from a model that already
// solves some tasks. Seeded end to end: the same file gives the same weights on the same backend. The held-out
// deduce tasks are drawn first and never appear in the training text; their greedy solve rate is the model's
// score (models/arith-tiny/README.md records it).

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
import { Streams } from '../runtime/streams.js';
import { parseYamlWith } from '../scenario/scenario.js';
import { AdamW } from './adamw.js';
import { LlamaTrainer } from './llama-backward.js';
import { crossEntropyStep } from './steps.js';

const int = (min: number) => z.number({ error: 'expected a number' }).int({ error: 'expected an integer' }).min(min, { error: `expected an integer >= ${min}` });

export const pretrainSchema = z.strictObject({
  name: z.string({ error: 'expected a name' }),
  seed: int(0),
  backend: z.enum(['webgpu', 'cpu', 'auto']).default('cpu'),
  model: z.strictObject({ preset: z.string({ error: 'expected a preset name such as tiny' }), seed: int(0).default(0) }),
  corpus: z.strictObject({ maxDepth: int(1).default(2), inputAbs: int(1).default(9) }).prefault({}),
  train: z.strictObject({ steps: int(1), batch: int(1).default(32), lr: z.number().positive().default(3e-3), maxGradNorm: z.number().positive().default(1) }),
  eval: z.strictObject({ tasks: int(1).default(200), every: int(0).default(0) }).prefault({}),
  out: z.string({ error: 'expected the output folder' }),
});
export type PretrainScenario = z.infer<typeof pretrainSchema>;

export const parsePretrainScenario = (text: string, file: string): PretrainScenario => parseYamlWith(pretrainSchema, text, file);

export interface PretrainProgress {
  step: number; // steps done
  loss: number;
  heldOutSolveRate: number | null; // at evaluation steps
}

export interface PretrainResult {
  config: LlamaConfig;
  losses: number[];
  evaluations: Array<{ step: number; heldOutSolveRate: number }>;
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

export async function pretrain(scenario: PretrainScenario, backend: Backend, onStep: (p: PretrainProgress) => void = () => {}): Promise<PretrainResult> {
  const preset = TINY_CONFIGS[scenario.model.preset];
  if (!preset) throw new RangeError(`field "model.preset": unknown preset "${scenario.model.preset}" (one of ${Object.keys(TINY_CONFIGS).join(', ')})`);
  const { json, tokenizer } = arithTokenizer();
  const config: LlamaConfig = { ...preset, vocabSize: vocabularyCovering(preset.vocabSize, tokenizer) };
  const streams = new Streams(scenario.seed);
  const heldOutStream = streams.stream('held-out');
  const heldOut = Array.from({ length: scenario.eval.tasks }, () => randomTask(heldOutStream, 'deduce', scenario.corpus));
  const heldOutPrompts = new Set(heldOut.map(solvePrompt));

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
        const example = corpusExample(rng, scenario.corpus);
        if (heldOutPrompts.has(example.prompt)) continue; // held-out tasks are never trained on
        batch.push({ tokens: [...tokenizer.encodePrompt(example.prompt + example.completion), tokenizer.eosTokenId!], adapter: -1 });
      }
      const { loss } = await crossEntropyStep(trainer, optimizer, batch, 'full');
      losses.push(loss);
      const done = step + 1;
      const evaluate = done === scenario.train.steps || (scenario.eval.every > 0 && done % scenario.eval.every === 0);
      const heldOutSolveRate = evaluate ? await deduceSolveRate(model, tokenizer, heldOut) : null;
      if (heldOutSolveRate !== null) evaluations.push({ step: done, heldOutSolveRate });
      onStep({ step: done, loss, heldOutSolveRate });
    }
    const named = new Map<string, Float32Array>();
    for (const [name, tensor] of trainer.parameters()) named.set(name, await backend.readF32(tensor));
    saveModel(scenario.out, config, weightsFromNamed(config, named), { tokenizerJson: json });
    return { config, losses, evaluations };
  } finally {
    optimizer.destroy();
    trainer.destroy();
    model.destroy();
  }
}
