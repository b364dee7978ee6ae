// `cross`: students of the other sub-populations, drawn uniformly (PopuLoRA's cross-evaluation: no agent grades
// its own lineage's tasks).
import { uniformPick, type MatchPolicy } from './policy.js';

export const cross: MatchPolicy = ({ teacher, students, count, rng }) => uniformPick(students.filter((s) => s.subpopulation !== teacher.subpopulation), count, rng);
