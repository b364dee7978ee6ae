// SwiGLU activation: out[i] = silu(gate[i]) · up[i] = gate / (1 + exp(-gate)) · up
// Bindings: p: Params; gate, up: [n] f32; out: [n] f32
// Dispatch: ceil(n / 256) workgroups of 256, folded into (x, y) past 65535. Elementwise: batch-invariant.

struct Params { n: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
  if (i >= p.n) { return; }
  let g = gate[i];
  out[i] = g / (1.0 + exp(-g)) * up[i];
}
