// A fixed-order tree over the workgroup's THREADS threads: the max, or the sum, of every thread's `value`; every
// thread gets the result. The order depends on THREADS only, never on the data or the batch.
// Included by attention.wgsl, attention_packed.wgsl, attention_backward_query.wgsl and log_softmax.wgsl, which
// declare `const THREADS: u32` (a power of two) and call combine from every thread of the workgroup.

var<workgroup> partial: array<f32, THREADS>;

fn combine(value: f32, lane: u32, takeMax: bool) -> f32 {
  partial[lane] = value;
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      let other = partial[lane + stride];
      partial[lane] = select(partial[lane] + other, max(partial[lane], other), takeMax);
    }
    workgroupBarrier();
  }
  let result = partial[0];
  workgroupBarrier(); // partial is reused by the next combine
  return result;
}
