// Scenario files (scenarios/*.yaml): what a run is. Validated by a schema whose errors name the file, the field
// and what was expected; every default is filled in, and the resolved scenario is written into the run folder.

import { existsSync, readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { DENSE_SUMS, MAX_CONTEXT } from '../backend/backend.js';
import { HELD_OUT_PARTS, type Domain } from '../domains/domain.js';
import { DEFAULT_DOMAIN, domainNamed, domainNames, isDomain } from '../domains/index.js';
import { promptSet, resolvePrompts, TemplateError, type ScenarioPrompts } from '../domains/prompts.js';
import { loadConfig } from '../model/checkpoint.js';
import { TINY_CONFIGS, type LlamaConfig } from '../model/config.js';
import { ModelFormatError } from '../model/errors.js';
import { LORA_MODULES, loraModuleShape, maxLoraRank, rankExceeds } from '../model/peft.js';
import { CROSSOVER_KINDS, type CrossoverKind } from '../evolution/operators.js';
import { evolutionOperatorOptions, isEvolutionOperator } from '../evolution/registry.js';
import { isMatchPolicy, MATCH_POLICIES, MATCH_POLICY_NAMES, matchPolicy, type BuiltInPolicyName, type MatchPolicyName } from '../matchmaking/index.js';
import { ratingSystemOptions } from '../rating/rating.js';
import { rewardHookOptions } from '../rewards/rules.js';
import { isPluginReference, pluginRecordsSchema } from './plugin-fields.js';
import { ScenarioError } from './errors.js';
import { loadScenarioPlugins, withPluginRecords } from './plugins.js';
import { characterTokenizer, vocabularyCovering, type TextTokenizer } from '../model/tokenizer.js';
import { ADVANTAGE_GROUPS } from '../train/advantages.js';
import { trainingBytesPerToken } from '../engine/budget.js';
import { int } from './fields.js';

export { ScenarioError };

export const MATCHMAKING_POLICIES = MATCH_POLICY_NAMES; // src/matchmaking/index.ts: the policies name themselves

/**
 * Upper bounds of the counts, so that a typo (an extra zero or three) is refused at load instead of met as a hang
 * or a climb through the machine's memory. `checkScenarioLimits` then holds the counts against the model and the
 * machine: students that exist, the model's context and dimensions, the memory a step needs.
 */
export const LIMITS = { groupSize: 256, members: 1024, perTeacher: 1024, answersPerStudent: 1024, references: 64, sequencesPerStep: 65_536, rank: 1024, threads: 64, fitnessWindow: 10_000, steps: 10_000_000, fuel: 1_000_000_000, guardMs: 3_600_000, heldOutTasks: 100_000, engineWorkers: 256 } as const;

const THREADS_EXPECTED = `expected a whole number from 1 to ${LIMITS.threads}, or auto`;
const BATCH_TOKENS_EXPECTED = 'expected a whole number of tokens >= 1, auto or unbounded';
const positive = z.number({ error: 'expected a number' }).positive({ error: 'expected a positive number' });
const probability = z.number({ error: 'expected a number' }).min(0, { error: 'expected a number in [0, 1]' }).max(1, { error: 'expected a number in [0, 1]' });

const domainsExpected = () => `expected one of ${domainNames().filter((name) => !isPluginReference(name)).join(', ')}, or the path of a plug-in module`;

/** What a sampling temperature may be (a scenario's, and `populora generate --temperature`'s). */
export const TEMPERATURE_EXPECTED = 'expected a number >= 0 (0 = greedy)';

/** The pretrained toy models shipped with populora (models/): `model: { embedded: arith-tiny }` names one from any folder. */
export const EMBEDDED_MODELS = ['arith-tiny', 'python-tiny'] as const;

/** populora's own folder (where models/ and scenarios/ are), from the sources or from dist/. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

const modelSchema = z.union(
  [
    z.strictObject({ path: z.string({ error: 'expected a folder path' }), weights: z.enum(['f32', 'f16']).optional() }),
    z.strictObject({ preset: z.string({ error: 'expected a preset name such as tiny' }), seed: int(0).default(0) }),
    // resolved to its folder at once: scenario.json records the path, as for any model folder
    z.strictObject({ embedded: z.enum(EMBEDDED_MODELS), weights: z.enum(['f32', 'f16']).optional() }).transform(({ embedded, weights }) => ({ path: join(packageRoot(), 'models', embedded), ...(weights === undefined ? {} : { weights }) })),
  ],
  { error: `expected either {path: DIR} (a Hugging Face model folder), {preset: NAME, seed: N} (seeded random weights) or {embedded: ${EMBEDDED_MODELS.join(' | ')}} (a model shipped with populora)` },
);

/**
 * A field whose `key` names either a built-in (validated by `builtIn`) or a plug-in module (validated by `plugin`):
 * the built-ins keep their own schema and its messages; a plug-in's options are validated by its own schema.
 */
function builtInOrPlugin<B extends z.ZodType, P extends z.ZodType>(key: string, builtIn: B, plugin: P) {
  return z.unknown().transform((value, ctx): z.output<B> | z.output<P> => {
    const named = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
    const parsed = (isPluginReference(named) ? plugin : builtIn).safeParse(value);
    if (parsed.success) return parsed.data as z.output<B> | z.output<P>;
    for (const issue of parsed.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
    return z.NEVER;
  });
}

/** Validates `options` (at `path`) with a plug-in's schema: its issues are the scenario's, under that field. */
function pluginOptions(ctx: z.RefinementCtx, schema: z.ZodType<unknown> | undefined, options: unknown, path: string[], plugin: string): void {
  if (schema === undefined) return ctx.addIssue({ code: 'custom', path: path.slice(0, -1), message: `the plug-in ${plugin} is not loaded (a scenario's plug-ins are imported by loadScenario)` });
  if (options === undefined) return;
  const parsed = schema.safeParse(options);
  if (!parsed.success) for (const issue of parsed.error.issues) ctx.addIssue({ ...(issue as Parameters<typeof ctx.addIssue>[0] & object), path: [...path, ...issue.path] });
}

/**
 * `matchmaking`: the policy (default cross, or a plug-in module), the students per task, and the policy's own
 * options, validated by the schema the policy declares (src/matchmaking/, or the plug-in's): one object schema per
 * built-in policy, told apart by `policy`.
 */
function matchmakingSchema() {
  const variants = MATCH_POLICY_NAMES.map((name) =>
    z.strictObject({
      policy: name === 'cross' ? z.literal(name).default(name) : z.literal(name),
      studentsPerTask: int(1, LIMITS.members).optional(), // default: 2, or as many students as a task can meet if fewer
      options: (MATCH_POLICIES[name].options as z.ZodType<Record<string, unknown>>).optional(),
    }),
  );
  const union = z.discriminatedUnion('policy', variants as unknown as [(typeof variants)[number], ...(typeof variants)[number][]], { error: `expected one of ${MATCH_POLICY_NAMES.join(', ')}` });
  const plugin = z
    .strictObject({ policy: z.string(), studentsPerTask: int(1, LIMITS.members).optional(), options: z.record(z.string(), z.unknown(), { error: 'expected a mapping of the policy\'s options' }).optional() })
    .superRefine((m, ctx) => pluginOptions(ctx, matchPolicyOptions(m.policy), m.options, ['options'], m.policy));
  return builtInOrPlugin('policy', union as unknown as z.ZodType<{ policy: BuiltInPolicyName; studentsPerTask?: number; options?: Record<string, unknown> }>, plugin).prefault({});
}

const BACKEND_NAME = z.enum(['webgpu', 'cpu', 'auto']);

/** A registered policy's options schema (undefined: none registered under that key). */
const matchPolicyOptions = (key: string): z.ZodType<unknown> | undefined => (isMatchPolicy(key) ? (matchPolicy(key).options as z.ZodType<unknown>) : undefined);

const CROSSOVER_EXPECTED = `expected ${CROSSOVER_KINDS.join(', ')}, or the path of a plug-in module`;

export const scenarioSchema = z.strictObject({
  name: z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9._-]+$/, { error: 'expected letters, digits, ".", "_" or "-"' }),
  seed: int(0),
  steps: int(1, LIMITS.steps),
  // the backend, or {name, threads, sums}: the CPU backend's threads (default: one per core; populora run --threads
  // overrides them), a machine setting like the verifier's workers: never part of the run hash, a resume or a replay;
  // and what its dense products sum in (f64 by default, or f32: backend.ts's DenseSums), which is part of them
  backend: z
    .union([BACKEND_NAME, z.strictObject({ name: BACKEND_NAME, threads: int(1, LIMITS.threads).optional(), sums: z.enum(DENSE_SUMS, { error: `expected ${DENSE_SUMS.join(' or ')}` }).optional() })], {
      error: 'expected webgpu, cpu or auto, or {name: cpu, threads: N, sums: f64 or f32}',
    })
    .refine((b) => typeof b === 'string' || b.threads === undefined || b.name !== 'webgpu', { error: 'threads are the cpu backend\'s: give name: cpu (or auto, where it falls back to the CPU)' })
    .refine((b) => typeof b === 'string' || b.sums === undefined || b.name === 'cpu', { error: 'sums are the cpu backend\'s arithmetic, and they change the run\'s bits: give name: cpu (auto may run on WebGPU)' })
    .default('auto'),
  model: modelSchema,
  domain: z.string({ error: domainsExpected }).refine(isDomain, { error: domainsExpected }).default(DEFAULT_DOMAIN), // a domain of the registry (src/domains/index.ts)
  // the domain's prompt templates (domains that have them): a mapping, or a YAML file beside the scenario (src/domains/prompts.ts)
  prompts: z.union([z.string(), z.record(z.string(), z.unknown())], { error: 'expected a mapping of templates, or the path of a YAML file holding one' }).optional(),
  population: z.strictObject({
    subpopulations: int(1, LIMITS.groupSize).default(1),
    teachers: int(1, LIMITS.groupSize).default(1), // per sub-population
    students: int(1, LIMITS.groupSize).default(1), // per sub-population
    lora: z.strictObject({
      rank: int(1, LIMITS.rank).default(8),
      alpha: positive.optional(), // default 2·rank
      modules: z
        .array(z.enum(LORA_MODULES, { error: `expected one of ${LORA_MODULES.join(', ')}` }))
        .min(1, { error: 'expected at least one module' })
        .refine((modules) => new Set(modules).size === modules.length, { error: 'a module is named twice; name each once' })
        .default(['q_proj', 'v_proj']),
      init: z.enum(['peft', 'gaussian']).default('peft'),
    }).prefault({}),
  }).prefault({}),
  tasks: z.strictObject({
    perTeacher: int(1, LIMITS.perTeacher).default(2), // proposals per teacher per task type per step
    types: z.array(z.string({ error: 'expected a task type name' })).min(1).optional(), // default: all of the domain's
    references: int(0, LIMITS.references).default(3), // reference tasks in a teacher's prompt (domains that use them)
    // whether teachers' prompts show `references` tasks of their buffer (AZR's: the domain's seed tasks, then their
    // own valid proposals); absent: the domain's default (the code domain's prompts do, the arithmetic toy's do not)
    referenceBuffer: z.boolean({ error: 'expected true or false' }).optional(),
    fuel: int(1000, LIMITS.fuel).default(100_000), // verifiers that run programs: steps a program may take per run (lines and jumps)
    guardMs: int(100, LIMITS.guardMs).default(5_000), // such verifiers' wall-clock safety net per job; when it fires, a fault, never a verdict
  }).prefault({}),
  matchmaking: matchmakingSchema(),
  sampling: z.strictObject({
    temperature: z.number({ error: 'expected a number' }).min(0, { error: TEMPERATURE_EXPECTED }).default(1),
    topP: z.number().gt(0).max(1).default(1),
    answersPerStudent: int(1, LIMITS.answersPerStudent).default(4), // samples per (task, student): the solve rate's denominator
    maxTokens: int(1, MAX_CONTEXT).default(32), // tokens a proposal (and, without answerMaxTokens, an answer) may take
    answerMaxTokens: int(1, MAX_CONTEXT).optional(), // tokens an answer may take (AZR: fewer than a proposal's); default maxTokens
  }).prefault({}),
  rewards: z
    .strictObject({
      invalidPenalty: z.number().default(-1),
      zeroAtUnsolved: z.boolean().default(true), // a valid task no student solves earns 0, not 1 (AZR)
      hook: z.string({ error: 'expected the path of a reward hook module' }).refine(isPluginReference, { error: 'expected the path of a reward hook module (e.g. ./rewards/shaping.js)' }).optional(), // absent: AZR's rules (src/rewards/rules.ts)
      options: z.record(z.string(), z.unknown(), { error: 'expected a mapping of the hook\'s options' }).optional(),
    })
    .superRefine((r, ctx) => {
      if (r.hook !== undefined) pluginOptions(ctx, rewardHookOptions(r.hook), r.options, ['options'], r.hook);
      else if (r.options !== undefined) ctx.addIssue({ code: 'custom', path: ['options'], message: 'options are for a reward hook: name one in rewards.hook, or remove rewards.options' });
    })
    .prefault({}),
  rl: z.strictObject({
    lr: positive.default(1e-3),
    klCoef: z.number().min(0).default(0),
    entropyCoef: z.number().min(0).default(0.001),
    maxGradNorm: positive.default(1),
    reduction: z.enum(['token', 'sequence']).default('token'),
    advantageGroups: z.enum(ADVANTAGE_GROUPS, { error: `expected one of ${ADVANTAGE_GROUPS.join(', ')}` }).default('role-and-task'), // src/train/advantages.ts
    // Remedies for self-play that forgets (docs/science.md). Absent, each is off, and a scenario without them
    // resolves as before. maskedLogProbs: train each completion as the distribution it was sampled from,
    // renormalised over the tokens its grammar allowed (src/train/grammar-policy.ts), not the whole vocabulary.
    maskedLogProbs: z.boolean({ error: 'expected true or false' }).optional(),
    // advantageScaling: whiten (the default: (r - mean) / std in each group) or center (r - mean, Dr. GRPO's).
    // weightDecay: AdamW's decoupled decay of the LoRA factors toward 0, the base model's own weights (default 0)
    advantageScaling: z.enum(['whiten', 'center'], { error: 'expected whiten or center' }).optional(),
    weightDecay: z.number({ error: 'expected a number' }).min(0, { error: 'expected a number >= 0' }).optional(),
  }).prefault({}),
  rating: builtInOrPlugin('system', z.discriminatedUnion('system', [
    z.strictObject({
      system: z.literal('elo').optional(), // the default
      k: positive.default(16), // Elo step
      initial: z.number().default(1000),
    }),
    z.strictObject({
      system: z.literal('trueskill'), // the paper's: μ 25, σ 25/3, β 25/6, τ 25/300; fitness μ - 3σ
      mu: z.number({ error: 'expected a number' }).default(25),
      sigma: positive.default(25 / 3),
      beta: positive.default(25 / 6),
      tau: z.number({ error: 'expected a number' }).min(0, { error: 'expected a number >= 0' }).default(25 / 300),
      drawProbability: z.number({ error: 'expected a number' }).min(0, { error: 'expected a number in [0, 1)' }).lt(1, { error: 'expected a number in [0, 1)' }).default(0.1),
    }),
  ], { error: 'expected system: elo or trueskill, or the path of a plug-in module' }).prefault({}), z.strictObject({
    system: z.string(), // a plug-in module
    options: z.record(z.string(), z.unknown(), { error: 'expected a mapping of the rating system\'s options' }).optional(),
  }).superRefine((r, ctx) => pluginOptions(ctx, ratingSystemOptions(r.system), r.options, ['options'], r.system))).prefault({}),
  evolution: z.strictObject({
    every: int(0).default(0), // 0 = no evolution
    fraction: z.number({ error: 'expected a number' }).gt(0, { error: 'expected a share in (0, 0.5]' }).max(0.5, { error: 'expected a share in (0, 0.5]: at most half of each role is replaced' }).default(0.25),
    selection: z.enum(['truncation', 'tournament', 'pbt']).default('truncation'),
    crossoverProbability: probability.default(0.5),
    crossover: z.union([z.enum(CROSSOVER_KINDS as [CrossoverKind, ...CrossoverKind[]]), z.string().refine(isPluginReference)], { error: CROSSOVER_EXPECTED }).default('svd'),
    crossoverOptions: z.record(z.string(), z.unknown(), { error: 'expected a mapping of the crossover plug-in\'s options' }).optional(),
    mutation: z.string({ error: 'expected the path of a plug-in module' }).refine(isPluginReference, { error: 'expected the path of a plug-in module (absent: Gaussian noise of scale sigma)' }).optional(), // absent: the built-in
    mutationOptions: z.record(z.string(), z.unknown(), { error: 'expected a mapping of the mutation plug-in\'s options' }).optional(),
    sigma: z.number().min(0).default(0.05),
    optimizerState: z.enum(['reset', 'inherit']).default('reset'),
    fitness: z.enum(['rating', 'reward']).default('rating'), // rank by rating, or by mean reward over fitnessWindow steps
    fitnessWindow: int(1, LIMITS.fitnessWindow).default(5),
    // threads for the SVD crossover's small factorisations: a number, or auto (cores less one, at most 8); the
    // children are the same with any number
    threads: z
      .union([z.number(), z.literal('auto')], { error: THREADS_EXPECTED })
      .refine((t) => t === 'auto' || (Number.isInteger(t) && t >= 1 && t <= LIMITS.threads), { error: THREADS_EXPECTED })
      .default('auto'),
  }).superRefine((e, ctx) => {
    for (const [role, field, options] of [['mutate', e.mutation, e.mutationOptions], ['crossover', e.crossover, e.crossoverOptions]] as const) {
      const optionsField = role === 'mutate' ? 'mutationOptions' : 'crossoverOptions';
      if (field === undefined || !isPluginReference(field)) {
        if (options !== undefined) ctx.addIssue({ code: 'custom', path: [optionsField], message: `options are for a plug-in operator: ${role === 'mutate' ? 'the built-in mutation takes sigma' : `the built-in crossover ${field} takes none`}; remove ${optionsField}` });
      } else if (!isEvolutionOperator(field, role)) {
        ctx.addIssue({ code: 'custom', path: [role === 'mutate' ? 'mutation' : 'crossover'], message: `the plug-in ${field} is not loaded with a ${role} function (a scenario's plug-ins are imported by loadScenario)` });
      } else pluginOptions(ctx, evolutionOperatorOptions(field), options, [optionsField], field);
    }
  }).prefault({}),
  checkpointEvery: int(0).default(0), // save adapters every N steps (0: at the end only)
  // the engine's micro-batches on this machine (src/engine/budget.ts): at most N tokens each, sized from the memory
  // there is (auto, the default), or each phase whole (unbounded). A machine setting: every value gives the same
  // run (a resume or a replay may use another; `populora run --batch-tokens` overrides it)
  batchTokens: z
    .union([z.number(), z.literal('auto'), z.literal('unbounded')], { error: BATCH_TOKENS_EXPECTED })
    .refine((t) => t === 'auto' || t === 'unbounded' || (Number.isInteger(t) && t >= 1), { error: BATCH_TOKENS_EXPECTED })
    .optional(),
  // a run over NATS (`populora run --nats URL`; src/cluster/): how many engine workers to expect and how members'
  // adapter slots are sharded over them, and what a lost worker costs. It never changes a run's bits: the same
  // scenario gives the same run hash in one process or on many
  cluster: z.strictObject({
    engineWorkers: int(0, LIMITS.engineWorkers).default(0), // 0: the engine runs in the coordinator; N: on N engine workers, a shard each
    assignment: z.enum(['round-robin', 'blocks']).default('round-robin'), // slot s to worker s mod N, or contiguous blocks
    deadlineSeconds: positive.default(120), // a request unanswered this long (wall clock, outside the replayed data) is lost
    onWorkerLoss: z.enum(['reassign', 'wait']).default('reassign'), // its shard to another worker, or wait for a new one
    verifierChunk: int(1, LIMITS.perTeacher).default(16), // verifier jobs per request to the verifier workers' queue group
  }).optional(),
  // every member answers a fixed set of the domain's held-out tasks greedily at the last step (and every `every`
  // steps); the set depends on `seed` alone (arith: seed 1 is the set models/arith-tiny was scored on; python: a
  // sample of the 400 tasks models/python-tiny was scored on)
  // what the run recorded of its plug-ins (scenario.json; src/scenario/plugins.ts): written by populora, checked on
  // every load against the files as they are, so that a replay or a resume refuses a plug-in that changed
  plugins: pluginRecordsSchema.optional(),
  evaluation: z.strictObject({
    tasks: int(1, LIMITS.heldOutTasks).default(200),
    every: int(0).default(0),
    seed: int(0).default(1),
    // which part of the held-out tasks (src/domains/domain.ts, heldOutPart): settings are chosen on validation,
    // and the chosen ones scored once on test; absent: all, the whole set (absent, so that a scenario written
    // before parts existed resolves as it did)
    part: z.enum(HELD_OUT_PARTS, { error: `expected one of ${HELD_OUT_PARTS.join(', ')}` }).optional(),
  }).optional(),
});

