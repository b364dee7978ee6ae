// A student: one population member that solves tasks. For each task the matchmaker assigns it, it asks the
// engine for `answersPerStudent` answers, has the verifier check them, tells the teacher (and the population
// manager, for ratings) how many were correct, and at the learn phase hands its samples to the engine with
// reward 1 for a correct answer and 0 otherwise.

import { answerFormat, solvePrompt, type AnswerCheck, type ArithTask } from '../src/domains/arith/tasks.js';
import type { Handler } from '../src/runtime/world.js';
import { ENGINE, POPULATION_MANAGER, VERIFIER, mean, type GenerateRequest, type Generated, type Outcome, type TrainingSample } from './protocol.js';

export interface StudentConfig {
  answersPerTask: number;
}

interface Answer {
  requestId: number;
  taskId: number;
  promptTokens: number[];
  completionTokens: number[];
  correct: boolean | null; // null until checked
}

interface Assignment {
  taskId: number;
  teacher: string;
  task: ArithTask;
}

export interface StudentState {
  id: string;
  subpopulation: number;
  slot: number;
  assignments: Assignment[]; // this step's
  answers: Answer[];
}

export type StudentMessage =
  | ({ type: 'assign' } & Assignment)
  | Generated
  | { type: 'checked'; requestId: number; check: AnswerCheck }
  | { type: 'learn' };

export const studentHandler =
  (config: StudentConfig): Handler<StudentState, StudentMessage> =>
  (state, message, world, self) => {
    const answer = (requestId: number) => {
      const found = state.answers.find((a) => a.requestId === requestId);
      if (!found) throw new Error(`no answer with request id ${requestId}`);
      return found;
    };
    const assignment = (taskId: number) => state.assignments.find((a) => a.taskId === taskId)!;
    switch (message.type) {
      case 'assign': {
        const { type: _, ...assigned } = message;
        const answers = [...state.answers];
        for (let i = 0; i < config.answersPerTask; i++) {
          const request: GenerateRequest = { type: 'generate', requestId: world.requestId(), replyTo: self, slot: state.slot, prompt: solvePrompt(assigned.task), format: answerFormat(assigned.task.type) };
          answers.push({ requestId: request.requestId, taskId: assigned.taskId, promptTokens: [], completionTokens: [], correct: null });
          world.send(self, ENGINE, request);
        }
        return { ...state, assignments: [...state.assignments, assigned], answers };
      }
      case 'generated': {
        const a = answer(message.requestId);
        Object.assign(a, { promptTokens: message.promptTokens, completionTokens: message.completionTokens });
        world.send(self, VERIFIER, { type: 'check', requestId: a.requestId, replyTo: self, task: assignment(a.taskId).task, answer: message.text });
        return state;
      }
      case 'checked': {
        const a = answer(message.requestId);
        a.correct = message.check.correct;
        const ofTask = state.answers.filter((b) => b.taskId === a.taskId);
        if (ofTask.every((b) => b.correct !== null)) {
          const { teacher } = assignment(a.taskId);
          const outcome: Outcome = { type: 'outcome', taskId: a.taskId, teacher, student: self, correct: ofTask.filter((b) => b.correct).length, total: ofTask.length };
          world.send(self, teacher, outcome);
          world.send(self, POPULATION_MANAGER, outcome);
        }
        return state;
      }
      case 'learn': {
        const samples: TrainingSample[] = state.answers.map((a) => ({
          member: self,
          role: 'student',
          taskType: assignment(a.taskId).task.type,
          slot: state.slot,
          promptTokens: a.promptTokens,
          completionTokens: a.completionTokens,
          reward: a.correct ? 1 : 0,
        }));
        if (samples.length > 0) world.send(self, ENGINE, { type: 'train', samples });
        const rewardMean = mean(samples.map((s) => s.reward));
        if (samples.length > 0) world.send(self, POPULATION_MANAGER, { type: 'reward', member: self, rewardMean });
        world.report('student', { id: self, subpopulation: state.subpopulation, tasks: state.assignments.length, answers: samples.length, correct: samples.filter((s) => s.reward === 1).length });
        return { ...state, assignments: [], answers: [] };
      }
    }
  };
