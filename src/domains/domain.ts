// A domain is what the actors' tasks are about: the toy arithmetic of src/domains/arith (grammar-constrained
// output, verified in JavaScript) or the code domain of src/domains/python (AZR's code_o/code_i/code_f, free text,
// verified by a sandboxed Python). The actors see only this interface; a scenario picks one by `domain`.

import { minimumTokens, type Format } from './arith/grammar.js';
import { ARITH_TASK_TYPES, answerFormat, proposalFormat, proposalPrompt as arithProposalPrompt, solvePrompt as arithSolvePrompt, type ArithTask, type ArithTaskType } from './arith/tasks.js';
import { CODE_TASK_TYPES, SEED_TASKS, proposalPrompt as codeProposalPrompt, solvePrompt as codeSolvePrompt, type CodeTask, type CodeTaskType } from './python/tasks.js';
import { ARITH_ALPHABET } from '../model/tokenizer.js';

export const DOMAIN_NAMES = ['arith', 'python'] as const;
export type DomainName = (typeof DOMAIN_NAMES)[number];
export type TaskType = ArithTaskType | CodeTaskType;
export type Task = ArithTask | CodeTask;

/** What the metrics track of a valid task (computed by the verifier, which parses it anyway). */
export interface TaskMetrics {
  size: number; // AST nodes
  depth: number;
  operators: string[]; // arith: operators used; python: input and output types
  signature: string; // one problem-space coverage bin
  program?: string; // python: normalised-program hash (distinct programs)
  cyclomatic?: number; // python: cyclomatic complexity
}

export type Validation = { valid: true; task: Task; fuelUsed: number; metrics: TaskMetrics } | { valid: false; reason: string };
export interface AnswerCheck {
  correct: boolean;
  reason: string;
}

/** A verifier job and its outcome. A fault (a worker that crashed or hung twice) is recorded, never a verdict. */
export type VerifyJob = { kind: 'validate'; taskType: TaskType; text: string } | { kind: 'check'; task: Task; answer: string };
export type VerifyOutcome = { kind: 'validate'; validation: Validation } | { kind: 'check'; check: AnswerCheck } | { kind: 'fault'; detail: string };

export interface VerifierPool {
  verify(jobs: readonly VerifyJob[]): Promise<VerifyOutcome[]>;
  close(): Promise<void>;
}

/** A generation's output constraint, as requests carry it: "proposal/deduce", "answer/code_o", … */
export type FormatName = `${'proposal' | 'answer'}/${TaskType}`;

export interface Domain {
  name: DomainName;
  taskTypes: readonly TaskType[];
  alphabet: string; // the characters a preset model's character-level tokenizer covers
  presetContext: number; // the context a preset model gets at least (prompts with programs are long)
  seedReferences: readonly Task[]; // a teacher's reference buffer starts with these (none: prompts show no references)
  proposalPrompt(type: TaskType, references: readonly Task[]): string;
  solvePrompt(task: Task): string;
  grammar(format: FormatName): Format | null; // null: free text
  minimumTokens(types: readonly TaskType[]): number; // the smallest token budget a proposal and an answer fit in
}

const split = (format: FormatName) => format.split('/') as ['proposal' | 'answer', TaskType];

const arith: Domain = {
  name: 'arith',
  taskTypes: ARITH_TASK_TYPES,
  alphabet: ARITH_ALPHABET,
  presetContext: 0,
  seedReferences: [],
  proposalPrompt: (type) => arithProposalPrompt(type as ArithTaskType),
  solvePrompt: (task) => arithSolvePrompt(task as ArithTask),
  grammar: (format) => {
    const [kind, type] = split(format);
    if (!(ARITH_TASK_TYPES as readonly string[]).includes(type)) throw new RangeError(`no arith format named ${format}`);
    return kind === 'proposal' ? proposalFormat(type as ArithTaskType) : answerFormat(type as ArithTaskType);
  },
  minimumTokens: (types) => Math.max(...types.flatMap((type) => [minimumTokens(proposalFormat(type as ArithTaskType)), minimumTokens(answerFormat(type as ArithTaskType))])),
};

/** Printable ASCII, newline and tab: what Python source and literals are written in. */
const PYTHON_ALPHABET = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('') + '\n\t';

const python: Domain = {
  name: 'python',
  taskTypes: CODE_TASK_TYPES,
  alphabet: PYTHON_ALPHABET,
  presetContext: 2048,
  seedReferences: SEED_TASKS,
  proposalPrompt: (type, references) => codeProposalPrompt(type as CodeTaskType, references as CodeTask[]),
  solvePrompt: (task) => codeSolvePrompt(task as CodeTask),
  grammar: () => null,
  minimumTokens: () => '```python\ndef f(x):\n    return x\n```\n```input\n1\n```'.length, // one character per token at worst
};

export const DOMAINS: Record<DomainName, Domain> = { arith, python };
