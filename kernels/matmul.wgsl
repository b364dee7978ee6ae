// matmul: y[t, n] = Σ_k x[t, k] · W[n, k] + bias[n]   (a linear layer; W in Hugging Face [out, in] layout)
//
// Bindings: p: Params
//           x:    [T, K] f32
//           w:    [N, wordsPerRow] u32: f32 bits (wordsPerRow = K), or with WEIGHT_F16 two halves a word
//                 (wordsPerRow = ceil(K / 2); an odd row's last word holds one value and a zero pad)
//           bias: [N] f32, read only when hasBias (else a dummy buffer)
//           y:    [T, N] f32
// Dispatch: (ceil(N / 8), ceil(T / TM)) workgroups of 256 threads = 32 K-lanes × 8 output columns.
//           Each thread keeps TM accumulators, one per row of its workgroup's row tile.
//
// Batch invariance: lane l sums its words l, l+32, l+64, ... in ascending order (for f16 both halves of a word,
// low then high), an odd K's last value is added last by the lane owning that word, then the 32 lanes meet in a
// fixed tree (16, 8, 4, 2, 1) and the bias is added. That order depends on K only: never on T, on the tile a
// row landed in, or on TM (both TM variants run this same per-element code, with fma written out so no
// compiler contracts one variant differently). Rows past T in the last tile are computed from a clamped row
// and never written.
//
// Bandwidth: consecutive lanes read consecutive words of a weight row (coalesced). Decode (TM = 1) is bound by
// memory bandwidth, so its main loop issues 4 words per lane before accumulating them (in the same order) to keep
// more loads in flight; with TM = 8 the extra registers cost more than they give (measured on lavapipe).

override WEIGHT_F16: bool = false;
override TM: u32 = 8u; // rows per workgroup: 1 for decode (T = 1), 8 otherwise; at most MAX_TM
const MAX_TM: u32 = 8u;
const LANES: u32 = 32u;
const COLS: u32 = 8u;

struct Params { T: u32, K: u32, N: u32, hasBias: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

var<workgroup> partial: array<f32, TM * COLS * LANES>; // [COLS][TM][LANES]
var<private> acc: array<f32, MAX_TM>;
var<private> xRow: array<u32, MAX_TM>; // offset of each tile row in x (clamped to the last row)

// acc[r] += x[row r, k] · weight, for every row of the tile.
fn accumulate(k: u32, weight: f32) {
  for (var r = 0u; r < TM; r++) { acc[r] = fma(x[xRow[r] + k], weight, acc[r]); }
}

#include "lane_sums.wgsl"

@compute @workgroup_size(32, 8)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let lane = lid.x;
  let col = wid.x * COLS + lid.y;
  let row0 = wid.y * TM;
  for (var r = 0u; r < TM; r++) {
    acc[r] = 0.0;
    xRow[r] = min(row0 + r, p.T - 1u) * p.K;
  }

  if (col < p.N) { laneSums(col * select(p.K, (p.K + 1u) / 2u, WEIGHT_F16), lane); }

  let tile = lid.y * TM * LANES;
  for (var r = 0u; r < TM; r++) { partial[tile + r * LANES + lane] = acc[r]; }
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      for (var r = 0u; r < TM; r++) {
        partial[tile + r * LANES + lane] += partial[tile + r * LANES + lane + stride];
      }
    }
    workgroupBarrier();
  }
  // Lane r writes row r of the tile.
  if (lane < TM && col < p.N && row0 + lane < p.T) {
    var value = partial[tile + lane * LANES];
    if (p.hasBias != 0u) { value += bias[col]; }
    y[(row0 + lane) * p.N + col] = value;
  }
}
