// Gram matrix of n vectors read out of one tensor (the SVD crossover's stacked factors, in place in the bank):
//   v_i[k] = x[bases[first + i] + k · stride] for k < length;   G[i, j] = Σ_k v_i[k] · v_j[k]
// written to out[outOffset + i·n + j] and its mirror (A rows: stride 1; B columns: stride R). n <= 64.
// Bindings: p: Params; x: f32; bases: i32 (this Gram's n from index `first`: one upload serves many); out: f32
// Dispatch: 1 workgroup of 256 threads per Gram. The vectors pass through workgroup memory a tile of 32
// positions at a time, loaded once (along k for rows, along i for columns: coalesced either way); thread t owns
// the pairs i <= j numbered t, t + 256, … and adds each tile's dot product in order: deterministic.

const THREADS: u32 = 256u;
const TILE: u32 = 32u;
const MAX_N: u32 = 64u;
const PAIRS_PER_THREAD: u32 = 9u; // ceil(64 · 65 / 2 / 256)

struct Params { n: u32, length: u32, stride: u32, outOffset: u32, first: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> bases: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

var<workgroup> tile: array<f32, 2048>; // [TILE, MAX_N]: tile[kk · n + i]

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  let n = p.n;
  let pairs = n * (n + 1u) / 2u;
  var first: array<u32, PAIRS_PER_THREAD>;
  var second: array<u32, PAIRS_PER_THREAD>;
  var acc: array<f32, PAIRS_PER_THREAD>;
  for (var q = 0u; q < PAIRS_PER_THREAD; q++) {
    var pair = lid.x + q * THREADS;
    var i = 0u;
    loop {
      if (i >= n || pair < n - i) { break; }
      pair -= n - i;
      i += 1u;
    }
    first[q] = i;
    second[q] = i + pair;
    acc[q] = 0.0;
  }
  for (var k0 = 0u; k0 < p.length; k0 += TILE) {
    for (var e = lid.x; e < TILE * n; e += THREADS) {
      var i = e / TILE;
      var kk = e % TILE;
      if (p.stride != 1u) { i = e % n; kk = e / n; }
      let k = k0 + kk;
      var value = 0.0;
      if (k < p.length) { value = x[u32(bases[p.first + i]) + k * p.stride]; }
      tile[kk * n + i] = value;
    }
    workgroupBarrier();
    for (var q = 0u; q < PAIRS_PER_THREAD; q++) {
      if (lid.x + q * THREADS < pairs) {
        var sum = 0.0;
        for (var kk = 0u; kk < TILE; kk++) { sum += tile[kk * n + first[q]] * tile[kk * n + second[q]]; }
        acc[q] += sum;
      }
    }
    workgroupBarrier();
  }
  for (var q = 0u; q < PAIRS_PER_THREAD; q++) {
    if (lid.x + q * THREADS < pairs) {
      out[p.outOffset + first[q] * n + second[q]] = acc[q];
      out[p.outOffset + second[q] * n + first[q]] = acc[q];
    }
  }
}
