// Building a run's simulation from a scenario: the model and tokenizer, one adapter slot per member (a teacher
// and its student twin share one under `self`), the engine and verifier services, and every actor with its
// initial (or checkpointed) state.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Backend } from '../backend/backend.js';
import { ENGINE, EVALUATOR, MATCHMAKER, POPULATION_MANAGER, studentAt, teacherAt, VERIFIER, type Role } from '../../actors/protocol.js';
import { EngineService } from '../../actors/engine.js';
import { evaluatorHandler, initialEvaluatorState, type EvaluatorState } from '../../actors/evaluator.js';
import { matchmakerHandler, type MatchmakerState } from '../../actors/matchmaker.js';
import { adapterName, populationManagerHandler, type MemberRecord, type PopulationState } from '../../actors/population-manager.js';
import { studentHandler, type StudentState } from '../../actors/student.js';
import { teacherHandler, type TeacherState } from '../../actors/teacher.js';
import { VerifierService } from '../../actors/verifier.js';
import { heldOutIndex, type VerifierPool } from '../domains/domain.js';
import { domainNamed } from '../domains/index.js';
import { promptSet } from '../domains/prompts.js';
import { matchPolicy } from '../matchmaking/index.js';
import { loadConfig, loadModel, randomModel } from '../model/checkpoint.js';
import type { LlamaConfig } from '../model/config.js';
import { LlamaModel, modelContext } from '../model/llama.js';
import { randomAdapter, type LoraAdapter } from '../model/peft.js';
import { loadTokenizer, type TextTokenizer } from '../model/tokenizer.js';
import { tokenTexts } from '../model/token-texts.js';
import { LocalEngineCore, type CoreSettings, type EngineCore } from '../engine/core.js';
import type { Pacer } from '../engine/pacer.js';
import { presetModel, ScenarioError, type Scenario } from '../scenario/scenario.js';
import { ratingSystem } from '../rating/rating.js';
import { rewardRules } from '../rewards/rules.js';
import { childMaker } from '../evolution/registry.js';
import { isPluginReference, pluginLabel } from '../scenario/plugin-fields.js';
import type { Service, World } from '../runtime/world.js';
import { threadCount } from '../runtime/worker-threads.js';

export interface MemberPlan {
  id: string;
  role: Role;
  subpopulation: number;
  slot: number;
}

/** Members in id order; slots numbered teachers first. Under `self` each student shares its teacher twin's slot. */
export function planMembers(scenario: Scenario): MemberPlan[] {
  const { subpopulations, teachers, students } = scenario.population;
  const members: MemberPlan[] = [];
  let slot = 0;
  for (let s = 0; s < subpopulations; s++) for (let t = 0; t < teachers; t++) members.push({ id: `teacher-${s}-${t}`, role: 'teacher', subpopulation: s, slot: slot++ });
  const self = matchPolicy(scenario.matchmaking.policy).studentsAreTeacherTwins === true;
  for (let s = 0; s < subpopulations; s++) {
    for (let i = 0; i < students; i++) members.push({ id: `student-${s}-${i}`, role: 'student', subpopulation: s, slot: self ? s * teachers + i : slot++ }); // teacher-s-i's slot
  }
  return members.sort((a, b) => (a.id < b.id ? -1 : 1));
}

/** What the actors need to know of the model: its shape, its tokenizer, its context. */
export interface ModelInfo {
  config: LlamaConfig;
  tokenizer: TextTokenizer;
  maxContext: number;
}

/** ModelInfo and the model itself, on a backend (what an engine core runs). */
export interface ModelParts extends ModelInfo {
  model: LlamaModel;
}

/** The model's shape and tokenizer, without its weights (a coordinator whose engine runs on workers). */
export function modelInfo(scenario: Scenario, file: string): ModelInfo {
  if ('preset' in scenario.model) {
    const { config, tokenizer } = presetModel(scenario, file);
    return { config, tokenizer, maxContext: modelContext(config) };
  }
  const config = loadConfig(scenario.model.path);
  return { config, tokenizer: loadTokenizer(tokenizerOf(scenario.model.path, scenario.domain, file)), maxContext: modelContext(config) };
}

