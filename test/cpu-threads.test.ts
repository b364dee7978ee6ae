// The CPU backend's threads (src/backend/cpu-threads.ts): every threaded op at 1, 2, 3 and 4 threads gives the bits
// of the unthreaded path (one thread, and the plain-loop reference), on shapes whose splits are ragged (rows around
// the kernels' tiles of 8 and 16, tokens and sequences that do not divide by the threads) and inputs whose sums
// cancel, so that any other order of a sum gives other bits; a whole model's logits and gradients, and a whole run's
// hash, the same at any thread count; threads as a machine setting that a resume and a replay do not compare; a
// worker's failure reported, not a hang; and Node exiting with idle workers. Everything lies past 2 GiB of the arena.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { Tensor } from '../src/backend/backend.js';
import { cpuArena } from '../src/backend/cpu-arena.js';
import * as attend from '../src/backend/cpu-attention.js';
import * as dense from '../src/backend/cpu-dense.js';
import * as lora from '../src/backend/cpu-lora.js';
import { f32Of } from '../src/backend/cpu-tensor.js';
import { CpuThreads, ONE_THREAD, splitRange } from '../src/backend/cpu-threads.js';
import * as trainAttention from '../src/backend/cpu-train-attention.js';
import { CpuBackend } from '../src/backend/cpu.js';
import * as backward from '../src/backend/cpu-backward.js';
import { initModelCommand, logitsCommand } from '../src/cli/model-commands.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { LORA_MODULES, randomAdapter } from '../src/model/peft.js';
import { parseScenario, withoutMachineSettings } from '../src/scenario/scenario.js';
import { replayRun } from '../src/sim/replay.js';
import { runScenario } from '../src/sim/run.js';
import { packSequences } from '../src/train/batch.js';
import { LlamaTrainer } from '../src/train/llama-backward.js';
import { bits, H, hugeEnds, random, sameEndColumns } from './cpu-inputs.js';

/**
 * 2 GiB held first (untouched: no memory used), so that every array, scratch region and call list of these tests
 * lies past 2^31 bytes, where an address no longer fits a signed i32 (a 0.5B model's arena reaches it).
 */
const ballast = cpuArena().f32(2 ** 29 + 2 ** 20);
const cpu = new CpuBackend();
/** 1 to 4 threads, each cutting even the smallest op (a share may hold as little as one multiply-add). */
const THREADS = [1, 2, 3, 4].map((n) => CpuThreads.open(n, 1));
afterAll(() => THREADS.forEach((t) => t.close()));
it('holds its arrays past 2 GiB of the arena', () => {
  expect(ballast!.length).toBe(2 ** 29 + 2 ** 20);
  expect(f32Of(cpu.uploadWeight(new Float32Array(8), [2, 4], 'f32')).byteOffset).toBeGreaterThan(2 ** 31);
});

/** Rows around the kernels' tiles (8 for matmul, 16 for row blocks) times the threads: every split ragged somewhere. */
const ROWS = [1, 7, 9, 17, 23, 31, 33, 47, 65, 100];