type ParsedScenario = z.infer<typeof scenarioSchema>;
/** A scenario with the defaults that depend on other fields filled in (task types, students per task, prompts). */
export type Scenario = Omit<ParsedScenario, 'prompts' | 'matchmaking'> & {
  tasks: ParsedScenario['tasks'] & { types: string[] };
  matchmaking: { policy: MatchPolicyName; studentsPerTask: number; options?: Record<string, unknown> };
  prompts?: ScenarioPrompts; // absent for a domain without templates
};

/** Parses YAML text to a plain value; errors name `file`. */
export function parseYaml(text: string, file: string): unknown {
  const document = parseDocument(text, { prettyErrors: true });
  if (document.errors.length > 0) throw new ScenarioError(`${file}: not valid YAML: ${document.errors[0]!.message}`);
  try {
    return document.toJS(); // refuses a document whose aliases would expand without bound (a "billion laughs")
  } catch (error) {
    throw new ScenarioError(`${file}: not valid YAML: ${(error as Error).message} (write the values out instead of through so many aliases)`);
  }
}

/** Validates a value with a schema; errors name `file`, the field and what was expected. */
export function validateWith<T extends z.ZodType>(schema: T, value: unknown, file: string): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.map((k) => (typeof k === 'number' ? `[${k}]` : `.${String(k)}`)).join('').replace(/^\./, '') || '(top level)';
    const unknown = issue.code === 'unrecognized_keys' ? `: unknown field(s) ${issue.keys.map((k) => `"${k}"`).join(', ')}` : `: ${issue.message}`;
    throw new ScenarioError(`${file}: field "${field}"${unknown}`);
  }
  return parsed.data;
}