export function buildModel(scenario: Scenario, backend: Backend, file: string): ModelParts {
  const info = modelInfo(scenario, file);
  const model =
    'preset' in scenario.model
      ? LlamaModel.upload(backend, info.config, randomModel(info.config, scenario.model.seed))
      : LlamaModel.upload(backend, info.config, loadModel(scenario.model.path).weights, { storage: scenario.model.weights });
  return { ...info, model };
}

/** A model folder's tokenizer.json, which the domains need to write their tasks. */
function tokenizerOf(folder: string, domain: string, file: string): string {
  const tokenizerFile = join(folder, 'tokenizer.json');
  if (!existsSync(tokenizerFile)) throw new ScenarioError(`${file}: field "model.path": ${folder} has no tokenizer.json, which the ${domain} domain needs to write its tasks`);
  return tokenizerFile;
}

export interface Simulation {
  members: MemberPlan[];
  slots: number; // adapter slots: one per member, or per teacher-student twin pair
  engine: EngineService;
  verifier: VerifierService;
}

/** The engine's settings for a scenario (what an engine worker builds its shard with, too). */
export function coreSettings(scenario: Scenario, parts: ModelInfo): CoreSettings {
  const { rl, population, evolution } = scenario;
  return {
    domain: domainNamed(scenario.domain),
    vocab: tokenTexts(parts.tokenizer, parts.config.vocabSize),
    rl: { reduction: rl.reduction, klCoef: rl.klCoef, entropyCoef: rl.entropyCoef },
    optimizer: { lr: rl.lr, maxGradNorm: rl.maxGradNorm },
    lora: { rank: population.lora.rank, modules: population.lora.modules },
    evolutionThreads: threadCount(evolution.threads),
    operators: {
      mutate: evolution.mutation === undefined ? null : childMaker(evolution.mutation, 'mutate', evolution.mutationOptions),
      crossover: isPluginReference(evolution.crossover) ? childMaker(evolution.crossover, 'crossover', evolution.crossoverOptions) : null,
    },
    batchTokens: scenario.batchTokens ?? 'auto',
  };
}

/**
 * How a plug-in is named in what a run writes besides scenario.json (messages, lineage): file@sha256, so that the
 * run's hash does not depend on the folder it was loaded from. A built-in's name stays as it is.
 */
function pluginName(scenario: Scenario, field: string, value: string): string {
  const record = scenario.plugins?.find((p) => p.field === field);
  return record && isPluginReference(value) ? pluginLabel(record) : value;
}

/** The number of adapter slots a scenario's population needs. */
export const slotCount = (scenario: Scenario) => new Set(planMembers(scenario).map((m) => m.slot)).size;

/** The engine core of a run in one process: every slot in this process's bank; `pacer`: see src/engine/pacer.ts. */
export function localCore(scenario: Scenario, parts: ModelParts, pacer?: Pacer): LocalEngineCore {
  return new LocalEngineCore(parts.model, coreSettings(scenario, parts), Array.from({ length: slotCount(scenario) }, (_, slot) => slot), 0, pacer);
}

/** Initial adapters, one per slot, each from its own seed. */
export function initialAdapters(scenario: Scenario, config: LlamaConfig, slots: number, world: World): LoraAdapter[] {
  const { rank, alpha, modules, init } = scenario.population.lora;
  return Array.from({ length: slots }, (_, slot) => randomAdapter(config, { rank, alpha: alpha ?? 2 * rank, targets: modules, seed: world.streams.stream('adapter', slot).u32(), init }));
}

