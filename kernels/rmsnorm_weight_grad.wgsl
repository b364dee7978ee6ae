// RMSNorm weight gradient: dweight[d] = Σ_t dy[t, d] · x[t, d] · r[t]     (r from rmsnorm_backward.wgsl's
// INVERSE_RMS_ONLY variant)
// Bindings: p: Params; dy: [T, D] f32; x: [T, D] f32; r: [T] f32; out: [D] f32
// Dispatch: ceil(D / 256) workgroups of 256 threads, one column each.
//
// Batch invariance: one thread sums its column over t = 0..T-1 in order.

struct Params { T: u32, D: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> r: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let d = gid.x + gid.y * groups.x * 256u;
  if (d >= p.D) { return; }
  var acc = 0.0;
  for (var t = 0u; t < p.T; t++) { acc = fma(dy[t * p.D + d] * x[t * p.D + d], r[t], acc); }
  out[d] = acc;
}