/** Parses YAML text and validates it with a schema; errors name `file`, the field and what was expected. */
export function parseYamlWith<T extends z.ZodType>(schema: T, text: string, file: string): z.infer<T> {
  return validateWith(schema, parseYaml(text, file), file);
}

export interface ScenarioOptions {
  /** What a relative `model.path` is taken relative to (default: the working directory). */
  relativeTo?: string;
  /** What a plug-in's relative path is taken relative to (default: the scenario file's folder). */
  pluginsRelativeTo?: string;
}

/**
 * Parses and validates scenario text; `file` names it in errors. A relative `model.path` is taken relative to
 * `relativeTo` (default: the working directory) and stored absolute, so that a run folder's scenario.json names
 * the same model from any working directory. A scenario that names plug-ins needs them loaded in this process
 * first: readScenario and loadScenario do that.
 */
export function parseScenario(text: string, file: string, options: ScenarioOptions = {}): Scenario {
  return scenarioFrom(parseYaml(text, file), file, options);
}

/** parseScenario, after importing the plug-ins the scenario names (relative paths: from the scenario file's folder). */
export async function readScenario(text: string, file: string, options: ScenarioOptions = {}): Promise<Scenario> {
  const raw = parseYaml(text, file);
  await loadScenarioPlugins(raw, file, options.pluginsRelativeTo ?? dirname(resolve(file)));
  return scenarioFrom(raw, file, options);
}

