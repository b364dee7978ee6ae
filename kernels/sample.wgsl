// Sampling: one token per row of logits, by exactly the rule of src/backend/sampling.ts.
//   greedy (temperature <= 0): argmax over allowed tokens, lowest index on ties;
//   else p_v = exp((logit_v − max) / temperature) over allowed tokens (unnormalised, max 1); with topP < 1 the
//   threshold is found by 24 bisection steps on [0, 1] (keep p_v >= mid while the kept mass is >= topP · total);
//   the token is the first v, in index order, whose cumulative kept mass exceeds u · keptMass (else the last kept),
//   u = 24-bit uniform from lowbias32 of (seed, requestId, position): independent of the batch (DESIGN.md rule 2).
// In a device-resident decode loop (src/model/generate.ts) the same dispatch also feeds the next step: row m's
// position is its RowParams position + step, its token goes to out[outAt + m] (a history of the loop's steps) and,
// with `advance`, into the next forward's step rows: tokens[m] = token (0 for -1: the forward needs a real token),
// positions[m] += 1. Nothing is read back.
// Bindings: p: Params
//           logits: [M, V] f32
//           rows:   [M] RowParams (8 words each)
//           mask:   [M, ceil(V / 32)] u32, bit v of row m set = token v allowed; read only when hasMask
//           out:    [outAt + M] i32, the token (-1 when the mask allows nothing)
//           next:   the step rows (src/backend/backend.ts StepRows) whose tokens and positions sections start at
//                   tokensAt and positionsAt; written only when advance
// Dispatch: M workgroups of 256 threads (folded into (x, y) past 65535), one row each.
//
// Batch invariance: a row reads only its own logits, mask words and parameters. The argmax (with its index
// tie-break) is order-free; total, bisection masses use thread-strided sums (coalesced reads) met by a fixed
// tree; the final scan needs index order, so for it each thread owns a contiguous chunk of the vocabulary:
// chunk sums, then one thread scans the chunk sums in order and walks into the chunk where the draw lands.

const THREADS: u32 = 256u;
const BISECTION_STEPS: u32 = 24u;
const NONE: u32 = 0xffffffffu;

