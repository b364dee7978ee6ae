// Attention backward, key/value side, for one (key token u, kv head g), with the softmax statistics of
// attention_backward_query.wgsl (max, sum, Δ per query token and head):
//   for each query t = u .. seqEnds[u]-1 (u's sequence) and each head h of g's group, in that order:
//     P = e^(scale · q_t,h · k_u - max) / sum,   dS = scale · P · (dOut_t,h · v_u - Δ_t,h)
//     dk_u += dS · q_t,h,   dv_u += P · dOut_t,h
// Bindings: p: Params; q, dOut: [T, heads · hd]; k, v: [T, kvHeads · hd]; stats: [T · heads, 3];
//           seqEnds: [T] i32; dk, dv: [T, kvHeads · hd]   (f32 but seqEnds)
// Dispatch: T · kvHeads workgroups of 64 threads (folded into (x, y) past 65535); thread l owns d = l, l+64, ...
//
// Batch invariance: the loop over (t, h) runs in order; each dot product is lane-strided and met by a fixed tree.

const THREADS: u32 = 64u;

struct Params { T: u32, heads: u32, kvHeads: u32, headDim: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> dOut: array<f32>;
@group(0) @binding(5) var<storage, read> stats: array<f32>;
@group(0) @binding(6) var<storage, read> seqEnds: array<i32>;
@group(0) @binding(7) var<storage, read_write> dk: array<f32>;
@group(0) @binding(8) var<storage, read_write> dv: array<f32>;

var<workgroup> partial: array<vec2f, THREADS>;

// The two dot products (q·k, dOut·v) of one (t, h), summed by a fixed tree.
fn combine(value: vec2f, lane: u32) -> vec2f {
  partial[lane] = value;
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) { partial[lane] += partial[lane + stride]; }
    workgroupBarrier();
  }
  let result = partial[0];
  workgroupBarrier();
  return result;
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let index = wid.x + wid.y * groups.x;
  if (index >= p.T * p.kvHeads) { return; }
  let lane = lid.x;
  let u = index / p.kvHeads;
  let g = index % p.kvHeads;
  let hd = p.headDim;
  let groupSize = p.heads / p.kvHeads;
  let kvBase = (u * p.kvHeads + g) * hd;
  let end = min(u32(max(seqEnds[u], 0)), p.T);
  var dkAcc = array<f32, 4>(); // d = lane + 64·i, hd <= 256
  var dvAcc = array<f32, 4>();
  for (var t = u; t < end; t++) {
    for (var h = g * groupSize; h < (g + 1u) * groupSize; h++) {
      let qBase = (t * p.heads + h) * hd;
      var local = vec2f(0.0);
      for (var d = lane; d < hd; d += THREADS) {
        local = fma(vec2f(q[qBase + d], dOut[qBase + d]), vec2f(k[kvBase + d], v[kvBase + d]), local);
      }
      let dots = combine(local, lane);
      let s = (t * p.heads + h) * 3u;
      let prob = exp(dots.x * p.scale - stats[s]) / stats[s + 1u];
      let dScore = p.scale * prob * (dots.y - stats[s + 2u]);
      for (var i = 0u; i < 4u; i++) {
        let d = lane + i * THREADS;
        if (d < hd) {
          dkAcc[i] = fma(dScore, q[qBase + d], dkAcc[i]);
          dvAcc[i] = fma(prob, dOut[qBase + d], dvAcc[i]);
        }
      }
    }
  }
  for (var i = 0u; i < 4u; i++) {
    let d = lane + i * THREADS;
    if (d < hd) {
      dk[kvBase + d] = dkAcc[i];
      dv[kvBase + d] = dvAcc[i];
    }
  }
}