describe('each threaded product at 1, 2, 3 and 4 threads equals one thread and the reference, bit for bit', () => {
  it('splitRange covers [first, end) in order, in at most the parts asked, every boundary aligned', () => {
    for (const [end, parts, align] of [[100, 3, 8], [7, 4, 1], [17, 4, 16], [1, 4, 8], [64, 64, 1], [5, 2, 8]] as const) {
      const ranges = splitRange(0, end, parts, align);
      expect(ranges.length).toBeLessThanOrEqual(parts);
      expect(ranges[0]![0]).toBe(0);
      expect(ranges.at(-1)![1]).toBe(end);
      ranges.forEach(([a, b], i) => {
        expect(b).toBeGreaterThan(a);
        if (i > 0) expect(a).toBe(ranges[i - 1]![1]);
        if (i < ranges.length - 1) expect(b % align).toBe(0);
      });
    }
  });

  it('matmul (rows of w split: f32, and f16 through row blocks) and matmulBackward (columns split)', () => {
    const r = random('threaded dense');
    for (let trial = 0; trial < 24; trial++) {
      const [T, N, K] = [r.pick([1, 2, 5, 33]), r.pick(ROWS), r.pick([3, 8, 13, 64])];
      const storage = r.pick(['f32', 'f16'] as const);
      const w = cpu.uploadWeight(sameEndColumns(r.floats(N * K, 4), K), [N, K], storage);
      const x = cpu.upload(hugeEnds(r.floats(T * K), K), [T, K]);
      const bias = trial % 2 ? cpu.upload(r.floats(N), [N]) : undefined;
      const dy = cpu.upload(r.floats(T * N), [T, N]);
      // matmulBackward's sums run over n: its rows of w start and end the same, dy's rows start +H and end −H
      const wBackValues = r.floats(N * K, 4);
      const wBack = cpu.uploadWeight(wBackValues.copyWithin((N - 1) * K, 0, K), [N, K], 'f32');
      hugeEnds(f32Of(dy), N);
      const what = `T ${T}, N ${N}, K ${K}, ${storage}`;
      const [one, back] = [bits(dense.matmul(x, w, bias, ONE_THREAD)), bits(dense.matmulBackward(dy, wBack, ONE_THREAD))];
      expect(one, what).toEqual(bits(dense.matmulReference(x, w, bias)));
      expect(back, what).toEqual(bits(dense.matmulBackwardReference(dy, wBack)));
      for (const threads of THREADS) {
        expect(bits(dense.matmul(x, w, bias, threads)), `${what}, ${threads.count} threads`).toEqual(one);
        expect(bits(dense.matmulBackward(dy, wBack, threads)), `${what}, ${threads.count} threads (backward)`).toEqual(back);
      }
    }
  });

  it('outerProductSum (every segment\'s rows split), with empty segments and negative scales', () => {
    const r = random('threaded outer');
    for (let trial = 0; trial < 16; trial++) {
      const [T, I, J, S] = [r.pick([1, 5, 11]), r.pick([1, 3, 9, 17]), r.pick([1, 8, 13, 33]), r.pick([1, 2, 4])];
      const order = Int32Array.from({ length: T }, (_, i) => i).sort(() => r.int(3) - 1);
      const bounds = [0, ...Array.from({ length: S - 1 }, () => r.int(T + 1)).sort((a, b) => a - b), T];
      const [us, vs] = [r.floats(T * I), r.floats(T * J)];
      for (let seg = 0; seg < S; seg++) {
        if (bounds[seg + 1]! - bounds[seg]! < 2) continue;
        const [first, last] = [order[bounds[seg]!]!, order[bounds[seg + 1]! - 1]!];
        us.fill(H, first * I, (first + 1) * I).fill(-H, last * I, (last + 1) * I);
        vs.copyWithin(last * J, first * J, (first + 1) * J);
      }
      const args = [cpu.upload(us, [T, I]), cpu.upload(vs, [T, J]), cpu.uploadI32(order, [T]), cpu.uploadI32(Int32Array.from(bounds), [S + 1]), trial % 2 ? cpu.upload(r.floats(S), [S]) : undefined] as const;
      const one = bits(dense.outerProductSumReference(...args));
      for (const threads of THREADS) expect(bits(dense.outerProductSum(...args, threads)), `T ${T}, I ${I}, J ${J}, S ${S}, ${threads.count} threads`).toEqual(one);
    }
  });

  it('the four LoRA products (tokens split across runs of adapter slots)', () => {
    const r = random('threaded lora');
    for (let trial = 0; trial < 16; trial++) {
      const [T, K, N, rank, slots] = [r.pick([1, 3, 7, 13]), r.pick([3, 8, 17]), r.pick([5, 16, 33]), r.pick([1, 4, 8]), r.pick([1, 3])];
      const a = cpu.uploadWeight(sameEndColumns(r.floats(slots * rank * K, 4), K), [slots * rank, K], 'f32');
      const b = cpu.uploadWeight(sameEndColumns(r.floats(slots * N * rank, 4), rank), [slots * N, rank], 'f32');
      const run = r.int(3) + 1;
      const adapters = cpu.uploadI32(Int32Array.from({ length: T }, (_, t) => (r.int(5) === 0 ? -1 : Math.floor(t / run) % slots)), [T]);
      const scales = cpu.upload(Float32Array.from({ length: slots }, (_, s) => (s === 1 ? -0.5 : 2 * (s + 1))), [slots]);
      const x = cpu.upload(hugeEnds(r.floats(T * K), K), [T, K]);
      const h = cpu.upload(hugeEnds(r.floats(T * rank), rank), [T, rank]);
      const dy = cpu.upload(hugeEnds(r.floats(T * N), N), [T, N]);
      const what = `T ${T}, K ${K}, N ${N}, rank ${rank}, ${slots} slots`;
      const expand = (threads?: CpuThreads) => {
        const y = cpu.upload(Float32Array.from({ length: T * N }, (_, i) => Math.cos(i)), [T, N]);
        if (threads) lora.loraExpand(y, h, b, adapters, scales, threads);
        else lora.loraExpandReference(y, h, b, adapters, scales);
        return bits(y);
      };
      const shrinkBackward = (threads?: CpuThreads) => {
        const dx = cpu.upload(Float32Array.from({ length: T * K }, (_, i) => Math.sin(i)), [T, K]);
        if (threads) lora.loraShrinkBackward(dx, h, a, adapters, threads);
        else lora.loraShrinkBackwardReference(dx, h, a, adapters);
        return bits(dx);
      };
      const second = cpu.uploadWeight(r.floats(slots * rank * K, 4), [slots * rank, K], 'f32');
      const reference = {
        parts: bits(lora.loraShrinkParts(x, [a, second], adapters, rank, ONE_THREAD)),
        expand: expand(),
        expandBackward: bits(lora.loraExpandBackwardReference(dy, b, adapters, scales, rank)),
        shrinkBackward: shrinkBackward(),
      };
      for (const threads of THREADS) {
        const n = `${what}, ${threads.count} threads`;
        expect(bits(lora.loraShrinkParts(x, [a, second], adapters, rank, threads)), n).toEqual(reference.parts);
        expect(expand(threads), n).toEqual(reference.expand);
        expect(bits(lora.loraExpandBackward(dy, b, adapters, scales, rank, threads)), n).toEqual(reference.expandBackward);
        expect(shrinkBackward(threads), n).toEqual(reference.shrinkBackward);
      }
    }
  });

  it('decode attention (tokens split, each thread with its own scores)', () => {
    const r = random('threaded attention');
    for (let trial = 0; trial < 12; trial++) {
      const [kvHeads, group, headDim, T] = [r.pick([1, 2]), r.pick([1, 3]), r.pick([3, 8, 16]), r.pick([1, 2, 5, 7])];
      const heads = kvHeads * group;
      const cache = cpu.createKvCache({ layers: 2, slots: 3, maxLen: 17, kvHeads, headDim });
      f32Of(cache.k).set(r.floats(f32Of(cache.k).length, 4));
      f32Of(cache.v).set(r.floats(f32Of(cache.v).length));
      const q = cpu.upload(r.floats(T * heads * headDim, 4), [T, heads * headDim]);
      const slots = cpu.uploadI32(Int32Array.from({ length: T }, () => r.int(3)), [T]);
      const positions = cpu.uploadI32(Int32Array.from({ length: T }, () => r.int(17)), [T]); // ragged: the longest sets every thread's scores
      const one = bits(attend.attentionReference(q, cache, 1, slots, positions, heads));
      for (const threads of THREADS) expect(bits(attend.attention(q, cache, 1, slots, positions, heads, threads)), `${heads}/${kvHeads} heads of ${headDim}, ${T} tokens, ${threads.count} threads`).toEqual(one);
    }
  });

  it('training attention (tokens split) and its backward (whole sequences split), over ragged sequences', () => {
    const r = random('threaded training attention');
    for (let trial = 0; trial < 16; trial++) {
      const [kvHeads, group, headDim] = [r.pick([1, 2]), r.pick([1, 2]), r.pick([3, 8, 9])];
      const heads = kvHeads * group;
      // n = 2^i tokens with equal keys, +H values first and −H last: dv's sums over tokens cancel (cpu-simd.test.ts)
      const lengths = Array.from({ length: 1 + r.int(5) }, () => r.pick([1, 2, 4, 8, 3, 7]));
      const positions = lengths.flatMap((n) => Array.from({ length: n }, (_, i) => i));
      const seqEnds = lengths.flatMap((n, s) => Array(n).fill(lengths.slice(0, s + 1).reduce((x, y) => x + y, 0)) as number[]);
      const T = positions.length;
      const [kvRow, qRow] = [kvHeads * headDim, heads * headDim];
      const [q, k, v, g] = [r.floats(T * qRow, 0), r.floats(T * kvRow, 0), r.floats(T * kvRow), r.floats(T * qRow)];
      let first = 0;
      for (const n of lengths) {
        for (let i = 1; i < n; i++) k.copyWithin((first + i) * kvRow, first * kvRow, (first + 1) * kvRow);
        if (n > 1 && (n & (n - 1)) === 0) {
          v.fill(H, first * kvRow, (first + 1) * kvRow).fill(-H, (first + n - 1) * kvRow, (first + n) * kvRow);
          g.fill(H, first * qRow, (first + 1) * qRow).fill(-H * n, (first + n - 1) * qRow, (first + n) * qRow);
        }
        first += n;
      }
      const [qt, kt, vt, gt] = [cpu.upload(q, [T, qRow]), cpu.upload(k, [T, kvRow]), cpu.upload(v, [T, kvRow]), cpu.upload(g, [T, qRow])];
      const [pos, ends] = [cpu.uploadI32(Int32Array.from(positions), [T]), cpu.uploadI32(Int32Array.from(seqEnds), [T])];
      const out = backward.attentionPackedReference(qt, kt, vt, pos, heads, kvHeads);
      const gradients = backward.attentionBackwardReference(gt, qt, kt, vt, out, pos, ends, heads, kvHeads).map(bits);
      const what = `${heads}/${kvHeads} heads of ${headDim}, sequences of ${lengths.join(', ')}`;
      for (const threads of THREADS) {
        expect(bits(trainAttention.attentionPacked(qt, kt, vt, pos, heads, kvHeads, threads)), `${what}, ${threads.count} threads`).toEqual(bits(out));
        trainAttention.attentionBackward(gt, qt, kt, vt, out, pos, ends, heads, kvHeads, threads).forEach((grad, i) => expect(bits(grad), `${['dq', 'dk', 'dv'][i]}: ${what}, ${threads.count} threads`).toEqual(gradients[i]));
      }
    }
  });
});

