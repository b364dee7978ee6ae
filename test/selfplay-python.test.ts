// The code domain wired into the actor runtime (`domain: python`): teachers' prompts show reference tasks, their
// proposals go through the sandboxed verifier, valid ones are matched, students' answers are checked, and the run
// is a function of its scenario whatever the number of verifier workers.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readEventLog } from '../src/runtime/event-log.js';
import type { StepMetrics } from '../src/sim/metrics.js';
import { runScenario } from '../src/sim/run.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { editDeliveries, resultsOf } from './edit-deliveries.js';

const scenario = parseScenario(
  `
name: code-test
seed: 5
steps: 2
backend: cpu
model: { preset: tiny, seed: 1 }
domain: python
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 2 } }
tasks: { perTeacher: 1, references: 2 }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 1, maxTokens: 56 }
`,
  'code-test.yaml',
);

const fence = (tag: string, body: string) => `\`\`\`${tag}\n${body}\n\`\`\``;

/**
 * A random tiny model writes no Python; this engine wrapper replaces the text of every proposal (a reply whose
 * prompt asked for a new task) with a small valid one, keyed by request id, so the whole path runs.
 */
const scriptedProposals = editDeliveries('engine', (deliveries) => {
  for (const d of deliveries) {
    if (d.message.type !== 'generated' || !d.to.startsWith('teacher')) continue;
    for (const result of resultsOf<{ requestId: number; text: string }>(d)) {
      const k = result.requestId % 5;
      result.text = [fence('python', `def f(x):\n    return [x * ${k}, x % ${k + 2}]`), ...[1, 2, 3, 4].map((x) => fence('input', String(x + k)))].join('\n');
    }
  }
});

const fresh = () => mkdtempSync(join(tmpdir(), 'populora-code-'));

describe('a self-play run in the code domain', () => {
  it('validates proposals in the sandbox, matches and checks them, and is the same with 1 or 2 verifier workers', async () => {
    const first = await runScenario(scenario, { outDir: fresh(), wrapService: scriptedProposals });
    const second = await runScenario(scenario, { outDir: fresh(), wrapService: scriptedProposals, verifierWorkers: 2 });
    expect(second.hash).toBe(first.hash);

    const { events } = readEventLog(join(first.outDir, 'events.msgpack'));
    const generate = events.filter((e) => e.type === 'generate' && e.actor.startsWith('teacher'));
    const prompts = generate.flatMap((e) => (e.payload as { message: { requests: Array<{ prompt: string; format: string }> } }).message.requests);
    expect(prompts.length).toBe(2 * 3 * 2); // 2 teachers × 3 task types × 2 steps
    for (const p of prompts) expect(p.prompt.match(/## Reference \d/g)).toHaveLength(2);
    expect(prompts.some((p) => p.prompt.includes('def f(numbers, k):'))).toBe(true); // a seed task shown
    expect(events.some((e) => e.type === 'assign')).toBe(true);
    expect(events.some((e) => e.type === 'checked')).toBe(true);

    const metrics = readFileSync(join(first.outDir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StepMetrics);
    expect(metrics[0]!.validity).toBe(1);
    expect(metrics[0]!.distinctPrograms).toBeGreaterThan(0);
    expect(metrics[0]!.verifierFaults).toBe(0);
    expect(metrics[1]!.coverage).toBeGreaterThan(0);
  });

  it('records what a random model writes as format errors, and goes on', async () => {
    const result = await runScenario({ ...scenario, steps: 1 }, { outDir: fresh() });
    const [metrics] = readFileSync(join(result.outDir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StepMetrics);
    expect(metrics!.validity).toBe(0);
    expect(metrics!.invalidReasons).toEqual({ format: 6 });
  });

  it('refuses a task type of the other domain, naming the field', () => {
    expect(() => parseScenario('name: x\nseed: 1\nsteps: 1\nmodel: { preset: tiny }\ndomain: python\ntasks: { types: [deduce] }\n', 'x.yaml')).toThrow(/^x\.yaml: field "tasks\.types": "deduce" is not a task type of the python domain \(use code_o, code_i, code_f\)$/);
  });
});
