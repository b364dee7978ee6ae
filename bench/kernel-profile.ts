// The per-kernel table of a prefill or a decode step: each dispatch's GPU time from timestamp queries
// (Backend.timeKernels), summed by kernel and variant, with its share of the GPU time and the bytes and FLOPs it
// moves by a model of what it reads and computes, hence GB/s and GFLOP/s. Its GPU time against the wall time of
// the same work is the share the device was busy: what is left is the host and the driver between dispatches.
//
// The byte and FLOP models count what a kernel must read and write once (weights, the rows it takes, its output,
// the KV entries each row attends over), not its cache traffic; kernels without a model show "—".

import type { Backend, KernelTiming, WeightStorage } from '../src/backend/backend.js';

/** What the byte and FLOP models need beyond a dispatch's own parameters. */
export interface ProfileShape {
  storage: WeightStorage;
  adapters: number; // distinct adapters in the batch (0: base only)
  meanContext: number; // KV entries a row attends over, on average
}

export interface KernelRow {
  kernel: string; // kernel file and variant, e.g. "linear q|k|v+rope+kv (lora)"
  dispatches: number;
  gpuMs: number;
  share: number; // of the phase's GPU time
  gbPerS: number | null;
  gflopPerS: number | null;
}

export interface PhaseProfile {
  phase: string;
  wallMs: number; // the work's wall time with every dispatch in a pass of its own
  gpuMs: number; // the dispatches' GPU time, summed
  kernels: KernelRow[];
}

const LINEAR_EPILOGUES = ['', '+residual', '+swiglu', '+rope+kv'];

/** A dispatch's row in the table: the kernel, and for the fused linear what its variant fuses. */
function label(t: KernelTiming): string {
  if (t.kernel !== 'linear') return t.kernel;
  const c = t.constants;
  if (c.SEGMENTS) return 'linear: lora shrink (segments)';
  const what = c.GATHER ? 'lm head' : `${c.NORM ? 'norm+' : ''}matmul${LINEAR_EPILOGUES[c.EPILOGUE!]}`;
  return `linear: ${what}${c.LORA ? ' +lora expand' : ''}`;
}

const scalar = (t: KernelTiming, name: string) => t.params[name] as number;

/** Bytes read and written, and FLOPs, of one dispatch; null where the kernel has no model here. */
function cost(t: KernelTiming, shape: ProfileShape): { bytes: number; flops: number } | null {
  const { adapters, meanContext } = shape;
  const weightBytes = shape.storage === 'f16' ? 2 : 4;
  switch (t.kernel) {
    case 'linear': {
      const [T, K, N] = [scalar(t, 'T'), scalar(t, 'K'), scalar(t, 'N')];
      const f = t.constants;
      // A shrink reads the A factors (f32) of each adapter in the batch; a projection reads its weight once.
      const weights = f.SEGMENTS ? Math.max(adapters, 1) * N * K * 4 : N * K * (f.WEIGHT_F16 ? 2 : 4);
      const outColumns = f.EPILOGUE === 2 ? N / 2 : N;
      const lora = f.LORA ? Math.max(adapters, 1) * N * scalar(t, 'rank') * 4 + T * scalar(t, 'hCols') * 4 : 0;
      const residual = f.EPILOGUE === 1 ? T * N * 4 : 0; // read before it is added to
      return { bytes: weights + T * K * 4 + T * outColumns * 4 + lora + residual, flops: 2 * T * N * K + (f.LORA ? 2 * T * N * scalar(t, 'rank') : 0) };
    }
    case 'attention': {
      const [T, heads, kvHeads, headDim] = [scalar(t, 'T'), scalar(t, 'heads'), scalar(t, 'kvHeads'), scalar(t, 'headDim')];
      return { bytes: T * meanContext * kvHeads * headDim * 2 * 4 + 2 * T * heads * headDim * 4, flops: 4 * T * heads * meanContext * headDim };
    }
    case 'matmul': { // the trainer's unfused linear: y[T, N] = x[T, K]·Wᵀ
      const [T, K, N] = [scalar(t, 'T'), scalar(t, 'K'), scalar(t, 'N')];
      return { bytes: N * K * (t.constants.WEIGHT_F16 ? 2 : 4) + (T * K + T * N) * 4, flops: 2 * T * N * K };
    }
    case 'matmul_backward': { // dx[T, K] = dy[T, N]·W
      const [T, N, K] = [scalar(t, 'T'), scalar(t, 'N'), scalar(t, 'K')];
      return { bytes: N * K * (t.constants.WEIGHT_F16 ? 2 : 4) + (T * K + T * N) * 4, flops: 2 * T * N * K };
    }
    case 'outer_product_sum': { // a gradient [S·I, J] summed over T rows of a[T, I] and b[T, J]
      const [I, J, S, T] = [scalar(t, 'I'), scalar(t, 'J'), scalar(t, 'S'), scalar(t, 'T')];
      return { bytes: (T * I + T * J + S * I * J) * 4, flops: 2 * T * I * J };
    }
    case 'embedding': {
      const [M, D] = [scalar(t, 'M'), scalar(t, 'D')];
      return { bytes: M * D * (weightBytes + 4), flops: 0 };
    }
    case 'sample':
      return { bytes: scalar(t, 'M') * scalar(t, 'V') * 4, flops: 0 };
    default:
      return null;
  }
}

