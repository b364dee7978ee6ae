// The CPU backend's row loops in TypeScript that its threads share (cpu-threads.ts): the softmax rows of the
// logits (log-probabilities and their gradient) and SwiGLU's elementwise loops. Each loop takes typed arrays and a
// range of rows or elements; one thread runs it over its arrays as they are, and threads run it over views of a
// copy in the arena (ROW_KERNELS), each over its own rows, so the bits are the same at any thread count.
//   logProbsRows:        out[t] = (log p_t(target_t), entropy H_t)                        logits z [T, V]
//   logitsBackwardRows:  out[t, v] = −wc_t·([v = y_t] − p_v) + we_t·p_v·(log p_v + H_t)   (cpu-backward.ts)
//   swigluRange:         out[i] = g_i·σ(g_i)·u_i;   swigluBackwardRange: its gradients
// p = softmax in f64 (the max, then exp(z − max) summed in order, then each divided by the sum), as
// cpu-backward.ts's references compute it: logitsBackwardReference and logProbs take the same steps, op for op.

/** Row t's softmax into p (f64 [V]), its entropy; returns the log of its normaliser's sum (logZ = max + that). */
function softmaxRow(zs: Float32Array, row: number, V: number, p: Float64Array, logp: Float64Array): { logZ: number; entropy: number } {
  let max = -Infinity;
  for (let v = 0; v < V; v++) max = Math.max(max, zs[row + v]!);
  let total = 0;
  for (let v = 0; v < V; v++) total += p[v] = Math.exp(zs[row + v]! - max);
  for (let v = 0; v < V; v++) p[v] = p[v]! / total;
  let entropy = 0;
  for (let v = 0; v < V; v++) {
    const pv = p[v]!;
    logp[v] = pv > 0 ? Math.log(pv) : 0;
    if (pv > 0) entropy -= pv * logp[v]!;
  }
  return { logZ: max + Math.log(total), entropy };
}

/** Rows 0 .. T-1: out [T, 2] = (log p(target), entropy); scratch f64 [2V]. */
export function logProbsRows(zs: Float32Array, ys: Int32Array, out: Float32Array, T: number, V: number, scratch: Float64Array): void {
  const [p, logp] = [scratch.subarray(0, V), scratch.subarray(V, 2 * V)];
  for (let t = 0; t < T; t++) {
    const { logZ, entropy } = softmaxRow(zs, t * V, V, p, logp);
    out[t * 2] = zs[t * V + ys[t]!]! - logZ;
    out[t * 2 + 1] = entropy;
  }
}

/** Rows 0 .. T-1 of logitsBackward: out [T, V]; scratch f64 [2V]. */
export function logitsBackwardRows(zs: Float32Array, ys: Int32Array, cw: Float32Array, ew: Float32Array, out: Float32Array, T: number, V: number, scratch: Float64Array): void {
  const [p, logp] = [scratch.subarray(0, V), scratch.subarray(V, 2 * V)];
  for (let t = 0; t < T; t++) {
    const row = t * V;
    const h = softmaxRow(zs, row, V, p, logp).entropy;
    const [target, logpScale, entropyScale] = [ys[t]!, cw[t]!, ew[t]!];
    for (let v = 0; v < V; v++) {
      const pv = p[v]!;
      out[row + v] = -logpScale * ((v === target ? 1 : 0) - pv) + entropyScale * pv * (logp[v]! + h);
    }
  }
}

/** Elements [0, n): out = silu(g)·u. */
export function swigluRange(g: Float32Array, u: Float32Array, out: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) out[i] = (g[i]! / (1 + Math.exp(-g[i]!))) * u[i]!;
}

/** Elements [0, n): silu(g) = g·σ(g), silu'(g) = σ(g)·(1 + g·(1 − σ(g))). */
export function swigluBackwardRange(dy: Float32Array, g: Float32Array, u: Float32Array, dGate: Float32Array, dUp: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const sigma = 1 / (1 + Math.exp(-g[i]!));
    dUp[i] = dy[i]! * g[i]! * sigma;
    dGate[i] = dy[i]! * u[i]! * sigma * (1 + g[i]! * (1 - sigma));
  }
}

/** The loops above over arrays at byte addresses of a memory of the arena (a thread's share: its first row's). */
export const ROW_KERNELS = {
  logProbs: (m: WebAssembly.Memory, zs: number, ys: number, out: number, T: number, V: number, scratch: number) =>
    logProbsRows(new Float32Array(m.buffer, zs, T * V), new Int32Array(m.buffer, ys, T), new Float32Array(m.buffer, out, 2 * T), T, V, new Float64Array(m.buffer, scratch, 2 * V)),
  logitsBackward: (m: WebAssembly.Memory, zs: number, ys: number, cw: number, ew: number, out: number, T: number, V: number, scratch: number) => {
    const f32 = (at: number, n: number) => new Float32Array(m.buffer, at, n);
    logitsBackwardRows(f32(zs, T * V), new Int32Array(m.buffer, ys, T), f32(cw, T), f32(ew, T), f32(out, T * V), T, V, new Float64Array(m.buffer, scratch, 2 * V));
  },
  swiglu: (m: WebAssembly.Memory, g: number, u: number, out: number, n: number) => swigluRange(new Float32Array(m.buffer, g, n), new Float32Array(m.buffer, u, n), new Float32Array(m.buffer, out, n), n),
  swigluBackward: (m: WebAssembly.Memory, dy: number, g: number, u: number, dGate: number, dUp: number, n: number) => {
    const f32 = (at: number) => new Float32Array(m.buffer, at, n);
    swigluBackwardRange(f32(dy), f32(g), f32(u), f32(dGate), f32(dUp), n);
  },
} as const;
