// Building a run's simulation from a scenario: the model and tokenizer, one adapter slot per member (a teacher
// and its student twin share one under `self`), the engine and verifier services, and every actor with its
// initial (or checkpointed) state.

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
import { loadModel, randomModel } from '../model/checkpoint.js';
import type { LlamaConfig } from '../model/config.js';
import { LlamaModel } from '../model/llama.js';
import { LoraBank } from '../model/lora-bank.js';
import { randomAdapter, type LoraAdapter } from '../model/peft.js';
import { loadTokenizer, type TextTokenizer } from '../model/tokenizer.js';
import { presetModel, ScenarioError, type Scenario } from '../scenario/scenario.js';
import { AdamW } from '../train/adamw.js';
import { LlamaTrainer } from '../train/llama-backward.js';
import { ratingSystem } from '../rating/rating.js';
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

export interface ModelParts {
  config: LlamaConfig;
  model: LlamaModel;
  tokenizer: TextTokenizer;
}

export function buildModel(scenario: Scenario, backend: Backend, file: string): ModelParts {
  if ('preset' in scenario.model) {
    const { config, tokenizer } = presetModel(scenario, file);
    return { config, model: LlamaModel.upload(backend, config, randomModel(config, scenario.model.seed)), tokenizer };
  }
  const { config, weights, tokenizerFile } = loadModel(scenario.model.path);
  if (!tokenizerFile) throw new ScenarioError(`${file}: field "model.path": ${scenario.model.path} has no tokenizer.json, which the ${scenario.domain} domain needs to write its tasks`);
  return { config, model: LlamaModel.upload(backend, config, weights, { storage: scenario.model.weights }), tokenizer: loadTokenizer(tokenizerFile) };
}

export interface Simulation {
  members: MemberPlan[];
  bank: LoraBank;
  optimizer: AdamW;
  trainer: LlamaTrainer;
  engine: EngineService;
  verifier: VerifierService;
}

/** Initial adapters, one per slot, each from its own seed. */
export function initialAdapters(scenario: Scenario, config: LlamaConfig, slots: number, world: World): LoraAdapter[] {
  const { rank, alpha, modules, init } = scenario.population.lora;
  return Array.from({ length: slots }, (_, slot) => randomAdapter(config, { rank, alpha: alpha ?? 2 * rank, targets: modules, seed: world.streams.stream('adapter', slot).u32(), init }));
}

/** The services and actors of a run. `states` holds checkpointed actor states (a resume). */
export function buildSimulation(scenario: Scenario, parts: ModelParts, world: World, pool: VerifierPool, states: Map<string, unknown> | null, wrap: (s: Service) => Service = (s) => s): Simulation {
  const members = planMembers(scenario);
  const slots = new Set(members.map((m) => m.slot)).size;
  const { lora } = scenario.population;
  const bank = new LoraBank(parts.model.backend, parts.config, slots, lora.rank, lora.modules);
  const optimizer = AdamW.forBank(parts.model.backend, bank, parts.config.numLayers, { lr: scenario.rl.lr, maxGradNorm: scenario.rl.maxGradNorm });
  const trainer = new LlamaTrainer(parts.model, bank);
  const { sampling, rl } = scenario;
  const domain = domainNamed(scenario.domain);
  const engine = new EngineService(
    { model: parts.model, bank, trainer, optimizer, tokenizer: parts.tokenizer },
    { domain, seed: scenario.seed >>> 0, temperature: sampling.temperature, topP: sampling.topP, maxTokens: sampling.maxTokens, advantageGroups: rl.advantageGroups, rl: { reduction: rl.reduction, klCoef: rl.klCoef, entropyCoef: rl.entropyCoef }, evolutionThreads: threadCount(scenario.evolution.threads) },
  );
  const verifier = new VerifierService(pool);
  world.actor(ENGINE, null, engine.handler);
  world.actor(VERIFIER, null, verifier.handler);
  world.service(wrap(engine));
  world.service(wrap(verifier));

  const restored = <T>(name: string, initial: T): T => (states?.get(name) as T | undefined) ?? initial;
  const prompts = promptSet(domain, scenario.prompts);
  const promptCharacters = parts.model.maxContext - sampling.maxTokens - 1; // one token per character at most, after a BOS
  const shown = domain.seedReferences.length > 0 ? scenario.tasks.references : 0; // a domain without seed references shows none
  const teacherConfig = { domain, prompts, taskTypes: scenario.tasks.types, perTeacher: scenario.tasks.perTeacher, references: shown, promptCharacters, rewards: scenario.rewards };
  const references = shown > 0 ? [...domain.seedReferences] : [];
  for (const m of members) {
    if (m.role === 'teacher') world.actor(teacherAt(m.id), restored<TeacherState>(m.id, { id: m.id, subpopulation: m.subpopulation, slot: m.slot, proposals: [], references }), teacherHandler(teacherConfig));
    else world.actor(studentAt(m.id), restored<StudentState>(m.id, { id: m.id, subpopulation: m.subpopulation, slot: m.slot, assignments: [], answers: [] }), studentHandler({ domain, prompts, answersPerTask: sampling.answersPerStudent }));
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
        crossover: evolution.crossover,
        sigma: evolution.sigma,
        optimizerState: evolution.optimizerState,
        fitness: evolution.fitness,
        fitnessWindow: evolution.fitnessWindow,
      },
    }),
  );
  return { members, bank, optimizer, trainer, engine, verifier };
}
