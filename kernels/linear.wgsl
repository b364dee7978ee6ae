// Fused linear layer: one dispatch per linear of a decoder layer, its neighbours folded in.
//
//   r[t, n] = Σ_k x̂[t, k] · W[row(n), k] + bias[n]       x̂ = x, or x / rms(x) · normWeight row by row (NORM)
//   LORA:     r[t, n] = fma(scale[s], Σ_j h[t, hAt + j] · B[s·N_p + n_p, j], r[t, n]),   s = adapters[t] >= 0
//
// over the parts of a packed weight (Wq|Wk|Wv, Wgate|Wup, or one matrix): output column n is column n_p of part p,
// read from weight row wStart[p] + n_p. Then the epilogue (EPILOGUE):
//   STORE     out[t, n] = r
//   RESIDUAL  out[t, n] += r                                   (out: the residual stream)
//   SWIGLU    out[t, i] = silu(r[t, i]) · r[t, F + i]          (parts gate | up, F columns each)
//   ROPE_KV   parts q | k | v: the pairs (i, i + hd/2) of each q and k head rotated by RoPE at positions[t]; q heads
//             to out [T, H·hd], k and v heads into the KV cache at (slots[t], positions[t])
// Rows: GATHER takes input row logitRows[m] for output row m (the LM head). SEGMENTS is the LoRA shrink (Punica
// SGMV): a workgroup takes one tile of the step's rows of one adapter s, part p's weight rows are s·N_p + n_p
// (W: the bank's A factors, N_p = rank) and out = h [T, N].
// Each step is the unfused op's own arithmetic (rmsnorm.wgsl, matmul.wgsl, lora_expand.wgsl, rope.wgsl,
// swiglu.wgsl, add.wgsl), so in the GPU layout the result is the unfused sequence's, bit for bit.
//
// Bindings: p: Params
//           x:          [Tx, K] f32
//           normWeight: [K] f32 (NORM)
//           w:          u32 words: f32 bits, or two halves a word (WEIGHT_F16; a row is ceil(K / 2) words)
//           bias:       f32, part p's from biasStart[p] (hasBias)
//           h:          [T, hCols] f32, the shrink of this input (LORA)
//           loraB:      f32, part p's B factors [S·N_p, rank] from row bStart[p] (LORA)
//           step:       i32, the forward's integers (StepRows: slots, positions, adapters, logitRows, order, tiles)
//           scales:     [S] f32 (LORA)
//           table:      [tableRows, hd] f32, cos | sin (ROPE_KV)
//           out:        f32 (see the epilogues)
//           cacheK/V:   [cacheSlots, maxLen, kvHeads·hd] f32 of one layer from element layerBase (ROPE_KV)
// Dispatch: (ceil(units / units per workgroup), row tiles). A unit is an output column, or a pair (SWIGLU,
//           ROPE_KV); a row tile is TM rows (1 when T = 1; else 8, or in the CPU layout 16 when T > 8), or one
//           segment of at most 8 rows (SEGMENTS). Units per workgroup: 8 (GPU layout; 4 pairs), SERIAL_THREADS · UNITS (CPU).
//
// Two thread layouts of the same maths (SERIAL):
//   GPU: 256 threads = 32 K-lanes × 8 column threads (a pair: threads c and c + 4). matmul.wgsl's order: lane l
//        sums words l, l+32, ... in ascending order (both halves of a word, low first; an odd K's last value
//        last), then the 32 lanes meet in a fixed tree. The RMS sum: rmsnorm.wgsl's 256-thread tree.
//   CPU (software adapters: lavapipe): 16 to 64 threads, each UNITS units × TM rows over every k in ascending order;
//        the RMS sum in ascending order. lavapipe runs 8 invocations as one SIMD vector: a weight load is one
//        gather for 8 columns and every x load is uniform (one scalar), where the GPU layout gathers x too and
//        waits at the tree's barriers (4-8x slower there, measured).
// Batch invariance: in both layouts an output's order depends on K only; rows never meet. Rows past the end of
// a tile are computed from a clamped row and never written.

