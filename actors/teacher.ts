// A teacher: one population member that proposes tasks. Per step it asks the engine for `perTeacher` proposals of
// each task type, has the verifier validate them, offers the valid ones to the matchmaker, gathers the students'
// outcomes, and at the learn phase turns them into rewards (DESIGN.md: learnability 1 - solve rate; a penalty
// for an invalid task; optionally 0 when no student solved it; or a scenario's reward hook: src/rewards/rules.ts)
// and hands its samples to the engine.
// Where the domain conditions proposals on examples (the code domain, as AZR does), each prompt shows
// `references` tasks drawn from the teacher's buffer: the domain's seed tasks, then its own valid proposals.
// What a prompt already gives of the proposal (a program to write inputs for) is validated as part of it.

import type { Domain, PromptSet, Task, TaskMetrics, TaskType } from '../src/domains/domain.js';
import type { Handler } from '../src/runtime/world.js';
import { ENGINE, MATCHMAKER, POPULATION_MANAGER, VERIFIER, byRequestId, mean, type GenerateRequest, type Generated, type Learn, type OfferedTask, type Outcomes, type TrainingSample } from './protocol.js';
import type { VerifierMessage, VerifierReply } from './verifier.js';
import type { ProposalOutcome, RewardRules } from '../src/rewards/rules.js';

export { teacherReward } from '../src/rewards/rules.js';

export interface TeacherConfig {
  domain: Domain;
  prompts: PromptSet | null; // the domain's templates as the scenario resolved them (null: it has none)
  taskTypes: readonly TaskType[];
  perTeacher: number;
  references: number; // reference tasks shown per prompt (0: none)
  promptCharacters: number; // the longest prompt the model's context holds beside the generation
  rewards: RewardRules; // AZR's, or a scenario's reward hook (src/rewards/rules.ts)
}

/** Most tasks a teacher's reference buffer keeps (the newest). */
export const REFERENCE_BUFFER_LIMIT = 32;

interface Proposal {
  requestId: number;
  taskType: TaskType;
  text: string;
  given?: string; // what the prompt gave of the proposal (absent: nothing)
  task: Task | null; // set once validated
  metrics: TaskMetrics | null;
  invalidReason: string | null;
  fault: string | null; // the verifier could not judge it: dropped, neither rewarded nor penalised
  correct: number; // answers correct, over all matched students
  answers: number;
}

export interface TeacherState {
  id: string;
  subpopulation: number;
  slot: number;
  proposals: Proposal[]; // this step's
  references: Task[]; // the reference buffer, oldest first
}

export type TeacherMessage =
  | { type: 'propose' }
  | Generated
  | Extract<VerifierReply, { type: 'validated' }>
  | Outcomes
  | Learn;

/** A judged proposal as the reward rules see it. */
const outcomeOf = (p: Proposal): ProposalOutcome => ({ taskType: p.taskType, text: p.text, valid: p.task !== null, invalidReason: p.invalidReason, task: p.task, metrics: p.metrics, correct: p.correct, answers: p.answers, solveRate: p.answers > 0 ? p.correct / p.answers : null });

export const teacherHandler =
  (config: TeacherConfig): Handler<TeacherState, TeacherMessage> =>
  (state, message, world, self) => {
    const proposal = (requestId: number) => byRequestId(state.proposals, requestId, 'proposal');
    switch (message.type) {
      case 'propose': {
        const proposals: Proposal[] = [];
        const request: GenerateRequest = { type: 'generate', replyTo: self, requests: [] };
        const draw = world.streams.stream(self, 'references', world.step);
        for (const taskType of config.taskTypes) {
          for (let i = 0; i < config.perTeacher; i++) {
            const requestId = world.requestId();
            const shown = Math.min(config.references, state.references.length);
            const references = draw.sample(state.references.length, shown).map((k) => state.references[k]!);
            const promptWith = (n: number) => config.domain.proposalPrompt(taskType, references.slice(0, n), config.prompts);
            let fitting = references.length; // as many references as the context holds
            while (fitting > 0 && promptWith(fitting).prompt.length > config.promptCharacters) fitting--;
            const { prompt, given } = promptWith(fitting);
            request.requests.push({ requestId, slot: state.slot, prompt, format: `proposal/${taskType}` });
            proposals.push({ requestId, taskType, text: '', ...(given === '' ? {} : { given }), task: null, metrics: null, invalidReason: null, fault: null, correct: 0, answers: 0 });
          }
        }
        world.send(self, ENGINE, request);
        return { ...state, proposals };
      }
      case 'generated': {
        const validate: VerifierMessage = { type: 'validate', replyTo: self, requests: [] };
        for (const result of message.results) {
          const p = proposal(result.requestId);
          p.text = result.text;
          validate.requests.push({ requestId: p.requestId, taskType: p.taskType, text: p.text, ...(p.given === undefined ? {} : { given: p.given }) });
        }
        world.send(self, VERIFIER, validate);
        return state;
      }
      case 'validated': {
        const offers: OfferedTask[] = [];
        for (const result of message.results) {
          const p = proposal(result.requestId);
          if (result.fault !== undefined) p.fault = result.fault;
          else if (result.validation.valid && config.domain.solvePrompt(result.validation.task, config.prompts).length > config.promptCharacters) {
            p.invalidReason = `too-long: the task's prompt does not fit the model's context beside the answer (${config.promptCharacters} characters)`;
          } else if (result.validation.valid) {
            p.task = result.validation.task;
            p.metrics = result.validation.metrics;
            offers.push({ taskId: p.requestId, teacher: self, task: p.task });
          } else {
            p.invalidReason = result.validation.reason;
          }
        }
        if (offers.length > 0) world.send(self, MATCHMAKER, { type: 'offers', offers });
        const references = config.references > 0 ? [...state.references, ...offers.map((o) => o.task)].slice(-REFERENCE_BUFFER_LIMIT) : state.references;
        return { ...state, references };
      }
      case 'outcomes': {
        for (const outcome of message.outcomes) {
          const p = proposal(outcome.taskId);
          p.correct += outcome.correct;
          p.answers += outcome.total;
        }
        return state;
      }
      case 'learn': {
        const judged = state.proposals.filter((p) => p.fault === null);
        const rewards = config.rewards.teacher(judged.map(outcomeOf), world.step, self);
        const samples: TrainingSample[] = judged.map((p, i) => ({ requestId: p.requestId, role: 'teacher', taskType: p.taskType, reward: rewards[i]! }));
        const rewardMean = mean(samples.map((s) => s.reward));
        if (samples.length > 0) world.send(self, ENGINE, { type: 'train', samples });
        if (samples.length > 0) world.send(self, POPULATION_MANAGER, { type: 'reward', member: self, rewardMean });
        world.report('teacher', {
          id: self,
          subpopulation: state.subpopulation,
          proposals: judged.length,
          valid: judged.filter((p) => p.task).length,
          faults: state.proposals.length - judged.length,
          rewardMean,
          tasks: judged.filter((p) => p.task).map((p) => ({ ...p.metrics!, type: p.taskType, solveRate: p.answers > 0 ? p.correct / p.answers : null })),
          invalidReasons: judged.filter((p) => p.invalidReason).map((p) => p.invalidReason!.split(':')[0]),
        });
        return { ...state, proposals: [] };
      }
    }
  };
