// What a domain brings to `populora pretrain` (src/train/pretrain.ts): the `corpus:` and `eval:` fields of a
// pretraining scenario, the training text, the held-out scores, and its part of the model card. The trainer itself
// knows no domain; a domain without `pretraining` cannot be pretrained here.

import type { z } from 'zod';
import type { LlamaConfig } from '../model/config.js';
import type { LlamaModel } from '../model/llama.js';
import type { TextTokenizer } from '../model/tokenizer.js';
import type { RandomStream, Streams } from '../runtime/streams.js';

/** Held-out scores by name (arith: deduce; python: code_o, code_i, proposals), each a share in [0, 1]. */
export type Scores = Record<string, number>;

/** What a domain gives one pretraining run: its tokenizer, training text, held-out evaluation. */
export interface PretrainCorpus {
  tokenizer: { json: Record<string, unknown>; tokenizer: TextTokenizer };
  /** A training example, or null to draw again (a held-out task, or one longer than the context). */
  example(rng: RandomStream): { prompt: string; completion: string } | null;
  evaluate(model: LlamaModel): Promise<Scores>;
  heldOut: unknown; // what the model folder records of the held-out set (held_out.json), null if nothing
  close(): Promise<void>;
}

/** A pretraining scenario's domain part, `corpus:` and `eval:` as the domain's schemas parsed them. */
export interface PretrainSettings {
  corpus: Record<string, unknown>;
  eval: Record<string, unknown>;
}

/** What the model card says of a finished pretraining. */
export interface ModelCardFacts {
  name: string;
  settings: PretrainSettings;
  config: LlamaConfig;
  parametersMillions: number;
  scores: Scores; // the last evaluation's
  reproduce: string; // the command and the seed, device and minutes, as a paragraph
}

export interface DomainPretraining {
  corpusSchema: z.ZodObject; // `corpus:` of a pretraining scenario (strict, every field defaulted)
  evalSchema: z.ZodObject; // `eval:`, without `every`
  /** Shown before the corpus is opened when that takes a while (null: nothing to say). */
  preparing(settings: PretrainSettings): string | null;
  /** The run's corpus; `context` is the model's, in tokens. Its streams are the run's (seeded by the scenario). */
  open(settings: PretrainSettings, streams: Streams, context: number): Promise<PretrainCorpus>;
  /** The model card (README.md of the model folder), in Markdown. */
  modelCard(facts: ModelCardFacts): string;
}
