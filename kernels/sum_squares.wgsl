// Sum of squares per slot: out[s] = Σ x[i]² over i = (first + s) · slotSize .. (first + s + 1) · slotSize - 1
// for s < S (gradient norms: every slot; a mutation: its parent's)
// Bindings: p: Params; x: [slots · slotSize] f32; out: [S] f32
// Dispatch: S workgroups of 256 threads (folded into (x, y) past 65535), one slot each.
//
// Batch invariance: lane-strided sums met by a fixed tree: the order depends on slotSize only.

const THREADS: u32 = 256u;

struct Params { S: u32, slotSize: u32, first: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, THREADS>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let s = wid.x + wid.y * groups.x;
  if (s >= p.S) { return; }
  let lane = lid.x;
  var sum = 0.0;
  for (var i = lane; i < p.slotSize; i += THREADS) {
    let value = x[(p.first + s) * p.slotSize + i];
    sum = fma(value, value, sum);
  }
  partial[lane] = sum;
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) { partial[lane] += partial[lane + stride]; }
    workgroupBarrier();
  }
  if (lane == 0u) { out[s] = partial[0]; }
}