/** A raw scenario (YAML or JSON as a value) validated and resolved. */
export function scenarioFrom(raw: unknown, file: string, options: ScenarioOptions = {}): Scenario {
  const withPlugins = withPluginRecords(raw, file, options.pluginsRelativeTo ?? dirname(resolve(file)));
  const { prompts: givenPrompts, ...parsed } = validateWith(scenarioSchema, withPlugins, file);
  const domain = domainNamed(parsed.domain);
  const types = parsed.tasks.types ?? [...domain.taskTypes];
  const foreign = types.find((type) => !domain.taskTypes.includes(type));
  if (foreign) throw new ScenarioError(`${file}: field "tasks.types": "${foreign}" is not a task type of the ${domain.name} domain (use ${domain.taskTypes.join(', ')})`);
  const { policy, options: policyOptions } = parsed.matchmaking;
  const unmet = matchPolicy(policy).requirement?.(parsed.population);
  if (unmet) throw new ScenarioError(`${file}: field "${unmet.field}": ${unmet.message}`);
  if (parsed.rl.maskedLogProbs && !domain.tokenMask) throw new ScenarioError(`${file}: field "rl.maskedLogProbs": the ${domain.name} domain samples without a grammar, so there is nothing to renormalise over; remove it`);
  if (parsed.evaluation && !domain.heldOutTasks) throw new ScenarioError(`${file}: field "evaluation": the ${domain.name} domain has no held-out task set; remove "evaluation"`);
  const studentsPerTask = parsed.matchmaking.studentsPerTask ?? Math.min(2, matchPolicy(policy).reach(parsed.population));
  const model = 'path' in parsed.model ? { ...parsed.model, path: modelFolder(parsed.model.path, file, options.relativeTo ?? process.cwd()) } : parsed.model;
  const prompts = scenarioPrompts(domain, givenPrompts, file, model);
  // `options` stays absent when the file gives none (the policy's defaults apply), so that scenarios written before
  // policies took options resolve to what they did
  const matchmaking = { policy, studentsPerTask, ...(policyOptions === undefined ? {} : { options: policyOptions }) };
  const scenario: Scenario = { ...parsed, model, tasks: { ...parsed.tasks, types }, matchmaking, ...(prompts === undefined ? {} : { prompts }) };
  checkScenarioLimits(scenario, file);
  return scenario;
}

