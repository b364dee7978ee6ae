// SwiGLU backward, for out = silu(gate) · up with silu(g) = g · σ(g):
//   dGate = dy · up · σ(g) · (1 + g · (1 - σ(g))),   dUp = dy · silu(g)
// Bindings: p: Params; dy, gate, up: [n] f32; dGate, dUp: [n] f32
// Dispatch: ceil(n / 256) workgroups of 256 threads (folded into (x, y) past 65535), one element each.

struct Params { n: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> gate: array<f32>;
@group(0) @binding(3) var<storage, read> up: array<f32>;
@group(0) @binding(4) var<storage, read_write> dGate: array<f32>;
@group(0) @binding(5) var<storage, read_write> dUp: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= p.n) { return; }
  let g = gate[i];
  let sigma = 1.0 / (1.0 + exp(-g));
  dUp[i] = dy[i] * g * sigma;
  dGate[i] = dy[i] * up[i] * sigma * (1.0 + g * (1.0 - sigma));
}
