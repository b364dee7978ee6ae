// `self`: the single-agent baseline. Each teacher has a student twin that shares its adapter (the runtime gives it
// one under this policy), and its tasks go to that twin alone: one set of weights proposes and solves.
import { NO_OPTIONS, type MatchPolicy } from './policy.js';

export const self: MatchPolicy = {
  options: NO_OPTIONS,
  reach: () => 1,
  studentsAreTeacherTwins: true,
  requirement: ({ teachers, students }) =>
    students === teachers ? null : { field: 'population.students', message: `under "self" every teacher solves its own tasks through a student twin that shares its adapter, so "students" must equal "teachers" (${teachers})` },
  choose: ({ teacher, students }) => students.filter((s) => s.adapterSlot === teacher.adapterSlot).slice(0, 1),
};
