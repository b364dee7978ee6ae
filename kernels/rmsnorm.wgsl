// RMSNorm: out[t, d] = x[t, d] · inverseSqrt(mean_d(x[t, d]²) + eps) · weight[d]
// Bindings: p: Params; x: [T, D] f32; weight: [D] f32; out: [T, D] f32
// Dispatch: T workgroups of 256 threads (folded into (x, y) past 65535), one row each;
//           SERIAL (the CPU layout, for software adapters): ceil(T / SERIAL_THREADS) workgroups, a thread a row.
//
// Batch invariance: thread l sums x² over d = l, l+256, ... in order, then a fixed tree over the 256 threads:
// the order depends on D only. SERIAL sums every d in ascending order, as linear.wgsl's CPU layout normalises its
// input (include/row_rms.wgsl, xHat): on software adapters the trainer's RMSNorm is the inference forward's, bit for bit.

override SERIAL: bool = false;
override SERIAL_THREADS: u32 = 64u; // SERIAL: threads a workgroup (8 to 64)
override WG: u32 = select(THREADS, SERIAL_THREADS, SERIAL);
override PARTIAL_WORDS: u32 = select(THREADS, 1u, SERIAL);
const THREADS: u32 = 256u;

struct Params { T: u32, D: u32, eps: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, PARTIAL_WORDS>;

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
  var sum = 0.0;
  for (var d = lane; d < p.D; d += THREADS) { sum = fma(x[base + d], x[base + d], sum); }
  partial[lane] = sum;
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) { partial[lane] += partial[lane + stride]; }
    workgroupBarrier();
  }
  let inverseRms = inverseSqrt(partial[0] / f32(p.D) + p.eps);
  for (var d = lane; d < p.D; d += THREADS) { out[base + d] = x[base + d] * inverseRms * weight[d]; }
}

#include "row_rms.wgsl"

// SERIAL: row t, its squares summed in ascending order.
fn serialRow(t: u32) {
  let base = t * p.D;
  let inverseRms = rowInverseRms(base, p.D, p.eps);
  for (var d = 0u; d < p.D; d++) { out[base + d] = x[base + d] * inverseRms * weight[d]; }
}
