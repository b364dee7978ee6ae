// Pretraining on the code domain (Domain.pretraining): the pool of sandbox-validated programs (corpus-pool.ts) is
// built once, its held-out part set aside, and the model is scored on what self-play asks of it at step 0: greedy
// answers to held-out code_o and code_i tasks, checked by the verifier, and the share of sampled proposals (prompts
// as a fresh teacher's: seed tasks as references) that the verifier validates.

import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { int } from '../../scenario/fields.js';
import { generate, type GenerationRequest } from '../../model/generate.js';
import type { LlamaModel } from '../../model/llama.js';
import { characterTokenizer, type TextTokenizer } from '../../model/tokenizer.js';
import type { RandomStream, Streams } from '../../runtime/streams.js';
import type { DomainPretraining, ModelCardFacts, PretrainCorpus, PretrainSettings, Scores } from '../pretraining.js';
import { TrainingPrograms, buildPool, corpusExample, poolTask, type PoolProgram } from './corpus-pool.js';
import { proposalPrompt, solvePrompt } from './prompts.js';
import { CODE_TASK_TYPES, PYTHON_ALPHABET, SEED_TASKS, type CodeTask } from './tasks.js';
import { DEFAULT_WALL_CLOCK_GUARD_MS, PythonVerifierPool } from './verifier-pool.js';

const corpusSchema = z.strictObject({
  programs: int(2).default(6000), // distinct validated programs in the pool, held-out ones included
  heldOut: int(1).default(300), // of them, never trained on
  // Another model's held_out.json: its programs are kept out of the pool (which is then all training programs) and
  // its tasks score this model, so the two are compared on the same tasks (and the domain's held-out set, taken from
  // models/python-tiny's, stays unseen). `heldOut` is then unused.
  heldOutFrom: z.string({ error: 'expected the path of a held_out.json, e.g. models/python-tiny/held_out.json' }).optional(),
  references: int(0).default(1), // most reference tasks a proposal example shows (as scenarios' tasks.references)
  workers: int(1).default(2), // sandbox processes validating the pool
  // A sandbox job's wall-clock guard (ms; counted fuel ends every ordinary program first). A pause of the run
  // (SIGSTOP on a shared machine) longer than this faults the job, and a fault while the pool is built ends the run.
  guardMs: int(1).default(DEFAULT_WALL_CLOCK_GUARD_MS),
});
const evalSchema = z.strictObject({
  tasks: int(1).default(200), // held-out code_o tasks, and as many code_i tasks
  proposals: int(0).default(60), // sampled proposals, the task types in turn
  temperature: z.number({ error: 'expected a number' }).min(0, { error: 'expected a number >= 0 (0 = greedy)' }).default(1), // of the proposals
  maxTokens: int(1).default(192), // per answer or proposal, as scenarios' sampling.maxTokens
});
export type PythonEvalOptions = z.infer<typeof evalSchema>;

/** The code domain's preset tokenizer: characters of printable ASCII. */
export const pythonTokenizer = () => characterTokenizer(PYTHON_ALPHABET, 'the python character tokenizer');

/** Held-out tasks the model is scored on: one code_o and one code_i task per held-out program, on different inputs. */
export interface HeldOutTasks {
  programs: PoolProgram[];
  code_o: CodeTask[];
  code_i: CodeTask[];
}

export function heldOutTasks(programs: PoolProgram[], count: number, rng: RandomStream): HeldOutTasks {
  const chosen = programs.slice(0, count);
  const inputs = chosen.map((p) => rng.sample(p.inputs.length, 2));
  return { programs, code_o: chosen.map((p, i) => poolTask(p, 'code_o', inputs[i]![0]!)), code_i: chosen.map((p, i) => poolTask(p, 'code_i', inputs[i]![1]!)) };
}

const heldOutFileSchema = z.object({
  programs: z.array(z.object({ program: z.string() }).passthrough()).min(1),
  code_o: z.array(z.object({ type: z.literal('code_o'), program: z.string() }).passthrough()),
  code_i: z.array(z.object({ type: z.literal('code_i'), program: z.string() }).passthrough()),
});

/** Another model's held-out programs and tasks (its held_out.json), read for `corpus.heldOutFrom`. */
export function readHeldOutFile(file: string): HeldOutTasks {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new RangeError(`field "corpus.heldOutFrom": cannot read ${file} as JSON (${(error as Error).message}); give the held_out.json of a pretrained model folder (e.g. models/python-tiny/held_out.json)`);
  }
  const parsed = heldOutFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new RangeError(`field "corpus.heldOutFrom": ${file}: field "${issue.path.join('.')}": ${issue.message}; expected a held_out.json as populora pretrain writes it (programs, code_o, code_i)`);
  }
  return parsed.data as unknown as HeldOutTasks;
}

