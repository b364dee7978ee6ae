// Causal grouped-query attention of each token over its own slot of the KV cache:
//   out[t, h, :] = Σ_{j ≤ pos[t]} softmax_j(q[t, h, :] · K[slot, j, g, :] · scale) · V[slot, j, g, :]
//   with g = h / (heads / kvHeads) and scale = 1 / √hd.
// Bindings: p: Params
//           q:               [T, heads · hd] f32
//           slots, positions: [T] i32 (clamped into the cache)
//           cacheK, cacheV:  [slots, maxLen, kvHeads · hd] f32 of one layer, from element layerBase
//           out:             [T, heads · hd] f32
// Dispatch: T · heads workgroups of 64 threads (folded into (x, y) past 65535), one (token, head) each.
//           Scores for positions 0..pos live in workgroup memory: context up to MAX_CONTEXT = 4096 (16 KiB);
//           hd up to MAX_HEAD_DIM = 256.
//           SERIAL (the CPU layout, for software adapters: see linear.wgsl): ceil(T · heads / SERIAL_THREADS)
//           workgroups, a thread per (token, head), with no workgroup memory and no barriers.
//
// Batch invariance: each score is one dot product over d = 0..hd-1 in order; the max and the softmax sum are
// per-thread position-strided sums (j = l, l+64, ...) met by a fixed tree (SERIAL: one sum over j in order); each
// output value is summed by one thread over j = 0..pos in order. Every order depends on hd and pos only.

override SERIAL: bool = false;
override SERIAL_THREADS: u32 = 64u; // SERIAL: threads a workgroup (8 to 64)
override WG: u32 = select(THREADS, SERIAL_THREADS, SERIAL);
override SCORE_WORDS: u32 = select(MAX_CONTEXT, 1u, SERIAL);
override QUERY_WORDS: u32 = select(MAX_HEAD_DIM, 1u, SERIAL);
const THREADS: u32 = 64u;
const MAX_CONTEXT: u32 = 4096u;
const MAX_HEAD_DIM: u32 = 256u;

struct Params { T: u32, heads: u32, kvHeads: u32, headDim: u32, slots: u32, maxLen: u32, layerBase: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> slots: array<i32>;
@group(0) @binding(3) var<storage, read> positions: array<i32>;
@group(0) @binding(4) var<storage, read> cacheK: array<f32>;
@group(0) @binding(5) var<storage, read> cacheV: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

var<workgroup> scores: array<f32, SCORE_WORDS>;
var<workgroup> query: array<f32, QUERY_WORDS>;

#include "combine.wgsl"

// Where (token, head) number `index` reads and writes: its context's length, K[slot, 0, g, 0] of its kv head g, a
// cache row's width, its query's first value.
struct Place { count: u32, head0: u32, width: u32, qBase: u32 }

fn placeOf(index: u32) -> Place {
  let t = index / p.heads;
  let h = index % p.heads;
  let width = p.kvHeads * p.headDim;
  let g = h / (p.heads / p.kvHeads);
  let slot = min(u32(max(slots[t], 0)), p.slots - 1u);
  let count = min(u32(max(positions[t], 0)), p.maxLen - 1u) + 1u;
  return Place(count, p.layerBase + slot * p.maxLen * width + g * p.headDim, width, (t * p.heads + h) * p.headDim);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  if (SERIAL) {
    serial((wid.x + wid.y * groups.x) * SERIAL_THREADS + lid.x);
    return;
  }
  let index = wid.x + wid.y * groups.x;
  if (index >= p.T * p.heads) { return; }
  let lane = lid.x;
  let hd = p.headDim;
  let at = placeOf(index);
  let count = at.count;
  let head0 = at.head0;
  let width = at.width;
  let qBase = at.qBase;

  for (var d = lane; d < hd; d += THREADS) { query[d] = q[qBase + d]; }
  workgroupBarrier();

  var localMax = bitcast<f32>(0xff7fffffu); // the lowest finite f32
  for (var j = lane; j < count; j += THREADS) {
    let kBase = head0 + j * width;
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot = fma(query[d], cacheK[kBase + d], dot); }
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
  let total = combine(localSum, lane, false); // ends with a barrier: every score is visible below

  for (var d = lane; d < hd; d += THREADS) {
    var acc = 0.0;
    for (var j = 0u; j < count; j++) { acc = fma(scores[j], cacheV[head0 + j * width + d], acc); }
    out[qBase + d] = acc / total;
  }
}

// CPU layout: thread `index` attends for one (token, head) alone: the scores twice (for their max, then for the
// weights; the same dot products, so the same values), the output's sums in a private array.
fn serial(index: u32) {
  if (index >= p.T * p.heads) { return; }
  let hd = p.headDim;
  let at = placeOf(index);

  var maxScore = bitcast<f32>(0xff7fffffu); // the lowest finite f32
  for (var j = 0u; j < at.count; j++) {
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot = fma(q[at.qBase + d], cacheK[at.head0 + j * at.width + d], dot); }
    maxScore = max(maxScore, dot * p.scale);
  }
  var total = 0.0;
  var acc: array<f32, MAX_HEAD_DIM>;
  for (var j = 0u; j < at.count; j++) {
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot = fma(q[at.qBase + d], cacheK[at.head0 + j * at.width + d], dot); }
    let e = exp(dot * p.scale - maxScore);
    total += e;
    for (var d = 0u; d < hd; d++) { acc[d] = fma(e, cacheV[at.head0 + j * at.width + d], acc[d]); }
  }
  for (var d = 0u; d < hd; d++) { out[at.qBase + d] = acc[d] / total; }
}
