// The actor runtime's cost: a 16-member population (2 sub-populations of 4 teachers and 4 students) on the toy
// model. Steps per minute, and where a step's wall time goes: engine (generation, the RL update, evolution: the
// batched device work), verifier (the worker pool), and the rest: actor messaging, scheduling, the event log.
// Step 0 (pipeline compilation, worker start-up) and the last step (which writes the final checkpoint) are run
// but not measured. Prints a table; writes JSON.
//
//   node dist/bench/selfplay.js [--backend webgpu|cpu] [--steps 3] [--workers 2] [--out bench/results/selfplay.json]

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { benchArgs } from './args.js';
import { openBackend, type BackendChoice } from '../src/backend/select.js';
import { runScenario } from '../src/sim/run.js';
import type { Service } from '../src/runtime/world.js';
import { parseScenario } from '../src/scenario/scenario.js';

const args = benchArgs(import.meta.url, { options: { backend: { type: 'string', default: 'webgpu' }, steps: { type: 'string', default: '3' }, workers: { type: 'string', default: '2' }, out: { type: 'string', default: 'bench/results/selfplay.json' } } });
const steps = Number(args.steps);
const scenario = parseScenario(
  `name: bench-selfplay
seed: 1
steps: ${steps + 2}
model: { preset: tiny, seed: 0 }
population: { subpopulations: 2, teachers: 4, students: 4, lora: { rank: 8, modules: [q_proj, v_proj, up_proj, down_proj] } }
tasks: { perTeacher: 1 }
matchmaking: { policy: cross, studentsPerTask: 2 }
sampling: { answersPerStudent: 4, maxTokens: 24 }
evolution: { every: 2, fraction: 0.25 }
`,
  'bench-selfplay',
);

const flushMs = new Map<string, number>();
const timed = (service: Service): Service => ({
  name: service.name,
  hasPending: () => service.hasPending(),
  flush: async (world) => {
    const start = performance.now();
    try {
      return await service.flush(world);
    } finally {
      flushMs.set(service.name, (flushMs.get(service.name) ?? 0) + performance.now() - start);
    }
  },
});

const backend = await openBackend(args.backend as BackendChoice);
const outDir = mkdtempSync(join(tmpdir(), 'populora-bench-'));
const stepMs: number[] = [];
let stepStart = performance.now();
let measuredFlushMs = new Map<string, number>();
try {
  const result = await runScenario(scenario, {
    outDir,
    backend,
    verifierWorkers: Number(args.workers),
    wrapService: timed,
    onStep: (metrics) => {
      if (metrics.step === 0) flushMs.clear();
      else if (metrics.step <= steps) stepMs.push(performance.now() - stepStart);
      if (metrics.step === steps) measuredFlushMs = new Map(flushMs);
      stepStart = performance.now();
    },
  });
  const total = stepMs.reduce((a, b) => a + b, 0);
  const engine = measuredFlushMs.get('engine') ?? 0;
  const verifier = measuredFlushMs.get('verifier') ?? 0;
  const messages = Math.round((result.events * steps) / (steps + 2)); // events in the measured steps, approximately
  const row = {
    backend: backend.deviceDescription,
    members: 16,
    steps,
    stepsPerMinute: (60_000 * steps) / total,
    msPerStep: total / steps,
    engineShare: engine / total,
    verifierShare: verifier / total,
    messagingShare: (total - engine - verifier) / total,
    messagesPerStep: messages / steps,
    messagesPerSecond: messages / (total / 1000),
  };
  console.log(`| backend | steps/min | ms/step | engine | verifier | messaging & scheduling | messages/step | messages/s |`);
  console.log(`|---|---|---|---|---|---|---|---|`);
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  console.log(`| ${row.backend} | ${row.stepsPerMinute.toFixed(2)} | ${row.msPerStep.toFixed(0)} | ${pct(row.engineShare)} | ${pct(row.verifierShare)} | ${pct(row.messagingShare)} | ${row.messagesPerStep.toFixed(0)} | ${row.messagesPerSecond.toFixed(0)} |`);
  mkdirSync(dirname(args.out!), { recursive: true });
  writeFileSync(args.out!, `${JSON.stringify(row, null, 2)}\n`);
} finally {
  rmSync(outDir, { recursive: true, force: true });
  backend.destroy();
}
