// Embedding lookup: out[m, d] = table[tokens[m] - first, d] for the tokens in the table's rows first .. first + V - 1.
// A table over the device's binding limit is stored in row blocks (src/backend/webgpu-row-blocks.ts): one dispatch
// per block, each writing the rows of its tokens only. A whole table is the block first = 0, V = total.
// Bindings: p: Params
//           tokens: [M] i32 (host-checked to lie in [0, total); clamped here so a bad id cannot read out of bounds)
//           table:  [V, wordsPerRow] u32: f32 bits (wordsPerRow = D) or (WEIGHT_F16) half pairs, rows padded to even D
//           out:    [M, D] f32
// Dispatch: one thread per output value: ceil(M · D / 256) workgroups of 256, folded into (x, y) past 65535.

override WEIGHT_F16: bool = false;

struct Params { M: u32, D: u32, V: u32, first: u32, total: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> tokens: array<i32>;
@group(0) @binding(2) var<storage, read> table: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
  if (i >= p.M * p.D) { return; }
  let m = i / p.D;
  let d = i % p.D;
  let id = min(u32(max(tokens[m], 0)), p.total - 1u);
  if (id < p.first || id >= p.first + p.V) { return; } // another block's row
  let token = id - p.first;
  if (WEIGHT_F16) {
    let pair = unpack2x16float(table[token * ((p.D + 1u) / 2u) + d / 2u]);
    out[i] = select(pair.x, pair.y, (d & 1u) == 1u);
  } else {
    out[i] = bitcast<f32>(table[token * p.D + d]);
  }
}
