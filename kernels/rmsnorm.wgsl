// RMSNorm: out[t, :] = x[t, :] / sqrt(mean(x[t, :]²) + eps) · weight
// Bindings: p: Params; x: [T, D]; weight: [D]; out: [T, D]
// Dispatch: (T) workgroups of 256 threads, one row each; fixed-order tree reduction (batch-invariant).

struct Params { D: u32, eps: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let base = wid.x * p.D;
  var sum = 0.0;
  for (var d = lid.x; d < p.D; d += 256u) { sum += x[base + d] * x[base + d]; }
  partial[lid.x] = sum;
  workgroupBarrier();
  for (var stride = 128u; stride > 0u; stride /= 2u) {
    if (lid.x < stride) { partial[lid.x] += partial[lid.x + stride]; }
    workgroupBarrier();
  }
  let inverseRms = inverseSqrt(partial[0] / f32(p.D) + p.eps);
  for (var d = lid.x; d < p.D; d += 256u) { out[base + d] = x[base + d] * inverseRms * weight[d]; }
}
