// The CPU backend's decode attention: each token's query heads against positions 0..p of its KV-cache slot (GQA: a
// kv head serves heads / kvHeads query heads), f64 scores and sums, f32 results (backend.ts, `attention`).
// attentionReference is the plain loop; attention runs kernels/cpu/attention.wasm (SIMD, the same sums in the same
// order, JavaScript's Math.exp imported: equal bit for bit), one call per token, reading the cache in place in the
// CPU arena (createKvCache puts it there; a cache outside it, or heads that kv heads do not divide, take the reference).

import { assert, type KvCache, type Tensor } from './backend.js';
import { cpuArena } from './cpu-arena.js';
import { roundUp, stage, unpadRows } from './cpu-dense.js';
import { f32Of, i32Of, tensor } from './cpu-tensor.js';
import { ONE_THREAD, type CpuThreads, type KernelCall } from './cpu-threads.js';

export function attentionReference(q: Tensor, cache: KvCache, layer: number, slots: Tensor, positions: Tensor, heads: number): Tensor {
  const { headDim, kvHeads, maxLen } = cache;
  const [qs, s, p] = [f32Of(q), i32Of(slots), i32Of(positions)];
  const [kc, vc] = [f32Of(cache.k), f32Of(cache.v)];
  const T = s.length;
  const groupSize = heads / kvHeads;
  const scale = 1 / Math.sqrt(headDim);
  const out = new Float32Array(T * heads * headDim);
  for (let t = 0; t < T; t++) {
    const slotBase = (layer * cache.slots + s[t]!) * maxLen;
    for (let h = 0; h < heads; h++) {
      const kvHead = Math.floor(h / groupSize);
      const qBase = (t * heads + h) * headDim;
      const at = (j: number) => ((slotBase + j) * kvHeads + kvHead) * headDim;
      const scores = new Float64Array(p[t]! + 1);
      for (let j = 0; j <= p[t]!; j++) {
        let dot = 0;
        for (let d = 0; d < headDim; d++) dot += qs[qBase + d]! * kc[at(j) + d]!;
        scores[j] = dot * scale;
      }
      const max = Math.max(...scores);
      let total = 0;
      for (let j = 0; j < scores.length; j++) total += (scores[j] = Math.exp(scores[j]! - max));
      for (let d = 0; d < headDim; d++) {
        let sum = 0;
        for (let j = 0; j < scores.length; j++) sum += scores[j]! * vc[at(j) + d]!;
        out[qBase + d] = sum / total;
      }
    }
  }
  return tensor(out, [T, heads * headDim], 'f32');
}

/** Threads each own whole tokens, each with its own scores in the scratch. */
export function attention(q: Tensor, cache: KvCache, layer: number, slots: Tensor, positions: Tensor, heads: number, threads: CpuThreads = ONE_THREAD): Tensor {
  const { headDim: hd, kvHeads, maxLen } = cache;
  const [qs, s, p] = [f32Of(q), i32Of(slots), i32Of(positions)];
  const arena = cpuArena();
  const home = arena.memoryOf(f32Of(cache.k)) ?? -1; // createKvCache puts k and v in one memory
  const [kAt, vAt] = [arena.addressOf(f32Of(cache.k), home), arena.addressOf(f32Of(cache.v), home)];
  if (kAt === undefined || vAt === undefined || heads % kvHeads !== 0) return attentionReference(q, cache, layer, slots, positions, heads);
  const T = s.length;
  const hdPad = roundUp(hd, 8);
  const longest = Math.max(0, ...p) + 1;
  const scoresBytes = (longest + 1) * 8;
  const staged = stage([qs.length * 8, threads.count * scoresBytes, T * heads * hdPad * 4], home);
  if (!staged) return attentionReference(q, cache, layer, slots, positions, heads);
  staged.putF64(0, qs);
  const [qAt, scoresAt, outAt] = staged.at as [number, number, number];
  const rowBytes = kvHeads * hd * 4;
  for (let t = 0; t < T; t++) assert(s[t]! >= 0 && s[t]! < cache.slots && p[t]! >= 0 && p[t]! < maxLen, `attention: slot ${s[t]} at position ${p[t]} is outside the KV cache (${cache.slots} slots of ${maxLen})`);
  let work = 0;
  for (let t = 0; t < T; t++) work += 2 * heads * hd * (p[t]! + 1);
  let share = 0;
  threads.runRanges(T, 1, work, (first, end) => {
    const scores = scoresAt + share++ * scoresBytes;
    return Array.from({ length: end - first }, (_, i): KernelCall => {
      const t = first + i;
      const slotRow = (layer * cache.slots + s[t]!) * maxLen * rowBytes;
      return { fn: 'attention', memory: home, args: [qAt + t * heads * hd * 8, heads, heads / kvHeads, hd, kAt + slotRow, vAt + slotRow, p[t]! + 1, rowBytes, scores, outAt + t * heads * hdPad * 4, hdPad, 1 / Math.sqrt(hd)] };
    });
  });
  return tensor(unpadRows(staged.f32(2, T * heads * hdPad), T * heads, hd, hdPad), [T, heads * hd], 'f32');
}
