// Gram matrix of n vectors read out of one tensor (the SVD crossover's stacked factors, in place in the bank):
//   v_i[k] = x[bases[first + i] + k · stride] for k < length;   G[i, j] = Σ_k v_i[k] · v_j[k]
// written to out[outOffset + i·n + j] and its mirror (A rows: stride 1; B columns: stride R).
// Bindings: p: Params; x: f32; bases: i32 (this Gram's n from index `first`: one upload serves many); out: f32
// Dispatch: n·(n+1)/2 workgroups of 256 threads (folded into (x, y) past 65535), one pair i <= j each, in row order.
//
// Determinism: lane-strided partial sums met by a fixed tree: the order depends on length only.

const THREADS: u32 = 256u;

struct Params { n: u32, length: u32, stride: u32, outOffset: u32, first: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> bases: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

var<workgroup> partial: array<f32, THREADS>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  var pair = wid.x + wid.y * groups.x;
  if (pair >= p.n * (p.n + 1u) / 2u) { return; }
  var i = 0u;
  loop {
    if (pair < p.n - i) { break; }
    pair -= p.n - i;
    i += 1u;
  }
  let j = i + pair;
  let bi = u32(bases[p.first + i]);
  let bj = u32(bases[p.first + j]);
  var sum = 0.0;
  for (var k = lid.x; k < p.length; k += THREADS) {
    sum += x[bi + k * p.stride] * x[bj + k * p.stride];
  }
  partial[lid.x] = sum;
  workgroupBarrier();
  for (var half = THREADS / 2u; half > 0u; half /= 2u) {
    if (lid.x < half) { partial[lid.x] += partial[lid.x + half]; }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
    out[p.outOffset + i * p.n + j] = partial[0];
    out[p.outOffset + j * p.n + i] = partial[0];
  }
}
