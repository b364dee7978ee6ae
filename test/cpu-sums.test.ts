// A run whose CPU backend sums the base model's dense products in f32 (`backend: {name: cpu, sums: f32}`;
// src/backend/backend.ts's DenseSums; the kernels against their reference are test/cpu-dense-f32.test.ts's): the
// setting as a scenario takes it and refuses it, part of what a resume and a replay compare where the threads are
// not, the backend's products, forward and backward, summed in f32 (a hand case f64 sums get otherwise), and a
// run's bits: not f64's, the same at 1 and 3 threads and under any micro-batch budget, a replay agreeing, a resume
// with other sums refused.
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import { f32Of } from '../src/backend/cpu-tensor.js';
import { parseScenario, withoutMachineSettings } from '../src/scenario/scenario.js';
import { replayRun } from '../src/sim/replay.js';
import { runScenario } from '../src/sim/run.js';

const text = (backend: string, batchTokens = 'unbounded') => `
name: sums
seed: 5
steps: 2
backend: ${backend}
model: { preset: tiny, seed: 1 }
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }
tasks: { perTeacher: 2, types: [deduce, abduce] }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 2, maxTokens: 12 }
checkpointEvery: 1
batchTokens: ${batchTokens}
`;
const F32 = '{ name: cpu, sums: f32 }';
const fresh = () => join(mkdtempSync(join(tmpdir(), 'populora-sums-')), 'run');
/** A run folder's checkpointed tensors (the adapters and their optimizer state), by path. */
const checkpointFiles = (outDir: string) => (readdirSync(outDir, { recursive: true }) as string[]).filter((file) => file.endsWith('.safetensors')).sort();

describe('the CPU backend\'s sums as a scenario names them', () => {
  it('are taken with name: cpu, refused elsewhere or misspelt by their field, and kept in what a resume compares (f64 as no setting)', () => {
    expect(parseScenario(text(F32), 's.yaml').backend).toEqual({ name: 'cpu', sums: 'f32' });
    expect(() => parseScenario(text('{ name: auto, sums: f32 }'), 'auto.yaml')).toThrow(/auto\.yaml: field "backend": sums are the cpu backend's arithmetic.*give name: cpu/);
    expect(() => parseScenario(text('{ name: webgpu, sums: f32 }'), 'gpu.yaml')).toThrow(/gpu\.yaml: field "backend": sums are the cpu backend's/);
    expect(() => parseScenario(text('{ name: cpu, sums: f16 }'), 'f16.yaml')).toThrow(/f16\.yaml: field "backend/);
    expect(withoutMachineSettings(parseScenario(text('{ name: cpu, threads: 2, sums: f32 }'), 's.yaml')).backend).toEqual({ name: 'cpu', sums: 'f32' });
    expect(withoutMachineSettings(parseScenario(text('{ name: cpu, threads: 2, sums: f64 }'), 's.yaml')).backend).toBe('cpu');
  });
});

describe('a CPU backend with f32 sums', () => {
  it('rounds every product and partial sum to f32 where f64 sums keep them: 1 + 2^-24 + 2^-24, forward and backward, SIMD kernels and plain loops alike', () => {
    // x [1, 3] against w [1, 3] of ones (forward), dy [1, 3] against w [3, 1] of ones (backward): in f32, 1 + 2^-24
    // rounds to 1 (to even) twice; in f64 the sum is 1 + 2^-23, an f32 value
    const terms = new Float32Array([1, 2 ** -24, 2 ** -24]);
    const product = (backend: CpuBackend) => f32Of(backend.matmul(backend.upload(terms, [1, 3]), backend.upload(new Float32Array([1, 1, 1]), [1, 3])))[0];
    const backwardProduct = (backend: CpuBackend) => f32Of(backend.matmulBackward(backend.upload(terms, [1, 3]), backend.upload(new Float32Array([1, 1, 1]), [3, 1])))[0];
    for (const simd of [true, false]) {
      for (const [what, of] of [['matmul', product], ['matmulBackward', backwardProduct]] as const) {
        expect(of(new CpuBackend({ simd, sums: 'f32' })), `${what}, simd ${simd}`).toBe(1);
        expect(of(new CpuBackend({ simd })), `${what}, simd ${simd}`).toBe(1 + 2 ** -23);
      }
    }
    expect(new CpuBackend({ sums: 'f32' }).deviceDescription).toMatch(/dense products summed in f32/);
  });
});

describe('a run with f32 sums', () => {
  it('has bits of its own, the same at 1 and 3 threads and budgets of one sequence or unbounded; a replay agrees', async () => {
    const runWith = async (scenarioText: string, threads: number, outDir = fresh()) => {
      const backend = new CpuBackend({ threads, minWorkPerShare: 1, sums: 'f32' });
      try {
        return { ...(await runScenario(parseScenario(scenarioText, 's.yaml'), { outDir, backend })), outDir };
      } finally {
        backend.destroy();
      }
    };
    const one = await runWith(text(F32), 1);
    const three = await runWith(text(F32, '1'), 3);
    expect(three.hash).toBe(one.hash);
    // the setting reaches the products a run samples and trains with: its adapters after training are not f64's
    // (its samples may be: a last bit rarely changes a sampled token of the tiny model, and the run hash is its log's)
    const f64 = fresh();
    await runScenario(parseScenario(text('cpu'), 's.yaml'), { outDir: f64 });
    const adapters = (outDir: string) => checkpointFiles(outDir).map((file) => readFileSync(join(outDir, file)).toString('base64'));
    expect(checkpointFiles(f64).length).toBeGreaterThan(0);
    expect(adapters(f64)).not.toEqual(adapters(one.outDir));
    expect(adapters(three.outDir)).toEqual(adapters(one.outDir));
    expect(await replayRun(one.outDir, { threads: 2 })).toMatchObject({ identical: true, hash: one.hash });
  });

  it('refuses a backend of other sums than its scenario\'s, and a resume whose scenario changed its sums', async () => {
    const f64Backend = new CpuBackend();
    await expect(runScenario(parseScenario(text(F32), 's.yaml'), { outDir: fresh(), backend: f64Backend })).rejects.toThrow(/sums its dense products in f32, the backend given to runScenario in f64: open it with new CpuBackend\(\{ sums: 'f32' \}\)/);
    const outDir = fresh();
    await runScenario(parseScenario(text(F32), 's.yaml'), { outDir, stopAfterSteps: 1 });
    const file = join(outDir, 'scenario.json');
    writeFileSync(file, readFileSync(file, 'utf8').replace('"sums": "f32"', '"sums": "f64"'));
    await expect(runScenario(parseScenario(readFileSync(file, 'utf8'), file, { relativeTo: outDir }), { outDir, resume: true, scenarioFile: file })).rejects.toThrow(/field "backend" is "cpu", but the run was started with \{"name":"cpu","sums":"f32"\}/);
  });
});
