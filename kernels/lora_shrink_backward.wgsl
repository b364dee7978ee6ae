// LoRA shrink backward: dx[t, k] += Σ_j dh[t, j] · A[s · rank + j, k], s = adapters[t] >= 0 (else untouched)
// Bindings: p: Params; dh: [T, rank] f32; a: [slots · rank, K] f32; adapters: [T] i32; dx: [T, K] f32, in place
// Dispatch: ceil(T · K / 256) workgroups of 256 threads (folded into (x, y) past 65535), one element each.
//           SERIAL (the CPU layout, for software adapters: see linear.wgsl): (ceil(K / (SERIAL_THREADS · UNITS)),
//           ceil(T / TM)) workgroups; a thread sums UNITS columns × a tile of TM rows (4 or 8), dh read as quads of
//           rows the same in every thread, and the tile's rows of one adapter share each load of A (a tile of
//           several adapters: a pass per adapter), as lora_expand.wgsl.
//
// Batch invariance: one thread sums over j = 0..rank-1 in order. SERIAL makes the same fma chain: the same bits.

override SERIAL: bool = false;
override TM: u32 = 8u; // SERIAL: rows a tile, 4 or 8
override UNITS: u32 = 1u; // SERIAL: columns a thread (<= MAX_COLUMNS)
override SERIAL_THREADS: u32 = 64u;
override WG: u32 = select(THREADS, SERIAL_THREADS, SERIAL);
override QUADS: u32 = TM / 4u;
const THREADS: u32 = 256u;
const MAX_COLUMNS: u32 = 8u;
const MAX_QUADS: u32 = 2u;

struct Params { T: u32, K: u32, rank: u32, slots: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dh: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> adapters: array<i32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  if (SERIAL) {
    serial(wid.y, lid.x, wid.x);
    return;
  }
  let i = (wid.x + wid.y * groups.x) * THREADS + lid.x;
  if (i >= p.T * p.K) { return; }
  let t = i / p.K;
  let k = i % p.K;
  let slot = u32(adapters[t]);
  if (slot >= p.slots) { return; }
  var sum = 0.0;
  for (var j = 0u; j < p.rank; j++) { sum = fma(dh[t * p.rank + j], a[(slot * p.rank + j) * p.K + k], sum); }
  dx[i] = dx[i] + sum;
}

// ---- CPU layout ----

#include "adapter_tiles.wgsl"

// dh[t, j] of the tile's rows 4q .. 4q + 3 (rows past T: the last row).
fn dhQuad(tile: u32, q: u32, j: u32) -> vec4f {
  var quad = vec4f();
  for (var l = 0u; l < 4u; l++) { quad[l] = dh[min(tile * TM + 4u * q + l, p.T - 1u) * p.rank + j]; }
  return quad;
}

fn columnCount() -> u32 {
  return p.K;
}

fn addTo(t: u32, k: u32, s: u32, value: f32) {
  let i = t * p.K + k;
  dx[i] = dx[i] + value;
}

// Σ_j dh[t, j] · A[s · rank + j, k] of the thread's columns k over the tile's rows, j in order.
fn adapterSums(tile: u32, s: u32, thread: u32, group: u32) -> array<array<vec4f, MAX_QUADS>, MAX_COLUMNS> {
  var column: array<u32, MAX_COLUMNS>;
  for (var c = 0u; c < UNITS; c++) { column[c] = min(columnOf(group, thread, c), p.K - 1u); }
  var acc = array<array<vec4f, MAX_QUADS>, MAX_COLUMNS>(); // zero each call (explicitly: lavapipe kept a loop's var)
  for (var j = 0u; j < p.rank; j++) {
    var hs: array<vec4f, MAX_QUADS>;
    for (var q = 0u; q < QUADS; q++) { hs[q] = dhQuad(tile, q, j); }
    let row = (s * p.rank + j) * p.K;
    for (var c = 0u; c < UNITS; c++) {
      let weight = vec4f(a[row + column[c]]);
      for (var q = 0u; q < QUADS; q++) { acc[c][q] = fma(hs[q], weight, acc[c][q]); }
    }
  }
  return acc;
}
