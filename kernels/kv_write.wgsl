// KV-cache write: cacheK[slots[t], positions[t], :] = k[t, :] and the same for v, in one layer of the cache.
// Bindings: p: Params
//           k, v:           [T, width] f32, width = kvHeads · hd
//           slots, positions: [T] i32; a row outside the cache (slot >= slots or position >= maxLen) is skipped
//           cacheK, cacheV: [slots, maxLen, width] f32 starting at element layerBase (the host binds one layer
//                           when its byte offset is aligned, else the whole cache with layerBase = layer's start)
// Dispatch: one thread per value: ceil(T · width / 256) workgroups of 256, folded into (x, y) past 65535.

struct Params { T: u32, width: u32, slots: u32, maxLen: u32, layerBase: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> slots: array<i32>;
@group(0) @binding(4) var<storage, read> positions: array<i32>;
@group(0) @binding(5) var<storage, read_write> cacheK: array<f32>;
@group(0) @binding(6) var<storage, read_write> cacheV: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = (wid.x + wid.y * groups.x) * 256u + lid.x;
  if (i >= p.T * p.width) { return; }
  let t = i / p.width;
  let slot = u32(slots[t]);
  let position = u32(positions[t]);
  if (slot >= p.slots || position >= p.maxLen) { return; } // negative ids wrap to huge u32s: skipped too
  let at = p.layerBase + (slot * p.maxLen + position) * p.width + i % p.width;
  cacheK[at] = k[i];
  cacheV[at] = v[i];
}