/** The domain's prompts as the run records them (src/domains/prompts.ts); a bad template is refused by its field. */
function scenarioPrompts(domain: Domain, given: unknown, file: string, model: Scenario['model']): ScenarioPrompts | undefined {
  try {
    return resolvePrompts(domain, given, file, model);
  } catch (error) {
    if (error instanceof TemplateError) throw new ScenarioError(`${file}: field "${error.field}": ${error.message}`);
    throw error;
  }
}

/** The absolute path of a scenario's model folder, which must exist. */
function modelFolder(path: string, file: string, relativeTo: string): string {
  const absolute = resolve(relativeTo, path);
  if (!existsSync(absolute)) {
    const from = isAbsolute(path) ? '' : ` (${path}, taken relative to ${relativeTo})`;
    throw new ScenarioError(`${file}: field "model.path": the model folder ${absolute}${from} does not exist; give the path of a Hugging Face model folder (config.json, model.safetensors, tokenizer.json), or use {preset: tiny}`);
  }
  return absolute;
}

/**
 * The scenario without its machine settings (the CPU backend's threads, the engine's micro-batch budget), which
 * never change a bit of a run: what a resume, a replay and a cluster's workers compare. The CPU backend's sums stay
 * where they change the bits (f32); f64, the default, reads as no setting, so scenarios older than it keep their
 * identity.
 */
