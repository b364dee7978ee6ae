// LoRA expand backward: dh[t, j] = scales[s] · Σ_n dy[t, n] · B[s · N + n, j], s = adapters[t]   (0 when s < 0)
// Bindings: p: Params; dy: [T, N] f32; b: [slots · N, rank] f32; adapters: [T] i32 (a slot past the bank counts
//           as none); scales: [slots] f32; dh: [T, rank] f32
// Dispatch: T workgroups (folded into (x, y) past 65535) of 32 N-lanes × 8 rank columns, one row each.
//           SERIAL (the CPU layout, for software adapters: see linear.wgsl): (ceil(rank / SERIAL_THREADS),
//           ceil(T / TM)) workgroups; a thread computes one column j for a tile of TM rows (1, 2, 4 or 8), and the
//           tile's rows of one adapter share each load of B (a tile of several adapters: a pass per adapter).
//
// Batch invariance: lane-strided sums over n in order, met by a fixed 32-lane tree: the order depends on N only.
// SERIAL makes the same sums: a thread keeps the 32 lanes' sums as 8 quads (lanes 4q .. 4q + 3) and meets them in
// the same tree (include/adapter_passes.wgsl, as lora_shrink.wgsl's), so both layouts give the same bits.

override SERIAL: bool = false;
override TM: u32 = 8u; // SERIAL: rows a tile (<= MAX_TM)
override SERIAL_THREADS: u32 = 16u; // SERIAL: threads (rank columns) a workgroup
override WG_X: u32 = select(LANES, SERIAL_THREADS, SERIAL);
override WG_Y: u32 = select(COLS, 1u, SERIAL);
override PARTIAL_WORDS: u32 = select(COLS * LANES, 1u, SERIAL);
const LANES: u32 = 32u;
const COLS: u32 = 8u;
const MAX_TM: u32 = 8u;

struct Params { T: u32, N: u32, rank: u32, slots: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> adapters: array<i32>;
@group(0) @binding(4) var<storage, read> scales: array<f32>;
@group(0) @binding(5) var<storage, read_write> dh: array<f32>;

var<workgroup> partial: array<f32, PARTIAL_WORDS>;

@compute @workgroup_size(WG_X, WG_Y)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  if (SERIAL) {
    serial(wid.y, wid.x * SERIAL_THREADS + lid.x);
    return;
  }
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

// ---- CPU layout ----

#include "adapter_passes.wgsl"

// B's column j of adapter `slot`: element n at the base + n · rank.
fn factorBase(slot: u32, j: u32) -> u32 {
  return slot * p.N * p.rank + j;
}

fn store(t: u32, j: u32, slot: u32, value: f32) {
  if (slot == NO_ADAPTER) { dh[t * p.rank + j] = 0.0; } else { dh[t * p.rank + j] = scales[slot] * value; }
}

// dy at column n of tile row r (rows past T: the last row); at an edge of N, 0 past it.
fn dyAt(tile: u32, r: u32, n: u32, edge: bool) -> f32 {
  let row = min(tile * TM + r, p.T - 1u) * p.N;
  if (edge) { return select(0.0, dy[row + min(n, p.N - 1u)], n < p.N); }
  return dy[row + n];
}

// One round of lanes 4q .. 4q + 3 (n .. n + 3) into every tile row's quad; `edge`: the round crosses N.
fn addRound(tile: u32, base: u32, n: u32, acc: ptr<function, array<vec4f, MAX_TM>>, edge: bool) {
  var weight = vec4f();
  for (var c = 0u; c < 4u; c++) {
    if (edge) { weight[c] = select(0.0, b[base + min(n + c, p.N - 1u) * p.rank], n + c < p.N); } else { weight[c] = b[base + (n + c) * p.rank]; }
  }
  for (var r = 0u; r < TM; r++) {
    (*acc)[r] = fma(vec4f(dyAt(tile, r, n, edge), dyAt(tile, r, n + 1u, edge), dyAt(tile, r, n + 2u, edge), dyAt(tile, r, n + 3u, edge)), weight, (*acc)[r]);
  }
}

// The 32 lanes' sums of every tile row against the B column starting at `base` (element n at base + n · rank):
// lane l = 4q + c sums n = l, l + 32, ... in order, as the GPU layout's lane l, and quad q holds lanes 4q .. 4q + 3.
// Values past N add fma(0, 0, sum) = sum: nothing.
fn tileSums(tile: u32, base: u32) -> array<f32, MAX_TM> {
  var lanes: array<array<vec4f, 8>, MAX_TM>;
  for (var q = 0u; q < 8u; q++) {
    var acc = array<vec4f, MAX_TM>(); // (an explicit zero: without one lavapipe kept the last quad's sums)
    var n = 4u * q;
    for (; n + 4u <= p.N; n += LANES) { addRound(tile, base, n, &acc, false); }
    if (n < p.N) { addRound(tile, base, n, &acc, true); }
    for (var r = 0u; r < TM; r++) { lanes[r][q] = acc[r]; }
  }
  var sums: array<f32, MAX_TM>;
  for (var r = 0u; r < TM; r++) { sums[r] = laneTree(lanes[r]); }
  return sums;
}
