// RMSNorm: out[t, d] = x[t, d] · inverseSqrt(mean_d(x[t, d]²) + eps) · weight[d]
// Bindings: p: Params; x: [T, D] f32; weight: [D] f32; out: [T, D] f32
// Dispatch: T workgroups of 256 threads (folded into (x, y) past 65535), one row each.
//
// Batch invariance: thread l sums x² over d = l, l+256, ... in order, then a fixed tree over the 256 threads:
// the order depends on D only.

const THREADS: u32 = 256u;

struct Params { T: u32, D: u32, eps: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, THREADS>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
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