const decode = (tokenizer: TextTokenizer, tokens: readonly number[]) => tokenizer.decode(tokens.filter((t) => t !== tokenizer.eosTokenId));
const promptTokens = (tokenizer: TextTokenizer, text: string) => tokenizer.encodePrompt(text);

/** The model's answers to the tasks (greedy unless a temperature is given), checked by the verifier: the share right. */
export async function solveRate(model: LlamaModel, tokenizer: TextTokenizer, verifier: PythonVerifierPool, tasks: readonly CodeTask[], options: { maxTokens: number; temperature?: number; seed?: number }): Promise<number> {
  if (tasks.length === 0) return 0;
  const requests: GenerationRequest[] = tasks.map((task, i) => ({ requestId: i, prompt: promptTokens(tokenizer, solvePrompt(task)), adapter: -1, maxTokens: options.maxTokens, seed: options.seed ?? 0, temperature: options.temperature ?? 0, stopTokens: [tokenizer.eosTokenId!] }));
  const results = await generate(model, requests);
  const outcomes = await verifier.verify(results.map((r, i) => ({ kind: 'check', task: tasks[i]!, answer: decode(tokenizer, r.tokens) })));
  return outcomes.filter((o) => o.kind === 'check' && o.check.correct).length / tasks.length;
}

/**
 * `count` proposals sampled from prompts a step-0 teacher writes (task types in turn, `references` seed tasks drawn
 * from the buffer as teacher.ts draws them, fewer if the prompt would not fit beside the generation), validated by
 * the verifier: the share valid, the texts, and why each one was refused (null: valid).
 */
export async function proposalValidity(model: LlamaModel, tokenizer: TextTokenizer, verifier: PythonVerifierPool, rng: RandomStream, options: { count: number; references: number; temperature: number; maxTokens: number }): Promise<{ valid: number; texts: string[]; refusals: Array<string | null> }> {
  if (options.count === 0) return { valid: 0, texts: [], refusals: [] };
  const promptCharacters = model.maxContext - options.maxTokens - 1;
  const types = Array.from({ length: options.count }, (_, i) => CODE_TASK_TYPES[i % CODE_TASK_TYPES.length]!);
  const prompts = types.map((type) => {
    const references = rng.sample(SEED_TASKS.length, Math.min(options.references, SEED_TASKS.length)).map((k) => SEED_TASKS[k]!);
    let fitting = references.length;
    while (fitting > 0 && proposalPrompt(type, references.slice(0, fitting)).length > promptCharacters) fitting--;
    return proposalPrompt(type, references.slice(0, fitting));
  });
  const seed = rng.u32();
  const requests: GenerationRequest[] = prompts.map((prompt, i) => ({ requestId: i, prompt: promptTokens(tokenizer, prompt), adapter: -1, maxTokens: options.maxTokens, seed, temperature: options.temperature, stopTokens: [tokenizer.eosTokenId!] }));
  const texts = (await generate(model, requests)).map((r) => decode(tokenizer, r.tokens));
  const outcomes = await verifier.verify(texts.map((text, i) => ({ kind: 'validate', taskType: types[i]!, text })));
  const refusals = outcomes.map((o) => (o.kind === 'fault' ? `fault: ${o.detail}` : o.kind === 'validate' && !o.validation.valid ? o.validation.reason : null));
  return { valid: refusals.filter((r) => r === null).length / options.count, texts, refusals };
}

/** The step-0 scores: greedy code_o and code_i solve rates on held-out tasks, and the share of valid proposals. */
export async function codeScores(model: LlamaModel, tokenizer: TextTokenizer, verifier: PythonVerifierPool, tasks: HeldOutTasks, rng: RandomStream, options: PythonEvalOptions & { references: number }): Promise<Scores> {
  return {
    code_o: await solveRate(model, tokenizer, verifier, tasks.code_o, { maxTokens: options.maxTokens }), // greedy: the temperature is the proposals'
    code_i: await solveRate(model, tokenizer, verifier, tasks.code_i, { maxTokens: options.maxTokens }),
    proposals: (await proposalValidity(model, tokenizer, verifier, rng, { ...options, count: options.proposals })).valid,
  };
}

