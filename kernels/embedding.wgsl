// embedding and row gathering: out[t, d] = table[index[t], d]
//   embedding:   table is a weight [V, D] (u32 words: f32 bits, or f16 pairs when WEIGHT_F16)
//   gatherRows:  table is an f32 activation [T, D] (WEIGHT_F16 false)
// Bindings: p: Params; index: [M] i32; table; out: [M, D] f32
// Dispatch: 1-D over M·D in workgroups of 256, folded into (x, y).

override WEIGHT_F16: bool = false;
struct Params { M: u32, D: u32, wordsPerRow: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> index: array<i32>;
@group(0) @binding(2) var<storage, read> table: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= p.M * p.D) { return; }
  let m = i / p.D;
  let d = i % p.D;
  let row = u32(index[m]) * p.wordsPerRow;
  if (WEIGHT_F16) {
    let pair = unpack2x16float(table[row + d / 2u]);
    out[i] = select(pair.x, pair.y, (d & 1u) == 1u);
  } else {
    out[i] = bitcast<f32>(table[row + d]);
  }
}
