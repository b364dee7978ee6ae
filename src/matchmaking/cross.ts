// `cross`: students of the other sub-populations, drawn uniformly (PopuLoRA's cross-evaluation: no agent grades
// its own lineage's tasks).
import { NO_OPTIONS, uniformPick, type MatchPolicy } from './policy.js';

export const cross: MatchPolicy = {
  options: NO_OPTIONS,
  reach: ({ subpopulations, students }) => (subpopulations - 1) * students,
  requirement: ({ subpopulations }) =>
    subpopulations >= 2 ? null : { field: 'matchmaking.policy', message: `"cross" pairs teachers with students of other sub-populations, so "population.subpopulations" must be at least 2 (got ${subpopulations})` },
  choose: ({ teacher, students, count, rng }) => uniformPick(students.filter((s) => s.subpopulation !== teacher.subpopulation), count, rng),
};
