// Rotary position embedding, in place, rotate-half convention (HF Llama): for each head and i < hd/2,
//   (x[i], x[i + hd/2]) <- (x[i]·cos − x[i + hd/2]·sin, x[i + hd/2]·cos + x[i]·sin),   cos/sin of positions[t]·invFreq[i]
// The cos/sin table is computed on the host in f64: WGSL's sin/cos are too loose for large angles.
// Bindings: p: Params; x: [T, heads · hd] f32, in place; positions: [T] i32 (clamped into the table);
//           table: [maxLen, hd] f32, cos in columns [0, hd/2), sin in [hd/2, hd)
// Dispatch: one thread per rotated pair: ceil(T · heads · hd/2 / 256) workgroups of 256, folded into (x, y).

struct Params { T: u32, heads: u32, headDim: u32, maxLen: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<i32>;
@group(0) @binding(3) var<storage, read> table: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let half = p.headDim / 2u;
  let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
  if (i >= p.T * p.heads * half) { return; }
  let pair = i % half;
  let head = (i / half) % p.heads;
  let t = i / (half * p.heads);
  let row = min(u32(max(positions[t], 0)), p.maxLen - 1u) * p.headDim;
  let c = table[row + pair];
  let s = table[row + half + pair];
  let base = (t * p.heads + head) * p.headDim;
  let x1 = x[base + pair];
  let x2 = x[base + half + pair];
  x[base + pair] = x1 * c - x2 * s;
  x[base + half + pair] = x2 * c + x1 * s;
}
