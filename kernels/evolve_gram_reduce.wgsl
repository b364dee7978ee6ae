// Gram matrix of n vectors, pass 2 of 2 (after evolve_gram.wgsl): the chunks' partial Grams added in order,
//   G[i, j] = Σ_{c < chunks} partial[c, q]   for pair q = (i, j), i <= j, in row order
// written to out[outOffset + i·n + j] and its mirror.
// Bindings: p: Params; partial: f32 [chunks, n·(n+1)/2]; out: f32
// Dispatch: ceil(n·(n+1)/2 / 256) workgroups of 256 threads, one pair each.

struct Params { n: u32, chunks: u32, outOffset: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> partial: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let pairs = p.n * (p.n + 1u) / 2u;
  let q = gid.x;
  if (q >= pairs) { return; }
  var i = 0u;
  var rest = q;
  loop {
    if (rest < p.n - i) { break; }
    rest -= p.n - i;
    i += 1u;
  }
  let j = i + rest;
  var sum = 0.0;
  for (var c = 0u; c < p.chunks; c++) {
    sum += partial[c * pairs + q];
  }
  out[p.outOffset + i * p.n + j] = sum;
  out[p.outOffset + j * p.n + i] = sum;
}
