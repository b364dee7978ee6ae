// Log-softmax of each logit row, forward and backward (one file: both need the same row statistics).
//   m = max_v z[t, v],  S = Σ_v e^(z - m),  W = Σ_v e^(z - m)·z,  log Z = m + log S,  H = log Z - W / S
//   BACKWARD = false:  out[t] = (z[t, y_t] - log Z, H)                                     out: [T, 2]
//   BACKWARD = true:   out[t, v] = -lw[t]·(δ(v, y_t) - p_v) + ew[t]·p_v·(log p_v + H)      out: [T, V]
//                      (the gradient of L = -Σ_t (lw[t]·log p_t(y_t) + ew[t]·H_t))
// Bindings: p: Params; logits: [T, V] f32; targets: [T] i32 (clamped into the vocabulary);
//           logpWeight, entropyWeight: [T] f32 (read only when BACKWARD); out: see above
// Dispatch: T workgroups of 256 threads (folded into (x, y) past 65535), one row each;
//           SERIAL (the CPU layout, for software adapters): ceil(T / SERIAL_THREADS) workgroups, a thread a row.
//
// Batch invariance: every row statistic is a lane-strided sum (v = l, l+256, ...) met by a fixed tree; the order
// depends on V only. SERIAL sums over every v in ascending order (the max is the same in any order).

override BACKWARD: bool = false;
override SERIAL: bool = false;
override SERIAL_THREADS: u32 = 64u; // SERIAL: threads a workgroup (8 to 64)
override WG: u32 = select(THREADS, SERIAL_THREADS, SERIAL);
const THREADS: u32 = 256u;

struct Params { T: u32, V: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read> logpWeight: array<f32>;
@group(0) @binding(4) var<storage, read> entropyWeight: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

#include "combine.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  if (SERIAL) {
    let t = (wid.x + wid.y * groups.x) * SERIAL_THREADS + lid.x;
    if (t < p.T) { serialRow(t); }
    return;
  }
  let t = wid.x + wid.y * groups.x;
  if (t >= p.T) { return; }
  let lane = lid.x;
  let base = t * p.V;
  var localMax = bitcast<f32>(0xff7fffffu);
  for (var v = lane; v < p.V; v += THREADS) { localMax = max(localMax, logits[base + v]); }
  let m = combine(localMax, lane, true);
  var s = 0.0;
  var w = 0.0;
  for (var v = lane; v < p.V; v += THREADS) {
    let z = logits[base + v];
    let e = exp(z - m);
    s += e;
    w = fma(e, z, w);
  }
  let total = combine(s, lane, false);
  let weighted = combine(w, lane, false);
  writeRow(t, lane, THREADS, m + log(total), weighted / total);
}

// SERIAL: row t, its statistics over every v in ascending order.
fn serialRow(t: u32) {
  let base = t * p.V;
  var m = bitcast<f32>(0xff7fffffu);
  for (var v = 0u; v < p.V; v++) { m = max(m, logits[base + v]); }
  var s = 0.0;
  var w = 0.0;
  for (var v = 0u; v < p.V; v++) {
    let z = logits[base + v];
    let e = exp(z - m);
    s += e;
    w = fma(e, z, w);
  }
  writeRow(t, 0u, 1u, m + log(s), w / s);
}

// Row t's outputs from log Z and W / S, values v = first, first + stride, ... (the statistics: by first = 0).
fn writeRow(t: u32, first: u32, stride: u32, logZ: f32, meanLogit: f32) {
  let base = t * p.V;
  let entropy = logZ - meanLogit;
  let y = min(u32(max(targets[t], 0)), p.V - 1u);
  if (!BACKWARD) {
    if (first == 0u) {
      out[t * 2u] = logits[base + y] - logZ;
      out[t * 2u + 1u] = entropy;
    }
    return;
  }
  let lw = logpWeight[t];
  let ew = entropyWeight[t];
  for (var v = first; v < p.V; v += stride) {
    let logp = logits[base + v] - logZ;
    let prob = exp(logp);
    let onehot = select(0.0, 1.0, v == y);
    out[base + v] = -lw * (onehot - prob) + ew * prob * (logp + entropy);
  }
}