export function withoutMachineSettings(scenario: Scenario): Scenario {
  const { batchTokens: _budget, ...rest } = scenario;
  if (typeof rest.backend === 'string') return rest;
  const { name, sums } = rest.backend;
  return { ...rest, backend: sums === undefined || sums === 'f64' ? name : { name, sums } };
}

function readScenarioText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new ScenarioError(`${file}: cannot read the scenario (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
}

/** Reads and validates a scenario file whose plug-ins, if it names any, this process has loaded (else: openScenario). */
export function loadScenario(file: string): Scenario {
  return parseScenario(readScenarioText(file), file);
}

/** Reads a scenario file, imports the plug-ins it names, and validates it (the library's `loadScenario`). */
export async function openScenario(file: string): Promise<Scenario> {
  return readScenario(readScenarioText(file), file);
}

/** A preset model's configuration, grown to its domain, and its character tokenizer. */
export function presetModel(scenario: Scenario, file: string): { config: LlamaConfig; tokenizer: TextTokenizer } {
  if (!('preset' in scenario.model)) throw new Error('presetModel: the scenario names a model folder');
  const config = TINY_CONFIGS[scenario.model.preset];
  if (!config) throw new ScenarioError(`${file}: field "model.preset": unknown preset "${scenario.model.preset}" (one of ${Object.keys(TINY_CONFIGS).join(', ')})`);
  const domain = domainNamed(scenario.domain);
  const { tokenizer } = characterTokenizer(domain.alphabet, `the ${scenario.model.preset} preset's character tokenizer`);
  // A preset grows to its domain: the vocabulary to its characters (printable ASCII is more than 64), the
  // context to its prompts (a program and reference tasks, one token per character).
  return { config: { ...config, vocabSize: vocabularyCovering(config.vocabSize, tokenizer), maxPositionEmbeddings: Math.max(config.maxPositionEmbeddings, domain.presetContext) }, tokenizer };
}

