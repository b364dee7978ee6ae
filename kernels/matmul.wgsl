// matmul: y = x · Wᵀ + bias   (a linear layer; W in Hugging Face [out, in] layout)
//
// Bindings: p: Params; x: [T, K] f32; w: [N, wordsPerRow] u32 (f32 bits, or f16 pairs when WEIGHT_F16,
//           rows padded to an even K); bias: [N] f32 (read only when hasBias); y: [T, N] f32
// Dispatch: (ceil(N / 8), ceil(T / 8)) workgroups of 32 K-lanes × 8 output columns; each workgroup owns 8 rows.
//
// Batch invariance: lane l sums k = l, l+32, ... in order, then the 32 lanes are combined by a fixed tree, so an
// element's summation order depends only on K: the same bits for a row alone or among 64 others.

override WEIGHT_F16: bool = false;
const LANES: u32 = 32u;
const COLS: u32 = 8u;
const ROWS: u32 = 8u;

struct Params { T: u32, K: u32, N: u32, hasBias: u32, wordsPerRow: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

var<workgroup> partial: array<f32, 2048>; // [COLS][ROWS][LANES]

@compute @workgroup_size(32, 8)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let lane = lid.x;
  let col = wid.x * COLS + lid.y;
  let row0 = wid.y * ROWS;
  var acc: array<f32, 8>;
  if (col < p.N) {
    let rowBase = col * p.wordsPerRow;
    for (var word = lane; word < p.wordsPerRow; word += LANES) {
      if (WEIGHT_F16) {
        let pair = unpack2x16float(w[rowBase + word]);
        let k = word * 2u;
        for (var r = 0u; r < ROWS; r++) {
          if (row0 + r >= p.T) { break; }
          let xr = (row0 + r) * p.K;
          var term = x[xr + k] * pair.x;
          if (k + 1u < p.K) { term += x[xr + k + 1u] * pair.y; }
          acc[r] += term;
        }
      } else {
        let weight = bitcast<f32>(w[rowBase + word]);
        for (var r = 0u; r < ROWS; r++) {
          if (row0 + r >= p.T) { break; }
          acc[r] += x[(row0 + r) * p.K + word] * weight;
        }
      }
    }
  }
  let base = lid.y * ROWS * LANES;
  for (var r = 0u; r < ROWS; r++) { partial[base + r * LANES + lane] = acc[r]; }
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      for (var r = 0u; r < ROWS; r++) {
        partial[base + r * LANES + lane] += partial[base + r * LANES + lane + stride];
      }
    }
    workgroupBarrier();
  }
  if (lane == 0u && col < p.N) {
    for (var r = 0u; r < ROWS; r++) {
      if (row0 + r >= p.T) { break; }
      var value = partial[base + r * LANES];
      if (p.hasBias != 0u) { value += bias[col]; }
      y[(row0 + r) * p.N + col] = value;
    }
  }
}
