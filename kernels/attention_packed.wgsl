// Causal grouped-query attention over packed sequences in token layout (the training forward):
//   out[t, h, :] = Σ_{j = start..t} softmax_j(q[t, h, :] · k[j, g, :] · scale) · v[j, g, :]
//   with start = t - positions[t] (the first token of t's sequence), g = h / (heads / kvHeads), scale = 1 / √hd.
// Bindings: p: Params; q: [T, heads · hd] f32; k, v: [T, kvHeads · hd] f32; positions: [T] i32; out: [T, heads · hd]
// Dispatch: T · heads workgroups of 64 threads (folded into (x, y) past 65535), one (token, head) each.
//           Scores live in workgroup memory: sequences up to MAX_CONTEXT = 4096; hd up to MAX_HEAD_DIM = 256.
//
// Batch invariance: the order of attention.wgsl (each score one dot product in d order, max and sum by
// position-strided lanes and a fixed tree, each output summed over j in order): it depends on hd and t's position.

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

var<workgroup> scores: array<f32, MAX_CONTEXT>;
var<workgroup> query: array<f32, MAX_HEAD_DIM>;

#include "combine.wgsl"
#include "packed_place.wgsl"

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let index = wid.x + wid.y * groups.x;
  if (index >= p.T * p.heads) { return; }
  let lane = lid.x;
  let hd = p.headDim;
  let at = placeOf(index);
  let count = at.count;
  let head0 = at.head0; // k[start, g, 0]
  let width = at.width;
  let qBase = at.qBase;

  for (var d = lane; d < hd; d += THREADS) { query[d] = q[qBase + d]; }
  workgroupBarrier();

  var localMax = bitcast<f32>(0xff7fffffu);
  for (var j = lane; j < count; j += THREADS) {
    let kBase = head0 + j * width;
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot = fma(query[d], k[kBase + d], dot); }
    scores[j] = dot * p.scale;
    localMax = max(localMax, scores[j]);
  }
  let maxScore = combine(localMax, lane, true);

  var localSum = 0.0;
  for (var j = lane; j < count; j += THREADS) {
    let e = exp(scores[j] - maxScore);
    scores[j] = e;
    localSum += e;
  }
  let total = combine(localSum, lane, false);

  for (var d = lane; d < hd; d += THREADS) {
    var acc = 0.0;
    for (var j = 0u; j < count; j++) { acc = fma(scores[j], v[head0 + j * width + d], acc); }
    out[qBase + d] = acc / total;
  }
}
