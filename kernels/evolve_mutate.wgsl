// Mutation of one adapter slot into another (or in place), by the rule of `mutate` in src/evolution/operators.ts:
//   x[child·slotSize + i] = x[parent·slotSize + i] + sigma · sqrt(sums[0] / slotSize) · z_i   (sums[0]: the parent's)
// z from Box–Muller on the pair i / 2: h = hash(seed, stream, i/2), u1 = ((h >> 8) + 1) / 2^24,
// u2 from hash(h, stream, 0x9e3779b9) likewise; z_2k = sqrt(-2 ln u1)·cos(2π u2), z_2k+1 = sqrt(-2 ln u1)·sin(2π u2).
// With fraction < 1 only the entries whose uniform(seed ^ 0x5bd1e995, stream, i) <= fraction move (sparse mutation).
// Bindings: p: Params; x: [slots · slotSize] f32, read and written; sums: [1] f32 (the parent slot's sum of squares)
// Dispatch: ceil(slotSize / 2 / 256) workgroups of 256 threads (folded into (x, y) past 65535), one pair each.
// The noise is f32 here (WGSL log, cos, sin) and f64 on the CPU (from tables: src/backend/noise.ts): the two
// agree to ~1e-6 relative, not bit for bit.

struct Params { slotSize: u32, child: u32, parent: u32, seed: u32, stream: u32, sigma: f32, fraction: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> sums: array<f32>;

fn mix32(value: u32) -> u32 { // lowbias32, as src/backend/sampling.ts
  var h = value;
  h ^= h >> 16u;
  h *= 0x7feb352du;
  h ^= h >> 15u;
  h *= 0x846ca68bu;
  h ^= h >> 16u;
  return h;
}

fn hash(seed: u32, stream: u32, index: u32) -> u32 {
  return mix32(mix32(mix32(seed ^ 0x9e3779b9u) ^ stream) ^ index);
}

fn toUniform(bits: u32) -> f32 { // in (0, 1]: never 0, so the logarithm stays finite
  return f32((bits >> 8u) + 1u) / 16777216.0;
}

fn moved(i: u32) -> bool {
  return p.fraction >= 1.0 || toUniform(hash(p.seed ^ 0x5bd1e995u, p.stream, i)) <= p.fraction;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let pair = gid.x + gid.y * groups.x * 256u;
  let i = pair * 2u;
  if (i >= p.slotSize) { return; }
  let h = hash(p.seed, p.stream, pair);
  let radius = sqrt(-2.0 * log(toUniform(h)));
  let angle = 6.283185307179586 * toUniform(hash(h, p.stream, 0x9e3779b9u));
  let scale = p.sigma * sqrt(sums[0] / f32(p.slotSize));
  let to = p.child * p.slotSize;
  let source = p.parent * p.slotSize;
  var first = x[source + i];
  if (moved(i)) { first += scale * radius * cos(angle); }
  x[to + i] = first;
  if (i + 1u < p.slotSize) {
    var second = x[source + i + 1u];
    if (moved(i + 1u)) { second += scale * radius * sin(angle); }
    x[to + i + 1u] = second;
  }
}