override WEIGHT_F16: bool = false;
override SERIAL: bool = false;
override TM: u32 = 8u; // rows per workgroup: at most MAX_TM (GPU layout), MAX_SERIAL_TM (CPU layout: 1, 8 or 16)
override NORM: bool = false;
override LORA: bool = false;
override EPILOGUE: u32 = 0u;
override GATHER: bool = false;
override SEGMENTS: bool = false;
override UNITS: u32 = 1u; // CPU layout: units a thread computes (COLUMNS <= MAX_COLUMNS)
override SERIAL_THREADS: u32 = 64u; // CPU layout: threads a workgroup, 16 to 64 (fewer where the units are few)

const STORE: u32 = 0u;
const RESIDUAL: u32 = 1u;
const SWIGLU: u32 = 2u;
const ROPE_KV: u32 = 3u;
const MAX_TM: u32 = 8u;
const MAX_SERIAL_TM: u32 = 16u;
const MAX_QUADS: u32 = 4u; // MAX_SERIAL_TM / 4
const MAX_COLUMNS: u32 = 8u;
const LANES: u32 = 32u;
const COLS: u32 = 8u;
const THREADS: u32 = 256u; // GPU layout: LANES · COLS
const NONE: u32 = 0xffffffffu;
const STAGE_SIZE: u32 = 4096u; // CPU layout: values of x̂ staged at once (16 KiB)

override PAIRED: bool = EPILOGUE == SWIGLU || EPILOGUE == ROPE_KV;
override WG_X: u32 = select(LANES, SERIAL_THREADS, SERIAL);
override WG_Y: u32 = select(COLS, 1u, SERIAL);
// Workgroup memory a variant does not use is one word, so it takes no occupancy from the other layout's variants.
override PARTIAL_WORDS: u32 = select(TM * THREADS, 1u, SERIAL);
override STAGED_QUADS: u32 = select(1u, STAGE_SIZE / 4u, SERIAL && TM > 1u);
override COLUMNS: u32 = select(UNITS, 2u * UNITS, PAIRED);
override QUADS: u32 = max(TM / 4u, 1u);
override CHUNK: u32 = STAGE_SIZE / (4u * QUADS); // values of k staged at once (even)

struct Params {
  colEnd: vec4u, // part p's columns: colEnd[p - 1] .. colEnd[p] - 1 (from 0 for p = 0); up to 3 parts
  wStart: vec4u, // part p's first weight row
  biasStart: vec4u, // part p's first bias
  hAt: vec4u, // part p's first column in h, or NONE: no LoRA on it
  bStart: vec4u, // part p's first row of B
  T: u32, // output rows (SEGMENTS: the step's tokens)
  K: u32,
  N: u32, // output columns r (all parts)
  hasBias: u32,
  eps: f32,
  rank: u32,
  slots: u32, // adapter slots in the bank: s >= slots means no adapter
  hCols: u32,
  rowsAt: u32, // where GATHER's row list (logitRows) or SEGMENTS' order starts in step
  tilesAt: u32,
  adaptersAt: u32,
  slotsAt: u32,
  positionsAt: u32,
  heads: u32,
  kvHeads: u32,
  headDim: u32,
  tableRows: u32,
  cacheSlots: u32,
  maxLen: u32,
  layerBase: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> normWeight: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> h: array<f32>;
@group(0) @binding(6) var<storage, read> loraB: array<f32>;
@group(0) @binding(7) var<storage, read> step: array<i32>;
@group(0) @binding(8) var<storage, read> scales: array<f32>;
@group(0) @binding(9) var<storage, read> table: array<f32>;
@group(0) @binding(10) var<storage, read_write> out: array<f32>;
@group(0) @binding(11) var<storage, read_write> cacheK: array<f32>;
@group(0) @binding(12) var<storage, read_write> cacheV: array<f32>;

var<workgroup> partial: array<f32, PARTIAL_WORDS>; // GPU layout: the RMS tree [TM][256], then the sums [COLS][TM][LANES]
var<workgroup> staged: array<vec4f, STAGED_QUADS>; // CPU layout: x̂ [CHUNK][QUADS] (quads of rows)
var<workgroup> stagedInverseRms: array<f32, MAX_SERIAL_TM>;
// GPU layout, per tile row: where its input starts in x, its output row (NONE past the tile), its inverse RMS, and
// the K-sum of the thread's column. (The CPU layout keeps these in vectors: lavapipe holds a private array in
// memory, and a load through an offset read from it is gathered lane by lane instead of made once.)
var<private> xRow: array<u32, MAX_TM>;
var<private> outRow: array<u32, MAX_TM>;
var<private> inverseRms: array<f32, MAX_TM>;
var<private> acc: array<f32, MAX_TM>;

@compute @workgroup_size(WG_X, WG_Y)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  if (SERIAL) {
    serial(wid.y, lid.x, wid.x);
  } else {
    lanes(wid.y, lid.x, lid.y, wid.x);
  }
}

