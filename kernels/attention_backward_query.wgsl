// Attention backward, query side (attention_packed.wgsl's layout), for one (token t, head h):
//   P_j = softmax_j(q_t · k_j · scale) over j = start..t,  Δ_t = dOut_t · out_t
//   dq_t = scale · Σ_j P_j · (dOut_t · v_j - Δ_t) · k_j
//   stats[t, h] = (max score, Σ_j e^(s_j - max), Δ_t), which attention_backward_kv.wgsl reuses.
// Bindings: p: Params; q: [T, heads · hd]; k, v: [T, kvHeads · hd]; dOut, out: [T, heads · hd]; positions: [T] i32;
//           dq: [T, heads · hd]; stats: [T · heads, 3]  (all f32 but positions)
// Dispatch: T · heads workgroups of 64 threads (folded into (x, y) past 65535).
//           SERIAL (the CPU layout, for software adapters: see linear.wgsl): ceil(T · heads / SERIAL_THREADS)
//           workgroups, a thread per (token, head), with no workgroup memory and no barriers; the scores are
//           computed again in each of the three passes (max, sum, gradient) instead of kept.
//
// Batch invariance: every sum has a fixed order that depends on hd and t's position only (as the forward). SERIAL
// makes the same sums: Δ's 64 lanes held as 16 quads and the softmax sum's 64 lanes in an array, each met in the
// same tree; the max is the same whatever its order.

override SERIAL: bool = false;
override SERIAL_THREADS: u32 = 64u; // SERIAL: threads a workgroup (8 to 64)
override WG: u32 = select(THREADS, SERIAL_THREADS, SERIAL);
override WEIGHT_WORDS: u32 = select(MAX_CONTEXT, 1u, SERIAL);
override VECTOR_WORDS: u32 = select(MAX_HEAD_DIM, 1u, SERIAL);
const THREADS: u32 = 64u;
const MAX_CONTEXT: u32 = 4096u;
const MAX_HEAD_DIM: u32 = 256u;

struct Params { T: u32, heads: u32, kvHeads: u32, headDim: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> dOut: array<f32>;
@group(0) @binding(5) var<storage, read> out: array<f32>;
@group(0) @binding(6) var<storage, read> positions: array<i32>;
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;
@group(0) @binding(8) var<storage, read_write> stats: array<f32>;

var<workgroup> weights: array<f32, WEIGHT_WORDS>; // e^(s_j - max), then P_j · (dOut · v_j - Δ)
var<workgroup> query: array<f32, VECTOR_WORDS>;
var<workgroup> gradient: array<f32, VECTOR_WORDS>; // dOut_t

#include "combine.wgsl"
#include "packed_place.wgsl"

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

  var localDelta = 0.0;
  for (var d = lane; d < hd; d += THREADS) {
    query[d] = q[qBase + d];
    gradient[d] = dOut[qBase + d];
    localDelta = fma(dOut[qBase + d], out[qBase + d], localDelta);
  }
  let delta = combine(localDelta, lane, false); // its barriers publish query and gradient too

  var localMax = bitcast<f32>(0xff7fffffu);
  for (var j = lane; j < count; j += THREADS) {
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot = fma(query[d], k[head0 + j * width + d], dot); }
    weights[j] = dot * p.scale;
    localMax = max(localMax, weights[j]);
  }
  let maxScore = combine(localMax, lane, true);
  var localSum = 0.0;
  for (var j = lane; j < count; j += THREADS) {
    let e = exp(weights[j] - maxScore);
    weights[j] = e;
    localSum += e;
  }
  let total = combine(localSum, lane, false);
  for (var j = lane; j < count; j += THREADS) {
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot = fma(gradient[d], v[head0 + j * width + d], dot); }
    weights[j] = (weights[j] / total) * (dot - delta);
  }
  workgroupBarrier();
  for (var d = lane; d < hd; d += THREADS) {
    var acc = 0.0;
    for (var j = 0u; j < count; j++) { acc = fma(weights[j], k[head0 + j * width + d], acc); }
    dq[qBase + d] = acc * p.scale;
  }
  if (lane == 0u) {
    stats[index * 3u] = maxScore;
    stats[index * 3u + 1u] = total;
    stats[index * 3u + 2u] = delta;
  }
}

// ---- CPU layout ----

// q_t · k_j · scale, summed over d in order (the GPU layout's score of j).
fn score(qBase: u32, row: u32) -> f32 {
  var dot = 0.0;
  for (var d = 0u; d < p.headDim; d++) { dot = fma(q[qBase + d], k[row + d], dot); }
  return dot * p.scale;
}

// dOut_t · out_t: lane l = 4i + c of the GPU layout sums d = l, l + 64, ...; quad i holds lanes 4i .. 4i + 3, met
// in combine's tree (strides 32 .. 1).
fn deltaOf(qBase: u32) -> f32 {
  let hd = p.headDim;
  var quads = array<vec4f, 16>();
  for (var d0 = 0u; d0 < hd; d0 += THREADS) {
    for (var i = 0u; i < 16u; i++) {
      let d = d0 + 4u * i;
      var g = vec4f();
      var o = vec4f();
      for (var c = 0u; c < 4u; c++) {
        g[c] = select(0.0, dOut[qBase + min(d + c, hd - 1u)], d + c < hd);
        o[c] = select(0.0, out[qBase + min(d + c, hd - 1u)], d + c < hd);
      }
      quads[i] = fma(g, o, quads[i]);
    }
  }
  for (var stride = 8u; stride > 0u; stride /= 2u) {
    for (var i = 0u; i < stride; i++) { quads[i] += quads[i + stride]; }
  }
  let pair = quads[0].xy + quads[0].zw;
  return pair.x + pair.y;
}

fn serial(index: u32) {
  if (index >= p.T * p.heads) { return; }
  let hd = p.headDim;
  let at = placeOf(index);

  let delta = deltaOf(at.qBase);
  var maxScore = bitcast<f32>(0xff7fffffu);
  for (var j = 0u; j < at.count; j++) { maxScore = max(maxScore, score(at.qBase, at.head0 + j * at.width)); }
  var lanes: array<f32, THREADS>; // lane l of the GPU layout sums j = l, l + 64, ...
  for (var j = 0u; j < at.count; j++) { lanes[j % THREADS] += exp(score(at.qBase, at.head0 + j * at.width) - maxScore); }
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    for (var i = 0u; i < stride; i++) { lanes[i] += lanes[i + stride]; }
  }
  let total = lanes[0];
  var acc: array<f32, MAX_HEAD_DIM>;
  for (var j = 0u; j < at.count; j++) {
    let row = at.head0 + j * at.width;
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot = fma(dOut[at.qBase + d], v[row + d], dot); }
    let weight = (exp(score(at.qBase, row) - maxScore) / total) * (dot - delta);
    for (var d = 0u; d < hd; d++) { acc[d] = fma(weight, k[row + d], acc[d]); }
  }
  for (var d = 0u; d < hd; d++) { dq[at.qBase + d] = acc[d] * p.scale; }
  stats[index * 3u] = maxScore;
  stats[index * 3u + 1u] = total;
  stats[index * 3u + 2u] = delta;
}
