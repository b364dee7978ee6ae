// KV-cache write: cacheK/V[layer, slots[t], positions[t], :] = k/v[t, :]
// Bindings: p: Params; k, v: [T, kvHeads·hd]; slots, positions: [T] i32; cacheK, cacheV: [layers, S, maxLen, kvHeads·hd]
// Dispatch: 1-D over T·kvHeads·hd in workgroups of 256, folded into (x, y).

struct Params { T: u32, width: u32, layer: u32, slots: u32, maxLen: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> slots: array<i32>;
@group(0) @binding(4) var<storage, read> positions: array<i32>;
@group(0) @binding(5) var<storage, read_write> cacheK: array<f32>;
@group(0) @binding(6) var<storage, read_write> cacheV: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= p.T * p.width) { return; }
  let t = i / p.width;
  let e = i % p.width;
  let at = ((p.layer * p.slots + u32(slots[t])) * p.maxLen + u32(positions[t])) * p.width + e;
  cacheK[at] = k[i];
  cacheV[at] = v[i];
}
