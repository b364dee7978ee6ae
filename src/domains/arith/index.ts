// The toy arithmetic domain as the runtime sees it: integer expressions in one variable, three task types
// (tasks.ts), every output decoded under a grammar mask (grammar.ts; on the device from its token automaton,
// grammar-automaton.ts), verified in JavaScript on worker threads
// (verifier-pool.ts). Its prompts are fixed markers: a scenario gives it no templates.

import { ARITH_ALPHABET } from '../../model/tokenizer.js';
import type { Domain, FormatName } from '../domain.js';
import { minimumTokens, tokenMask } from './grammar.js';
import { formatAutomaton } from './grammar-automaton.js';
import { heldOutTasks } from './held-out.js';
import { arithPretraining } from './pretraining.js';
import { ARITH_TASK_TYPES, SEED_TASKS, answerFormat, proposalFormat, proposalPrompt, solvePrompt, type ArithTask, type ArithTaskType } from './tasks.js';
import { ArithVerifierPool } from './verifier-pool.js';

function formatOf(format: FormatName) {
  const [kind, type] = format.split('/') as ['proposal' | 'answer', ArithTaskType];
  if (!ARITH_TASK_TYPES.includes(type)) throw new RangeError(`no arith format named ${format}`);
  return kind === 'proposal' ? proposalFormat(type) : answerFormat(type);
}

export const arith: Domain = {
  name: 'arith',
  taskTypes: ARITH_TASK_TYPES,
  alphabet: ARITH_ALPHABET,
  presetContext: 0,
  seedReferences: SEED_TASKS,
  referencesOptIn: true, // the shipped prompts are the marker alone (models/arith-tiny was trained on them)
  prompts: null,
  proposalPrompt: (type, references) => ({ prompt: proposalPrompt(type as ArithTaskType, references as readonly ArithTask[]), given: '' }),
  solvePrompt: (task) => solvePrompt(task as ArithTask),
  tokenMask: (format, vocab) => {
    const grammar = formatOf(format);
    return (generatedText, remainingTokens) => tokenMask(grammar, vocab, generatedText, remainingTokens);
  },
  tokenAutomaton: (format, vocab) => formatAutomaton(format, formatOf(format), vocab),
  minimumTokens: (types) => Math.max(...types.flatMap((type) => [minimumTokens(proposalFormat(type as ArithTaskType)), minimumTokens(answerFormat(type as ArithTaskType))])),
  tokenBudgetHint: 24,
  verifierPool: (workers) => new ArithVerifierPool(workers),
  heldOutTasks,
  pretraining: arithPretraining,
};
