// The SVD crossover's last step: the child's vectors as combinations of the parents' stacked vectors,
//   out_j[k] = Σ_i mix[m + i · keep + j] · v_i[k],   v_i[k] = x[bases[b + i] + k · stride],   out_j[k] at x[bases[b + n + j] + k · stride]
// for j < keep and k < length, written into the child's region of the same tensor (disjoint from the parents').
// Bindings: p: Params; x: f32, read_write; bases: i32, n + keep from index b (the parents' vectors, then the
//           child's); mix: f32, [n, keep] from index m (one upload of each serves every module)
// Dispatch: ceil(keep · length / 256) workgroups of 256 threads (folded into (x, y) past 65535), one output each
// (k-major for columns, j-major for rows); its sum over i runs in order.

struct Params { n: u32, keep: u32, length: u32, stride: u32, b: u32, m: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> bases: array<i32>;
@group(0) @binding(3) var<storage, read> mix: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let index = gid.x + gid.y * groups.x * 256u;
  if (index >= p.keep * p.length) { return; }
  // Consecutive threads touch consecutive addresses: along k for rows (stride 1), along j for columns.
  var j = index / p.length;
  var k = index % p.length;
  if (p.stride != 1u) {
    j = index % p.keep;
    k = index / p.keep;
  }
  var sum = 0.0;
  for (var i = 0u; i < p.n; i++) {
    sum += mix[p.m + i * p.keep + j] * x[u32(bases[p.b + i]) + k * p.stride];
  }
  x[u32(bases[p.b + p.n + j]) + k * p.stride] = sum;
}
