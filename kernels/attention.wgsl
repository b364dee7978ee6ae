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
// output value is summed by one thread over j = 0..pos in order. Every order depends on hd and pos only. (The
// layouts are in include/attention_heads.wgsl, shared with attention_packed.wgsl.)

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
#include "attention_heads.wgsl"

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

fn keyAt(i: u32) -> f32 {
  return cacheK[i];
}

fn valueAt(i: u32) -> f32 {
  return cacheV[i];
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  if (SERIAL) {
    serial((wid.x + wid.y * groups.x) * SERIAL_THREADS + lid.x);
  } else {
    lanes(wid.x + wid.y * groups.x, lid.x);
  }
}
