// 1 / rms of `count` values of x from `base`, their squares summed in ascending order: the CPU layouts' norm, one
// function for linear.wgsl, rmsnorm.wgsl and rmsnorm_backward.wgsl, so that on software adapters the trainer's
// RMSNorm is the fused linear's, bit for bit. The includer declares `x: array<f32>`.

fn rowInverseRms(base: u32, count: u32, eps: f32) -> f32 {
  var sum = 0.0;
  for (var d = 0u; d < count; d++) { sum = fma(x[base + d], x[base + d], sum); }
  return inverseSqrt(sum / f32(count) + eps);
}
