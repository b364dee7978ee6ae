// A child slot as a blend of two parent slots of one bank tensor, with weights per rank component (the `module`,
// `rank` and `interpolate` crossovers, and a plain copy, of src/evolution/operators.ts):
//   x[out·S + i] = c1[k] · x[s1·S + i] + c2[k] · x[s2·S + i],   k = (i / divisor) % R
// with c1 = weights[w .. w + R), c2 = weights[w + R .. w + 2R) (one upload holds every factor's weights).
// A factors [R, in] have one component per row (divisor = in); B factors [out, R] one per column (divisor = 1).
// Bindings: p: Params; x: [slots · S] f32 (reads the parents' regions, writes the child's: disjoint);
//           weights: f32, 2R from index w (c1 then c2)
// Dispatch: ceil(S / 256) workgroups of 256 threads (folded into (x, y) past 65535). Elementwise.

struct Params { S: u32, outSlot: u32, slot1: u32, slot2: u32, divisor: u32, R: u32, w: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> weights: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= p.S) { return; }
  let k = (i / p.divisor) % p.R;
  x[p.outSlot * p.S + i] = weights[p.w + k] * x[p.slot1 * p.S + i] + weights[p.w + p.R + k] * x[p.slot2 * p.S + i];
}
