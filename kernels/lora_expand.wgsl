// LoRA expand: y[t, n] += scales[s] · Σ_j h[t, j] · b[s·N + n, j]   with s = adapters[t] >= 0
// Bindings: p: Params; h: [T, rank]; b: [slots·N, rank] f32 (the bank's B factors); adapters: [T] i32;
//           scales: [slots]; y: [T, N]
// Dispatch: 1-D over T·N in workgroups of 256, folded into (x, y); each element sums over rank in order.

struct Params { T: u32, N: u32, rank: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> h: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> adapters: array<i32>;
@group(0) @binding(4) var<storage, read> scales: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= p.T * p.N) { return; }
  let t = i / p.N;
  let n = i % p.N;
  let adapter = adapters[t];
  if (adapter < 0) { return; }
  let s = u32(adapter);
  let bBase = (s * p.N + n) * p.rank;
  var sum = 0.0;
  for (var j = 0u; j < p.rank; j++) { sum += h[t * p.rank + j] * b[bBase + j]; }
  y[i] = y[i] + scales[s] * sum;
}