// ---- the tile's rows ----

// Input row (a row of x) of tile row r; rows past the tile's end repeat its last row.
fn inputRow(tile: u32, r: u32) -> u32 {
  if (SEGMENTS) {
    let first = u32(step[p.tilesAt + 2u * tile]);
    let count = u32(step[p.tilesAt + 2u * tile + 1u]);
    return u32(step[p.rowsAt + first + min(r, count - 1u)]);
  }
  let m = min(tile * TM + r, p.T - 1u);
  if (GATHER) { return u32(step[p.rowsAt + m]); } // (not select: it would load past the row list too)
  return m;
}

// Output row of tile row r (SEGMENTS: the token's row of h), or NONE past the tile's end.
fn outputRow(tile: u32, r: u32) -> u32 {
  if (SEGMENTS) {
    let first = u32(step[p.tilesAt + 2u * tile]);
    let count = u32(step[p.tilesAt + 2u * tile + 1u]);
    return select(NONE, u32(step[p.rowsAt + first + min(r, count - 1u)]), r < count);
  }
  let m = tile * TM + r;
  return select(NONE, m, m < p.T);
}

// SEGMENTS: the adapter of the tile's rows.
fn tileSlot(tile: u32) -> u32 {
  return u32(step[p.adaptersAt + inputRow(tile, 0u)]);
}

// ---- the output's columns ----

fn unitCount() -> u32 {
  return select(p.N, p.N / 2u, PAIRED);
}

// Output column of a unit; `second`: the pair's second column.
fn column(unit: u32, second: bool) -> u32 {
  if (EPILOGUE == SWIGLU) { return select(unit, p.N / 2u + unit, second); }
  if (EPILOGUE == ROPE_KV) {
    let half = p.headDim / 2u;
    let n = (unit / half) * p.headDim + unit % half;
    return select(n, n + half, second);
  }
  return unit;
}

fn partOf(n: u32) -> u32 {
  return select(select(0u, 1u, n >= p.colEnd.x), 2u, n >= p.colEnd.y);
}

fn colStart(part: u32) -> u32 {
  return select(0u, p.colEnd[max(part, 1u) - 1u], part > 0u);
}

// First word of column n's weight row.
fn weightBase(tile: u32, n: u32) -> u32 {
  let part = partOf(n);
  var row = p.wStart[part] + n - colStart(part);
  if (SEGMENTS) { row += tileSlot(tile) * (p.colEnd[part] - colStart(part)); }
  return row * select(p.K, (p.K + 1u) / 2u, WEIGHT_F16);
}

