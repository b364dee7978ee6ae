// The CPU layout of a per-adapter product over the rank (lora_expand.wgsl, lora_shrink_backward.wgsl): a thread
// sums UNITS columns × a tile of TM rows. The tile's rows are done a pass per adapter (in uniform control flow: a
// tile's slots are the same in every thread): each pass computes every row's sums against that adapter's factor
// (the includer's `adapterSums`) and adds those of the rows that use it (`addTo`); rows without an adapter are left
// alone.
//
// The includer declares TM, UNITS, SERIAL_THREADS, MAX_QUADS, MAX_COLUMNS, `p.T`, `p.slots`, `adapters`,
// `fn columnCount() -> u32`, `fn adapterSums(tile, slot, thread, group) -> array<array<vec4f, MAX_QUADS>,
// MAX_COLUMNS>` (column c's sums over the tile's rows as quads) and `fn addTo(t, column, slot, value)`.

// The adapter slot of tile row r (rows past T: the last row's), past every slot when it has none.
fn slotOf(tile: u32, r: u32) -> u32 {
  return u32(adapters[min(tile * TM + r, p.T - 1u)]);
}

// The thread's column c: (group · UNITS + c) · SERIAL_THREADS + thread (past the last: computed, not added).
fn columnOf(group: u32, thread: u32, c: u32) -> u32 {
  return (group * UNITS + c) * SERIAL_THREADS + thread;
}

fn serial(tile: u32, thread: u32, group: u32) {
  var done = 0u; // a bit per tile row: added to, without an adapter, or past T
  for (var r = 0u; r < TM; r++) {
    if (tile * TM + r >= p.T || slotOf(tile, r) >= p.slots) { done |= 1u << r; }
  }
  let all = (1u << TM) - 1u;
  while (done != all) {
    let s = slotOf(tile, firstTrailingBit(~done));
    let acc = adapterSums(tile, s, thread, group);
    for (var r = 0u; r < TM; r++) {
      if ((done & (1u << r)) != 0u || slotOf(tile, r) != s) { continue; }
      done |= 1u << r;
      for (var c = 0u; c < UNITS; c++) {
        let column = columnOf(group, thread, c);
        if (column < columnCount()) { addTo(tile * TM + r, column, s, acc[c][r / 4u][r % 4u]); }
      }
    }
  }
}
