// Column copy: dst[r, dstFirst + j] = src[r, srcFirst + j] for r < rows, j < count. Puts a row block's logits
// [M, V_i] into their columns of the whole logits [M, V], and takes a block's columns out of dlogits.
// Bindings: p: Params; src: [rows, srcCols] f32; dst: [rows, dstCols] f32
// Dispatch: one thread per copied value: ceil(rows · count / 256) workgroups of 256, folded into (x, y) past 65535.

struct Params { rows: u32, count: u32, srcCols: u32, srcFirst: u32, dstCols: u32, dstFirst: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
  if (i >= p.rows * p.count) { return; }
  let r = i / p.count;
  let j = i % p.count;
  dst[r * p.dstCols + p.dstFirst + j] = src[r * p.srcCols + p.srcFirst + j];
}
