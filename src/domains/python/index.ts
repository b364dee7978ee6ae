// The code domain as the runtime sees it: Absolute Zero Reasoner's code_o/code_i/code_f (tasks.ts), prompts from
// templates (prompts.ts), free-text generation (no token mask), verified by a sandboxed Python in worker processes
// (verifier-pool.ts); `populora verify` inspects one task by hand (verify-command.ts).

import type { Domain } from '../domain.js';
import { PLAIN_PROMPTS, CODE_PROMPTS, proposalGiven, proposalPrompt, solvePrompt } from './prompts.js';
import { heldOutTasks } from './held-out.js';
import { pythonPretraining } from './pretraining.js';
import { CODE_TASK_TYPES, PYTHON_ALPHABET, SEED_TASKS, type CodeTask, type CodeTaskType } from './tasks.js';
import { PythonVerifierPool } from './verifier-pool.js';
import { VERIFY_COMMAND } from './verify-command.js';

/** The shortest proposal, at one character per token (a preset's tokenizer): a budget must hold at least this. */
const SHORTEST_PROPOSAL = '```python\ndef f(x):\n    return x\n```\n```input\n1\n```';

export const python: Domain = {
  name: 'python',
  taskTypes: CODE_TASK_TYPES,
  alphabet: PYTHON_ALPHABET,
  presetContext: 2048,
  seedReferences: SEED_TASKS,
  prompts: CODE_PROMPTS,
  proposalPrompt: (type, references, prompts) => {
    const [codeType, tasks, set] = [type as CodeTaskType, references as readonly CodeTask[], prompts ?? PLAIN_PROMPTS];
    return { prompt: proposalPrompt(codeType, tasks, set), given: proposalGiven(codeType, tasks, set) };
  },
  solvePrompt: (task, prompts) => solvePrompt(task as CodeTask, prompts ?? PLAIN_PROMPTS),
  minimumTokens: () => SHORTEST_PROPOSAL.length,
  tokenBudgetHint: 256,
  verifierPool: (workers, settings) => new PythonVerifierPool(workers, { fuel: settings.fuel, wallClockGuardMs: settings.guardMs }),
  commands: [VERIFY_COMMAND],
  heldOutTasks,
  pretraining: pythonPretraining,
};
