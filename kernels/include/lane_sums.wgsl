// One K-lane's share of a weight row's dot products: lane l reads words l, l + LANES, l + 2·LANES, ... of the row
// (coalesced across lanes) and adds each value into every row of its tile through the includer's
// `accumulate(k, weight)`, in ascending k (an f16 word low half first; an odd K's last value last, by the lane
// owning that word). The order depends on K only, which keeps matmul.wgsl and linear.wgsl batch-invariant.
// Decode (TM = 1) issues 4 words per lane before accumulating them, in the same order, to keep loads in flight.
//
// Included by matmul.wgsl and linear.wgsl (`#include`, expanded by the kernel loader), which declare: WEIGHT_F16,
// TM, LANES, `p.K`, the weight words `w`, and `fn accumulate(k: u32, weight: f32)`.

// Both halves of word `word` (values 2·word and 2·word + 1), low half first.
fn accumulatePair(word: u32, packed: u32) {
  let pair = unpack2x16float(packed);
  accumulate(2u * word, pair.x);
  accumulate(2u * word + 1u, pair.y);
}

// This lane's share of the column whose weight row starts at word `base`.
fn laneSums(base: u32, lane: u32) {
  if (WEIGHT_F16) {
    let fullWords = p.K / 2u;
    var word = lane;
    if (TM == 1u) {
      for (; word + 3u * LANES < fullWords; word += 4u * LANES) {
        let w0 = w[base + word];
        let w1 = w[base + word + LANES];
        let w2 = w[base + word + 2u * LANES];
        let w3 = w[base + word + 3u * LANES];
        accumulatePair(word, w0);
        accumulatePair(word + LANES, w1);
        accumulatePair(word + 2u * LANES, w2);
        accumulatePair(word + 3u * LANES, w3);
      }
    }
    for (; word < fullWords; word += LANES) { accumulatePair(word, w[base + word]); }
    if ((p.K & 1u) == 1u && lane == fullWords % LANES) {
      accumulate(p.K - 1u, unpack2x16float(w[base + fullWords]).x);
    }
  } else {
    var k = lane;
    if (TM == 1u) {
      for (; k + 3u * LANES < p.K; k += 4u * LANES) {
        let w0 = bitcast<f32>(w[base + k]);
        let w1 = bitcast<f32>(w[base + k + LANES]);
        let w2 = bitcast<f32>(w[base + k + 2u * LANES]);
        let w3 = bitcast<f32>(w[base + k + 3u * LANES]);
        accumulate(k, w0);
        accumulate(k + LANES, w1);
        accumulate(k + 2u * LANES, w2);
        accumulate(k + 3u * LANES, w3);
      }
    }
    for (; k < p.K; k += LANES) { accumulate(k, bitcast<f32>(w[base + k])); }
  }
}
