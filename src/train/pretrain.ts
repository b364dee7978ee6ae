// `populora pretrain`: a tiny Llama-family base model trained from scratch (every weight: full-parameter mode) on
// text of one domain, so that self-play starts from a model that already solves some tasks. The domain brings the
// corpus, the held-out scores and the model card (Domain.pretraining, src/domains/pretraining.ts); this file is
// the training loop. Seeded end to end: the same file gives the same weights on the same backend. Held-out tasks
// are drawn first and never appear in the training text; their scores are the model's (its model card records them).

import { z } from 'zod';
import { int } from '../scenario/fields.js';
import type { Backend } from '../backend/backend.js';
import { domainNamed, domains } from '../domains/index.js';
import type { DomainPretraining, PretrainSettings, Scores } from '../domains/pretraining.js';
import { randomModel, saveModel, weightsFromNamed } from '../model/checkpoint.js';
import { TINY_CONFIGS, type LlamaConfig } from '../model/config.js';
import { LlamaModel } from '../model/llama.js';
import { vocabularyCovering } from '../model/tokenizer.js';
import { Streams } from '../runtime/streams.js';
import { parseYamlWith } from '../scenario/scenario.js';
import { AdamW } from './adamw.js';
import { LlamaTrainer } from './llama-backward.js';
import { crossEntropyStep } from './steps.js';

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

/** The domains a base model can be pretrained on: those that bring `pretraining`, the registry's first the default. */
const pretrainable = () => domains().filter((d) => d.pretraining !== undefined);
const withDefaultDomain = (value: unknown) => (typeof value === 'object' && value !== null && !Array.isArray(value) && !('domain' in value) ? { ...value, domain: pretrainable()[0]!.name } : value);

/** A pretraining scenario: the fields every domain shares, and the `corpus:` and `eval:` fields of its domain. */
function pretrainSchema() {
  const variants = pretrainable().map((domain) => {
    const { corpusSchema, evalSchema } = domain.pretraining!;
    return z.strictObject({
      ...common,
      domain: z.literal(domain.name),
      corpus: corpusSchema.prefault({}),
      eval: evalSchema.extend({ every: int(0).default(0) }).prefault({}), // score every N steps (0: at the end only)
    });
  });
  const names = pretrainable().map((d) => d.name);
  return z.preprocess(withDefaultDomain, z.discriminatedUnion('domain', variants as [(typeof variants)[number], ...typeof variants], { error: `expected one of ${names.join(', ')}` }));
}

export interface PretrainScenario extends Omit<z.infer<ReturnType<typeof pretrainSchema>>, 'corpus' | 'eval'> {
  corpus: Record<string, unknown>;
  eval: Record<string, unknown> & { every: number };
}

export const parsePretrainScenario = (text: string, file: string): PretrainScenario => parseYamlWith(pretrainSchema(), text, file) as PretrainScenario;

/** The scenario's `corpus:` and `eval:` as its domain's schemas read them (`eval.every` is the trainer's). */
export function domainSettings(scenario: PretrainScenario): PretrainSettings {
  const { every, ...evaluation } = scenario.eval;
  return { corpus: scenario.corpus, eval: evaluation };
}

/** The pretraining hooks of the scenario's domain. */
export const pretrainingOf = (scenario: PretrainScenario): DomainPretraining => domainNamed(scenario.domain).pretraining!;

export type { Scores };

export interface PretrainProgress {
  step: number; // steps done
  loss: number;
  scores: Scores | null; // at evaluation steps
}

export interface PretrainResult {
  config: LlamaConfig;
  losses: number[]; // one a step done: losses.length is the steps done
  evaluations: Array<{ step: number; scores: Scores }>;
  heldOut: unknown;
  stopped: boolean; // by PretrainControl.stop, before the scenario's last step
}

export interface PretrainControl {
  onStep?: (p: PretrainProgress) => void;
  /** Aborted: the step in progress ends, the model is scored and saved, and pretrain returns (stopped). */
  stop?: AbortSignal;
  /**
   * Called right after the model of each evaluation is saved, with the run as it is then: what its folder needs to
   * describe the saved model (a log, a card). Nothing else runs between the save and this call, so a process that
   * ends at any point leaves a folder whose files agree.
   */
  onSaved?: (saved: PretrainResult) => void;
}

/** The step's learning rate: constant, or a cosine from lr down to lr / 10 over the steps. */
export function learningRate(train: PretrainScenario['train'], step: number): number {
  if (train.schedule === 'constant') return train.lr;
  const progress = train.steps === 1 ? 0 : step / (train.steps - 1);
  return train.lr * (0.1 + 0.45 * (1 + Math.cos(Math.PI * progress)));
}

export async function pretrain(scenario: PretrainScenario, backend: Backend, control: PretrainControl = {}): Promise<PretrainResult> {
  const preset = TINY_CONFIGS[scenario.model.preset];
  if (!preset) throw new RangeError(`field "model.preset": unknown preset "${scenario.model.preset}" (one of ${Object.keys(TINY_CONFIGS).join(', ')})`);
  const streams = new Streams(scenario.seed);
  const corpus = await pretrainingOf(scenario).open(domainSettings(scenario), streams, preset.maxPositionEmbeddings);
  const { json, tokenizer } = corpus.tokenizer;
  const config: LlamaConfig = { ...preset, vocabSize: vocabularyCovering(preset.vocabSize, tokenizer) };

  const model = LlamaModel.upload(backend, config, randomModel(config, scenario.model.seed), { storage: 'f32' });
  const trainer = new LlamaTrainer(model);
  const optimizer = AdamW.forTensors(backend, trainer.parameters(), { lr: scenario.train.lr, maxGradNorm: scenario.train.maxGradNorm });
  const losses: number[] = [];
  const evaluations: PretrainResult['evaluations'] = [];
  const result = (stopped: boolean): PretrainResult => ({ config, losses: [...losses], evaluations: [...evaluations], heldOut: corpus.heldOut, stopped });
  const save = async (stopped: boolean) => {
    const named = new Map<string, Float32Array>();
    for (const [name, tensor] of trainer.parameters()) named.set(name, await backend.readF32(tensor));
    saveModel(scenario.out, config, weightsFromNamed(config, named), { tokenizerJson: json });
    control.onSaved?.(result(stopped));
  };
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
      await new Promise((resolve) => setImmediate(resolve)); // the event loop turns: a signal's stop is seen between steps
      const stopping = control.stop?.aborted === true && done < scenario.train.steps;
      const evaluate = stopping || done === scenario.train.steps || (scenario.eval.every > 0 && done % scenario.eval.every === 0);
      const scores = evaluate ? await corpus.evaluate(model) : null;
      if (scores !== null) evaluations.push({ step: done, scores });
      // The model as scored, at every evaluation: a run that ends later (killed, on a shared machine) leaves it.
      if (scores !== null) await save(stopping);
      control.onStep?.({ step: done, loss, scores });
      if (stopping) return result(true);
    }
    return result(false);
  } finally {
    await corpus.close();
    optimizer.destroy();
    trainer.destroy();
    model.destroy();
  }
}
