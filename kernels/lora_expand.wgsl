// LoRA expand: y[t, n] += scales[s] · Σ_j h[t, j] · B[s · N + n, j]   with s = adapters[t]; rows with s < 0 untouched
//
// Bindings: p: Params
//           h:        [T, rank] f32 (from lora_shrink)
//           b:        [slots · N, wordsPerRow] u32: the bank's B factors, f32 bits or (WEIGHT_F16) half pairs
//           adapters: [T] i32 (-1: none; a slot past the bank counts as none)
//           scales:   [slots] f32 (lora_alpha / rank of each adapter)
//           y:        [T, N] f32, updated in place
// Dispatch: one thread per (t, n): ceil(T · N / 256) workgroups of 256, folded into (x, y) past 65535.
//
// Batch invariance: each element sums j = 0, 1, ..., rank - 1 in order, by itself: nothing depends on T.

override WEIGHT_F16: bool = false;

struct Params { T: u32, N: u32, rank: u32, slots: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> h: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read> adapters: array<i32>;
@group(0) @binding(4) var<storage, read> scales: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
  if (i >= p.T * p.N) { return; }
  let t = i / p.N;
  let n = i % p.N;
  let s = u32(adapters[t]); // -1 wraps past every slot
  if (s >= p.slots) { return; }
  let hBase = t * p.rank;
  var sum = 0.0;
  if (WEIGHT_F16) {
    let base = (s * p.N + n) * ((p.rank + 1u) / 2u);
    for (var j = 0u; j < p.rank; j += 2u) {
      let pair = unpack2x16float(b[base + j / 2u]);
      sum = fma(h[hBase + j], pair.x, sum);
      if (j + 1u < p.rank) { sum = fma(h[hBase + j + 1u], pair.y, sum); }
    }
  } else {
    let base = (s * p.N + n) * p.rank;
    for (var j = 0u; j < p.rank; j++) { sum = fma(h[hBase + j], bitcast<f32>(b[base + j]), sum); }
  }
  y[i] = fma(scales[s], sum, y[i]);
}