/** Runs `work` with its dispatches timed and sums them by kernel (needs Backend.timeKernels). */
export async function profilePhase(backend: Backend, phase: string, shape: ProfileShape, work: () => Promise<void>): Promise<PhaseProfile> {
  if (!backend.timeKernels) throw new Error(`a kernel profile needs WebGPU with timestamp queries; ${backend.deviceDescription} has none`);
  const start = performance.now();
  const timings = await backend.timeKernels(work);
  const wallMs = performance.now() - start;
  const byLabel = new Map<string, { dispatches: number; ns: number; bytes: number; flops: number; modelled: boolean }>();
  for (const t of timings) {
    const key = label(t);
    const row = byLabel.get(key) ?? { dispatches: 0, ns: 0, bytes: 0, flops: 0, modelled: true };
    const c = cost(t, shape);
    row.dispatches++;
    row.ns += t.gpuNs;
    row.bytes += c?.bytes ?? 0;
    row.flops += c?.flops ?? 0;
    row.modelled &&= c !== null;
    byLabel.set(key, row);
  }
  const gpuNs = timings.reduce((sum, t) => sum + t.gpuNs, 0);
  const kernels = [...byLabel.entries()]
    .map(([kernel, r]): KernelRow => ({
      kernel, dispatches: r.dispatches, gpuMs: r.ns / 1e6, share: r.ns / gpuNs,
      gbPerS: r.modelled && r.ns > 0 ? r.bytes / r.ns : null, gflopPerS: r.modelled && r.ns > 0 && r.flops > 0 ? r.flops / r.ns : null,
    }))
    .sort((a, b) => b.gpuMs - a.gpuMs);
  return { phase, wallMs, gpuMs: gpuNs / 1e6, kernels };
}

export function printProfile(p: PhaseProfile): void {
  console.log(`\n${p.phase}: GPU ${p.gpuMs.toFixed(2)} ms of ${p.wallMs.toFixed(2)} ms wall (device busy ${((p.gpuMs / p.wallMs) * 100).toFixed(0)}%; every dispatch in a pass of its own)\n`);
  console.log('| kernel | dispatches | GPU ms | share | GB/s | GFLOP/s |');
  console.log('|---|---:|---:|---:|---:|---:|');
  const shown = (v: number | null) => (v === null ? '—' : v.toFixed(2));
  for (const k of p.kernels) console.log(`| ${k.kernel} | ${k.dispatches} | ${k.gpuMs.toFixed(3)} | ${(k.share * 100).toFixed(1)}% | ${shown(k.gbPerS)} | ${shown(k.gflopPerS)} |`);
}
