// Scenario files (scenarios/*.yaml): what a run is. Validated by a schema whose errors name the file, the field
// and what was expected; every default is filled in, and the resolved scenario is written into the run folder.

import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { ARITH_TASK_TYPES } from '../domains/arith/tasks.js';
import { DOMAIN_NAMES, DOMAINS } from '../domains/domain.js';
import { CODE_TASK_TYPES } from '../domains/python/tasks.js';
import { LORA_MODULES } from '../model/peft.js';

export const MATCHMAKING_POLICIES = ['self', 'within', 'cross', 'random', 'rating', 'pfsp'] as const;
export const TASK_TYPES = [...ARITH_TASK_TYPES, ...CODE_TASK_TYPES] as const;

const THREADS_EXPECTED = 'expected a whole number >= 1, or auto';
const int = (min: number) => z.number({ error: 'expected a number' }).int({ error: 'expected an integer' }).min(min, { error: `expected an integer >= ${min}` });
const positive = z.number({ error: 'expected a number' }).positive({ error: 'expected a positive number' });
const probability = z.number({ error: 'expected a number' }).min(0, { error: 'expected a number in [0, 1]' }).max(1, { error: 'expected a number in [0, 1]' });

const modelSchema = z.union(
  [
    z.strictObject({ path: z.string({ error: 'expected a folder path' }), weights: z.enum(['f32', 'f16']).optional() }),
    z.strictObject({ preset: z.string({ error: 'expected a preset name such as tiny' }), seed: int(0).default(0) }),
  ],
  { error: 'expected either {path: DIR} (a Hugging Face model folder) or {preset: NAME, seed: N} (seeded random weights)' },
);

export const scenarioSchema = z.strictObject({
  name: z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9._-]+$/, { error: 'expected letters, digits, ".", "_" or "-"' }),
  seed: int(0),
  steps: int(1),
  backend: z.enum(['webgpu', 'cpu', 'auto']).default('auto'),
  model: modelSchema,
  domain: z.enum(DOMAIN_NAMES, { error: `expected one of ${DOMAIN_NAMES.join(', ')}` }).default('arith'),
  population: z.strictObject({
    subpopulations: int(1).default(1),
    teachers: int(1).default(1), // per sub-population
    students: int(1).default(1), // per sub-population
    lora: z.strictObject({
      rank: int(1).default(8),
      alpha: positive.optional(), // default 2·rank
      modules: z.array(z.enum(LORA_MODULES, { error: `expected one of ${LORA_MODULES.join(', ')}` })).min(1).default(['q_proj', 'v_proj']),
      init: z.enum(['peft', 'gaussian']).default('peft'),
    }).prefault({}),
  }).prefault({}),
  tasks: z.strictObject({
    perTeacher: int(1).default(2), // proposals per teacher per task type per step
    types: z.array(z.enum(TASK_TYPES, { error: `expected one of ${TASK_TYPES.join(', ')}` })).min(1).optional(), // default: all of the domain's
    references: int(0).default(3), // reference tasks in a teacher's prompt (domains that use them: python)
    fuel: int(1000).default(100_000), // python: steps a program may take per run (lines and jumps)
    guardMs: int(100).default(5_000), // python: wall-clock safety net per verifier job; when it fires, a fault, never a verdict
  }).prefault({}),
  matchmaking: z.strictObject({
    policy: z.enum(MATCHMAKING_POLICIES, { error: `expected one of ${MATCHMAKING_POLICIES.join(', ')}` }).default('cross'),
    studentsPerTask: int(1).default(2),
  }).prefault({}),
  sampling: z.strictObject({
    temperature: z.number().min(0).default(1),
    topP: z.number().gt(0).max(1).default(1),
    answersPerStudent: int(1).default(4), // samples per (task, student): the solve rate's denominator
    maxTokens: int(1).default(32),
  }).prefault({}),
  rewards: z.strictObject({
    invalidPenalty: z.number().default(-1),
    zeroAtUnsolved: z.boolean().default(true), // a valid task no student solves earns 0, not 1 (AZR)
  }).prefault({}),
  rl: z.strictObject({
    lr: positive.default(1e-3),
    klCoef: z.number().min(0).default(0),
    entropyCoef: z.number().min(0).default(0.001),
    maxGradNorm: positive.default(1),
    reduction: z.enum(['token', 'sequence']).default('token'),
    advantageGroups: z.enum(['role-and-task', 'role', 'none']).default('role-and-task'),
  }).prefault({}),
  rating: z.strictObject({
    k: positive.default(16), // Elo step
    initial: z.number().default(1000),
  }).prefault({}),
  evolution: z.strictObject({
    every: int(0).default(0), // 0 = no evolution
    fraction: z.number({ error: 'expected a number' }).gt(0, { error: 'expected a share in (0, 0.5]' }).max(0.5, { error: 'expected a share in (0, 0.5]: at most half of each role is replaced' }).default(0.25),
    selection: z.enum(['truncation', 'tournament', 'pbt']).default('truncation'),
    crossoverProbability: probability.default(0.5),
    crossover: z.enum(['svd', 'module', 'rank', 'interpolate']).default('svd'),
    sigma: z.number().min(0).default(0.05),
    optimizerState: z.enum(['reset', 'inherit']).default('reset'),
    fitness: z.enum(['rating', 'reward']).default('rating'), // rank by rating, or by mean reward over fitnessWindow steps
    fitnessWindow: int(1).default(5),
    // threads for the SVD crossover's small factorisations: a number, or auto (cores less one, at most 8); the
    // children are the same with any number
    threads: z
      .union([z.number(), z.literal('auto')], { error: THREADS_EXPECTED })
      .refine((t) => t === 'auto' || (Number.isInteger(t) && t >= 1), { error: THREADS_EXPECTED })
      .default('auto'),
  }).prefault({}),
  checkpointEvery: int(0).default(0), // save adapters every N steps (0: at the end only)
});

