// Rotary position embedding, in place, rotate-half convention (HF Llama):
//   (x[i], x[i + hd/2]) ← (x[i]·cos − x[i + hd/2]·sin, x[i + hd/2]·cos + x[i]·sin),  angle = positions[t]·invFreq[i]
// The cos/sin table is computed on the host in f64 (WGSL's sin/cos are too loose for large angles).
// Bindings: p: Params; x: [T, heads·hd] f32; positions: [T] i32; table: [maxLen, hd] (cos | sin)
// Dispatch: 1-D over T·heads·hd/2 in workgroups of 256, folded into (x, y).

struct Params { T: u32, heads: u32, headDim: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<i32>;
@group(0) @binding(3) var<storage, read> table: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let half = p.headDim / 2u;
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= p.T * p.heads * half) { return; }
  let pair = i % half;
  let head = (i / half) % p.heads;
  let t = i / (half * p.heads);
  let row = u32(positions[t]) * p.headDim;
  let c = table[row + pair];
  let s = table[row + half + pair];
  let base = (t * p.heads + head) * p.headDim;
  let x1 = x[base + pair];
  let x2 = x[base + half + pair];
  x[base + pair] = x1 * c - x2 * s;
  x[base + half + pair] = x2 * c + x1 * s;
}
