// LoRA expand: y[t, n] += scales[s] · Σ_j h[t, j] · B[s · N + n, j]   with s = adapters[t]; rows with s < 0 untouched
//
// Bindings: p: Params
//           h:        [T, rank] f32 (from lora_shrink)
//           b:        [slots · N, wordsPerRow] u32: the bank's B factors, f32 bits or (WEIGHT_F16) half pairs
//           adapters: [T] i32 (-1: none; a slot past the bank counts as none)
//           scales:   [slots] f32 (lora_alpha / rank of each adapter)
//           y:        [T, N] f32, updated in place
// Dispatch: one thread per (t, n): ceil(T · N / 256) workgroups of 256, folded into (x, y) past 65535.
//           SERIAL (the CPU layout, for software adapters: see linear.wgsl): (ceil(N / (SERIAL_THREADS · UNITS)),
//           ceil(T / TM)) workgroups; a thread sums UNITS columns × a tile of TM rows (4 or 8), h read as quads of
//           rows the same in every thread, and the tile's rows of one adapter share each load of B (a tile of
//           several adapters: a pass per adapter).
//
// Batch invariance: each element sums j = 0, 1, ..., rank - 1 in order, by itself: nothing depends on T. SERIAL
// makes the same fma chain: both layouts give the same bits.

override WEIGHT_F16: bool = false;
override SERIAL: bool = false;
override TM: u32 = 8u; // SERIAL: rows a tile, 4 or 8
override UNITS: u32 = 1u; // SERIAL: columns a thread (<= MAX_COLUMNS)
override SERIAL_THREADS: u32 = 64u;
override WG: u32 = select(THREADS, SERIAL_THREADS, SERIAL);
override QUADS: u32 = TM / 4u;
const THREADS: u32 = 256u;
const MAX_COLUMNS: u32 = 8u;
const MAX_QUADS: u32 = 2u;

struct Params { T: u32, N: u32, rank: u32, slots: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> h: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read> adapters: array<i32>;
@group(0) @binding(4) var<storage, read> scales: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  if (SERIAL) {
    serial(wid.y, lid.x, wid.x);
    return;
  }
  let i = (wid.x + wid.y * groups.x) * THREADS + lid.x;
  if (i >= p.T * p.N) { return; }
  let t = i / p.N;
  let n = i % p.N;
  let s = u32(adapters[t]); // -1 wraps past every slot
  if (s >= p.slots) { return; }
  let hBase = t * p.rank;
  var sum = 0.0;
  if (WEIGHT_F16) {
    let base = (s * p.N + n) * ((p.rank + 1u) / 2u);
    for (var j = 0u; j < p.rank; j += 2u) {
      let pair = unpack2x16float(b[base + j / 2u]);
      sum = fma(h[hBase + j], pair.x, sum);
      if (j + 1u < p.rank) { sum = fma(h[hBase + j + 1u], pair.y, sum); }
    }
  } else {
    let base = (s * p.N + n) * p.rank;
    for (var j = 0u; j < p.rank; j++) { sum = fma(h[hBase + j], bitcast<f32>(b[base + j]), sum); }
  }
  y[i] = fma(scales[s], sum, y[i]);
}

// ---- CPU layout ----

#include "adapter_tiles.wgsl"

// h[t, j] of the tile's rows 4q .. 4q + 3 (rows past T: the last row).
fn hQuad(tile: u32, q: u32, j: u32) -> vec4f {
  var quad = vec4f();
  for (var l = 0u; l < 4u; l++) { quad[l] = h[min(tile * TM + 4u * q + l, p.T - 1u) * p.rank + j]; }
  return quad;
}

fn columnCount() -> u32 {
  return p.N;
}

fn addTo(t: u32, n: u32, s: u32, value: f32) {
  let i = t * p.N + n;
  y[i] = fma(scales[s], value, y[i]);
}

// Σ_j h[t, j] · B[s · N + n, j] of the thread's columns n over the tile's rows, j in order.
fn adapterSums(tile: u32, s: u32, thread: u32, group: u32) -> array<array<vec4f, MAX_QUADS>, MAX_COLUMNS> {
  var base: array<u32, MAX_COLUMNS>;
  for (var c = 0u; c < UNITS; c++) { base[c] = (s * p.N + min(columnOf(group, thread, c), p.N - 1u)) * select(p.rank, (p.rank + 1u) / 2u, WEIGHT_F16); }
  var acc = array<array<vec4f, MAX_QUADS>, MAX_COLUMNS>(); // zero each call (explicitly: lavapipe kept a loop's var)
  if (WEIGHT_F16) {
    for (var j = 0u; j < p.rank; j += 2u) {
      var low: array<vec4f, MAX_QUADS>;
      var high: array<vec4f, MAX_QUADS>;
      for (var q = 0u; q < QUADS; q++) {
        low[q] = hQuad(tile, q, j);
        high[q] = hQuad(tile, q, min(j + 1u, p.rank - 1u));
      }
      for (var c = 0u; c < UNITS; c++) {
        let pair = unpack2x16float(b[base[c] + j / 2u]);
        for (var q = 0u; q < QUADS; q++) {
          acc[c][q] = fma(low[q], vec4f(pair.x), acc[c][q]);
          if (j + 1u < p.rank) { acc[c][q] = fma(high[q], vec4f(pair.y), acc[c][q]); }
        }
      }
    }
  } else {
    for (var j = 0u; j < p.rank; j++) {
      var hs: array<vec4f, MAX_QUADS>;
      for (var q = 0u; q < QUADS; q++) { hs[q] = hQuad(tile, q, j); }
      for (var c = 0u; c < UNITS; c++) {
        let weight = vec4f(bitcast<f32>(b[base[c] + j]));
        for (var q = 0u; q < QUADS; q++) { acc[c][q] = fma(hs[q], weight, acc[c][q]); }
      }
    }
  }
  return acc;
}