// ---- CPU layout ----
//
// A thread computes a register tile: UNITS units (COLUMNS columns: a pair's second columns after the firsts) × the
// tile's TM rows, each sum over every k in ascending order. With TM > 1 the tile's x̂ is staged in workgroup memory
// CHUNK values of k at a time as quads of rows ([k][QUADS] vec4f), so one load of x̂ (uniform across the workgroup)
// feeds a quad's sums in every column of the thread, and one weight load (a lane-by-lane gather on lavapipe) feeds
// every row. TM = 1 (decode) reads x itself, uniform across the workgroup. (Measured on lavapipe: 8 columns × 16
// rows a thread made a prefill matmul 5x faster than one column × 8 rows.)

// Weights at k = 2i and 2i + 1 of the column whose row starts at word `base`.
fn weightPair(base: u32, i: u32) -> vec2f {
  if (WEIGHT_F16) { return unpack2x16float(w[base + i]); }
  return vec2f(bitcast<f32>(w[base + 2u * i]), bitcast<f32>(w[base + 2u * i + 1u]));
}

// An odd K's last weight (k = K - 1) of the column.
fn weightLast(base: u32) -> f32 {
  if (WEIGHT_F16) { return unpack2x16float(w[base + p.K / 2u]).x; }
  return bitcast<f32>(w[base + p.K - 1u]);
}

#include "row_rms.wgsl"

// x̂ at column k of the input row starting at `row`, whose inverse RMS is `inv`.
fn xHat(row: u32, inv: f32, k: u32) -> f32 {
  let v = x[row + k];
  if (NORM) { return v * inv * normWeight[k]; }
  return v;
}

// Unit c of the thread: units are dealt to the workgroup's threads one round of SERIAL_THREADS at a time.
fn unitOf(group: u32, thread: u32, c: u32) -> u32 {
  return (group * UNITS + c) * SERIAL_THREADS + thread;
}

// First weight word of each of the thread's columns (units past the end: the last unit's, computed, not written).
fn columnBases(tile: u32, group: u32, thread: u32) -> array<u32, MAX_COLUMNS> {
  var base: array<u32, MAX_COLUMNS>;
  for (var j = 0u; j < COLUMNS; j++) {
    let unit = min(unitOf(group, thread, j % UNITS), unitCount() - 1u);
    base[j] = weightBase(tile, column(unit, j >= UNITS));
  }
  return base;
}

// Where unit c's second column sits in the register tile (PAIRED); otherwise c itself, unused.
fn second(c: u32) -> u32 {
  return select(c, UNITS + c, PAIRED);
}

fn serial(tile: u32, thread: u32, group: u32) {
  if (TM == 1u) { serialRow(tile, thread, group); } else { serialTile(tile, thread, group); }
}

fn serialRow(tile: u32, thread: u32, group: u32) {
  let row = inputRow(tile, 0u) * p.K;
  var inv = 1.0;
  if (NORM) { inv = rowInverseRms(row, p.K, p.eps); }
  let base = columnBases(tile, group, thread);
  var acc: array<f32, MAX_COLUMNS>;
  for (var i = 0u; i < p.K / 2u; i++) {
    let x0 = xHat(row, inv, 2u * i);
    let x1 = xHat(row, inv, 2u * i + 1u);
    for (var j = 0u; j < COLUMNS; j++) {
      let weights = weightPair(base[j], i);
      acc[j] = fma(x1, weights.y, fma(x0, weights.x, acc[j]));
    }
  }
  if ((p.K & 1u) == 1u) {
    let x0 = xHat(row, inv, p.K - 1u);
    for (var j = 0u; j < COLUMNS; j++) { acc[j] = fma(x0, weightLast(base[j]), acc[j]); }
  }
  let t = outputRow(tile, 0u);
  for (var c = 0u; c < UNITS; c++) {
    let unit = unitOf(group, thread, c);
    if (unit < unitCount() && t != NONE) { finishRow(t, unit, acc[c], acc[second(c)]); }
  }
}

