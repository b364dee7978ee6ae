// The evolution operators on the device (BankEvolution) against their host twins (operators.ts): the same child
// from the same parents, seed and options, on the CPU backend and on WebGPU; and the same bits twice.
import { describe, expect, it } from 'vitest';
import type { Backend } from '../src/backend/backend.js';
import { CpuBackend } from '../src/backend/cpu.js';
import { BankEvolution } from '../src/evolution/device-operators.js';
import { CROSSOVER_KINDS, crossover, mutate } from '../src/evolution/operators.js';
import { TINY_CONFIGS } from '../src/model/config.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { randomAdapter, type LoraAdapter } from '../src/model/peft.js';
import { gpu } from './webgpu.js';

const config = TINY_CONFIGS['qwen2-tiny']!;
const rank = 4;
const targets = ['q_proj', 'v_proj', 'down_proj'] as const;
const parent1 = randomAdapter(config, { rank, alpha: 8, targets: [...targets], seed: 1, init: 'gaussian' });
const parent2 = randomAdapter(config, { rank, alpha: 4, targets: [...targets], seed: 2, init: 'gaussian' }); // another scale

/** Largest |device - host| over every factor, relative to the largest |host| entry. */
function relativeError(device: LoraAdapter, host: LoraAdapter): number {
  let diff = 0;
  let max = 0;
  host.layers.forEach((layer, l) => {
    for (const m of targets) {
      for (const f of ['a', 'b'] as const) {
        const [d, h] = [device.layers[l]![m]![f], layer[m]![f]];
        h.forEach((v, i) => {
          diff = Math.max(diff, Math.abs(d[i]! - v));
          max = Math.max(max, Math.abs(v));
        });
      }
    }
  });
  return diff / max;
}

function bankWithParents(backend: Backend): { bank: LoraBank; evolution: BankEvolution } {
  const bank = new LoraBank(backend, config, 4, rank, [...targets]);
  bank.load(0, parent1);
  bank.load(1, parent2);
  return { bank, evolution: new BankEvolution(bank, config) };
}

const backends: Array<[string, Backend | undefined, number]> = [
  ['cpu', new CpuBackend(), 1e-6],
  ['webgpu', gpu, 2e-5], // f32 noise and Gram sums on the device, f64 on the host
];

describe.each(backends)('device evolution on %s', (_name, backend, tolerance) => {
  it.runIf(backend)('mutates as the host operator does (all entries, sparse on some modules, in place)', async () => {
    const { bank, evolution } = bankWithParents(backend!);
    for (const options of [{ sigma: 0.1, seed: 7 }, { sigma: 0.3, seed: 9, fraction: 0.25, modules: ['v_proj'] as const, layers: [1] }]) {
      evolution.mutate(2, 0, { ...options, modules: options.modules ? [...options.modules] : undefined });
      const child = await bank.read(2);
      expect(relativeError(child, mutate(parent1, { ...options, modules: options.modules ? [...options.modules] : undefined }))).toBeLessThan(tolerance);
      expect(relativeError(await bank.read(0), parent1)).toBe(0); // the parent is untouched
    }
    evolution.mutate(1, 1, { sigma: 0.1, seed: 7 }); // in place
    expect(relativeError(await bank.read(1), mutate(parent2, { sigma: 0.1, seed: 7 }))).toBeLessThan(tolerance);
    bank.destroy();
  });

  it.runIf(backend)('makes each crossover kind\'s child, keeping parent 1\'s scale', async () => {
    const { bank, evolution } = bankWithParents(backend!);
    for (const kind of CROSSOVER_KINDS) {
      const options = { kind, seed: 5, weights: [0.7, 0.3] as const };
      await evolution.crossover(3, 0, 1, options);
      const child = await bank.read(3);
      expect(child.alpha).toBe(parent1.alpha);
      expect(relativeError(child, crossover(parent1, parent2, options)), kind).toBeLessThan(kind === 'svd' ? 50 * tolerance : tolerance);
    }
    bank.destroy();
  });

  it.runIf(backend)('clears what the child\'s slot held when the blend has rank below the bank\'s', async () => {
    // A's rows 2 and 3 repeat rows 0 and 1: every module's blend has rank 2 < 4, so the child's last two rank
    // components must come out zero whatever the slot held before (here: parent 2).
    const low = structuredClone(parent1);
    for (const layer of low.layers) for (const f of Object.values(layer)) f.a.copyWithin(2 * (f.a.length / rank), 0, 2 * (f.a.length / rank));
    const bank = new LoraBank(backend!, config, 4, rank, [...targets]);
    bank.load(0, low);
    bank.load(3, parent2);
    await new BankEvolution(bank, config).crossover(3, 0, 0, { kind: 'svd', seed: 1 });
    const child = await bank.read(3);
    expect(relativeError(child, crossover(low, low, { kind: 'svd', seed: 1 }))).toBeLessThan(50 * tolerance);
    expect(child.layers[0]!.q_proj!.a.subarray(2 * config.hiddenSize).every((v) => v === 0)).toBe(true);
    bank.destroy();
  });

  it.runIf(backend)('makes the same SVD child with its small factorisations on two worker threads', async () => {
    const children: LoraAdapter[] = [];
    for (const workers of [1, 2]) {
      const bank = new LoraBank(backend!, config, 4, rank, [...targets]);
      bank.load(0, parent1);
      bank.load(1, parent2);
      const evolution = new BankEvolution(bank, config, workers);
      await evolution.crossover(3, 0, 1, { kind: 'svd', seed: 4 });
      children.push(await bank.read(3));
      await evolution.close();
      bank.destroy();
    }
    expect(relativeError(children[1]!, children[0]!)).toBe(0);
  });

  it.runIf(backend)('gives the same bits twice', async () => {
    const runs: LoraAdapter[] = [];
    for (let i = 0; i < 2; i++) {
      const { bank, evolution } = bankWithParents(backend!);
      evolution.mutate(2, 0, { sigma: 0.1, seed: 3 });
      await evolution.crossover(3, 2, 1, { kind: 'svd', seed: 3 });
      runs.push(await bank.read(3));
      bank.destroy();
    }
    expect(relativeError(runs[0]!, runs[1]!)).toBe(0);
  });
});
