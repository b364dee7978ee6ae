// Where (token, head) number `index` of packed sequences (k, v: [T, kvHeads · hd], the tokens of a sequence side
// by side, position 0 first) reads and writes: its context's length, k[start, g, 0] of its kv head g (start: the
// first token of its sequence), a k row's width, its query's first value.
//
// Included by attention_packed.wgsl and attention_backward_query.wgsl, which declare `p` (T, heads, kvHeads,
// headDim), `positions` and MAX_CONTEXT.

struct Place { count: u32, head0: u32, width: u32, qBase: u32 }

fn placeOf(index: u32) -> Place {
  let t = index / p.heads;
  let h = index % p.heads;
  let width = p.kvHeads * p.headDim;
  let g = h / (p.heads / p.kvHeads);
  let count = min(u32(max(positions[t], 0)), min(t, MAX_CONTEXT - 1u)) + 1u;
  return Place(count, (t + 1u - count) * width + g * p.headDim, width, (t * p.heads + h) * p.headDim);
}