type ParsedScenario = z.infer<typeof scenarioSchema>;
/** A scenario with its domain's defaults filled in. */
export type Scenario = ParsedScenario & { tasks: ParsedScenario['tasks'] & { types: (typeof TASK_TYPES)[number][] } };

export class ScenarioError extends Error {}

/** Parses YAML text and validates it with a schema; errors name `file`, the field and what was expected. */
export function parseYamlWith<T extends z.ZodType>(schema: T, text: string, file: string): z.infer<T> {
  const document = parseDocument(text, { prettyErrors: true });
  if (document.errors.length > 0) throw new ScenarioError(`${file}: not valid YAML: ${document.errors[0]!.message}`);
  const parsed = schema.safeParse(document.toJS());
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.map((k) => (typeof k === 'number' ? `[${k}]` : `.${String(k)}`)).join('').replace(/^\./, '') || '(top level)';
    const unknown = issue.code === 'unrecognized_keys' ? `: unknown field(s) ${issue.keys.map((k) => `"${k}"`).join(', ')}` : `: ${issue.message}`;
    throw new ScenarioError(`${file}: field "${field}"${unknown}`);
  }
  return parsed.data;
}

/** Parses and validates scenario text; `file` names it in errors. */
export function parseScenario(text: string, file: string): Scenario {
  const parsed = parseYamlWith(scenarioSchema, text, file);
  const domain = DOMAINS[parsed.domain];
  const types = parsed.tasks.types ?? [...domain.taskTypes];
  const foreign = types.find((type) => !domain.taskTypes.includes(type));
  if (foreign) throw new ScenarioError(`${file}: field "tasks.types": "${foreign}" is not a task type of the ${domain.name} domain (use ${domain.taskTypes.join(', ')})`);
  const scenario: Scenario = { ...parsed, tasks: { ...parsed.tasks, types } };
  if (scenario.matchmaking.policy === 'self' && scenario.population.students !== scenario.population.teachers) {
    throw new ScenarioError(`${file}: field "population.students": under "self" every teacher solves its own tasks through a student twin that shares its adapter, so "students" must equal "teachers" (${scenario.population.teachers})`);
  }
  if (scenario.matchmaking.policy === 'cross' && scenario.population.subpopulations < 2) {
    throw new ScenarioError(`${file}: field "matchmaking.policy": "cross" pairs teachers with students of other sub-populations, so "population.subpopulations" must be at least 2 (got ${scenario.population.subpopulations})`);
  }
  return scenario;
}

export function loadScenario(file: string): Scenario {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ScenarioError(`${file}: cannot read the scenario (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  return parseScenario(text, file);
}
