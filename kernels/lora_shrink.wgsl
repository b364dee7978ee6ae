// LoRA shrink: h[t, j] = Σ_k x[t, k] · A[adapters[t] · rank + j, k]   (h[t, :] = 0 when adapters[t] < 0)
//
// Bindings: p: Params
//           x:        [T, K] f32
//           a:        [slots · rank, wordsPerRow] u32: the bank's A factors, f32 bits or (WEIGHT_F16) half pairs
//           adapters: [T] i32, the adapter slot of each row (-1: none; a slot past the bank counts as none)
//           h:        [T, rank] f32
// Dispatch: T workgroups (folded into (x, y) past 65535) of 32 K-lanes × 8 rank columns; one row each, since
//           every row may use a different adapter. A workgroup walks the rank in groups of 8 columns.
//           SERIAL (the CPU layout, for software adapters: see linear.wgsl): (ceil(rank / SERIAL_THREADS),
//           ceil(T / TM)) workgroups; a thread computes one column j for a tile of TM rows (1, 2, 4 or 8), and the
//           tile's rows of one adapter share each load of A (a tile of several adapters: a pass per adapter).
//
// Batch invariance: the per-element order of matmul.wgsl with TM = 1 (lane-strided words in ascending order,
// odd tail last, fixed 32-lane tree): it depends on K only. SERIAL makes the same sums: a thread keeps the 32
// lanes' sums as 8 quads (lanes 4q .. 4q + 3) and meets them in the same tree, so both layouts give the same bits.

override WEIGHT_F16: bool = false;
override SERIAL: bool = false;
override TM: u32 = 8u; // SERIAL: rows a tile (<= MAX_TM)
override SERIAL_THREADS: u32 = 16u; // SERIAL: threads (rank columns) a workgroup
override WG_X: u32 = select(LANES, SERIAL_THREADS, SERIAL);
override WG_Y: u32 = select(COLS, 1u, SERIAL);
override PARTIAL_WORDS: u32 = select(COLS * LANES, 1u, SERIAL);
const LANES: u32 = 32u;
const COLS: u32 = 8u;
const MAX_TM: u32 = 8u;

struct Params { T: u32, K: u32, rank: u32, slots: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<u32>;
@group(0) @binding(3) var<storage, read> adapters: array<i32>;
@group(0) @binding(4) var<storage, read_write> h: array<f32>;

var<workgroup> partial: array<f32, PARTIAL_WORDS>; // [COLS][LANES]

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

// ---- CPU layout ----

#include "adapter_passes.wgsl"

// A's row j of adapter `slot`, its first word.
fn factorBase(slot: u32, j: u32) -> u32 {
  return (slot * p.rank + j) * select(p.K, (p.K + 1u) / 2u, WEIGHT_F16);
}

fn store(t: u32, j: u32, slot: u32, value: f32) {
  h[t * p.rank + j] = value;
}

// x at column k of tile row r (rows past T: the last row); at an edge of K, 0 past it.
fn xAt(tile: u32, r: u32, k: u32, edge: bool) -> f32 {
  let row = min(tile * TM + r, p.T - 1u) * p.K;
  if (edge) { return select(0.0, x[row + min(k, p.K - 1u)], k < p.K); }
  return x[row + k];
}

// One round of lanes 4q .. 4q + 3 (f32: k .. k + 3) into every tile row's quad; `edge`: the round crosses K.
fn roundF32(tile: u32, base: u32, k: u32, acc: ptr<function, array<vec4f, MAX_TM>>, edge: bool) {
  var weight = vec4f();
  for (var c = 0u; c < 4u; c++) {
    if (edge) { weight[c] = select(0.0, bitcast<f32>(a[base + min(k + c, p.K - 1u)]), k + c < p.K); } else { weight[c] = bitcast<f32>(a[base + k + c]); }
  }
  for (var r = 0u; r < TM; r++) {
    (*acc)[r] = fma(vec4f(xAt(tile, r, k, edge), xAt(tile, r, k + 1u, edge), xAt(tile, r, k + 2u, edge), xAt(tile, r, k + 3u, edge)), weight, (*acc)[r]);
  }
}

// The same for f16 words word .. word + 3 (k = 2 · word ..), each low half first.
fn roundF16(tile: u32, base: u32, word: u32, acc: ptr<function, array<vec4f, MAX_TM>>, edge: bool) {
  let words = (p.K + 1u) / 2u;
  var low = vec4f();
  var high = vec4f();
  for (var c = 0u; c < 4u; c++) {
    if (edge) {
      let pair = unpack2x16float(a[base + min(word + c, words - 1u)]);
      low[c] = select(0.0, pair.x, word + c < words);
      high[c] = select(0.0, pair.y, 2u * (word + c) + 1u < p.K);
    } else {
      let pair = unpack2x16float(a[base + word + c]);
      low[c] = pair.x;
      high[c] = pair.y;
    }
  }
  let k = 2u * word;
  for (var r = 0u; r < TM; r++) {
    let x0 = vec4f(xAt(tile, r, k, edge), xAt(tile, r, k + 2u, edge), xAt(tile, r, k + 4u, edge), xAt(tile, r, k + 6u, edge));
    let x1 = vec4f(xAt(tile, r, k + 1u, edge), xAt(tile, r, k + 3u, edge), xAt(tile, r, k + 5u, edge), xAt(tile, r, k + 7u, edge));
    (*acc)[r] = fma(x1, high, fma(x0, low, (*acc)[r]));
  }
}

// The 32 lanes' sums of every tile row against the A row starting at word `base`: lane l = 4q + c sums the same
// values as laneSum's lane l, in the same order (f16: words l, l + 32, ..., each low half first; f32: k = l, l + 32,
// ...), and quad q holds lanes 4q .. 4q + 3. Values past K add fma(0, 0, sum) = sum: nothing.
fn tileSums(tile: u32, base: u32) -> array<f32, MAX_TM> {
  var lanes: array<array<vec4f, 8>, MAX_TM>;
  for (var q = 0u; q < 8u; q++) {
    var acc = array<vec4f, MAX_TM>(); // (an explicit zero: without one lavapipe kept the last quad's sums)
    if (WEIGHT_F16) {
      var word = 4u * q;
      for (; word + 4u <= p.K / 2u; word += LANES) { roundF16(tile, base, word, &acc, false); }
      if (word < (p.K + 1u) / 2u) { roundF16(tile, base, word, &acc, true); }
    } else {
      var k = 4u * q;
      for (; k + 4u <= p.K; k += LANES) { roundF32(tile, base, k, &acc, false); }
      if (k < p.K) { roundF32(tile, base, k, &acc, true); }
    }
    for (var r = 0u; r < TM; r++) { lanes[r][q] = acc[r]; }
  }
  var sums: array<f32, MAX_TM>;
  for (var r = 0u; r < TM; r++) { sums[r] = laneTree(lanes[r]); }
  return sums;
}
