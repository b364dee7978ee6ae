// Causal grouped-query attention over packed sequences in token layout (the training forward):
//   out[t, h, :] = Σ_{j = start..t} softmax_j(q[t, h, :] · k[j, g, :] · scale) · v[j, g, :]
//   with start = t - positions[t] (the first token of t's sequence), g = h / (heads / kvHeads), scale = 1 / √hd.
// Bindings: p: Params; q: [T, heads · hd] f32; k, v: [T, kvHeads · hd] f32; positions: [T] i32; out: [T, heads · hd]
// Dispatch: T · heads workgroups of 64 threads (folded into (x, y) past 65535), one (token, head) each.
//           Scores live in workgroup memory: sequences up to MAX_CONTEXT = 4096; hd up to MAX_HEAD_DIM = 256.
//           SERIAL (the CPU layout, for software adapters): ceil(T · heads / SERIAL_THREADS) workgroups, a thread
//           per (token, head), with no workgroup memory and no barriers.
//
// Batch invariance: the order of attention.wgsl in the same layout (include/attention_heads.wgsl holds both): it
// depends on hd and t's position. So a training forward's attention is the inference's, bit for bit.

override SERIAL: bool = false;
override SERIAL_THREADS: u32 = 64u; // SERIAL: threads a workgroup (8 to 64)
override WG: u32 = select(THREADS, SERIAL_THREADS, SERIAL);
override SCORE_WORDS: u32 = select(MAX_CONTEXT, 1u, SERIAL);
override QUERY_WORDS: u32 = select(MAX_HEAD_DIM, 1u, SERIAL);
const THREADS: u32 = 64u;
const MAX_CONTEXT: u32 = 4096u;
const MAX_HEAD_DIM: u32 = 256u;

struct Params { T: u32, heads: u32, kvHeads: u32, headDim: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> positions: array<i32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

var<workgroup> scores: array<f32, SCORE_WORDS>;
var<workgroup> query: array<f32, QUERY_WORDS>;

#include "combine.wgsl"
#include "packed_place.wgsl"
#include "attention_heads.wgsl"

fn keyAt(i: u32) -> f32 {
  return k[i];
}

fn valueAt(i: u32) -> f32 {
  return v[i];
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  if (SERIAL) {
    serial((wid.x + wid.y * groups.x) * SERIAL_THREADS + lid.x);
  } else {
    lanes(wid.x + wid.y * groups.x, lid.x);
  }
}
