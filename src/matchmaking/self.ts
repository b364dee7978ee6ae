// `self`: the single-agent baseline. The teacher's task goes to the student that shares its adapter (the runtime
// gives each teacher such a twin under this policy), so one set of weights proposes and solves.
import type { MatchPolicy } from './policy.js';

export const self: MatchPolicy = ({ teacher, students }) => students.filter((s) => s.adapterSlot === teacher.adapterSlot).slice(0, 1);
