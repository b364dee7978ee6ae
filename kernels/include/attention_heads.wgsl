// One (token, head)'s causal attention over its context, in both thread layouts, for attention.wgsl (over the KV
// cache: inference) and attention_packed.wgsl (over packed sequences: the training forward). Both make the same
// sums in the same order, so the trainer's attention is the inference's, bit for bit, in either layout.
//   lanes (GPU layout): a workgroup of THREADS threads; each score one dot product over d in order; the max and the
//          softmax sum by position-strided lanes (j = l, l + THREADS, ...) met by a fixed tree (combine.wgsl);
//          each output value summed by one thread over j in order.
//   serial (CPU layout, SERIAL): a thread alone; the scores twice (for their max, then for the weights: the same
//          dot products, so the same values), the sum over j in order, the outputs' sums in a private array.
//
// The includer declares p (T, heads, headDim, scale), THREADS, MAX_HEAD_DIM, the bindings q and out, the
// workgroup arrays scores and query, `struct Place { count, head0, width, qBase }` and `fn placeOf(index) -> Place`
// (its context's length, its kv head's first key, a key row's width, its query's first value), `fn keyAt(i) -> f32`
// and `fn valueAt(i) -> f32` (element i of the keys and values it reads), and includes combine.wgsl.

fn lanes(index: u32, lane: u32) {
  if (index >= p.T * p.heads) { return; }
  let hd = p.headDim;
  let at = placeOf(index);

  for (var d = lane; d < hd; d += THREADS) { query[d] = q[at.qBase + d]; }
  workgroupBarrier();

  var localMax = bitcast<f32>(0xff7fffffu); // the lowest finite f32
  for (var j = lane; j < at.count; j += THREADS) {
    let kBase = at.head0 + j * at.width;
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot = fma(query[d], keyAt(kBase + d), dot); }
    scores[j] = dot * p.scale;
    localMax = max(localMax, scores[j]);
  }
  let maxScore = combine(localMax, lane, true);

  var localSum = 0.0;
  for (var j = lane; j < at.count; j += THREADS) {
    let e = exp(scores[j] - maxScore);
    scores[j] = e;
    localSum += e;
  }
  let total = combine(localSum, lane, false); // ends with a barrier: every score is visible below

  for (var d = lane; d < hd; d += THREADS) {
    var acc = 0.0;
    for (var j = 0u; j < at.count; j++) { acc = fma(scores[j], valueAt(at.head0 + j * at.width + d), acc); }
    out[at.qBase + d] = acc / total;
  }
}

fn serial(index: u32) {
  if (index >= p.T * p.heads) { return; }
  let hd = p.headDim;
  let at = placeOf(index);

  var maxScore = bitcast<f32>(0xff7fffffu);
  for (var j = 0u; j < at.count; j++) {
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot = fma(q[at.qBase + d], keyAt(at.head0 + j * at.width + d), dot); }
    maxScore = max(maxScore, dot * p.scale);
  }
  var total = 0.0;
  var acc: array<f32, MAX_HEAD_DIM>;
  for (var j = 0u; j < at.count; j++) {
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot = fma(q[at.qBase + d], keyAt(at.head0 + j * at.width + d), dot); }
    let e = exp(dot * p.scale - maxScore);
    total += e;
    for (var d = 0u; d < hd; d++) { acc[d] = fma(e, valueAt(at.head0 + j * at.width + d), acc[d]); }
  }
  for (var d = 0u; d < hd; d++) { out[at.qBase + d] = acc[d] / total; }
}
