// `rating`: the students whose rating (TrueSkill: μ) is closest to the teacher's (ties broken by a random draw,
// then by id).
import { NO_OPTIONS, type MatchPolicy } from './policy.js';

export const rating: MatchPolicy = {
  options: NO_OPTIONS,
  reach: ({ subpopulations, students }) => subpopulations * students,
  choose: ({ teacher, students, count, rng }) =>
    students
      .map((s) => ({ s, distance: Math.abs(s.rating - teacher.rating), tie: rng.next() }))
      .sort((a, b) => a.distance - b.distance || a.tie - b.tie || (a.s.id < b.s.id ? -1 : 1))
      .slice(0, count)
      .map(({ s }) => s),
};
