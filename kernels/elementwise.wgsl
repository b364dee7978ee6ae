// Elementwise ops on n values, selected by `op`:
//   0 add:    acc[i] += x[i]
//   1 swiglu: out[i] = silu(gate[i]) · up[i] = gate / (1 + exp(-gate)) · up
// Bindings: p: Params; a: acc or gate; b: x or up; out: swiglu's result (unused by add)
// Dispatch: 1-D over n in workgroups of 256, folded into (x, y) when n / 256 exceeds 65535.

struct Params { n: u32, op: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= p.n) { return; }
  if (p.op == 0u) {
    a[i] = a[i] + b[i];
  } else {
    let g = a[i];
    out[i] = g / (1.0 + exp(-g)) * b[i];
  }
}
