// What an adapter thinks of the right answers (docs/science.md, the diagnosis): for each held-out task, the
// log-probability the model with an adapter (or the base model alone, slot -1) gives the task's reference answer
// and the end of sequence after its prompt, teacher-forced and without the grammar mask, and the mean entropy (nats)
// of its next-token distribution over those positions. A greedy score says whether the right answer is the most
// likely one; these say how far each update moved it, even while the greedy answer stays the same.
//
// Shared by bench/science-diagnose.ts (a run's checkpoints) and bench/science-probe.ts (an RL update on its own).

import type { Domain, PromptSet, Task } from '../src/domains/domain.js';
import { proposalText, type CodeTask } from '../src/domains/python/tasks.js';
import type { TokenTexts } from '../src/model/token-texts.js';
import type { TextTokenizer } from '../src/model/tokenizer.js';
import { packSequences } from '../src/train/batch.js';
import { completionMasks } from '../src/train/grammar-policy.js';
import type { LlamaTrainer } from '../src/train/llama-backward.js';
import { readLogProbs } from '../src/train/steps.js';

/** The answer a task's author gives (a student's completion, as pretraining wrote it); other answers may be right too (abduce, induce, code_i, code_f). */
export function referenceAnswer(task: Task): string {
  const t = task as Task & { inputs: Array<string | number>; outputs: Array<string | number>; expr?: string };
  if (t.type === 'deduce' || t.type === 'code_o') return String(t.outputs[0]);
  if (t.type === 'abduce' || t.type === 'code_i') return String(t.inputs[0]);
  if (t.type === 'induce' && t.expr !== undefined) return t.expr;
  if (t.type === 'code_f') return proposalText((task as CodeTask).program, []); // a python block, as pretraining wrote it
  throw new RangeError(`no reference answer for a ${t.type} task`);
}

export interface AnswerLikelihoods {
  logLikelihood: number[]; // per task: Σ log p over the answer's tokens and the end of sequence (nats)
  entropy: number[]; // per task: mean entropy of the next-token distribution at those positions (nats)
}

/** Sequences per forward pass: the packed batch stays small (the toy models' activations are a few MB). */
const CHUNK = 64;

/** Per task, teacher-forced: log p(reference answer, EOS | prompt) and the mean entropy, under `slot` (-1: the base model). */
export async function answerLikelihoods(trainer: LlamaTrainer, tokenizer: TextTokenizer, domain: Domain, prompts: PromptSet | null, tasks: readonly Task[], slot: number, grammar?: { vocab: TokenTexts; maxTokens: number }): Promise<AnswerLikelihoods> {
  const eos = tokenizer.eosTokenId;
  if (eos === null) throw new RangeError('answer likelihoods need a tokenizer with an end-of-sequence token');
  const sequences = tasks.map((task) => {
    const prompt = tokenizer.encodePrompt(domain.solvePrompt(task, prompts));
    const answer = [...tokenizer.encode(referenceAnswer(task)), eos];
    const mask = grammar && domain.tokenMask?.(`answer/${task.type}`, grammar.vocab);
    const allowed = mask ? { start: prompt.length, masks: completionMasks(mask, grammar.vocab, answer, grammar.maxTokens) } : undefined;
    return { tokens: [...prompt, ...answer], promptLength: prompt.length, adapter: slot, ...(allowed ? { allowed } : {}) };
  });
  const out: AnswerLikelihoods = { logLikelihood: [], entropy: [] };
  const { config, maxContext } = trainer.model;
  for (let start = 0; start < sequences.length; start += CHUNK) {
    const chunk = sequences.slice(start, start + CHUNK);
    const batch = packSequences(chunk, config.vocabSize, maxContext);
    const tape = trainer.forward(batch);
    try {
      const values = await readLogProbs(trainer, tape); // [T, 2]: log p of the next token, entropy
      chunk.forEach((sequence, s) => {
        const first = batch.starts[s]!;
        let [logp, entropy] = [0, 0];
        // token at position i predicts token i + 1: the answer's tokens are predicted from positions promptLength - 1 on
        for (let i = sequence.promptLength - 1; i < sequence.tokens.length - 1; i++) {
          logp += values[(first + i) * 2]!;
          entropy += values[(first + i) * 2 + 1]!;
        }
        out.logLikelihood.push(logp);
        out.entropy.push(entropy / (sequence.tokens.length - sequence.promptLength));
      });
    } finally {
      trainer.freeTape(tape);
    }
  }
  return out;
}