/** The code domain's corpus: builds the pool (a minute or two of sandbox runs), then serves examples and scores. */
async function openCorpus(settings: PretrainSettings, streams: Streams, context: number): Promise<PretrainCorpus> {
  const corpus = corpusSchema.parse(settings.corpus);
  const evaluation = evalSchema.parse(settings.eval);
  const given = corpus.heldOutFrom === undefined ? null : readHeldOutFile(corpus.heldOutFrom);
  const available = given === null ? corpus.heldOut : Math.min(given.code_o.length, given.code_i.length);
  if (available < evaluation.tasks) throw new RangeError(`field "eval.tasks": ${evaluation.tasks} held-out tasks of each type need at least as many held-out ${given === null ? `programs (corpus.heldOut is ${corpus.heldOut})` : `tasks (${corpus.heldOutFrom} has ${available})`}`);
  const tokenizer = pythonTokenizer();
  const verifier = new PythonVerifierPool(corpus.workers, { wallClockGuardMs: corpus.guardMs });
  try {
    const excluded = new Set(given?.programs.map((p) => p.program));
    const pool = await buildPool(verifier, streams.stream('programs'), streams.stream('held-out'), corpus.programs, given === null ? corpus.heldOut : 0, excluded);
    const tasks = given === null ? heldOutTasks(pool.heldOut, evaluation.tasks, streams.stream('held-out-tasks')) : { programs: given.programs, code_o: given.code_o.slice(0, evaluation.tasks), code_i: given.code_i.slice(0, evaluation.tasks) };
    const training = new TrainingPrograms(pool.training);
    let evaluations = 0;
    return {
      tokenizer,
      example: (rng) => {
        const example = corpusExample(rng, training, corpus.references);
        return example.prompt.length + example.completion.length + 2 > context ? null : example; // one token per character, a BOS and an EOS
      },
      evaluate: (model) => codeScores(model, tokenizer.tokenizer, verifier, tasks, streams.stream('evaluation', evaluations++), { ...evaluation, references: corpus.references }),
      heldOut: { refused: pool.refused, training: pool.training.length, ...tasks },
      close: () => verifier.close(),
    };
  } catch (error) {
    await verifier.close();
    throw error;
  }
}

function modelCard({ name, settings, config, parametersMillions, scores, reproduce }: ModelCardFacts): string {
  const corpus = corpusSchema.parse(settings.corpus);
  const evaluation = evalSchema.parse(settings.eval);
  const percent = (share: number) => `${(100 * share).toFixed(1)}%`;
  return `# ${name}

A tiny Llama-family base model (hidden size ${config.hiddenSize}, ${config.numLayers} layers, about ${parametersMillions.toFixed(2)} M parameters, a character
tokenizer of printable ASCII, context ${config.maxPositionEmbeddings}) pretrained from scratch on text of populora's code domain: AZR-style
tasks generated by \`src/domains/python/corpus.ts\` (small functions over ints, lists, strings and dicts), their
outputs computed by the project's sandbox, written exactly as the actors show and expect them: teachers' proposal
prompts (0 to ${corpus.references} reference tasks) and proposals, and code_o, code_i and code_f solve prompts and answers. A
scenario names its folder as \`model: { path: FOLDER }\` (\`scenarios/code.yaml\` names \`models/python-tiny\`).

${reproduce}

Scores at the end of pretraining (step 0 of self-play), on ${corpus.heldOutFrom === undefined ? `${corpus.heldOut} held-out programs` : `the ${corpus.heldOutFrom} programs (another model's held-out set)`} that never appear in
the training text (\`held_out.json\`):

| score | value |
|---|---|
| greedy code_o solve rate (${evaluation.tasks} held-out tasks) | **${percent(scores['code_o']!)}** |
| greedy code_i solve rate (${evaluation.tasks} held-out tasks) | **${percent(scores['code_i']!)}** |
| proposals that validate (${evaluation.proposals} sampled at temperature ${evaluation.temperature}, seed tasks as references) | **${percent(scores['proposals']!)}** |

\`loss.html\` plots the training loss and the held-out scores; \`pretrain_log.json\` holds both;
\`bench/code-step0.ts\` measures the step-0 scores again over two seeds (\`bench/results/code-step0.json\`).
`;
}

export const pythonPretraining: DomainPretraining = {
  corpusSchema,
  evalSchema,
  preparing: (settings) => {
    const corpus = corpusSchema.parse(settings.corpus);
    return `validating a pool of ${corpus.programs} generated programs in the sandbox (${corpus.heldOutFrom === undefined ? `${corpus.heldOut} held out` : `none of ${corpus.heldOutFrom}'s programs`})…`;
  },
  open: openCorpus,
  modelCard,
};
