// Rewards: what a teacher's proposal and a student's answer earn at the learn phase. The built-in rules are AZR's
// (DESIGN.md): a student earns 1 for a correct answer, 0 otherwise; a teacher's invalid task earns the penalty, a
// valid one 1 - solve rate (0 when no student solved it, with `zeroAtUnsolved`; 0 when none was matched). A
// scenario's `rewards.hook` names a plug-in (src/plugins/) that shapes either role's rewards instead; it sees each
// outcome, the step, the member, the role's whole batch of the step and the built-in reward, and must return a
// finite number. Rewards are data of the run: they go into the `train` messages, so a hook that changes its mind
// on a replay is named as the first divergent event.

import type { z } from 'zod';
import type { Task, TaskMetrics, TaskType } from '../domains/domain.js';
import { guarded } from '../plugins/guard.js';
import { PluginRegistry } from '../plugins/registry.js';
import type { OptionsSchema } from '../plugins/options.js';

/** What a teacher's proposal came to, as a reward sees it. */
export interface ProposalOutcome {
  taskType: TaskType;
  text: string; // the generated proposal
  valid: boolean;
  invalidReason: string | null;
  task: Task | null; // the validated task (null when invalid)
  metrics: TaskMetrics | null;
  correct: number; // answers right, over every matched student
  answers: number;
  solveRate: number | null; // correct / answers; null when no student was matched
}

/** What a student's answer came to. */
export interface AnswerOutcome {
  taskType: TaskType;
  task: Task;
  correct: boolean;
}

/** Everything a reward hook may look at besides the outcome. */
export interface RewardContext<Options, Outcome> {
  step: number;
  member: string; // the teacher's or student's id
  options: Options; // the scenario's rewards.options, as the hook's schema parsed them
  builtIn: number; // what AZR's rules give this outcome
  batch: readonly Outcome[]; // the member's outcomes of this step (this one among them), in request order
}

/** A reward-shaping plug-in: either role's reward, or both; a role it leaves out keeps AZR's rules. */
export interface RewardHook<Options = Record<string, never>> {
  options?: OptionsSchema<Options>;
  teacher?(proposal: ProposalOutcome, context: RewardContext<Options, ProposalOutcome>): number;
  student?(answer: AnswerOutcome, context: RewardContext<Options, AnswerOutcome>): number;
}

/** The scenario's `rewards`: AZR's settings, and optionally a hook by its key (an absolute path) with its options. */
export interface RewardSettings {
  invalidPenalty: number;
  zeroAtUnsolved: boolean;
  hook?: string;
  options?: unknown;
}

/** Teacher reward for one proposal (AZR / PopuLoRA form). */
export function teacherReward(valid: boolean, solveRate: number | null, rewards: Pick<RewardSettings, 'invalidPenalty' | 'zeroAtUnsolved'>): number {
  if (!valid) return rewards.invalidPenalty;
  if (solveRate === null) return 0; // valid but no student was matched: nothing was learned about it
  if (solveRate === 0 && rewards.zeroAtUnsolved) return 0;
  return 1 - solveRate;
}

export const studentReward = (correct: boolean) => (correct ? 1 : 0);

/** What the actors call at the learn phase: one reward per outcome, in order. */
export interface RewardRules {
  teacher(outcomes: readonly ProposalOutcome[], step: number, member: string): number[];
  student(outcomes: readonly AnswerOutcome[], step: number, member: string): number[];
}

const hooks = new PluginRegistry<RewardHook<unknown>>();

/** Adds a reward hook under its key, the module's absolute path (src/plugins/ does, for a scenario's `rewards.hook`). */
export const registerRewardHook = (key: string, hook: RewardHook<unknown>, options: z.ZodType<unknown>) => hooks.register(key, hook, options);

/** The options schema of the hook registered under `key`; undefined when there is none. */
export const rewardHookOptions = (key: string) => hooks.options(key);

function checked(reward: unknown, who: string, index: number): number {
  if (typeof reward !== 'number' || !Number.isFinite(reward)) throw new RangeError(`${who} returned ${String(reward)} for outcome ${index}: a reward must be a finite number`);
  return reward;
}

/** The rules a scenario's `rewards` make: AZR's, with the hook's shaping where it has one. */
export function rewardRules(settings: RewardSettings): RewardRules {
  const builtIn: RewardRules = {
    teacher: (outcomes) => outcomes.map((p) => teacherReward(p.valid, p.solveRate, settings)),
    student: (outcomes) => outcomes.map((a) => studentReward(a.correct)),
  };
  if (settings.hook === undefined) return builtIn;
  const registered = hooks.get(settings.hook);
  if (!registered) throw new RangeError(`the reward hook ${settings.hook} is not loaded (a scenario's plug-ins are loaded by loadScenario)`);
  const options = registered.options.parse(settings.options ?? {});
  const hook = registered.plugin;
  const file = settings.hook;
  const shaped = <O>(role: 'teacher' | 'student', base: (outcomes: readonly O[], step: number, member: string) => number[], shape: ((o: O, c: RewardContext<unknown, O>) => number) | undefined) => {
    if (!shape) return base;
    const who = `the reward hook ${file}, ${role}()`;
    const call = guarded(who, shape.bind(hook));
    return (outcomes: readonly O[], step: number, member: string) => {
      const defaults = base(outcomes, step, member);
      return outcomes.map((outcome, i) => checked(call(outcome, { step, member, options, builtIn: defaults[i]!, batch: outcomes }), who, i));
    };
  };
  return { teacher: shaped('teacher', builtIn.teacher, hook.teacher), student: shaped('student', builtIn.student, hook.student) };
}