// Stages x̂ at k = k0 .. k0 + count - 1 of the tile's rows: staged[(k - k0) · QUADS + q] = rows 4q .. 4q + 3.
fn stageChunk(tile: u32, thread: u32, k0: u32, count: u32) {
  for (var i = thread; i < count * QUADS; i += SERIAL_THREADS) {
    let k = k0 + i / QUADS;
    let first = 4u * (i % QUADS);
    var quad = vec4f();
    for (var j = 0u; j < 4u; j++) { quad[j] = xHat(inputRow(tile, first + j) * p.K, stagedInverseRms[first + j], k); }
    staged[i] = quad;
  }
}

fn serialTile(tile: u32, thread: u32, group: u32) {
  if (NORM && thread < TM) { stagedInverseRms[thread] = rowInverseRms(inputRow(tile, thread) * p.K, p.K, p.eps); } // TM <= 16 threads
  let base = columnBases(tile, group, thread);
  var acc: array<array<vec4f, MAX_QUADS>, MAX_COLUMNS>;
  for (var k0 = 0u; k0 < p.K; k0 += CHUNK) {
    let count = min(CHUNK, p.K - k0);
    workgroupBarrier(); // the previous chunk is read (before the first: the inverse RMS are written)
    stageChunk(tile, thread, k0, count);
    workgroupBarrier();
    for (var k = 0u; k + 1u < count; k += 2u) { // CHUNK is even: a pair of k never straddles two chunks
      var x0: array<vec4f, MAX_QUADS>;
      var x1: array<vec4f, MAX_QUADS>;
      for (var q = 0u; q < QUADS; q++) {
        x0[q] = staged[k * QUADS + q];
        x1[q] = staged[(k + 1u) * QUADS + q];
      }
      for (var j = 0u; j < COLUMNS; j++) {
        let weights = weightPair(base[j], (k0 + k) / 2u);
        for (var q = 0u; q < QUADS; q++) { acc[j][q] = fma(x1[q], vec4f(weights.y), fma(x0[q], vec4f(weights.x), acc[j][q])); }
      }
    }
    if (k0 + count == p.K && (count & 1u) == 1u) { // an odd K's last value
      for (var j = 0u; j < COLUMNS; j++) {
        let weight = vec4f(weightLast(base[j]));
        for (var q = 0u; q < QUADS; q++) { acc[j][q] = fma(staged[(count - 1u) * QUADS + q], weight, acc[j][q]); }
      }
    }
  }
  // LoRA deltas: when the tile's rows share an adapter (a few sequences per adapter, the usual case), each B row
  // is read once for the tile instead of once per row (the same sums, in the same order).
  let slot = adapterOf(outputRow(tile, 0u));
  var oneAdapter = LORA;
  for (var r = 1u; r < TM; r++) { oneAdapter = oneAdapter && sameAdapter(outputRow(tile, r), slot); }
  for (var c = 0u; c < UNITS; c++) {
    let unit = unitOf(group, thread, c);
    if (unit >= unitCount()) { break; }
    var delta: array<vec4f, MAX_QUADS>;
    var delta2: array<vec4f, MAX_QUADS>;
    if (oneAdapter) {
      delta = tileDelta(tile, column(unit, false), slot);
      if (PAIRED) { delta2 = tileDelta(tile, column(unit, true), slot); }
    }
    for (var r = 0u; r < TM; r++) {
      let t = outputRow(tile, r);
      if (t == NONE) { break; } // rows past the end of a tile are at its end
      let q = r / 4u;
      let l = r % 4u;
      if (oneAdapter) {
        finish(t, unit, acc[c][q][l], acc[second(c)][q][l], delta[q][l], delta2[q][l]);
      } else {
        finishRow(t, unit, acc[c][q][l], acc[second(c)][q][l]);
      }
    }
  }
}

// Adapter slot of output row t (NONE: past the tile, or LoRA off).
fn adapterOf(t: u32) -> u32 {
  if (!LORA || t == NONE) { return NONE; }
  return u32(step[p.adaptersAt + t]);
}

