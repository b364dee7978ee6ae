// LoRA shrink: h[t, j] = Σ_k x[t, k] · a[adapters[t]·rank + j, k]   (0 when adapters[t] < 0)
// Bindings: p: Params; x: [T, K]; a: [slots·rank, K] f32 (the bank's A factors); adapters: [T] i32; h: [T, rank]
// Dispatch: (ceil(rank / 8), T) workgroups of 32 K-lanes × 8 rank columns: each row reads its own adapter.
// Batch invariance: the same lane-strided sum and fixed tree as matmul.wgsl.

const LANES: u32 = 32u;
const COLS: u32 = 8u;
struct Params { K: u32, rank: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> adapters: array<i32>;
@group(0) @binding(4) var<storage, read_write> h: array<f32>;

var<workgroup> partial: array<f32, 256>; // [COLS][LANES]

@compute @workgroup_size(32, 8)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let lane = lid.x;
  let j = wid.x * COLS + lid.y;
  let t = wid.y;
  let adapter = adapters[t];
  var sum = 0.0;
  if (adapter >= 0 && j < p.rank) {
    let aBase = (u32(adapter) * p.rank + j) * p.K;
    for (var k = lane; k < p.K; k += LANES) { sum += x[t * p.K + k] * a[aBase + k]; }
  }
  let base = lid.y * LANES;
  partial[base + lane] = sum;
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) { partial[base + lane] += partial[base + lane + stride]; }
    workgroupBarrier();
  }
  if (lane == 0u && j < p.rank) { h[t * p.rank + j] = partial[base]; }
}
