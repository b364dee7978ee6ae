// Segmented sum of outer products (the weight gradient of a linear layer, per adapter slot):
//   out[s·I + i, j] = scale[s] · Σ_{q = offsets[s] .. offsets[s+1]-1} u[order[q], i] · v[order[q], j]
// Bindings: p: Params; u: [T, I] f32; v: [T, J] f32; order: [Q] i32 (row indices); offsets: [S + 1] i32;
//           scales: [S] f32 (read when HAS_SCALES); out: [S · I, J] f32
// Dispatch: S · ceil(I / 16) · ceil(J / 16) workgroups of 16 × 16 threads (folded into (x, y) past 65535), one
//           16 × 16 tile of one segment each; the segment's rows advance 16 at a time through workgroup memory.
//           SERIAL (the CPU layout, for software adapters: see linear.wgsl): S · ceil(rows / TM) ·
//           ceil(columns / (SERIAL_THREADS · UNITS)) workgroups of SERIAL_THREADS (folded likewise), where the
//           columns are j and the rows i, or (SWAP: I > J) the columns i and the rows j; a thread sums UNITS
//           columns × TM rows (a register tile), its columns' values a lane-by-lane load each, its rows' TM
//           values loaded as quads the same in every thread.
//
// Batch invariance: each output is summed by one thread over its segment's rows in `order`: the result of a
// segment does not depend on the other segments or on T. Both layouts make the same fma chain (u · v and v · u
// are the same product): the same bits.

override HAS_SCALES: bool = false;
override SERIAL: bool = false;
override SWAP: bool = false; // SERIAL: the columns are i (u's), the rows j (v's)
override UNITS: u32 = 1u; // SERIAL: columns a thread (<= MAX_COLUMNS)
override TM: u32 = 16u; // SERIAL: rows a tile, 4, 8 or 16
override SERIAL_THREADS: u32 = 64u;
override WG_X: u32 = select(TILE, SERIAL_THREADS, SERIAL);
override WG_Y: u32 = select(TILE, 1u, SERIAL);
override TILE_WORDS: u32 = select(TILE * TILE, 1u, SERIAL);
override QUADS: u32 = TM / 4u;
const TILE: u32 = 16u;
const MAX_COLUMNS: u32 = 8u;
const MAX_QUADS: u32 = 4u;

struct Params { I: u32, J: u32, S: u32, tilesI: u32, tilesJ: u32, T: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> u: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> order: array<i32>;
@group(0) @binding(4) var<storage, read> offsets: array<i32>;
@group(0) @binding(5) var<storage, read> scales: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

var<workgroup> uTile: array<f32, TILE_WORDS>; // [row][i]
var<workgroup> vTile: array<f32, TILE_WORDS>; // [row][j]

@compute @workgroup_size(WG_X, WG_Y)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  if (SERIAL) {
    serial(wid.x + wid.y * groups.x, lid.x);
    return;
  }
  let tilesPerSegment = p.tilesI * p.tilesJ;
  let tile = wid.x + wid.y * groups.x;
  let s = min(tile / tilesPerSegment, p.S - 1u); // past the grid: recomputes the last segment, writes nothing
  let inGrid = tile < p.S * tilesPerSegment;
  let i0 = ((tile % tilesPerSegment) / p.tilesJ) * TILE;
  let j0 = (tile % p.tilesJ) * TILE;
  let i = i0 + lid.y;
  let j = j0 + lid.x;
  let first = u32(offsets[s]);
  let last = u32(offsets[s + 1u]);
  var acc = 0.0;
  for (var q0 = first; q0 < last; q0 += TILE) {
    // Thread (x, y) loads u[row q0 + y, i0 + x] and v[row q0 + y, j0 + x].
    let q = q0 + lid.y;
    var uValue = 0.0;
    var vValue = 0.0;
    if (q < last) {
      let row = min(u32(max(order[q], 0)), p.T - 1u);
      if (i0 + lid.x < p.I) { uValue = u[row * p.I + i0 + lid.x]; }
      if (j0 + lid.x < p.J) { vValue = v[row * p.J + j0 + lid.x]; }
    }
    uTile[lid.y * TILE + lid.x] = uValue;
    vTile[lid.y * TILE + lid.x] = vValue;
    workgroupBarrier();
    let rows = min(TILE, last - q0);
    for (var r = 0u; r < rows; r++) { acc = fma(uTile[r * TILE + lid.y], vTile[r * TILE + lid.x], acc); }
    workgroupBarrier();
  }
  if (inGrid && i < p.I && j < p.J) {
    var scale = 1.0;
    if (HAS_SCALES) { scale = scales[s]; }
    out[(s * p.I + i) * p.J + j] = scale * acc;
  }
}

// ---- CPU layout ----

// The column operand at (input row, column c) and the row operand at (input row, row r): u and v, or (SWAP) v and u.
fn columnValue(row: u32, c: u32) -> f32 {
  if (SWAP) { return u[row * p.I + c]; }
  return v[row * p.J + c];
}

fn rowValue(row: u32, r: u32) -> f32 {
  if (SWAP) { return v[row * p.J + r]; }
  return u[row * p.I + r];
}

// The thread's columns (group · UNITS + c) · SERIAL_THREADS + thread; past the end: the last column, not written.
fn serial(index: u32, thread: u32) {
  let shape = select(vec2u(p.J, p.I), vec2u(p.I, p.J), SWAP);
  let columns = shape.x;
  let rows = shape.y;
  let groups = (columns + SERIAL_THREADS * UNITS - 1u) / (SERIAL_THREADS * UNITS);
  let tiles = (rows + TM - 1u) / TM;
  let group = index % groups;
  let tile = (index / groups) % tiles;
  let s = index / (groups * tiles);
  if (s >= p.S) { return; }
  var c: array<u32, MAX_COLUMNS>;
  for (var k = 0u; k < UNITS; k++) { c[k] = min((group * UNITS + k) * SERIAL_THREADS + thread, columns - 1u); }
  var acc: array<array<vec4f, MAX_QUADS>, MAX_COLUMNS>;
  for (var q = u32(offsets[s]); q < u32(offsets[s + 1u]); q++) {
    let row = min(u32(max(order[q], 0)), p.T - 1u);
    var quads: array<vec4f, MAX_QUADS>;
    for (var k = 0u; k < QUADS; k++) {
      for (var l = 0u; l < 4u; l++) { quads[k][l] = rowValue(row, min(tile * TM + 4u * k + l, rows - 1u)); } // past the end: computed, not written
    }
    for (var k = 0u; k < UNITS; k++) {
      let value = vec4f(columnValue(row, c[k]));
      for (var l = 0u; l < QUADS; l++) { acc[k][l] = fma(quads[l], value, acc[k][l]); }
    }
  }
  var scale = 1.0;
  if (HAS_SCALES) { scale = scales[s]; }
  for (var k = 0u; k < UNITS; k++) {
    let column = (group * UNITS + k) * SERIAL_THREADS + thread;
    for (var l = 0u; l < TM; l++) {
      let rowIndex = tile * TM + l;
      let ij = select(vec2u(rowIndex, column), vec2u(column, rowIndex), SWAP);
      if (column < columns && rowIndex < rows) { out[(s * p.I + ij.x) * p.J + ij.y] = scale * acc[k][l / 4u][l % 4u]; }
    }
  }
}