struct Params { M: u32, V: u32, hasMask: u32, step: u32, outAt: u32, advance: u32, tokensAt: u32, positionsAt: u32 }
struct RowParams { temperature: f32, topP: f32, seed: u32, requestId: u32, position: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<RowParams>;
@group(0) @binding(3) var<storage, read> mask: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<i32>;
@group(0) @binding(5) var<storage, read_write> next: array<i32>;

var<workgroup> partialValue: array<f32, THREADS>;
var<workgroup> partialIndex: array<u32, THREADS>;
// Values every thread branches on around barriers: shared through workgroupUniformLoad so WGSL knows they are uniform.
var<workgroup> sharedMode: vec2<f32>; // (temperature, topP)
var<workgroup> sharedArgmax: u32;

fn mix32(value: u32) -> u32 { // lowbias32
  var x = value;
  x ^= x >> 16u;
  x *= 0x7feb352du;
  x ^= x >> 15u;
  x *= 0x846ca68bu;
  x ^= x >> 16u;
  return x;
}

fn uniform01(seed: u32, requestId: u32, position: u32) -> f32 {
  var h = mix32(seed ^ 0x9e3779b9u);
  h = mix32(h ^ requestId);
  h = mix32(h ^ position);
  return f32(h >> 8u) / 16777216.0; // exact: 24 bits
}

fn allowed(m: u32, v: u32) -> bool {
  if (p.hasMask == 0u) { return true; }
  let words = (p.V + 31u) / 32u;
  return ((mask[m * words + v / 32u] >> (v % 32u)) & 1u) == 1u;
}

// Unnormalised probability of token v (0 when masked). Recomputed where needed: a row does not fit in
// workgroup memory, and the same inputs give the same bits every time.
fn probability(m: u32, v: u32, maxLogit: f32, temperature: f32) -> f32 {
  if (!allowed(m, v)) { return 0.0; }
  return exp((logits[m * p.V + v] - maxLogit) / temperature);
}

// The row's token: into out and, in a decode loop, into the next step's input.
fn emit(m: u32, token: i32) {
  out[p.outAt + m] = token;
  if (p.advance == 1u) {
    next[p.tokensAt + m] = max(token, 0);
    next[p.positionsAt + m] += 1;
  }
}

fn sumOverThreads(value: f32, lane: u32) -> f32 {
  partialValue[lane] = value;
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) { partialValue[lane] += partialValue[lane + stride]; }
    workgroupBarrier();
  }
  let total = partialValue[0];
  workgroupBarrier();
  return total;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let m = wid.x + wid.y * groups.x;
  if (m >= p.M) { return; }
  let lane = lid.x;
  let row = rows[m];
  let V = p.V;

  // 1. Argmax over allowed tokens, lowest index on ties (each thread sees its indices in ascending order).
  var bestValue = 0.0;
  var bestIndex = NONE;
  for (var v = lane; v < V; v += THREADS) {
    let logit = logits[m * V + v];
    if (allowed(m, v) && (bestIndex == NONE || logit > bestValue)) {
      bestValue = logit;
      bestIndex = v;
    }
  }
  partialValue[lane] = bestValue;
  partialIndex[lane] = bestIndex;
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      let otherIndex = partialIndex[lane + stride];
      let otherValue = partialValue[lane + stride];
      let mine = partialIndex[lane];
      let better = otherValue > partialValue[lane] || (otherValue == partialValue[lane] && otherIndex < mine);
      if (otherIndex != NONE && (mine == NONE || better)) {
        partialValue[lane] = otherValue;
        partialIndex[lane] = otherIndex;
      }
    }
    workgroupBarrier();
  }
  if (lane == 0u) {
    sharedArgmax = partialIndex[0];
    sharedMode = vec2(row.temperature, row.topP);
  }
  let maxLogit = partialValue[0];
  let argmax = workgroupUniformLoad(&sharedArgmax);
  let mode = workgroupUniformLoad(&sharedMode);
  let temperature = mode.x;
  if (argmax == NONE || temperature <= 0.0) {
    if (lane == 0u) { emit(m, select(i32(argmax), -1, argmax == NONE)); }
    return;
  }

  // 2. Top-p threshold: bisection on [0, 1] of the unnormalised probabilities.
  var threshold = 0.0;
  if (mode.y < 1.0) {
    var localTotal = 0.0;
    for (var v = lane; v < V; v += THREADS) { localTotal += probability(m, v, maxLogit, temperature); }
    let targetMass = mode.y * sumOverThreads(localTotal, lane);
    var lo = 0.0;
    var hi = 1.0;
    for (var step = 0u; step < BISECTION_STEPS; step++) {
      let mid = (lo + hi) / 2.0; // exact: a dyadic number of at most 24 bits
      var localMass = 0.0;
      for (var v = lane; v < V; v += THREADS) {
        let pv = probability(m, v, maxLogit, temperature);
        if (pv >= mid) { localMass += pv; }
      }
      if (sumOverThreads(localMass, lane) >= targetMass) { lo = mid; } else { hi = mid; }
    }
    threshold = lo;
  }

  // 3. Kept mass of each thread's contiguous chunk, and the chunk's last kept token.
  let chunk = (V + THREADS - 1u) / THREADS;
  let begin = min(lane * chunk, V);
  let end = min(begin + chunk, V);
  var keptMass = 0.0;
  var lastKept = NONE;
  for (var v = begin; v < end; v++) {
    let pv = probability(m, v, maxLogit, temperature);
    if (pv > 0.0 && pv >= threshold) {
      keptMass += pv;
      lastKept = v;
    }
  }
  partialValue[lane] = keptMass;
  partialIndex[lane] = lastKept;
  workgroupBarrier();
  if (lane != 0u) { return; }

  // 4. One thread: the first token, in index order, whose cumulative kept mass exceeds u · total kept mass.
  var totalKept = 0.0;
  var fallback = argmax; // the last kept token, in case rounding leaves the draw at the very end
  for (var i = 0u; i < THREADS; i++) {
    totalKept += partialValue[i];
    if (partialIndex[i] != NONE) { fallback = partialIndex[i]; }
  }
  let r = uniform01(row.seed, row.requestId, row.position + p.step) * totalKept;
  var cumulative = 0.0;
  for (var i = 0u; i < THREADS; i++) {
    if (cumulative + partialValue[i] <= r) { // the draw lies past this chunk
      cumulative += partialValue[i];
      continue;
    }
    let chunkEnd = min(i * chunk + chunk, V);
    for (var v = i * chunk; v < chunkEnd; v++) {
      let pv = probability(m, v, maxLogit, temperature);
      if (pv > 0.0 && pv >= threshold) {
        cumulative += pv;
        if (cumulative > r) {
          emit(m, i32(v));
          return;
        }
      }
    }
  }
  emit(m, i32(fallback));
}