function modelConfig(scenario: Scenario, file: string): LlamaConfig {
  if ('preset' in scenario.model) return presetModel(scenario, file).config;
  try {
    return loadConfig(scenario.model.path);
  } catch (error) {
    if (error instanceof ModelFormatError) throw new ScenarioError(`${file}: field "model.path": ${error.message}`);
    throw error;
  }
}

const GIB = 2 ** 30;

/**
 * Holds a scenario's counts against what exists and what the model and the machine can hold: the members, the
 * students a task can meet, the token budget against the domain and the model's context, the LoRA rank against
 * the model's dimensions, and the memory one step needs against this machine's. Errors name the file and field.
 */
export function checkScenarioLimits(scenario: Scenario, file: string): void {
  const fail = (field: string, message: string) => {
    throw new ScenarioError(`${file}: field "${field}": ${message}`);
  };
  const { subpopulations, teachers, students, lora } = scenario.population;
  const members = subpopulations * (teachers + students);
  if (members > LIMITS.members) fail(teachers >= students ? 'population.teachers' : 'population.students', `${subpopulations} sub-population(s) of ${teachers} teacher(s) and ${students} student(s) make ${members} members, more than the ${LIMITS.members} a run holds`);
  const canMeet = matchPolicy(scenario.matchmaking.policy).reach(scenario.population);
  if (scenario.matchmaking.studentsPerTask > canMeet) fail('matchmaking.studentsPerTask', `${scenario.matchmaking.studentsPerTask} students per task, but under "${scenario.matchmaking.policy}" a task can go to ${canMeet} student(s) of this population; use at most ${canMeet}, or add students`);
  const domain = domainNamed(scenario.domain);
  const needed = domain.minimumTokens(scenario.tasks.types);
  if (scenario.sampling.maxTokens < needed) fail('sampling.maxTokens', `${scenario.sampling.maxTokens} tokens cannot hold the shortest ${scenario.tasks.types.join('/')} proposal; use at least ${needed} (${domain.tokenBudgetHint} or more leaves room for real tasks)`);

  const config = modelConfig(scenario, file);
  const context = Math.min(config.maxPositionEmbeddings, MAX_CONTEXT);
  const prompts = promptSet(domain, scenario.prompts);
  const prompt = Math.max(...scenario.tasks.types.map((type) => domain.proposalPrompt(type, [], prompts).prompt.length)) + 1; // and a BOS
  if (prompt >= context) fail(scenario.prompts ? 'prompts' : 'sampling.maxTokens', `a ${prompt}-token prompt leaves no room for an answer in the model's ${context}-token context; use shorter prompts (prompts.style: plain) or a model with a longer context`);
  if (scenario.sampling.maxTokens + prompt > context) fail('sampling.maxTokens', `${scenario.sampling.maxTokens} tokens leave no room in the model's ${context}-token context for a ${prompt}-token prompt; use at most ${context - prompt}`);
  const answerTokens = scenario.sampling.answerMaxTokens;
  if (answerTokens !== undefined && answerTokens > scenario.sampling.maxTokens) fail('sampling.answerMaxTokens', `${answerTokens} tokens an answer, more than the ${scenario.sampling.maxTokens} of a proposal (sampling.maxTokens), which sizes the prompts' room in the context; use at most ${scenario.sampling.maxTokens}`);
  const limit = maxLoraRank(config, lora.modules);
  if (lora.rank > limit.rank) fail('population.lora.rank', `rank ${lora.rank} ${rankExceeds(limit, config)}`);
  checkStepMemory(scenario, config, fail);
}