// Row t is past the tile's end, or of adapter s.
fn sameAdapter(t: u32, s: u32) -> bool {
  return t == NONE || adapterOf(t) == s;
}

// Σ_j h[t, hAt + j] · B[s·N_p + n_p, j] of column n for the tile's rows (as quads), all of adapter s.
fn tileDelta(tile: u32, n: u32, s: u32) -> array<vec4f, MAX_QUADS> {
  var d: array<vec4f, MAX_QUADS>;
  let part = partOf(n);
  let hAt = p.hAt[part];
  if (s >= p.slots || hAt == NONE) { return d; }
  let bBase = (p.bStart[part] + s * (p.colEnd[part] - colStart(part)) + n - colStart(part)) * p.rank;
  var hRow: array<u32, MAX_SERIAL_TM>; // rows past the tile: any row, never written
  for (var r = 0u; r < TM; r++) { hRow[r] = min(outputRow(tile, r), p.T - 1u) * p.hCols + hAt; }
  for (var j = 0u; j < p.rank; j++) {
    let weight = vec4f(loraB[bBase + j]);
    for (var q = 0u; q < QUADS; q++) {
      let hs = vec4f(h[hRow[4u * q] + j], h[hRow[4u * q + 1u] + j], h[hRow[4u * q + 2u] + j], h[hRow[4u * q + 3u] + j]);
      d[q] = fma(hs, weight, d[q]);
    }
  }
  return d;
}

// ---- GPU layout ----

fn xin(r: u32, k: u32) -> f32 {
  let v = x[xRow[r] + k];
  if (NORM) { return v * inverseRms[r] * normWeight[k]; }
  return v;
}

fn lanesRms(i: u32) {
  for (var r = 0u; r < TM; r++) {
    var sum = 0.0;
    for (var d = i; d < p.K; d += THREADS) { sum = fma(x[xRow[r] + d], x[xRow[r] + d], sum); }
    partial[r * THREADS + i] = sum;
  }
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (i < stride) {
      for (var r = 0u; r < TM; r++) { partial[r * THREADS + i] += partial[r * THREADS + i + stride]; }
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < TM; r++) { inverseRms[r] = inverseSqrt(partial[r * THREADS] / f32(p.K) + p.eps); }
  workgroupBarrier(); // partial is refilled with the column sums
}

fn accumulate(k: u32, weight: f32) {
  for (var r = 0u; r < TM; r++) { acc[r] = fma(xin(r, k), weight, acc[r]); }
}

#include "lane_sums.wgsl"

fn lanes(tile: u32, lane: u32, c: u32, group: u32) {
  for (var r = 0u; r < TM; r++) {
    xRow[r] = inputRow(tile, r) * p.K;
    outRow[r] = outputRow(tile, r);
    acc[r] = 0.0;
  }
  if (NORM) { lanesRms(c * LANES + lane); }
  let perGroup = select(COLS, COLS / 2u, PAIRED); // units per workgroup
  let unit = group * perGroup + c % perGroup;
  let inRange = unit < unitCount();
  if (inRange) { laneSums(weightBase(tile, column(unit, c >= perGroup)), lane); }

  let sums = c * TM * LANES; // this column thread's [TM][LANES] in partial
  for (var r = 0u; r < TM; r++) { partial[sums + r * LANES + lane] = acc[r]; }
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      for (var r = 0u; r < TM; r++) { partial[sums + r * LANES + lane] += partial[sums + r * LANES + lane + stride]; }
    }
    workgroupBarrier();
  }
  // Lane r of column thread c finishes row r of unit c (of a pair, column threads c and c + perGroup).
  if (lane < TM && c < perGroup && inRange && outRow[lane] != NONE) {
    var second = 0.0;
    if (PAIRED) { second = partial[(c + perGroup) * TM * LANES + lane * LANES]; }
    finishRow(outRow[lane], unit, partial[sums + lane * LANES], second);
  }
}

// ---- epilogue ----

