// Token masks from token automata, for a device-resident decode loop under a grammar (src/model/generate.ts): the
// mask kernels/sample.wgsl then reads, computed here from tables uploaded once. The rule and the table layout are
// src/backend/automaton-mask.ts's (its CPU twin):
//   row m's automaton sits in its RowParams words 5..7: state, tokens left at the run's step 0, and its table's word
//   offset in `tables` (NONE: the row is not masked, every token allowed). At step > 0 the row first advances its
//   state by the token the step before drew (the next step rows' tokens[m]): column c of that token,
//   state = next[state, c] (EOS leaves the state; a token without a column, or an impossible move, gives -1).
//   With R = left - step, token v is allowed in state s iff v = eos and complete[s], or
//   n = next[s, column[v]] >= 0 and toComplete[n] + 2 <= R. State -1 allows nothing (sample.wgsl then draws -1).
//   A table at offset `at` (i32 words): header [S, C, V, eos, 0, 0, 0, 0], column [V], complete [S],
//   toComplete [S], next [S, C].
// Bindings: p: Params (M rows, V vocabulary, words = ceil(V / 32), step, tokensAt: the tokens section of stepRows)
//           tables:   i32 words, every row's table end to end
//           rows:     [M, 8] u32 RowParams; the state word is written back
//           stepRows: i32, the step rows (src/backend/backend.ts StepRows) the next forward reads
//           mask:     [M, words] u32 out, bit v of row m set = token v allowed
// Dispatch: M workgroups of 64 threads (folded into (x, y) past 65535), one row each; thread `lane` writes the
//   mask words lane, lane + 64, … (32 tokens each). Only the row's own words are read or written.

const THREADS: u32 = 64u;
const NONE: u32 = 0xffffffffu;
const HEADER: u32 = 8u;
const STATE: u32 = 5u;
const LEFT: u32 = 6u;
const TABLE: u32 = 7u;

struct Params { M: u32, V: u32, words: u32, step: u32, tokensAt: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> tables: array<i32>;
@group(0) @binding(2) var<storage, read_write> rows: array<u32>;
@group(0) @binding(3) var<storage, read> stepRows: array<i32>;
@group(0) @binding(4) var<storage, read_write> mask: array<u32>;

var<workgroup> sharedRow: vec2<u32>; // (table offset, state), shared through workgroupUniformLoad: uniform

struct Table { S: u32, C: u32, eos: i32, column: u32, complete: u32, toComplete: u32, next: u32 }

fn tableAt(at: u32) -> Table {
  let S = u32(tables[at]);
  let C = u32(tables[at + 1u]);
  let V = u32(tables[at + 2u]);
  let column = at + HEADER;
  return Table(S, C, tables[at + 3u], column, column + V, column + V + S, column + V + 2u * S);
}

// The state after token v's text (next[state, column[v]]), or -1.
fn follow(t: Table, state: i32, v: i32) -> i32 {
  if (state < 0 || v < 0 || u32(v) >= p.V) { return -1; }
  let c = tables[t.column + u32(v)];
  if (c < 0) { return -1; }
  return tables[t.next + u32(state) * t.C + u32(c)];
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let m = wid.x + wid.y * groups.x;
  if (m >= p.M) { return; }
  let lane = lid.x;

  // 1. One thread advances the row's state by the token of the step before (none at a run's first step).
  if (lane == 0u) {
    let at = rows[m * 8u + TABLE];
    var state = i32(rows[m * 8u + STATE]);
    if (at != NONE && p.step > 0u) {
      let t = tableAt(at);
      let token = stepRows[p.tokensAt + m];
      if (token != t.eos) { state = follow(t, state, token); }
      rows[m * 8u + STATE] = u32(state);
    }
    sharedRow = vec2(at, u32(state));
  }
  let row = workgroupUniformLoad(&sharedRow);
  let at = row.x;
  let state = i32(row.y);
  if (at == NONE) {
    for (var w = lane; w < p.words; w += THREADS) { mask[m * p.words + w] = 0xffffffffu; }
    return;
  }
  let t = tableAt(at);
  let left = i32(rows[m * 8u + LEFT]) - i32(p.step);

  // 2. The mask, 32 tokens a word.
  for (var w = lane; w < p.words; w += THREADS) {
    var bits = 0u;
    for (var b = 0u; b < 32u; b++) {
      let v = w * 32u + b;
      if (v >= p.V || state < 0) { break; }
      var ok = false;
      if (i32(v) == t.eos) {
        ok = tables[t.complete + u32(state)] == 1;
      } else {
        let n = follow(t, state, i32(v));
        ok = n >= 0 && tables[t.toComplete + u32(n)] + 2 <= left;
      }
      if (ok) { bits |= 1u << b; }
    }
    mask[m * p.words + w] = bits;
  }
}
