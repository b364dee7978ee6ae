// The input gradient of a linear layer: dx[t, k] = Σ_n dy[t, n] · W[n, k]      (W as in matmul.wgsl: [N, K])
// Bindings: p: Params; dy: [T, N] f32; w: [N, wordsPerRow] u32 (f32 bits, or WEIGHT_F16: half pairs with
//           each row padded to an even count); dx: [T, K] f32
// Dispatch: ceil(K / 16) · ceil(T / 16) workgroups of 16 × 16 threads (folded into (x, y) past 65535),
//           one 16 × 16 tile of dx each; n advances in tiles of 16 through workgroup memory.
//
// Batch invariance: each dx element is summed by one thread over n = 0..N-1 in order, whatever T is.

override WEIGHT_F16: bool = false;
const TILE: u32 = 16u;

struct Params { T: u32, N: u32, K: u32, tilesK: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

var<workgroup> dyTile: array<f32, TILE * TILE>; // [t][n]
var<workgroup> wTile: array<f32, TILE * TILE>; // [n][k]

fn weightAt(n: u32, k: u32) -> f32 {
  if (WEIGHT_F16) {
    let word = w[n * ((p.K + 1u) / 2u) + k / 2u];
    let pair = unpack2x16float(word);
    return select(pair.x, pair.y, (k & 1u) == 1u);
  }
  return bitcast<f32>(w[n * p.K + k]);
}

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
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
