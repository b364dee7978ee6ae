// LoRA expand backward: dh[t, j] = scales[s] · Σ_n dy[t, n] · B[s · N + n, j], s = adapters[t]   (0 when s < 0)
// Bindings: p: Params; dy: [T, N] f32; b: [slots · N, rank] f32; adapters: [T] i32 (a slot past the bank counts
//           as none); scales: [slots] f32; dh: [T, rank] f32
// Dispatch: T workgroups (folded into (x, y) past 65535) of 32 N-lanes × 8 rank columns, one row each.
//
// Batch invariance: lane-strided sums over n in order, met by a fixed 32-lane tree: the order depends on N only.

const LANES: u32 = 32u;
const COLS: u32 = 8u;

struct Params { T: u32, N: u32, rank: u32, slots: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> adapters: array<i32>;
@group(0) @binding(4) var<storage, read> scales: array<f32>;
@group(0) @binding(5) var<storage, read_write> dh: array<f32>;

var<workgroup> partial: array<f32, COLS * LANES>;

@compute @workgroup_size(32, 8)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let t = wid.x + wid.y * groups.x;
  if (t >= p.T) { return; }
  let lane = lid.x;
  let slot = u32(adapters[t]); // -1 wraps past every slot
  let hasAdapter = slot < p.slots;
  let cell = lid.y * LANES + lane;
  for (var j0 = 0u; j0 < p.rank; j0 += COLS) {
    let j = j0 + lid.y;
    var sum = 0.0;
    if (hasAdapter && j < p.rank) {
      for (var n = lane; n < p.N; n += LANES) { sum = fma(dy[t * p.N + n], b[(slot * p.N + n) * p.rank + j], sum); }
    }
    partial[cell] = sum;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
      if (lane < stride) { partial[cell] += partial[cell + stride]; }
      workgroupBarrier();
    }
    if (lane == 0u && j < p.rank) { dh[t * p.rank + j] = select(0.0, scales[min(slot, p.slots - 1u)] * partial[cell], hasAdapter); }
    workgroupBarrier();
  }
}