describe('the row loops on threads (cpu-rows.ts): each thread its own rows, equal to the references', () => {
  it('log-probabilities and their gradient over the logits, and SwiGLU and its backward', () => {
    const r = random('threaded rows');
    for (const [T, V] of [[1, 5], [3, 64], [7, 33], [13, 100]] as const) {
      const logits = cpu.upload(r.floats(T * V, 6), [T, V]); // wide: some probabilities underflow to 0
      const targets = cpu.uploadI32(Int32Array.from({ length: T }, () => r.int(V)), [T]);
      const [cw, ew] = [cpu.upload(r.floats(T, 2), [T]), cpu.upload(Float32Array.from({ length: T }, (_, t) => (t % 3 === 0 ? 0 : r.floats(1, 2)[0]!)), [T])];
      const [g, u, dy] = [r.floats(T * V, 3), r.floats(T * V), r.floats(T * V)].map((a) => cpu.upload(a, [T, V])) as [Tensor, Tensor, Tensor];
      const reference = { logProbs: bits(backward.logProbsReference(logits, targets)), gradient: bits(backward.logitsBackwardReference(logits, targets, cw, ew)) };
      const [swiglu, [dGate, dUp]] = [bits(backward.swiglu(g, u, ONE_THREAD)), backward.swigluBackward(dy, g, u, ONE_THREAD).map(bits)];
      for (const threads of THREADS) {
        const what = `T ${T}, V ${V}, ${threads.count} threads`;
        expect(bits(backward.logProbs(logits, targets, threads)), what).toEqual(reference.logProbs);
        expect(bits(backward.logitsBackward(logits, targets, cw, ew, threads)), what).toEqual(reference.gradient);
        expect(bits(backward.swiglu(g, u, threads)), what).toEqual(swiglu);
        expect(backward.swigluBackward(dy, g, u, threads).map(bits), what).toEqual([dGate, dUp]);
      }
    }
  });
});

