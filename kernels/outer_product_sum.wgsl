// Segmented sum of outer products (the weight gradient of a linear layer, per adapter slot):
//   out[s·I + i, j] = scale[s] · Σ_{q = offsets[s] .. offsets[s+1]-1} u[order[q], i] · v[order[q], j]
// Bindings: p: Params; u: [T, I] f32; v: [T, J] f32; order: [Q] i32 (row indices); offsets: [S + 1] i32;
//           scales: [S] f32 (read when HAS_SCALES); out: [S · I, J] f32
// Dispatch: S · ceil(I / 16) · ceil(J / 16) workgroups of 16 × 16 threads (folded into (x, y) past 65535), one
//           16 × 16 tile of one segment each; the segment's rows advance 16 at a time through workgroup memory.
//
// Batch invariance: each output is summed by one thread over its segment's rows in `order`: the result of a
// segment does not depend on the other segments or on T.

override HAS_SCALES: bool = false;
const TILE: u32 = 16u;

struct Params { I: u32, J: u32, S: u32, tilesI: u32, tilesJ: u32, T: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> u: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> order: array<i32>;
@group(0) @binding(4) var<storage, read> offsets: array<i32>;
@group(0) @binding(5) var<storage, read> scales: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

var<workgroup> uTile: array<f32, TILE * TILE>; // [row][i]
var<workgroup> vTile: array<f32, TILE * TILE>; // [row][j]

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
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
