// Pretraining on the toy domain (Domain.pretraining): random expressions as solved tasks and proposals
// (corpus.ts), scored on held-out deduce tasks answered greedily under the grammar. The held-out tasks are drawn
// first, from their own stream (held-out.ts draws the same set for runs' evaluation), and never trained on.

import { z } from 'zod';
import { int } from '../../scenario/fields.js';
import { generate } from '../../model/generate.js';
import type { LlamaModel } from '../../model/llama.js';
import { ARITH_ALPHABET, characterTokenizer, type TextTokenizer } from '../../model/tokenizer.js';
import type { DomainPretraining, ModelCardFacts, PretrainSettings } from '../pretraining.js';
import { corpusExample, randomTask } from './corpus.js';
import { tokenMask, tokenTexts } from './grammar.js';
import { answerFormat, checkAnswer, solvePrompt, type ArithTask } from './tasks.js';

export const arithCorpusSchema = z.strictObject({ maxDepth: int(1).default(2), inputAbs: int(1).default(9) });
export const arithEvalSchema = z.strictObject({ tasks: int(1).default(200) });

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

function modelCard({ name, settings, config, scores, reproduce }: ModelCardFacts): string {
  const { tasks } = arithEvalSchema.parse(settings.eval);
  return `# ${name}

A tiny Llama-family base model (hidden size ${config.hiddenSize}, ${config.numLayers} layers, character tokenizer) pretrained from scratch
on text of populora's toy arithmetic domain: solved deduce, abduce and induce tasks and teachers' proposals, in the
formats the actors use. It is the default base model of \`scenarios/quickstart.yaml\`.

${reproduce}

Greedy solve rate on ${tasks} held-out deduce tasks (never in the training text): **${(100 * scores['deduce']!).toFixed(1)}%**.
\`loss.html\` plots the training loss and the held-out solve rate; \`pretrain_log.json\` holds both.
`;
}

export const arithPretraining: DomainPretraining = {
  corpusSchema: arithCorpusSchema,
  evalSchema: arithEvalSchema,
  preparing: () => null,
  open: async (settings: PretrainSettings, streams) => {
    const corpus = arithCorpusSchema.parse(settings.corpus);
    const { tasks } = arithEvalSchema.parse(settings.eval);
    const tokenizer = arithTokenizer();
    const heldOutStream = streams.stream('held-out');
    const heldOut = Array.from({ length: tasks }, () => randomTask(heldOutStream, 'deduce', corpus));
    const heldOutPrompts = new Set(heldOut.map(solvePrompt));
    return {
      tokenizer,
      example: (rng) => {
        const example = corpusExample(rng, corpus);
        return heldOutPrompts.has(example.prompt) ? null : example; // held-out tasks are never trained on
      },
      evaluate: async (model) => ({ deduce: await deduceSolveRate(model, tokenizer.tokenizer, heldOut) }),
      heldOut: null,
      close: async () => {},
    };
  },
  modelCard,
};
