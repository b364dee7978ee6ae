// Causal attention over the KV cache, grouped-query:
//   out[t, h, :] = Σ_{j ≤ pos[t]} softmax_j(q[t, h]·k[slot, j, g] / √hd) · v[slot, j, g],   g = h / (heads / kvHeads)
// Bindings: p: Params; q: [T, heads·hd]; slots, positions: [T] i32; cacheK, cacheV: [layers, S, maxLen, kvHeads·hd];
//           out: [T, heads·hd]
// Dispatch: (heads, T) workgroups of 64 threads, one (token, head) each. Scores live in workgroup memory, so the
// context is limited to MAX_CONTEXT = 4096. Max and sum use fixed-order tree reductions and each output element
// sums positions in order: a token's result does not depend on the rest of the batch.

const THREADS: u32 = 64u;
const MAX_CONTEXT: u32 = 4096u;
struct Params { heads: u32, kvHeads: u32, headDim: u32, layer: u32, slots: u32, maxLen: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> slots: array<i32>;
@group(0) @binding(3) var<storage, read> positions: array<i32>;
@group(0) @binding(4) var<storage, read> cacheK: array<f32>;
@group(0) @binding(5) var<storage, read> cacheV: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

var<workgroup> scores: array<f32, 4096>;
var<workgroup> partial: array<f32, 64>;

fn reduce(value: f32, lane: u32, isMax: bool) -> f32 {
  partial[lane] = value;
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      let other = partial[lane + stride];
      partial[lane] = select(partial[lane] + other, max(partial[lane], other), isMax);
    }
    workgroupBarrier();
  }
  let result = partial[0];
  workgroupBarrier();
  return result;
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let lane = lid.x;
  let h = wid.x;
  let t = wid.y;
  let hd = p.headDim;
  let width = p.kvHeads * hd;
  let g = h / (p.heads / p.kvHeads);
  let count = u32(positions[t]) + 1u;
  let slotBase = (p.layer * p.slots + u32(slots[t])) * p.maxLen;
  let qBase = (t * p.heads + h) * hd;

  var localMax = -3.4e38;
  for (var j = lane; j < count; j += THREADS) {
    let kBase = (slotBase + j) * width + g * hd;
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot += q[qBase + d] * cacheK[kBase + d]; }
    scores[j] = dot * p.scale;
    localMax = max(localMax, scores[j]);
  }
  let maxScore = reduce(localMax, lane, true);
  var localSum = 0.0;
  for (var j = lane; j < count; j += THREADS) {
    let e = exp(scores[j] - maxScore);
    scores[j] = e;
    localSum += e;
  }
  let total = reduce(localSum, lane, false);
  for (var d = lane; d < hd; d += THREADS) {
    var acc = 0.0;
    for (var j = 0u; j < count; j++) { acc += scores[j] * cacheV[(slotBase + j) * width + g * hd + d]; }
    out[qBase + d] = acc / total;
  }
}
