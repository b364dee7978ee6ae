// Gram matrices, pass 2 of 2 (after evolve_gram.wgsl), for every Gram of one gramsInto call at once: each Gram's
// partial sums over its chunks added in order,
//   G[i, j] = Σ_{c < chunks} partial[partialOffset + c · pairs + q]   for pair q = (i, j), i <= j, in row order
// written to out[outOffset + i·n + j] and its mirror.
// Bindings: p: Params; table: i32 [grams, 4] = (partialOffset, chunks, n, outOffset) per Gram; partial: f32; out: f32
// Dispatch: (ceil(most pairs / 256), grams) workgroups of 256 threads: row y is Gram y, one pair per thread.

struct Params { grams: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> table: array<i32>;
@group(0) @binding(2) var<storage, read> partial: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let g = wid.y;
  if (g >= p.grams) { return; }
  let partialOffset = u32(table[g * 4u]);
  let chunks = u32(table[g * 4u + 1u]);
  let n = u32(table[g * 4u + 2u]);
  let outOffset = u32(table[g * 4u + 3u]);
  let pairs = n * (n + 1u) / 2u;
  let q = wid.x * 256u + lid.x;
  if (q >= pairs) { return; }
  var i = 0u;
  var rest = q;
  loop {
    if (rest < n - i) { break; }
    rest -= n - i;
    i += 1u;
  }
  let j = i + rest;
  var sum = 0.0;
  for (var c = 0u; c < chunks; c++) {
    sum += partial[partialOffset + c * pairs + q];
  }
  out[outOffset + i * n + j] = sum;
  out[outOffset + j * n + i] = sum;
}
