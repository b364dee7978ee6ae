// bench/gpu-goals.ts: the goals table from its parts' benchmark JSON, worked by hand (the figures are made up; only
// the arithmetic and the verdicts are under test), and the tiled random weights its 7B part loads.
import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { goalRows, mergedOutcomes, type Outcomes } from '../bench/gpu-goals.js';
import { randomModel } from '../src/model/checkpoint.js';
import { TINY_CONFIGS } from '../src/model/config.js';

const inference = (preset: string, rows: Array<[batch: number, adapters: number, tokensPerS: number, gbPerS: number]>, loopDeviceTokensPerS: number[] = []) => ({
  result: {
    preset, device: 'nvidia / hopper', streamingGBPerS: 1000, peakGBPerS: 1000,
    rows: rows.map(([batch, adapters, decodeTokensPerS, decodeGBPerS]) => ({ batch, adapters, decodeTokensPerS, decodeGBPerS })),
    loops: { rows: loopDeviceTokensPerS.length > 0 ? [{ batch: 1, adapters: 0, decodeTokensPerS: { host: [90], device: loopDeviceTokensPerS } }] : [] },
  },
});

describe('the GPU goals table', () => {
  const outcomes: Outcomes = {
    // batch 1: 600 of 1000 GB/s a forward step (60%); the device loop's best round, 150 tok/s, scales it to 90%.
    // 32 x 32: 1000 / 900 - 1 = 11.1% slower.
    decode: inference('qwen2.5-0.5b-shape', [[1, 0, 100, 600], [1, 1, 95, 580], [32, 0, 1000, 700], [32, 32, 900, 650]], [140, 150]),
    'lora-small': inference('bench-small', [[32, 0, 1000, 10], [32, 32, 880, 9]]), // 1000 / 880 - 1 = 13.6%
    training: { result: { preset: 'qwen2.5-0.5b-shape', rows: [{ batch: 8, stepToForward: 2.5 }, { batch: 32, stepToForward: 3.2 }] } },
    'forward-7b': { failure: 'over the 420 s limit (--limit-s)' },
  };
  const rows = goalRows(outcomes);
  const row = (start: string) => rows.find((r) => r.goal.startsWith(start))!;

  it('judges bandwidth by the better of the forward steps and the device loop', () => {
    expect(row('decode at batch 1')).toMatchObject({ target: '>= 60%', met: true });
    expect(row('decode at batch 1').measured).toContain('100 tok/s a forward step (60.0%)');
    expect(row('decode at batch 1').measured).toContain('150 tok/s in the device loop (90.0%)');
  });

  it('gives LoRA overheads as the base decode rate over the adapters\', less one', () => {
    expect(row('batch 32 over 32')).toMatchObject({ measured: 'qwen2.5-0.5b-shape: 11.1% slower', met: false });
    expect(row('bench-small LoRA overhead')).toMatchObject({ measured: '13.6%', met: true });
  });

  it('holds the worst training batch to the target, and says which part failed or did not run', () => {
    expect(row('a LoRA training step')).toMatchObject({ met: false });
    expect(row('a LoRA training step').measured).toBe('qwen2.5-0.5b-shape: batch 8 2.50x, batch 32 3.20x');
    expect(row('a 7B-shaped forward')).toMatchObject({ measured: 'failed: over the 420 s limit (--limit-s)', met: null });
    expect(row('SVD crossover')).toMatchObject({ measured: 'not run', met: null });
  });

  it('says so when a benchmark ran without the row a goal needs', () => {
    const [bandwidth, adapters] = goalRows({ decode: inference('bench-small', [[8, 0, 100, 1]]) });
    expect(bandwidth!.measured).toBe('its benchmark has no row for it');
    expect(adapters!.met).toBeNull();
  });
});

describe('merging the JSON of runs made a few parts at a time', () => {
  const dir = mkdtempSync(join(tmpdir(), 'populora-goals-'));
  const file = (name: string, content: unknown) => {
    const path = join(dir, name);
    writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
    return path;
  };

  it('takes every part once, a later file\'s over an earlier one\'s', () => {
    const first = file('a.json', { outcomes: { training: { failure: 'over the 420 s limit (--limit-s)' }, 'svd-7b': { result: { rows: [{ shape: '7B-shaped (r 16)', operator: 'crossover svd', path: 'device', msPerChild: 80 }] } } } });
    const second = file('b.json', { outcomes: { training: { result: { preset: 'qwen2.5-0.5b-shape', rows: [{ batch: 8, stepToForward: 2 }] } } } });
    const rows = goalRows(mergedOutcomes([first, second]));
    expect(rows.find((r) => r.goal.startsWith('a LoRA training step'))).toMatchObject({ measured: 'qwen2.5-0.5b-shape: batch 8 2.00x', met: true });
    expect(rows.find((r) => r.goal.startsWith('SVD crossover'))).toMatchObject({ measured: '80.0 ms a child', met: true });
    expect(rows.find((r) => r.goal.startsWith('decode at batch 1'))!.measured).toBe('not run');
  });

  it('names a file that is not a result', () => {
    expect(() => mergedOutcomes([file('c.json', { rows: [] })])).toThrow(/c\.json is not a gpu-goals\.js result \(no "outcomes"\)/);
    expect(() => mergedOutcomes([file('d.json', '{ not json')])).toThrow(/^--merge: .*d\.json: /);
  });
});

describe('tiled random weights (the 7B part)', () => {
  it('repeat the first `tile` values of each tensor, and the first tensor\'s are the untiled model\'s first draws', () => {
    const config = TINY_CONFIGS.tiny!;
    const [tiled, drawn] = [randomModel(config, 3, 5), randomModel(config, 3)];
    const first = tiled.layers[0]!.inputNorm.data; // the first tensor drawn
    expect(Array.from(first.subarray(0, 5))).toEqual(Array.from(drawn.layers[0]!.inputNorm.data.subarray(0, 5)));
    for (const data of [first, tiled.layers[1]!.downProj.data, tiled.embedTokens.data]) {
      for (let i = 5; i < data.length; i++) expect(data[i]).toBe(data[i % 5]);
      expect(new Set(data.subarray(0, 5)).size).toBe(5);
    }
  });
});
