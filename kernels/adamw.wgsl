// AdamW, in place, per element i of slot s = i / slotSize, with slot[s] = (lr, gradScale, c1, c2):
//   g = grad · gradScale;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
//   param -= lr · (m·c1 / (√(v·c2) + eps) + weightDecay · param)        (a slot with lr = 0 is untouched)
// c1 = 1 / (1 - β1^step) and c2 = 1 / (1 - β2^step) are the bias corrections of the slot's own step count.
// Bindings: p: Params; param, m, v: [n] f32 in place; grad: [n] f32; slots: [S, 4] f32
// Dispatch: ceil(n / 256) workgroups of 256 threads (folded into (x, y) past 65535). Elementwise.

struct Params { n: u32, slotSize: u32, beta1: f32, beta2: f32, eps: f32, weightDecay: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(5) var<storage, read> slots: array<vec4f>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = gid.x + gid.y * groups.x * 256u;
  if (i >= p.n) { return; }
  let slot = slots[i / p.slotSize];
  let lr = slot.x;
  if (lr == 0.0) { return; }
  let g = grad[i] * slot.y;
  let mNew = p.beta1 * m[i] + (1.0 - p.beta1) * g;
  let vNew = p.beta2 * v[i] + (1.0 - p.beta2) * g * g;
  m[i] = mNew;
  v[i] = vNew;
  param[i] = param[i] - lr * (mNew * slot.z / (sqrt(vNew * slot.w) + p.eps) + p.weightDecay * param[i]);
}
