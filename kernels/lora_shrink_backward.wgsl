// LoRA shrink backward: dx[t, k] += Σ_j dh[t, j] · A[s · rank + j, k], s = adapters[t] >= 0 (else untouched)
// Bindings: p: Params; dh: [T, rank] f32; a: [slots · rank, K] f32; adapters: [T] i32; dx: [T, K] f32, in place
// Dispatch: ceil(T · K / 256) workgroups of 256 threads (folded into (x, y) past 65535), one element each.
//
// Batch invariance: one thread sums over j = 0..rank-1 in order.

struct Params { T: u32, K: u32, rank: u32, slots: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dh: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> adapters: array<i32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= p.T * p.K) { return; }
  let t = i / p.K;
  let k = i % p.K;
  let slot = u32(adapters[t]);
  if (slot >= p.slots) { return; }
  var sum = 0.0;
  for (var j = 0u; j < p.rank; j++) { sum = fma(dh[t * p.rank + j], a[(slot * p.rank + j) * p.K + k], sum); }
  dx[i] = dx[i] + sum;
}
