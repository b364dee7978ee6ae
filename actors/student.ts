// A student: one population member that solves tasks. For each task the matchmaker assigns it, it asks the
// engine for `answersPerStudent` answers, has the verifier check them, tells the teacher (and the population
// manager, for ratings) how many were correct, and at the learn phase hands its samples to the engine with
// reward 1 for a correct answer and 0 otherwise (AZR's; a scenario's reward hook may shape it: src/rewards/rules.ts).

import type { Domain, PromptSet, Task } from '../src/domains/domain.js';
import type { Address, Handler } from '../src/runtime/world.js';
import { ENGINE, POPULATION_MANAGER, VERIFIER, byRequestId, groupBy, mean, type GenerateRequest, type Generated, type Learn, type Outcome, type Outcomes, type TrainingSample } from './protocol.js';
import type { VerifierMessage, VerifierReply } from './verifier.js';
import type { RewardRules } from '../src/rewards/rules.js';

export interface StudentConfig {
  domain: Domain;
  prompts: PromptSet | null; // the domain's templates as the scenario resolved them (null: it has none)
  answersPerTask: number;
  rewards: RewardRules; // AZR's, or a scenario's reward hook (src/rewards/rules.ts)
}

interface Answer {
  requestId: number;
  taskId: number;
  correct: boolean | null; // null until checked
  fault: boolean; // the verifier could not judge it: dropped from outcomes and training
}

interface Assignment {
  taskId: number;
  teacher: Address<Outcomes>;
  task: Task;
}

export interface StudentState {
  id: string;
  subpopulation: number;
  slot: number;
  assignments: Assignment[]; // this step's
  answers: Answer[];
}

export type StudentMessage =
  | { type: 'assign'; tasks: Assignment[] }
  | Generated
  | Extract<VerifierReply, { type: 'checked' }>
  | Learn;

export const studentHandler =
  (config: StudentConfig): Handler<StudentState, StudentMessage> =>
  (state, message, world, self) => {
    const answer = (requestId: number) => byRequestId(state.answers, requestId, 'answer');
    const assignment = (taskId: number) => state.assignments.find((a) => a.taskId === taskId)!;
    switch (message.type) {
      case 'assign': {
        const answers = [...state.answers];
        const request: GenerateRequest = { type: 'generate', replyTo: self, requests: [] };
        for (const assigned of message.tasks) {
          for (let i = 0; i < config.answersPerTask; i++) {
            const requestId = world.requestId();
            request.requests.push({ requestId, slot: state.slot, prompt: config.domain.solvePrompt(assigned.task, config.prompts), format: `answer/${assigned.task.type}` });
            answers.push({ requestId, taskId: assigned.taskId, correct: null, fault: false });
          }
        }
        world.send(self, ENGINE, request);
        return { ...state, assignments: [...state.assignments, ...message.tasks], answers };
      }
      case 'generated': {
        const byTask = groupBy(message.results, (result) => String(answer(result.requestId).taskId));
        const requests = [...byTask.values()].map((results) => ({ task: assignment(answer(results[0]!.requestId).taskId).task, answers: results.map((r) => ({ requestId: r.requestId, answer: r.text })) }));
        const check: VerifierMessage = { type: 'check', replyTo: self, requests };
        world.send(self, VERIFIER, check);
        return state;
      }
      case 'checked': {
        const completed = new Set<number>();
        for (const result of message.results) {
          const a = answer(result.requestId);
          if (result.fault !== undefined) a.fault = true;
          else a.correct = result.check.correct;
          if (state.answers.every((b) => b.taskId !== a.taskId || b.correct !== null || b.fault)) completed.add(a.taskId);
        }
        const outcomes: Outcome[] = [...completed].sort((x, y) => x - y).flatMap((taskId) => {
          const ofTask = state.answers.filter((b) => b.taskId === taskId && !b.fault);
          return ofTask.length === 0 ? [] : [{ taskId, teacher: assignment(taskId).teacher, student: self, correct: ofTask.filter((b) => b.correct).length, total: ofTask.length }];
        });
        for (const [teacher, ofTeacher] of groupBy(outcomes, (o) => o.teacher)) world.send(self, teacher, { type: 'outcomes', outcomes: ofTeacher });
        if (outcomes.length > 0) world.send(self, POPULATION_MANAGER, { type: 'outcomes', outcomes });
        return state;
      }
      case 'learn': {
        const judged = state.answers.filter((a) => !a.fault);
        const rewards = config.rewards.student(judged.map((a) => ({ taskType: assignment(a.taskId).task.type, task: assignment(a.taskId).task, correct: a.correct === true })), world.step, self);
        const samples: TrainingSample[] = judged.map((a, i) => ({ requestId: a.requestId, role: 'student', taskType: assignment(a.taskId).task.type, reward: rewards[i]! }));
        if (samples.length > 0) world.send(self, ENGINE, { type: 'train', samples });
        const rewardMean = mean(samples.map((s) => s.reward));
        if (samples.length > 0) world.send(self, POPULATION_MANAGER, { type: 'reward', member: self, rewardMean });
        const byTeacher: Record<string, { correct: number; answers: number }> = {};
        for (const a of state.answers.filter((b) => !b.fault)) {
          const tally = (byTeacher[assignment(a.taskId).teacher] ??= { correct: 0, answers: 0 });
          tally.answers++;
          if (a.correct) tally.correct++;
        }
        world.report('student', { id: self, subpopulation: state.subpopulation, tasks: state.assignments.length, answers: samples.length, correct: judged.filter((a) => a.correct).length, faults: state.answers.length - samples.length, byTeacher });
        return { ...state, assignments: [], answers: [] };
      }
    }
  };
