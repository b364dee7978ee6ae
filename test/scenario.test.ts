// Scenario files: defaults filled in, and every mistake named by file and field.
import { describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { threadCount } from '../src/runtime/worker-threads.js';
import { loadScenario, parseScenario } from '../src/scenario/scenario.js';

const minimal = 'name: t1\nseed: 3\nsteps: 5\nmodel: { preset: tiny }\npopulation: { subpopulations: 2 }\n';

describe('scenarios', () => {
  it('fill every default of a minimal file', () => {
    const s = parseScenario(minimal, 'min.yaml');
    expect(s.model).toEqual({ preset: 'tiny', seed: 0 });
    expect(s.matchmaking).toEqual({ policy: 'cross', studentsPerTask: 2 });
    expect(s.population.lora).toEqual({ rank: 8, modules: ['q_proj', 'v_proj'], init: 'peft' });
    expect(s.rl.entropyCoef).toBe(0.001);
    expect(s.evolution.every).toBe(0);
    expect(s.evolution.threads).toBe('auto');
    // auto: a core for each thread but the main one, at least one, at most 8; a number stays as it is.
    expect(threadCount('auto')).toBe(Math.max(1, Math.min(8, availableParallelism() - 1)));
    expect(threadCount(3)).toBe(3);
    expect(parseScenario(`${minimal}evolution: { threads: 2 }\n`, 'min.yaml').evolution.threads).toBe(2);
  });

  it('name the file and field of each mistake', () => {
    const cases: [string, RegExp][] = [
      [`${minimal}stepz: 3\n`, /^bad\.yaml: field "\(top level\)": unknown field\(s\) "stepz"$/],
      [minimal.replace('steps: 5', 'steps: -1'), /field "steps": expected an integer >= 1/],
      [`${minimal}matchmaking: { policy: elo }\n`, /field "matchmaking.policy": expected one of self, within, cross, random, rating, pfsp/],
      [`${minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 2, lora: { modules: [q_proj, lm_head] } }')}`, /field "population.lora.modules\[1\]"/],
      [minimal.replace('{ subpopulations: 2 }', '{ subpopulations: 1 }'), /"cross" pairs teachers with students of other sub-populations/],
      ['name: [unclosed\n', /^bad\.yaml: not valid YAML/],
      [`${minimal}evolution: { threads: all }\n`, /field "evolution.threads": expected a whole number >= 1, or auto/],
      [`${minimal}evolution: { threads: 0 }\n`, /field "evolution.threads": expected a whole number >= 1, or auto/],
    ];
    for (const [text, message] of cases) expect(() => parseScenario(text, 'bad.yaml')).toThrow(message);
  });
});

describe('shipped scenarios', () => {
  it('all validate', () => {
    const files = ['scenarios', 'scenarios/policies'].flatMap((dir) => readdirSync(dir).filter((f) => f.endsWith('.yaml')).map((f) => `${dir}/${f}`));
    expect(files.length).toBeGreaterThanOrEqual(9);
    for (const file of files) expect(() => loadScenario(file), file).not.toThrow();
  });
});