// Σ_j h[t, hAt + j] · B[s·N_p + n_p, j] of column n for row t alone (lora_expand.wgsl's sum).
fn rowDelta(t: u32, n: u32) -> f32 {
  var delta = 0.0;
  let s = adapterOf(t);
  let part = partOf(n);
  let hAt = p.hAt[part];
  if (s >= p.slots || hAt == NONE) { return delta; }
  let bBase = (p.bStart[part] + s * (p.colEnd[part] - colStart(part)) + n - colStart(part)) * p.rank;
  let hBase = t * p.hCols + hAt;
  for (var j = 0u; j < p.rank; j++) { delta = fma(h[hBase + j], loraB[bBase + j], delta); }
  return delta;
}

// The column's K-sum with its bias (matmul.wgsl), then its LoRA delta (lora_expand.wgsl).
fn result(t: u32, n: u32, sum: f32, delta: f32) -> f32 {
  var value = sum;
  if (p.hasBias != 0u) {
    let part = partOf(n);
    value += bias[p.biasStart[part] + n - colStart(part)];
  }
  let s = adapterOf(t); // -1 wraps past every slot
  if (s < p.slots && p.hAt[partOf(n)] != NONE) { value = fma(scales[s], delta, value); }
  return value;
}

// finish, with the LoRA deltas of row t alone.
fn finishRow(t: u32, unit: u32, s0: f32, s1: f32) {
  var d0 = 0.0;
  var d1 = 0.0;
  if (LORA) {
    d0 = rowDelta(t, column(unit, false));
    if (PAIRED) { d1 = rowDelta(t, column(unit, true)); }
  }
  finish(t, unit, s0, s1, d0, d1);
}

// Row t of a unit, from its K-sums and LoRA deltas (s1, d1: of a pair's second column).
fn finish(t: u32, unit: u32, s0: f32, s1: f32, d0: f32, d1: f32) {
  if (EPILOGUE == STORE) {
    out[t * p.N + unit] = result(t, unit, s0, d0);
  } else if (EPILOGUE == RESIDUAL) {
    let i = t * p.N + unit;
    out[i] = out[i] + result(t, unit, s0, d0);
  } else if (EPILOGUE == SWIGLU) {
    let F = p.N / 2u;
    let g = result(t, unit, s0, d0);
    out[t * F + unit] = g / (1.0 + exp(-g)) * result(t, F + unit, s1, d1);
  } else {
    ropeKv(t, unit, result(t, column(unit, false), s0, d0), result(t, column(unit, true), s1, d1));
  }
}

fn ropeKv(t: u32, unit: u32, v1: f32, v2: f32) {
  let hd = p.headDim;
  let half = hd / 2u;
  let head = unit / half; // q heads, then k heads, then v heads
  let i = unit % half;
  let position = step[p.positionsAt + t];
  var x1 = v1;
  var x2 = v2;
  if (head < p.heads + p.kvHeads) {
    let row = min(u32(max(position, 0)), p.tableRows - 1u) * hd;
    let c = table[row + i];
    let s = table[row + half + i];
    x1 = v1 * c - v2 * s;
    x2 = v2 * c + v1 * s;
  }
  if (head < p.heads) {
    let base = (t * p.heads + head) * hd;
    out[base + i] = x1;
    out[base + half + i] = x2;
    return;
  }
  let slot = u32(step[p.slotsAt + t]);
  let at = u32(position);
  if (slot >= p.cacheSlots || at >= p.maxLen) { return; } // negative ids wrap to huge u32s: skipped too
  let kvHead = (head - p.heads) % p.kvHeads;
  let base = p.layerBase + ((slot * p.maxLen + at) * p.kvHeads + kvHead) * hd + i;
  if (head < p.heads + p.kvHeads) {
    cacheK[base] = x1;
    cacheK[base + half] = x2;
  } else {
    cacheV[base] = x1;
    cacheV[base + half] = x2;
  }
}
