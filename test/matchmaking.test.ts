// Matchmaking policies: who may be chosen, how many, how often, and the same match from the same stream.
import { describe, expect, it } from 'vitest';
import { MATCH_POLICIES, type MemberView } from '../src/matchmaking/index.js';
import { expectedSolveRate } from '../src/matchmaking/policy.js';
import { Streams } from '../src/runtime/streams.js';

const student = (i: number, subpopulation: number, rating: number): MemberView => ({ id: `student-${i}`, role: 'student', subpopulation, adapterSlot: 10 + i, rating });
const students = [student(0, 0, 1000), student(1, 0, 1200), student(2, 1, 900), student(3, 1, 1010), student(4, 2, 1500), student(5, 2, 700)];
const teacher: MemberView = { id: 'teacher-0', role: 'teacher', subpopulation: 1, adapterSlot: 12, rating: 1000 };
const streams = new Streams(3);

describe('matchmaking policies', () => {
  it('choose distinct students from the allowed sub-populations, at most `count`', () => {
    for (let draw = 0; draw < 50; draw++) {
      const request = (count: number) => ({ teacher, students, count, rng: streams.stream('match', draw) });
      const crossed = MATCH_POLICIES.cross(request(3));
      expect(crossed).toHaveLength(3);
      expect(crossed.every((s) => s.subpopulation !== 1)).toBe(true);
      expect(new Set(crossed.map((s) => s.id)).size).toBe(3);
      expect(MATCH_POLICIES.within(request(5)).map((s) => s.id).sort()).toEqual(['student-2', 'student-3']);
      expect(new Set(MATCH_POLICIES.random(request(6)).map((s) => s.id)).size).toBe(6);
      expect(new Set(MATCH_POLICIES.pfsp(request(4)).map((s) => s.id)).size).toBe(4);
    }
  });

  it('self gives the teacher its twin, rating the closest ratings', () => {
    const rng = streams.stream('x');
    expect(MATCH_POLICIES.self({ teacher, students, count: 3, rng }).map((s) => s.id)).toEqual(['student-2']);
    expect(MATCH_POLICIES.rating({ teacher, students, count: 3, rng }).map((s) => s.id)).toEqual(['student-0', 'student-3', 'student-2']);
  });

  it('pfsp draws a single student with probability proportional to p(1 - p)', () => {
    const weights = students.map((s) => expectedSolveRate(s, teacher) * (1 - expectedSolveRate(s, teacher)));
    const total = weights.reduce((a, b) => a + b, 0);
    const counts = new Map<string, number>();
    const n = 6000;
    for (let i = 0; i < n; i++) {
      const [chosen] = MATCH_POLICIES.pfsp({ teacher, students, count: 1, rng: streams.stream('pfsp', i) });
      counts.set(chosen!.id, (counts.get(chosen!.id) ?? 0) + 1);
    }
    students.forEach((s, i) => expect(Math.abs((counts.get(s.id) ?? 0) / n - weights[i]! / total)).toBeLessThan(0.02));
  });

  it('give the same match from the same stream', () => {
    for (const policy of Object.values(MATCH_POLICIES)) {
      const run = () => policy({ teacher, students, count: 2, rng: new Streams(9).stream('same') }).map((s) => s.id);
      expect(run()).toEqual(run());
    }
  });
});