describe('a whole model at 1, 2, 3 and 4 threads', () => {
  it('gives the same logits, decode steps and LoRA gradients, bit for bit', async () => {
    const config = TINY_CONFIGS['qwen2-tiny']!;
    const weights = randomModel(config, 5);
    const results = [];
    for (const threads of [1, 2, 3, 4]) {
      const backend = new CpuBackend({ threads, minWorkPerShare: 1 });
      expect(backend.threadCount).toBe(threads);
      const model = LlamaModel.upload(backend, config, weights, { storage: 'f16', maxContext: 16 });
      const bank = new LoraBank(backend, config, 3, 4, LORA_MODULES);
      for (let slot = 0; slot < 3; slot++) bank.load(slot, randomAdapter(config, { rank: 4, targets: [...LORA_MODULES], seed: slot, init: 'gaussian' }));
      const logits = bits(await model.logits([1, 5, 9, 3, 7, 2, 11], 1, bank));
      const cache = model.createKvCache(3, 16);
      const steps = [];
      for (let position = 0; position < 4; position++) {
        const rows = Int32Array.of(0, 1, 2);
        const step = model.forward({ tokens: rows.map((s) => (s * 7 + position) % config.vocabSize), slots: rows, positions: rows.map(() => position), adapters: Int32Array.of(2, -1, 0), logitRows: rows }, cache, bank);
        steps.push(bits(await backend.readF32(step)));
      }
      const trainer = new LlamaTrainer(model, bank);
      const tape = trainer.forward(packSequences([{ tokens: [1, 4, 6, 8, 10], adapter: 0 }, { tokens: [1, 3, 5, 7, 9, 11, 13], adapter: 1 }, { tokens: [2, 4, 6], adapter: 2 }], config.vocabSize, 16));
      const T = tape.batch.tokens.length;
      const grads = trainer.backward(tape, Float32Array.from({ length: T }, (_, t) => (t % 3) / 7), Float32Array.from({ length: T }, (_, t) => (t % 2) / 11), 'lora');
      results.push({ logits, steps, grads: Object.fromEntries([...grads].map(([key, g]) => [key, bits(g)])) });
      backend.destroy();
    }
    expect(Object.keys(results[0]!.grads).length).toBeGreaterThan(10);
    for (const result of results.slice(1)) expect(result).toEqual(results[0]);
  });
});

