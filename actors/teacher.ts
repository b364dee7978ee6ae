// A teacher: one population member that proposes tasks. Per step it asks the engine for `perTeacher` proposals of
// each task type, has the verifier validate them, offers the valid ones to the matchmaker, gathers the students'
// outcomes, and at the learn phase turns them into rewards (DESIGN.md: learnability 1 - solve rate; a penalty
// for an invalid task; optionally 0 when no student solved it) and hands its samples to the engine.

import { proposalPrompt, taskMetrics, type ArithTask, type ArithTaskType } from '../src/domains/arith/tasks.js';
import type { Handler } from '../src/runtime/world.js';
import { ENGINE, MATCHMAKER, POPULATION_MANAGER, VERIFIER, byRequestId, mean, type GenerateRequest, type Generated, type OfferedTask, type Outcomes, type TrainingSample } from './protocol.js';
import type { VerifierMessage, VerifierReply } from './verifier.js';

export interface TeacherRewards {
  invalidPenalty: number;
  zeroAtUnsolved: boolean;
}

export interface TeacherConfig {
  taskTypes: readonly ArithTaskType[];
  perTeacher: number;
  rewards: TeacherRewards;
}

interface Proposal {
  requestId: number;
  taskType: ArithTaskType;
  text: string;
  task: ArithTask | null; // set once validated
  invalidReason: string | null;
  correct: number; // answers correct, over all matched students
  answers: number;
}

export interface TeacherState {
  id: string;
  subpopulation: number;
  slot: number;
  proposals: Proposal[]; // this step's
}

export type TeacherMessage =
  | { type: 'propose' }
  | Generated
  | Extract<VerifierReply, { type: 'validated' }>
  | Outcomes
  | { type: 'learn' };

/** Teacher reward for one proposal (AZR / PopuLoRA form). */
export function teacherReward(valid: boolean, solveRate: number | null, rewards: TeacherRewards): number {
  if (!valid) return rewards.invalidPenalty;
  if (solveRate === null) return 0; // valid but no student was matched: nothing was learned about it
  if (solveRate === 0 && rewards.zeroAtUnsolved) return 0;
  return 1 - solveRate;
}

export const teacherHandler =
  (config: TeacherConfig): Handler<TeacherState, TeacherMessage> =>
  (state, message, world, self) => {
    const proposal = (requestId: number) => byRequestId(state.proposals, requestId, 'proposal');
    switch (message.type) {
      case 'propose': {
        const proposals: Proposal[] = [];
        const request: GenerateRequest = { type: 'generate', replyTo: self, requests: [] };
        for (const taskType of config.taskTypes) {
          for (let i = 0; i < config.perTeacher; i++) {
            const requestId = world.requestId();
            request.requests.push({ requestId, slot: state.slot, prompt: proposalPrompt(taskType), format: `proposal/${taskType}` });
            proposals.push({ requestId, taskType, text: '', task: null, invalidReason: null, correct: 0, answers: 0 });
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
          validate.requests.push({ requestId: p.requestId, taskType: p.taskType, text: p.text });
        }
        world.send(self, VERIFIER, validate);
        return state;
      }
      case 'validated': {
        const offers: OfferedTask[] = [];
        for (const { requestId, validation } of message.results) {
          const p = proposal(requestId);
          if (validation.valid) {
            p.task = validation.task;
            offers.push({ taskId: p.requestId, teacher: self, task: p.task });
          } else {
            p.invalidReason = validation.reason;
          }
        }
        if (offers.length > 0) world.send(self, MATCHMAKER, { type: 'offers', offers });
        return state;
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
        const samples: TrainingSample[] = state.proposals.map((p) => ({
          requestId: p.requestId,
          role: 'teacher',
          taskType: p.taskType,
          reward: teacherReward(p.task !== null, p.answers > 0 ? p.correct / p.answers : null, config.rewards),
        }));
        world.send(self, ENGINE, { type: 'train', samples });
        const rewardMean = mean(samples.map((s) => s.reward));
        world.send(self, POPULATION_MANAGER, { type: 'reward', member: self, rewardMean });
        world.report('teacher', {
          id: self,
          subpopulation: state.subpopulation,
          proposals: state.proposals.length,
          valid: state.proposals.filter((p) => p.task).length,
          rewardMean,
          tasks: state.proposals.filter((p) => p.task).map((p) => ({ ...taskMetrics(p.task!), type: p.taskType, solveRate: p.answers > 0 ? p.correct / p.answers : null })),
          invalidReasons: state.proposals.filter((p) => p.invalidReason).map((p) => p.invalidReason!.split(':')[0]),
        });
        return { ...state, proposals: [] };
      }
    }
  };
