// The actor runtime on the WebGPU backend: generation, the batched RL update and evolution on the device give a
// run that repeats bit for bit (DESIGN.md: bit-identical replay on the same backend and device).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { replayRun } from '../src/sim/replay.js';
import { runScenario } from '../src/sim/run.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { gpu } from './webgpu.js';

const scenario = parseScenario(
  `name: gpu
seed: 5
steps: 2
backend: webgpu
model: { preset: qwen2-tiny, seed: 2 }
population: { subpopulations: 2, teachers: 1, students: 2, lora: { rank: 4, modules: [q_proj, v_proj, down_proj] } }
tasks: { perTeacher: 1, types: [deduce, induce] }
matchmaking: { policy: pfsp, studentsPerTask: 2 }
sampling: { answersPerStudent: 2, maxTokens: 16 }
evolution: { every: 1, fraction: 0.5, crossoverProbability: 1 }
`,
  'gpu.yaml',
);

describe.runIf(gpu)('a self-play run on WebGPU', () => {
  it('replays bit for bit, evolution and training included', async () => {
    const outDir = mkdtempSync(join(tmpdir(), 'populora-gpu-run-'));
    const first = await runScenario(scenario, { outDir, backend: gpu });
    expect(first.last?.evolution.length).toBeGreaterThan(0);
    expect(await replayRun(outDir, { backend: gpu, verifierWorkers: 2 })).toMatchObject({ identical: true, hash: first.hash });
  });
});
