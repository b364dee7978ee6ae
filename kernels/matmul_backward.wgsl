// The input gradient of a linear layer: dx[t, k] = Σ_n dy[t, n] · W[n, k]      (W as in matmul.wgsl: [N, K])
// Bindings: p: Params; dy: [T, N] f32; w: [N, wordsPerRow] u32 (f32 bits, or WEIGHT_F16: half pairs with
//           each row padded to an even count); dx: [T, K] f32
// Dispatch: ceil(K / 16) · ceil(T / 16) workgroups of 16 × 16 threads (folded into (x, y) past 65535),
//           one 16 × 16 tile of dx each; n advances in tiles of 16 through workgroup memory.
//           SERIAL (the CPU layout, for software adapters: see linear.wgsl): (ceil(K / (SERIAL_THREADS · UNITS)),
//           ceil(T / TM)) workgroups; a thread sums UNITS columns × TM rows (a register tile), dy's rows staged
//           CHUNK values of n at a time as quads of rows ([n][TM / 4] vec4f).
//
// Batch invariance: each dx element is summed by one thread over n = 0..N-1 in order, whatever T is (in both
// layouts the same fma chain: the same bits).

override WEIGHT_F16: bool = false;
override SERIAL: bool = false;
override UNITS: u32 = 1u; // SERIAL: columns a thread (<= MAX_COLUMNS)
override TM: u32 = 16u; // SERIAL: rows a tile, 8 or 16
override SERIAL_THREADS: u32 = 64u;
override WG_X: u32 = select(TILE, SERIAL_THREADS, SERIAL);
override WG_Y: u32 = select(TILE, 1u, SERIAL);
override TILE_WORDS: u32 = select(TILE * TILE, 1u, SERIAL);
override STAGED_QUADS: u32 = select(1u, STAGE_SIZE / 4u, SERIAL);
override QUADS: u32 = TM / 4u;
override CHUNK: u32 = STAGE_SIZE / TM; // values of n staged at once
const TILE: u32 = 16u;
const MAX_COLUMNS: u32 = 8u;
const MAX_QUADS: u32 = 4u;
const STAGE_SIZE: u32 = 4096u; // values of dy staged at once (16 KiB)

struct Params { T: u32, N: u32, K: u32, tilesK: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

var<workgroup> dyTile: array<f32, TILE_WORDS>; // [t][n]
var<workgroup> wTile: array<f32, TILE_WORDS>; // [n][k]
var<workgroup> staged: array<vec4f, STAGED_QUADS>; // SERIAL: dy [CHUNK][QUADS]

fn weightAt(n: u32, k: u32) -> f32 {
  if (WEIGHT_F16) {
    let word = w[n * ((p.K + 1u) / 2u) + k / 2u];
    let pair = unpack2x16float(word);
    return select(pair.x, pair.y, (k & 1u) == 1u);
  }
  return bitcast<f32>(w[n * p.K + k]);
}

@compute @workgroup_size(WG_X, WG_Y)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  if (SERIAL) {
    serial(wid.y, lid.x, wid.x);
    return;
  }
  let tile = wid.x + wid.y * groups.x;
  let tileK = tile % p.tilesK;
  let tileT = tile / p.tilesK;
  let k = tileK * TILE + lid.x;
  let t = tileT * TILE + lid.y;
  var acc = 0.0;
  for (var n0 = 0u; n0 < p.N; n0 += TILE) {
    // Thread (x, y) loads dy[t, n0 + x] and W[n0 + y, k].
    let tLoad = tileT * TILE + lid.y;
    let nLoad = n0 + lid.x;
    var dyValue = 0.0;
    if (tLoad < p.T && nLoad < p.N) { dyValue = dy[tLoad * p.N + nLoad]; }
    dyTile[lid.y * TILE + lid.x] = dyValue;
    let nRow = n0 + lid.y;
    var wValue = 0.0;
    if (nRow < p.N && k < p.K) { wValue = weightAt(nRow, k); }
    wTile[lid.y * TILE + lid.x] = wValue;
    workgroupBarrier();
    for (var i = 0u; i < TILE; i++) { acc = fma(dyTile[lid.y * TILE + i], wTile[i * TILE + lid.x], acc); }
    workgroupBarrier();
  }
  if (t < p.T && k < p.K) { dx[t * p.K + k] = acc; }
}

// SERIAL: the thread's columns (group · UNITS + c) · SERIAL_THREADS + thread; past K: the last column, not written.
fn serial(tileT: u32, thread: u32, group: u32) {
  var k: array<u32, MAX_COLUMNS>;
  for (var c = 0u; c < UNITS; c++) { k[c] = min((group * UNITS + c) * SERIAL_THREADS + thread, p.K - 1u); }
  var acc: array<array<vec4f, MAX_QUADS>, MAX_COLUMNS>;
  for (var n0 = 0u; n0 < p.N; n0 += CHUNK) {
    let count = min(CHUNK, p.N - n0);
    workgroupBarrier(); // the previous chunk is read
    for (var i = thread; i < count * QUADS; i += SERIAL_THREADS) {
      let n = n0 + i / QUADS;
      let first = tileT * TM + 4u * (i % QUADS);
      var quad = vec4f();
      for (var j = 0u; j < 4u; j++) { quad[j] = dy[min(first + j, p.T - 1u) * p.N + n]; }
      staged[i] = quad;
    }
    workgroupBarrier();
    for (var i = 0u; i < count; i++) {
      for (var c = 0u; c < UNITS; c++) {
        let weight = vec4f(weightAt(n0 + i, k[c]));
        for (var q = 0u; q < QUADS; q++) { acc[c][q] = fma(staged[i * QUADS + q], weight, acc[c][q]); }
      }
    }
  }
  for (var c = 0u; c < UNITS; c++) {
    let column = (group * UNITS + c) * SERIAL_THREADS + thread;
    for (var r = 0u; r < TM; r++) {
      let t = tileT * TM + r;
      if (column < p.K && t < p.T) { dx[t * p.K + column] = acc[c][r / 4u][r % 4u]; }
    }
  }
}
