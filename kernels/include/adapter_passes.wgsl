// The CPU layout of a per-adapter rank-column sum (lora_shrink.wgsl, lora_expand_backward.wgsl): a thread computes
// rank column j for a tile of TM rows. The tile's rows are done a pass per adapter (all in uniform control flow: a
// tile's slots are the same in every thread): each pass sums every row against that adapter's factor (the
// includer's `tileSums(tile, base)`, the 32 lanes of the GPU layout kept as 8 quads and met in laneTree) and writes
// the rows that use it (`store(t, j, slot, sum)`); rows without an adapter get 0.
//
// The includer declares TM, `p.T`, `p.rank`, `p.slots`, `adapters`, `fn factorBase(slot, j) -> u32`,
// `fn tileSums(tile, base) -> array<f32, MAX_TM>` and `fn store(t, j, slot, value)` (slot NONE: no adapter, 0).

const NO_ADAPTER: u32 = 0xffffffffu;

// The adapter slot of tile row r (rows past T: the last row's), past every slot when it has none.
fn slotOf(tile: u32, r: u32) -> u32 {
  return u32(adapters[min(tile * TM + r, p.T - 1u)]);
}

fn serial(tile: u32, j: u32) {
  var done = 0u; // a bit per tile row: written, or past T
  for (var r = 0u; r < TM; r++) {
    let t = tile * TM + r;
    if (t >= p.T) { done |= 1u << r; } else if (slotOf(tile, r) >= p.slots) {
      if (j < p.rank) { store(t, j, NO_ADAPTER, 0.0); }
      done |= 1u << r;
    }
  }
  let all = (1u << TM) - 1u;
  while (done != all) {
    let slot = slotOf(tile, firstTrailingBit(~done));
    let sums = tileSums(tile, factorBase(slot, min(j, p.rank - 1u)));
    for (var r = 0u; r < TM; r++) {
      if ((done & (1u << r)) == 0u && slotOf(tile, r) == slot) {
        if (j < p.rank) { store(tile * TM + r, j, slot, sums[r]); }
        done |= 1u << r;
      }
    }
  }
}

// The GPU layout's 32-lane tree (strides 16, 8, 4, 2, 1) over lanes held as 8 quads.
fn laneTree(l: array<vec4f, 8>) -> f32 {
  let s16 = array<vec4f, 4>(l[0] + l[4], l[1] + l[5], l[2] + l[6], l[3] + l[7]);
  let s8 = array<vec4f, 2>(s16[0] + s16[2], s16[1] + s16[3]);
  let s4 = s8[0] + s8[1];
  let s2 = s4.xy + s4.zw;
  return s2.x + s2.y;
}
