// The evaluator: scores every member on a fixed set of held-out tasks (src/evaluation/held-out.ts), answered
// greedily (temperature 0) and checked by the verifier, so that "beats the baseline" is measured the way the
// paper measures it: on tasks the population never proposed. A held-out task a teacher proposed during the run
// (the matchmaker names it) stops counting in that score; how many were dropped is reported, and so is the score
// on the whole set, which every run of a comparison shares.
// The population manager asks at evaluation steps (before evolution, so the scored members are the ones that
// played the step) and waits for `evaluated`. Members that share an adapter (self-play twins) share a score.

import type { Domain, PromptSet, Task } from '../src/domains/domain.js';
import type { Address, Handler, World } from '../src/runtime/world.js';
import { ENGINE, VERIFIER, type GenerateRequest, type Generated, type Role } from './protocol.js';
import type { VerifierMessage, VerifierReply } from './verifier.js';

export interface EvaluatorConfig {
  domain: Domain;
  prompts: PromptSet | null; // the run's resolved prompt templates (the students' own)
  tasks: readonly Task[]; // the held-out set, in order
}

interface PendingAnswer {
  requestId: number;
  slot: number;
  task: number; // index in the held-out set
  correct: boolean | null;
  fault: boolean;
}

export interface EvaluatorState {
  excluded: number[]; // held-out tasks proposed during the run, ascending
  members: Array<{ id: string; role: Role; slot: number }>; // of the evaluation in progress
  replyTo: Address<Evaluated> | null;
  answers: PendingAnswer[];
}

export interface EvaluateRequest {
  type: 'evaluate';
  replyTo: Address<Evaluated>;
  members: Array<{ id: string; role: Role; slot: number }>;
}

/** The evaluator's answer: the scores are in this step's report; the asker may go on (to evolution). */
export interface Evaluated {
  type: 'evaluated';
}

export type EvaluatorMessage = EvaluateRequest | { type: 'proposed'; heldOut: number[] } | Generated | Extract<VerifierReply, { type: 'checked' }>;

/** What the metrics record of one evaluation. */
export interface EvaluationReport {
  tasks: number; // scored: the held-out set less the excluded
  excluded: number;
  faults: number; // answers the verifier could not judge (not counted)
  members: Record<string, { role: Role; solveRate: number | null; solveRateAllTasks: number | null }>; // on the tasks never proposed; on the whole set
}

export const initialEvaluatorState = (): EvaluatorState => ({ excluded: [], members: [], replyTo: null, answers: [] });

export const evaluatorHandler =
  (config: EvaluatorConfig): Handler<EvaluatorState, EvaluatorMessage> =>
  (state, message, world, self) => {
    switch (message.type) {
      case 'proposed':
        return { ...state, excluded: [...new Set([...state.excluded, ...message.heldOut])].sort((a, b) => a - b) };
      case 'evaluate': {
        const slots = [...new Set(message.members.map((m) => m.slot))].sort((a, b) => a - b);
        const answers: PendingAnswer[] = [];
        const request: GenerateRequest = { type: 'generate', replyTo: self, requests: [] };
        for (const slot of slots) {
          config.tasks.forEach((task, i) => {
            const requestId = world.requestId();
            request.requests.push({ requestId, slot, prompt: config.domain.solvePrompt(task, config.prompts), format: `answer/${task.type}`, greedy: true });
            answers.push({ requestId, slot, task: i, correct: null, fault: false });
          });
        }
        world.send(self, ENGINE, request);
        return { ...state, members: message.members, replyTo: message.replyTo, answers };
      }
      case 'generated': {
        const byId = new Map(state.answers.map((a) => [a.requestId, a]));
        const byTask = new Map<number, Array<{ requestId: number; answer: string }>>();
        for (const result of message.results) {
          const task = byId.get(result.requestId)!.task;
          byTask.set(task, [...(byTask.get(task) ?? []), { requestId: result.requestId, answer: result.text }]);
        }
        const check: VerifierMessage = { type: 'check', replyTo: self, requests: [...byTask].map(([task, answers]) => ({ task: config.tasks[task]!, answers })) };
        world.send(self, VERIFIER, check);
        return state;
      }
      case 'checked': {
        const answers = state.answers.map((a) => ({ ...a }));
        const byId = new Map(answers.map((a) => [a.requestId, a]));
        for (const result of message.results) {
          const answer = byId.get(result.requestId)!;
          if (result.fault !== undefined) answer.fault = true;
          else answer.correct = result.check.correct;
        }
        if (answers.some((a) => a.correct === null && !a.fault)) return { ...state, answers };
        return finish({ ...state, answers }, config, world, self);
      }
    }
  };

/** Reports the scores of a finished evaluation and tells the asker. */
function finish(state: EvaluatorState, config: EvaluatorConfig, world: World, self: Address<EvaluatorMessage>): EvaluatorState {
  const excluded = new Set(state.excluded);
  const score = (slot: number, allTasks: boolean) => {
    const judged = state.answers.filter((a) => a.slot === slot && !a.fault && (allTasks || !excluded.has(a.task)));
    return judged.length === 0 ? null : judged.filter((a) => a.correct).length / judged.length;
  };
  const report: EvaluationReport = {
    tasks: config.tasks.length - state.excluded.length,
    excluded: state.excluded.length,
    faults: state.answers.filter((a) => a.fault).length,
    members: Object.fromEntries(state.members.map((m) => [m.id, { role: m.role, solveRate: score(m.slot, false), solveRateAllTasks: score(m.slot, true) }])),
  };
  world.report('evaluation', report);
  world.send(self, state.replyTo!, { type: 'evaluated' });
  return { ...state, members: [], replyTo: null, answers: [] };
}
