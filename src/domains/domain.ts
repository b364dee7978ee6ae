// What a domain is: everything the actors' tasks are about, behind one interface. A domain brings its task types,
// its prompts (fixed text, or templates a scenario may override), an optional token mask, the smallest token budget
// its outputs fit in, its verifier pool (what validates proposals and checks answers, and computes each valid
// task's metrics), and optionally commands of its own for the command line, a held-out task set and how to
// pretrain a base model on its text (pretraining.ts). Nothing outside src/domains/ names a particular domain: a
// scenario's `domain` is looked up in the registry (index.ts).

import type { TokenAutomaton } from '../model/token-automaton.js';
import type { TokenTexts } from '../model/token-texts.js';
import type { DomainPretraining } from './pretraining.js';

export type TaskType = string;

/** A validated task: plain data (it crosses to worker processes and into the event log), tagged with its type. */
export type Task = { readonly type: TaskType };

/** What the metrics track of a valid task (computed by the verifier, which parses it anyway). */
export interface TaskMetrics {
  size: number; // AST nodes
  depth: number;
  operators: string[]; // what the task is made of: operators used, or input and output types
  signature: string; // one problem-space coverage bin
  program?: string; // a normalised-program hash, for domains whose tasks are programs (distinct programs)
  cyclomatic?: number; // cyclomatic complexity, likewise
}

export type Validation = { valid: true; task: Task; fuelUsed: number; metrics: TaskMetrics } | { valid: false; reason: string };
export interface AnswerCheck {
  correct: boolean;
  reason: string;
}

/**
 * A verifier job and its outcome. A fault (a worker that crashed or hung twice) is recorded, never a verdict.
 * `given` is the part of a proposal its prompt supplied (a program the teacher was asked to write inputs for).
 */
export type VerifyJob = { kind: 'validate'; taskType: TaskType; text: string; given?: string } | { kind: 'check'; task: Task; answer: string };
export type VerifyOutcome = { kind: 'validate'; validation: Validation } | { kind: 'check'; check: AnswerCheck } | { kind: 'fault'; detail: string };

export interface VerifierPool {
  /** Resolves once every worker can take jobs (a run waits for it before its first step); absent: at once. */
  ready?(): Promise<void>;
  verify(jobs: readonly VerifyJob[]): Promise<VerifyOutcome[]>;
  close(): Promise<void>;
}

/** The scenario's verifier settings (`tasks.fuel`, `tasks.guardMs`): for domains whose verifier runs programs. */
export interface VerifierSettings {
  fuel: number; // counted steps a program may take per run
  guardMs: number; // wall-clock safety net per job: when it fires, a fault, never a verdict
}

/** A generation's output constraint, as requests carry it: "proposal/deduce", "answer/code_o", … */
export type FormatName = `${'proposal' | 'answer'}/${TaskType}`;

/** The tokens that may come next (a bitmask over the vocabulary) after `generatedText`, with `remainingTokens` left. */
export type TokenMask = (generatedText: string, remainingTokens: number) => Uint32Array;

/** A teacher's prompt, and the part of its proposal the prompt already gives ('' for none). */
export interface ProposalPrompt {
  prompt: string;
  given: string;
}

/** One template a domain fills: the slots it may name, and those it must (a prompt without them cannot be solved). */
export interface TemplateSpec {
  slots: readonly string[];
  required: readonly string[];
}

/**
 * A domain's prompt templates (prompts.ts fills and checks them). Templates are named by their path under a
 * scenario's `prompts` ("code_o.proposal", "reference", "wrap"); each built-in style gives every one of them.
 */
export interface PromptCatalog {
  templates: Readonly<Record<string, TemplateSpec>>;
  styles: Readonly<Record<string, Readonly<Record<string, string>>>>;
  defaultStyle: { toy: string; real: string }; // toy: a preset or a model pretrained here; real: any other model folder
}

/** The resolved prompts of a run: every template of the domain's catalog, and how a prompt is put to the model. */
export interface PromptSet {
  templates: Readonly<Record<string, string>>;
  chat: ChatFormat;
}
export const CHAT_FORMATS = ['none', 'chatml'] as const;
export type ChatFormat = (typeof CHAT_FORMATS)[number];

