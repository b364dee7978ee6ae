// Gram matrix of n vectors read out of one tensor (the SVD crossover's stacked factors, in place in the bank),
// pass 1 of 2: partial Grams over chunks of k, so that each vector value is read from memory once.
//   v_i[k] = x[bases[first + i] + k · stride] for k < length     (A rows: stride 1; B columns: stride R)
//   partial[partialOffset + c · pairs + q] = Σ_{k in chunk c, in order} v_i[k] · v_j[k]
// for pair q = (i, j), i <= j, in row order; pairs = n·(n+1)/2 (the Grams of one gramsInto call share `partial`).
// Chunk c holds k in [c · chunk, (c + 1) · chunk); chunk = TILE / (n + 1), set by the host (webgpu-evolution.ts).
// Bindings: p: Params; x: f32; bases: i32 (this Gram's n from index `first`: one upload serves many);
//           partial: f32, [chunks, pairs] from partialOffset
// Dispatch: one workgroup of 256 threads per chunk (folded into (x, y) past 65535). The chunk's values go to
// workgroup memory as [chunk, n + 1] (the pad keeps the row loads of stride-1 vectors off one memory bank);
// then each thread sums its pairs over the chunk. evolve_gram_reduce.wgsl adds the chunks in order, so the
// result depends on n, length and stride only.

const THREADS: u32 = 256u;
const TILE: u32 = 4096u; // floats of workgroup memory (16 KiB, WebGPU's default limit)

struct Params { n: u32, length: u32, stride: u32, first: u32, chunk: u32, partialOffset: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> bases: array<i32>;
@group(0) @binding(3) var<storage, read_write> partial: array<f32>;

var<workgroup> tile: array<f32, TILE>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let c = wid.x + wid.y * groups.x;
  let k0 = c * p.chunk;
  if (k0 >= p.length) { return; }
  let count = min(p.chunk, p.length - k0);
  let row = p.n + 1u;
  // Consecutive threads read consecutive addresses: along k for rows (stride 1), along i for columns.
  for (var e = lid.x; e < count * p.n; e += THREADS) {
    var i = e % p.n;
    var k = e / p.n;
    if (p.stride == 1u) {
      i = e / count;
      k = e % count;
    }
    tile[k * row + i] = x[u32(bases[p.first + i]) + (k0 + k) * p.stride];
  }
  workgroupBarrier();
  let pairs = p.n * (p.n + 1u) / 2u;
  for (var q = lid.x; q < pairs; q += THREADS) {
    var i = 0u;
    var rest = q;
    loop {
      if (rest < p.n - i) { break; }
      rest -= p.n - i;
      i += 1u;
    }
    let j = i + rest;
    var sum = 0.0;
    for (var k = 0u; k < count; k++) {
      sum += tile[k * row + i] * tile[k * row + j];
    }
    partial[p.partialOffset + c * pairs + q] = sum;
  }
}
