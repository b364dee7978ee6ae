// RMSNorm backward: for y = x · r · w with r = inverseSqrt(mean(x²) + eps),
//   dx[t, d] = r · dy[t, d] · w[d] - x[t, d] · r³ · (Σ_e dy[t, e] · w[e] · x[t, e]) / D
//   INVERSE_RMS_ONLY = true: out[t] = r of row t instead (rmsnorm_weight_grad.wgsl reads it).
// Bindings: p: Params; dy: [T, D] f32; x: [T, D] f32; weight: [D] f32; out: [T, D] f32 (or [T])
// Dispatch: T workgroups of 256 threads (folded into (x, y) past 65535), one row each;
//           SERIAL (the CPU layout, for software adapters): ceil(T / SERIAL_THREADS) workgroups, a thread a row.
//
// Batch invariance: both row sums are lane-strided (d = l, l+256, ...) and met by a fixed tree: order depends on D.
// SERIAL sums each in ascending order (r as rmsnorm.wgsl's SERIAL layout computes it).

override INVERSE_RMS_ONLY: bool = false;
override SERIAL: bool = false;
override SERIAL_THREADS: u32 = 64u; // SERIAL: threads a workgroup (8 to 64)
override WG: u32 = select(THREADS, SERIAL_THREADS, SERIAL);
override PARTIAL_WORDS: u32 = select(THREADS, 1u, SERIAL);
const THREADS: u32 = 256u;

struct Params { T: u32, D: u32, eps: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, PARTIAL_WORDS>;

fn total(value: f32, lane: u32) -> f32 {
  partial[lane] = value;
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) { partial[lane] += partial[lane + stride]; }
    workgroupBarrier();
  }
  let result = partial[0];
  workgroupBarrier();
  return result;
}

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
  let base = t * p.D;
  var squares = 0.0;
  for (var d = lane; d < p.D; d += THREADS) { squares = fma(x[base + d], x[base + d], squares); }
  let r = inverseSqrt(total(squares, lane) / f32(p.D) + p.eps);
  if (INVERSE_RMS_ONLY) {
    if (lane == 0u) { out[t] = r; }
    return;
  }
  var dot = 0.0;
  for (var d = lane; d < p.D; d += THREADS) { dot = fma(dy[base + d] * weight[d], x[base + d], dot); }
  let c = r * r * r * total(dot, lane) / f32(p.D);
  for (var d = lane; d < p.D; d += THREADS) { out[base + d] = r * dy[base + d] * weight[d] - x[base + d] * c; }
}

#include "row_rms.wgsl"

// SERIAL: row t, each sum in ascending order.
fn serialRow(t: u32) {
  let base = t * p.D;
  let r = rowInverseRms(base, p.D, p.eps);
  if (INVERSE_RMS_ONLY) {
    out[t] = r;
    return;
  }
  var dot = 0.0;
  for (var d = 0u; d < p.D; d++) { dot = fma(dy[base + d] * weight[d], x[base + d], dot); }
  let c = r * r * r * dot / f32(p.D);
  for (var d = 0u; d < p.D; d++) { out[base + d] = r * dy[base + d] * weight[d] - x[base + d] * c; }
}