/** The services and actors of a run. `states` holds checkpointed actor states (a resume). */
export function buildSimulation(scenario: Scenario, parts: ModelInfo, core: EngineCore, world: World, pool: VerifierPool, states: Map<string, unknown> | null, wrap: (s: Service) => Service = (s) => s): Simulation {
  const members = planMembers(scenario);
  const { sampling, rl } = scenario;
  const domain = domainNamed(scenario.domain);
  const engine = new EngineService(core, { tokenizer: parts.tokenizer, eos: tokenTexts(parts.tokenizer, parts.config.vocabSize).eos, seed: scenario.seed >>> 0, temperature: sampling.temperature, topP: sampling.topP, maxTokens: sampling.maxTokens, answerMaxTokens: sampling.answerMaxTokens ?? sampling.maxTokens, advantageGroups: rl.advantageGroups });
  const verifier = new VerifierService(pool);
  world.actor(ENGINE, null, engine.handler);
  world.actor(VERIFIER, null, verifier.handler);
  world.service(wrap(engine));
  world.service(wrap(verifier));

  const restored = <T>(name: string, initial: T): T => (states?.get(name) as T | undefined) ?? initial;
  const prompts = promptSet(domain, scenario.prompts);
  const promptCharacters = parts.maxContext - sampling.maxTokens - 1; // one token per character at most, after a BOS
  const shown = domain.seedReferences.length > 0 ? scenario.tasks.references : 0; // a domain without seed references shows none
  const rewards = rewardRules(scenario.rewards);
  const teacherConfig = { domain, prompts, taskTypes: scenario.tasks.types, perTeacher: scenario.tasks.perTeacher, references: shown, promptCharacters, rewards };
  const references = shown > 0 ? [...domain.seedReferences] : [];
  for (const m of members) {
    if (m.role === 'teacher') world.actor(teacherAt(m.id), restored<TeacherState>(m.id, { id: m.id, subpopulation: m.subpopulation, slot: m.slot, proposals: [], references }), teacherHandler(teacherConfig));
    else world.actor(studentAt(m.id), restored<StudentState>(m.id, { id: m.id, subpopulation: m.subpopulation, slot: m.slot, assignments: [], answers: [] }), studentHandler({ domain, prompts, answersPerTask: sampling.answersPerStudent, rewards }));
  }
  const ratings = ratingSystem(scenario.rating);
  const policy = matchPolicy(scenario.matchmaking.policy);
  const keepHistory = policy.needsHistory?.(policy.options.parse(scenario.matchmaking.options ?? {})) ?? false;
  const heldOut = scenario.evaluation && domain.heldOutTasks ? domain.heldOutTasks(scenario.evaluation.seed, scenario.evaluation.tasks) : null;
  if (heldOut) world.actor(EVALUATOR, restored<EvaluatorState>(EVALUATOR, initialEvaluatorState()), evaluatorHandler({ domain, prompts, tasks: heldOut }));
  world.actor(MATCHMAKER, restored<MatchmakerState>(MATCHMAKER, { roster: [], offers: [] }), matchmakerHandler({ ...scenario.matchmaking, ratings, heldOutIndex: heldOut ? heldOutIndex(heldOut) : undefined }));
  const records: MemberRecord[] = members.map((m) => ({ ...m, adapter: adapterName(m.id, 0), generation: 0, ...ratings.initial(), rewards: [] }));
  const { evolution } = scenario;
  world.actor(
    POPULATION_MANAGER,
    restored<PopulationState>(POPULATION_MANAGER, { members: records, outcomes: [], lineage: [], ...(keepHistory ? { history: {} } : {}) }),
    populationManagerHandler({
      ratings,
      keepHistory,
      evaluation: scenario.evaluation ? { every: scenario.evaluation.every, steps: scenario.steps } : null,
      evolution: {
        every: evolution.every,
        policy: evolution.selection === 'tournament' ? { kind: 'tournament', fraction: evolution.fraction, size: 2 } : { kind: evolution.selection, fraction: evolution.fraction },
        crossoverProbability: evolution.crossoverProbability,
        crossover: pluginName(scenario, 'evolution.crossover', evolution.crossover),
        mutation: evolution.mutation === undefined ? null : pluginName(scenario, 'evolution.mutation', evolution.mutation),
        sigma: evolution.sigma,
        optimizerState: evolution.optimizerState,
        fitness: evolution.fitness,
        fitnessWindow: evolution.fitnessWindow,
      },
    }),
  );
  return { members, slots: slotCount(scenario), engine, verifier };
}
