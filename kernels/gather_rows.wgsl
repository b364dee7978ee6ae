// Row gather: out[m, d] = x[rows[m], d]   (picks the rows whose logits are wanted, before the final norm)
// Bindings: p: Params; x: [T, D] f32; rows: [M] i32 (clamped into [0, T)); out: [M, D] f32
// Dispatch: one thread per output value: ceil(M · D / 256) workgroups of 256, folded into (x, y) past 65535.

struct Params { M: u32, D: u32, T: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
  if (i >= p.M * p.D) { return; }
  let m = i / p.D;
  let row = min(u32(max(rows[m], 0)), p.T - 1u);
  out[i] = x[row * p.D + i % p.D];
}
