// Attention backward, key/value side, for one (key token u, kv head g), with the softmax statistics of
// attention_backward_query.wgsl (max, sum, Δ per query token and head):
//   for each query t = u .. seqEnds[u]-1 (u's sequence) and each head h of g's group, in that order:
//     P = e^(scale · q_t,h · k_u - max) / sum,   dS = scale · P · (dOut_t,h · v_u - Δ_t,h)
//     dk_u += dS · q_t,h,   dv_u += P · dOut_t,h
// Bindings: p: Params; q, dOut: [T, heads · hd]; k, v: [T, kvHeads · hd]; stats: [T · heads, 3];
//           seqEnds: [T] i32; dk, dv: [T, kvHeads · hd]   (f32 but seqEnds)
// Dispatch: T · kvHeads workgroups of 64 threads (folded into (x, y) past 65535); thread l owns d = l, l+64, ...
//           SERIAL (the CPU layout, for software adapters: see linear.wgsl): kvHeads · ceil(T / 8) workgroups of 8
//           threads (folded likewise), a thread per (u, g) for 8 consecutive key tokens u of one kv head g, with no
//           workgroup memory and no barriers. The workgroup walks t from its first u to its last sequence end, so
//           q and dOut are read the same in every thread; a thread adds the (t, h) of its own u only.
//
// Batch invariance: the loop over (t, h) runs in order; each dot product is lane-strided and met by a fixed tree.
// SERIAL makes the same sums: a thread keeps the 64 lanes' shares as 16 quads (lanes 4i .. 4i + 3) and meets them
// in the same tree, so both layouts give the same bits.

override SERIAL: bool = false;
override WG: u32 = select(THREADS, SERIAL_THREADS, SERIAL);
override PARTIAL_WORDS: u32 = select(THREADS, 1u, SERIAL);
const THREADS: u32 = 64u;
const SERIAL_THREADS: u32 = 8u; // one SIMD vector on lavapipe: its threads' t loops are one loop anyway
const MAX_HEAD_DIM: u32 = 256u;

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

var<workgroup> partial: array<vec2f, PARTIAL_WORDS>;

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

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let index = wid.x + wid.y * groups.x;
  if (SERIAL) {
    serial(index, lid.x);
    return;
  }
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

// ---- CPU layout ----

// The GPU layout's 64-lane tree (strides 32, 16, 8, 4, 2, 1) over lanes held as 16 quads.
fn laneTree(l: array<vec4f, 16>) -> f32 {
  var s = l;
  for (var stride = 8u; stride > 0u; stride /= 2u) {
    for (var i = 0u; i < stride; i++) { s[i] += s[i + stride]; }
  }
  let s2 = s[0].xy + s[0].zw;
  return s2.x + s2.y;
}

fn serial(index: u32, thread: u32) {
  let tiles = (p.T + SERIAL_THREADS - 1u) / SERIAL_THREADS;
  if (index >= tiles * p.kvHeads) { return; }
  let g = index / tiles;
  let u0 = (index % tiles) * SERIAL_THREADS;
  let u = min(u0 + thread, p.T - 1u); // past T: the last token, not written
  let hd = p.headDim;
  let groupSize = p.heads / p.kvHeads;
  let kvBase = (u * p.kvHeads + g) * hd;
  var tEnd = 0u; // the workgroup's last sequence end
  for (var i = 0u; i < SERIAL_THREADS; i++) { tEnd = max(tEnd, min(u32(max(seqEnds[min(u0 + i, p.T - 1u)], 0)), p.T)); }
  let end = min(u32(max(seqEnds[u], 0)), p.T);
  var keys: array<f32, MAX_HEAD_DIM>; // k_u and v_u, 0 past hd
  var values: array<f32, MAX_HEAD_DIM>;
  for (var d = 0u; d < hd; d++) {
    keys[d] = k[kvBase + d];
    values[d] = v[kvBase + d];
  }
  var dkAcc: array<f32, MAX_HEAD_DIM>;
  var dvAcc: array<f32, MAX_HEAD_DIM>;
  for (var t = u0; t < tEnd; t++) {
    for (var h = g * groupSize; h < (g + 1u) * groupSize; h++) {
      let qBase = (t * p.heads + h) * hd;
      // Lane l = 4i + c of the GPU layout sums d = l, l + 64, ...: quad i holds lanes 4i .. 4i + 3. Quads wholly
      // past hd (hd < 64) stay +0, as the lanes past hd do there (a sum from +0 of nothing).
      var qk = array<vec4f, 16>();
      var gv = array<vec4f, 16>();
      for (var d0 = 0u; d0 < hd; d0 += THREADS) {
        for (var i = 0u; i < 16u && d0 + 4u * i < hd; i++) {
          let d = d0 + 4u * i;
          var qs = vec4f();
          var gs = vec4f();
          for (var c = 0u; c < 4u; c++) {
            qs[c] = select(0.0, q[qBase + min(d + c, hd - 1u)], d + c < hd);
            gs[c] = select(0.0, dOut[qBase + min(d + c, hd - 1u)], d + c < hd);
          }
          qk[i] = fma(qs, vec4f(keys[d], keys[d + 1u], keys[d + 2u], keys[d + 3u]), qk[i]); // d + 3 < MAX_HEAD_DIM
          gv[i] = fma(gs, vec4f(values[d], values[d + 1u], values[d + 2u], values[d + 3u]), gv[i]);
        }
      }
      let s = (t * p.heads + h) * 3u;
      let prob = exp(laneTree(qk) * p.scale - stats[s]) / stats[s + 1u];
      let dScore = p.scale * prob * (laneTree(gv) - stats[s + 2u]);
      if (t >= u && t < end) {
        for (var d = 0u; d < hd; d++) {
          dkAcc[d] = fma(dScore, q[qBase + d], dkAcc[d]);
          dvAcc[d] = fma(prob, dOut[qBase + d], dvAcc[d]);
        }
      }
    }
  }
  if (u0 + thread < p.T) {
    for (var d = 0u; d < hd; d++) {
      dk[kvBase + d] = dkAcc[d];
      dv[kvBase + d] = dvAcc[d];
    }
  }
}
