// addInPlace: acc[i] += x[i]   (the residual stream)
// Bindings: p: Params; acc: [n] f32, updated in place; x: [n] f32 (a different buffer: WebGPU forbids aliasing)
// Dispatch: ceil(n / 256) workgroups of 256, folded into (x, y) past 65535. Elementwise: batch-invariant.

struct Params { n: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> acc: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
  if (i >= p.n) { return; }
  acc[i] = acc[i] + x[i];
}