describe('threads are a machine setting', () => {
  const text = `
name: threads
seed: 3
steps: 2
backend: { name: cpu, threads: 1 }
model: { preset: tiny, seed: 1 }
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }
tasks: { perTeacher: 1, types: [deduce] }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 2, maxTokens: 12 }
checkpointEvery: 1
`;
  const scenario = parseScenario(text, 'threads.yaml');
  const fresh = () => join(mkdtempSync(join(tmpdir(), 'populora-threads-')), 'run');

  it('a scenario takes backend {name: cpu, threads: N}; webgpu with threads is refused by its field; neither counts in what a resume compares', () => {
    expect(scenario.backend).toEqual({ name: 'cpu', threads: 1 });
    expect(parseScenario(text.replace('backend: { name: cpu, threads: 1 }', 'backend: cpu'), 'plain.yaml').backend).toBe('cpu');
    expect(() => parseScenario(text.replace('name: cpu, threads: 1', 'name: webgpu, threads: 2'), 'gpu.yaml')).toThrow(/gpu\.yaml: field "backend": threads are the cpu backend's/);
    expect(() => parseScenario(text.replace('threads: 1 }', 'threads: 0 }'), 'zero.yaml')).toThrow(/zero\.yaml: field "backend/);
    expect(withoutMachineSettings(scenario).backend).toBe('cpu');
  });

  it('reach the backend from a command (logits --threads N: the bytes of --threads 1); --threads 0 is refused by name', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'populora-threads-cli-'));
    await initModelCommand({ out: join(dir, 'model'), preset: 'qwen2-tiny', seed: 0, dtype: 'F32' });
    const said: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((line: string) => void said.push(line));
    const logits = async (threads: number) => {
      const out = join(dir, `logits-${threads}.npy`);
      await logitsCommand({ model: join(dir, 'model'), backend: 'cpu', threads, tokens: '1,5,9,3,7,2,11,4', out });
      expect(said.at(-1)).toMatch(new RegExp(`\\b${threads} threads?\\)`));
      return readFileSync(out);
    };
    try {
      expect((await logits(3)).equals(await logits(1))).toBe(true);
    } finally {
      log.mockRestore();
    }
    const cli = new URL('../dist/src/cli/main.js', import.meta.url).pathname;
    const refused = spawnSync(process.execPath, [cli, 'logits', '--model', join(dir, 'model'), '--tokens', '1', '--threads', '0', '--out', join(dir, 'x.npy')], { encoding: 'utf8' });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/--threads must be from 1 to 64, got 0/);
  });

  it('give the same run hash at 1 and 3 threads; a resume at 4 threads and a replay at 2 continue and agree with the run', async () => {
    const runAt = async (threads: number, outDir: string, options: { stopAfterSteps?: number; resume?: boolean } = {}) => {
      const backend = new CpuBackend({ threads, minWorkPerShare: 1 });
      try {
        return await runScenario(scenario, { outDir, backend, ...options });
      } finally {
        backend.destroy();
      }
    };
    const one = await runAt(1, fresh());
    const three = await runAt(3, fresh());
    expect(three.hash).toBe(one.hash);
    // A run crashed after its first step at 1 thread, its scenario.json then set to 4 threads: the resume goes on.
    const crashed = fresh();
    await runAt(1, crashed, { stopAfterSteps: 1 });
    const file = join(crashed, 'scenario.json');
    writeFileSync(file, readFileSync(file, 'utf8').replace('"threads": 1', '"threads": 4'));
    const resumed = await runScenario(parseScenario(readFileSync(file, 'utf8'), file, { relativeTo: crashed }), { outDir: crashed, resume: true, scenarioFile: file, threads: 4 });
    expect(resumed.hash).toBe(one.hash);
    const copy = fresh();
    cpSync(crashed, copy, { recursive: true });
    const verdict = await replayRun(copy, { threads: 2 });
    expect(verdict.identical).toBe(true);
  });
});

