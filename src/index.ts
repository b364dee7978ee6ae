/**
 * populora as a library: `import { loadScenario, runScenario, replayRun } from 'populora'`. What the command line
 * does, as functions (docs/api.md), the interfaces a plug-in implements with their define* helpers
 * (docs/plugins.md), and the model and backend entry points beneath them.
 *
 * @packageDocumentation
 */

// ---- Scenarios, runs, replays, comparisons, sweeps ----
export {
  /** Reads a scenario file, imports the plug-ins it names (relative to the file) and validates it. */
  openScenario as loadScenario,
  readScenario,
  parseScenario,
  ScenarioError,
  LIMITS,
  type Scenario,
  type ScenarioOptions,
} from './scenario/scenario.js';
export { runScenario, type RunOptions, type RunResult } from './sim/run.js';
/** A run stopped at once (RunOptions.stopNow), and where a step in progress stands (RunOptions.onProgress). */
export { RunStopped, type PhaseProgress } from './engine/pacer.js';
export type { BatchTokensSetting } from './engine/budget.js';
export { replayRun, describeEvent, type ReplayOptions, type ReplayVerdict } from './sim/replay.js';
export { compare, type Comparison } from './report/compare.js';
export { sweep, sweepPlugins, type SweepCallOptions } from './sweep/sweep.js';
export { openSweep, planSweep, type SweepPlan, type PlannedRun } from './sweep/grid.js';
export type { StepMetrics } from './sim/metrics.js';
export type { RunEvent } from './runtime/event-log.js';

// ---- Plug-ins: the interfaces, and helpers that type a plug-in's default export ----
export {
  defineDomain,
  defineEvolutionOperator,
  defineMatchPolicy,
  defineRatingSystem,
  defineRewardHook,
  type DomainPlugin,
  type EvolutionOperator,
  type MatchPolicyPlugin,
  type OperatorContext,
  type RatingModel,
  type RatingSystemPlugin,
} from './plugins/define.js';
export type { OptionsSchema } from './plugins/options.js';
export { PluginError } from './plugins/errors.js';
export { PluginRuleError } from './plugins/guard.js';
export { pluginLabel, PLUGIN_FIELDS, type PluginRecord } from './scenario/plugin-fields.js';
export type { MatchContext, MatchPolicy, MemberView, PairHistory, PopulationShape } from './matchmaking/index.js';
export type { AnswerCheck, Domain, DomainCommand, FormatName, PromptCatalog, PromptSet, ProposalPrompt, Task, TaskMetrics, TaskType, TemplateSpec, TokenMask, Validation, VerifierPool, VerifierSettings, VerifyJob, VerifyOutcome } from './domains/domain.js';
export type { AnswerOutcome, ProposalOutcome, RewardContext, RewardHook } from './rewards/rules.js';
export { teacherReward, studentReward } from './rewards/rules.js';
export type { RatingSystem, Skill } from './rating/rating.js';
export type { RandomStream } from './runtime/streams.js';
/** zod, as populora uses it: a plug-in's options schema can be written with it wherever the plug-in lives. */
export { z } from 'zod';

// ---- Models, adapters and backends ----
export { openBackend, defaultCpuThreads, BACKEND_CHOICES, type BackendChoice, type BackendSetting } from './backend/select.js';
export type { Backend, BackendName, WeightStorage } from './backend/backend.js';
export { CpuBackend } from './backend/cpu.js';
export { LlamaModel } from './model/llama.js';
export { loadConfig, loadModel, randomModel, saveModel, type ModelWeights } from './model/checkpoint.js';
export { TINY_CONFIGS, type LlamaConfig } from './model/config.js';
export { LoraBank } from './model/lora-bank.js';
export { loadPeftAdapter, randomAdapter, savePeftAdapter, LORA_MODULES, type LoraAdapter, type LoraFactors, type LoraModule } from './model/peft.js';
export { generate, type GenerationRequest, type GenerationResult, type GenerateOptions } from './model/generate.js';
export { generateText, type TextGenerationRequest, type TextGenerationResult } from './model/text-stream.js';
export { loadTokenizer, type TextTokenizer } from './model/tokenizer.js';
export { crossover, mutate, CROSSOVER_KINDS, type CrossoverKind, type CrossoverOptions, type MutationOptions } from './evolution/operators.js';