/** A command a domain adds to `populora` (the code domain's `verify`); options are read as commander gives them. */
export interface DomainCommand {
  name: string;
  description: string;
  options: ReadonlyArray<{ flags: string; description: string; required?: boolean; repeatable?: boolean; integer?: boolean; default?: number | string }>;
  run(options: Record<string, unknown>): Promise<void>;
}

export interface Domain {
  name: string;
  taskTypes: readonly TaskType[];
  alphabet: string; // the characters a preset model's character-level tokenizer covers
  presetContext: number; // the context a preset model gets at least (prompts with programs are long)
  seedReferences: readonly Task[]; // a teacher's reference buffer starts with these (none: prompts show no references)
  referencesOptIn?: boolean; // its prompts show references only when a scenario asks (tasks.referenceBuffer: true)
  prompts: PromptCatalog | null; // null: the domain writes fixed prompts (a scenario's `prompts` is refused)
  proposalPrompt(type: TaskType, references: readonly Task[], prompts: PromptSet | null): ProposalPrompt;
  solvePrompt(task: Task, prompts: PromptSet | null): string;
  /** The mask a generation of this format is decoded under; absent or null: free text. */
  tokenMask?(format: FormatName, vocab: TokenTexts): TokenMask | null;
  /**
   * tokenMask compiled to the token level, the same masks computed on the device (src/model/token-automaton.ts);
   * absent: the engine decodes under tokenMask on the host. Cached by the domain per (format, vocab).
   */
  tokenAutomaton?(format: FormatName, vocab: TokenTexts): TokenAutomaton | null;
  minimumTokens(types: readonly TaskType[]): number; // the smallest token budget a proposal and an answer fit in
  tokenBudgetHint: number; // a `sampling.maxTokens` that leaves room for real tasks (named when the budget is too small)
  verifierPool(workers: number, settings: VerifierSettings): VerifierPool;
  commands?: readonly DomainCommand[];
  /**
   * A fixed set of `count` tasks for the held-out evaluation, the same for every run given the seed, from one part
   * of the domain's held-out tasks (heldOutPart); absent: none.
   */
  heldOutTasks?(seed: number, count: number, part?: HeldOutPart): Task[];
  /** How `populora pretrain` trains a base model on this domain's text; absent: it cannot. */
  pretraining?: DomainPretraining;
}

/**
 * The parts of a domain's held-out tasks, for an honest selection of settings: settings are chosen on `validation`,
 * and `test` is scored only for the final comparison of the chosen ones; `all` is both (the whole set).
 */
export const HELD_OUT_PARTS = ['all', 'validation', 'test'] as const;
export type HeldOutPart = (typeof HELD_OUT_PARTS)[number];

/**
 * The part the task at `position` of a domain's held-out sequence belongs to: positions 4k and 4k+1 to validation,
 * 4k+2 and 4k+3 to test. In pairs, because the code domain's set holds each program twice, a code_o then a code_i
 * task (a program's two tasks stay in one part, and each part gets as many of either type); the sequences are in a
 * random order already (drawn from a seeded stream, or a seeded pool), so a fixed pattern splits them at random.
 */
export const heldOutPart = (position: number): Exclude<HeldOutPart, 'all'> => (Math.floor(position / 2) % 2 === 0 ? 'validation' : 'test');

/** Whether the task at `position` of a held-out sequence is in `part`. */
export const inHeldOutPart = (position: number, part: HeldOutPart) => part === 'all' || heldOutPart(position) === part;

/**
 * What makes two tasks the same question: their fields, in the order the domain's validation writes them (a
 * proposal of a held-out task is recognised by it).
 */
export const taskKey = (task: Task): string => JSON.stringify(task);

/** A lookup from a proposed task to its place in a held-out set (undefined: not held out). */
export function heldOutIndex(tasks: readonly Task[]): (task: Task) => number | undefined {
  const index = new Map(tasks.map((task, i) => [taskKey(task), i]));
  return (task) => index.get(taskKey(task));
}
