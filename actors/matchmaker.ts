// The matchmaker: collects the step's valid tasks, then at the match phase assigns each (in task id order) to
// students chosen by the scenario's policy (src/matchmaking), drawing from one stream per (step, task) so that
// one task's draws never shift another's. The policy sees one context: the roster (ratings and their
// uncertainty), the rating system's win probability, the pairs' past results (when it asks for them), its options.
// With a held-out evaluation, it tells the evaluator which held-out tasks a teacher proposed (they stop counting).

import { matchPolicy, NO_HISTORY, type MatchContext, type MatchPolicyName, type MemberView, type PairHistory } from '../src/matchmaking/index.js';
import type { RatingSystem } from '../src/rating/rating.js';
import type { Address, Handler } from '../src/runtime/world.js';
import type { Task } from '../src/domains/domain.js';
import { EVALUATOR, groupBy, studentAt, type OfferedTask } from './protocol.js';
import type { StudentMessage } from './student.js';

export interface MatchmakerConfig {
  policy: MatchPolicyName;
  studentsPerTask: number;
  options?: Record<string, unknown>; // the scenario's; the policy's defaults fill in the rest
  ratings: Pick<RatingSystem, 'winProbability'>;
  heldOutIndex?: (task: Task) => number | undefined; // with an evaluation: a proposed task's place in the held-out set
}

export interface MatchmakerState {
  roster: MemberView[]; // every member, as the population manager last sent it
  offers: OfferedTask[];
  history?: Record<string, PairHistory>; // "teacher student" → their record, when the policy reads it
}

/** The population manager's roster: every member, and the pairs' records when the policy reads them. */
export type RosterMessage = { type: 'roster'; members: MemberView[]; history?: Record<string, PairHistory> };

export type MatchmakerMessage = RosterMessage | { type: 'offers'; offers: OfferedTask[] } | { type: 'match' };

export const pairKey = (teacher: string, student: string) => `${teacher} ${student}`;

export const matchmakerHandler = (config: MatchmakerConfig): Handler<MatchmakerState, MatchmakerMessage> => {
  const policy = matchPolicy(config.policy);
  const options = policy.options.parse(config.options ?? {});
  return (state, message, world, self) => {
    switch (message.type) {
      case 'roster':
        return message.history === undefined ? { ...state, roster: message.members } : { ...state, roster: message.members, history: message.history };
      case 'offers':
        return { ...state, offers: [...state.offers, ...message.offers] };
      case 'match': {
        const students = state.roster.filter((m) => m.role === 'student').sort((a, b) => (a.id < b.id ? -1 : 1));
        const offers = [...state.offers].sort((a, b) => a.taskId - b.taskId);
        const pairs: Array<{ teacher: OfferedTask['teacher']; student: Address<StudentMessage>; taskId: number }> = [];
        for (const offer of offers) {
          const teacher = state.roster.find((m) => m.id === offer.teacher);
          if (!teacher) throw new Error(`an offer from ${offer.teacher}, who is not on the roster`);
          const context: MatchContext<Record<string, unknown>> = {
            teacher,
            students,
            count: config.studentsPerTask,
            rng: world.streams.stream(self, world.step, offer.taskId),
            options,
            winProbability: config.ratings.winProbability,
            history: (t, s) => state.history?.[pairKey(t, s)] ?? NO_HISTORY,
          };
          policy.choose(context).forEach((student) => pairs.push({ teacher: offer.teacher, student: studentAt(student.id), taskId: offer.taskId }));
        }
        // One message per student with all its tasks, students in id order. Teachers learn their tasks' results
        // from the students' outcomes.
        const offerOf = new Map(state.offers.map((o) => [o.taskId, o]));
        for (const [student, ofStudent] of [...groupBy(pairs, (p) => p.student)].sort(([a], [b]) => (a < b ? -1 : 1))) {
          world.send(self, student, { type: 'assign', tasks: ofStudent.map((p) => ({ taskId: p.taskId, teacher: p.teacher, task: offerOf.get(p.taskId)!.task })) });
        }
        const proposedHeldOut = config.heldOutIndex ? offers.map((o) => config.heldOutIndex!(o.task)).filter((i): i is number => i !== undefined) : [];
        if (proposedHeldOut.length > 0) world.send(self, EVALUATOR, { type: 'proposed', heldOut: proposedHeldOut });
        world.report('matches', pairs);
        world.report('tasks', offers.map((o) => o.task)); // for the metrics' distinct tasks (not a message: no part of the run hash)
        return { ...state, offers: [] };
      }
    }
  };
};
