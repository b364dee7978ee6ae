// The matchmaker: collects the step's valid tasks, then at the match phase assigns each (in task id order) to
// students chosen by the scenario's policy (src/matchmaking), drawing from one stream per (step, task) so that
// one task's draws never shift another's.

import { MATCH_POLICIES, type MemberView } from '../src/matchmaking/index.js';
import type { MATCHMAKING_POLICIES } from '../src/scenario/scenario.js';
import type { Handler } from '../src/runtime/world.js';
import { groupBy, type OfferedTask } from './protocol.js';

export interface MatchmakerConfig {
  policy: (typeof MATCHMAKING_POLICIES)[number];
  studentsPerTask: number;
}

export interface MatchmakerState {
  roster: MemberView[]; // every member, as the population manager last sent it
  offers: OfferedTask[];
}

export type MatchmakerMessage = { type: 'roster'; members: MemberView[] } | { type: 'offers'; offers: OfferedTask[] } | { type: 'match' };

export const matchmakerHandler =
  (config: MatchmakerConfig): Handler<MatchmakerState, MatchmakerMessage> =>
  (state, message, world, self) => {
    switch (message.type) {
      case 'roster':
        return { ...state, roster: message.members };
      case 'offers':
        return { ...state, offers: [...state.offers, ...message.offers] };
      case 'match': {
        const students = state.roster.filter((m) => m.role === 'student').sort((a, b) => (a.id < b.id ? -1 : 1));
        const pairs: Array<{ teacher: string; student: string; taskId: number }> = [];
        for (const offer of [...state.offers].sort((a, b) => a.taskId - b.taskId)) {
          const teacher = state.roster.find((m) => m.id === offer.teacher);
          if (!teacher) throw new Error(`an offer from ${offer.teacher}, who is not on the roster`);
          const rng = world.streams.stream(self, world.step, offer.taskId);
          const chosen = MATCH_POLICIES[config.policy]({ teacher, students, count: config.studentsPerTask, rng });
          chosen.forEach((student) => pairs.push({ teacher: offer.teacher, student: student.id, taskId: offer.taskId }));
        }
        // One message per student with all its tasks, students in id order. Teachers learn their tasks' results
        // from the students' outcomes.
        const offerOf = new Map(state.offers.map((o) => [o.taskId, o]));
        for (const [student, ofStudent] of [...groupBy(pairs, (p) => p.student)].sort(([a], [b]) => (a < b ? -1 : 1))) {
          world.send(self, student, { type: 'assign', tasks: ofStudent.map((p) => ({ taskId: p.taskId, teacher: p.teacher, task: offerOf.get(p.taskId)!.task })) });
        }
        world.report('matches', pairs);
        return { ...state, offers: [] };
      }
    }
  };
