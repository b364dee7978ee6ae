// LoRA shrink: h[t, j] = Σ_k x[t, k] · A[adapters[t] · rank + j, k]   (h[t, :] = 0 when adapters[t] < 0)
//
// Bindings: p: Params
//           x:        [T, K] f32
//           a:        [slots · rank, wordsPerRow] u32: the bank's A factors, f32 bits or (WEIGHT_F16) half pairs
//           adapters: [T] i32, the adapter slot of each row (-1: none; a slot past the bank counts as none)
//           h:        [T, rank] f32
// Dispatch: T workgroups (folded into (x, y) past 65535) of 32 K-lanes × 8 rank columns; one row each, since
//           every row may use a different adapter. A workgroup walks the rank in groups of 8 columns.
//
// Batch invariance: the per-element order of matmul.wgsl with TM = 1 (lane-strided words in ascending order,
// odd tail last, fixed 32-lane tree): it depends on K only.

override WEIGHT_F16: bool = false;
const LANES: u32 = 32u;
const COLS: u32 = 8u;

struct Params { T: u32, K: u32, rank: u32, slots: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<u32>;
@group(0) @binding(3) var<storage, read> adapters: array<i32>;
@group(0) @binding(4) var<storage, read_write> h: array<f32>;

var<workgroup> partial: array<f32, COLS * LANES>; // [COLS][LANES]

// Σ_k x[xBase + k] · A[row, k] over this lane's share of k.
fn laneSum(xBase: u32, row: u32, lane: u32) -> f32 {
  var sum = 0.0;
  if (WEIGHT_F16) {
    let fullWords = p.K / 2u;
    let base = row * ((p.K + 1u) / 2u);
    for (var word = lane; word < fullWords; word += LANES) {
      let pair = unpack2x16float(a[base + word]);
      sum = fma(x[xBase + 2u * word], pair.x, sum);
      sum = fma(x[xBase + 2u * word + 1u], pair.y, sum);
    }
    if ((p.K & 1u) == 1u && lane == fullWords % LANES) {
      sum = fma(x[xBase + p.K - 1u], unpack2x16float(a[base + fullWords]).x, sum);
    }
  } else {
    let base = row * p.K;
    for (var k = lane; k < p.K; k += LANES) { sum = fma(x[xBase + k], bitcast<f32>(a[base + k]), sum); }
  }
  return sum;
}

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
    if (hasAdapter && j < p.rank) { sum = laneSum(t * p.K, slot * p.rank + j, lane); }
    partial[cell] = sum;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
      if (lane < stride) { partial[cell] += partial[cell + stride]; }
      workgroupBarrier();
    }
    if (lane == 0u && j < p.rank) { h[t * p.rank + j] = partial[cell]; }
    workgroupBarrier(); // partial is refilled by the next column group
  }
}