describe('the worker threads', () => {
  it('report a kernel that fails (an address past the memory) on whichever thread ran it, instead of hanging, and keep working', () => {
    const threads = THREADS[1]!;
    const call = (address: number) => ({ fn: 'matmul' as const, memory: 0, args: [address, 1, 8, address, 8, address, address, 0, 1, 0, 8] });
    const nothing = { fn: 'matmul' as const, memory: 0, args: [0, 0, 8, 0, 8, 0, 0, 0, 1, 0, 8] }; // no tokens: a share that does nothing (either thread may run either share)
    expect(() => threads.run([[nothing], [call(2 ** 32 - 64)]])).toThrow(/a CPU backend thread failed: thread \d: .*out of bounds/);
    const x = cpu.upload(Float32Array.from({ length: 64 * 40 }, (_, i) => Math.sin(i)), [40, 64]);
    const w = cpu.uploadWeight(Float32Array.from({ length: 64 * 33 }, (_, i) => Math.cos(i)), [33, 64], 'f32');
    expect(bits(dense.matmul(x, w, undefined, threads))).toEqual(bits(dense.matmulReference(x, w)));
  });

  it('let Node exit while they wait for work, whether or not the backend was destroyed', () => {
    const backendModule = new URL('../dist/src/backend/cpu.js', import.meta.url).href;
    for (const destroy of [false, true]) {
      const script = `const { CpuBackend } = await import(${JSON.stringify(backendModule)});
const b = new CpuBackend({ threads: 4, minWorkPerShare: 1 });
const w = b.uploadWeight(new Float32Array(64 * 64).fill(1), [64, 64], 'f32');
const y = b.matmul(b.upload(new Float32Array(2 * 64).fill(1), [2, 64]), w);
console.log(y.data[0], b.deviceDescription);
${destroy ? 'b.destroy();' : ''}`;
      const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
      expect(out).toMatch(/^64 cpu \(.*4 threads\)/);
    }
  });
});