/**
 * A lower bound of what a step holds at once, held against this machine's memory: the adapter bank, and the
 * activations of one training micro-batch (batchTokens tokens; unbounded: every sequence of the step; auto sizes
 * itself to the memory there is, so at least one sequence).
 */
function checkStepMemory(scenario: Scenario, config: LlamaConfig, fail: (field: string, message: string) => never): void {
  const { population, tasks, matchmaking, sampling } = scenario;
  const proposals = population.subpopulations * population.teachers * tasks.types.length * tasks.perTeacher;
  const answers = proposals * matchmaking.studentsPerTask * sampling.answersPerStudent;
  const field = sampling.answersPerStudent >= tasks.perTeacher ? 'sampling.answersPerStudent' : 'tasks.perTeacher'; // the larger multiplier
  if (proposals + answers > LIMITS.sequencesPerStep) fail(field, `a step would generate up to ${proposals + answers} sequences (${proposals} proposals, each answered ${matchmaking.studentsPerTask * sampling.answersPerStudent} times), more than ${LIMITS.sequencesPerStep}; lower tasks.perTeacher, matchmaking.studentsPerTask or sampling.answersPerStudent`);
  const setting = scenario.batchTokens ?? 'auto';
  const heldTokens = setting === 'unbounded' ? (proposals + answers) * sampling.maxTokens : setting === 'auto' ? sampling.maxTokens : Math.max(setting, sampling.maxTokens);
  const stepBytes = heldTokens * trainingBytesPerToken(config);
  const slots = population.subpopulations * (population.teachers + (matchPolicy(matchmaking.policy).studentsAreTeacherTwins ? 0 : population.students));
  const adapterValues = config.numLayers * population.lora.modules.reduce((n, m) => n + population.lora.rank * Object.values(loraModuleShape(config, m)).reduce((a, b) => a + b, 0), 0);
  const bankBytes = slots * adapterValues * 4 * 4; // f32 weights, gradients and AdamW's two moments
  const machineBytes = totalmem();
  if (stepBytes + bankBytes > machineBytes) {
    const held = setting === 'unbounded' ? `${proposals + answers} sequences of up to ${sampling.maxTokens} tokens at once (batchTokens: unbounded)` : `${heldTokens} tokens at once (batchTokens: ${setting})`;
    fail(stepBytes >= bankBytes ? (setting === 'unbounded' ? field : 'batchTokens') : 'population.lora.rank', `a step needs at least ${((stepBytes + bankBytes) / GIB).toFixed(1)} GiB (${held} through a model of hidden size ${config.hiddenSize}, ${slots} adapters of rank ${population.lora.rank}), more than this machine's ${(machineBytes / GIB).toFixed(1)} GiB; ${setting === 'unbounded' ? 'give batchTokens a number of tokens, or make the population or its step smaller' : 'lower batchTokens, or make the population smaller'}`);
  }
}
