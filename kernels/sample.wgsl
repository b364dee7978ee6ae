// Sampling, one token per row of logits, by the rule of src/backend/sampling.ts:
//   greedy (temperature <= 0): argmax over allowed tokens, lowest index on ties;
//   else p_v = exp((logit_v − max) / temperature); top-p threshold by 24 bisection steps on [0, 1];
//   the token is the first v (in index order) whose cumulative kept mass exceeds u · keptMass,
//   u = 24-bit uniform from lowbias32(seed, requestId, position): independent of the batch (DESIGN.md rule 2).
// Bindings: p: Params; logits: [M, V]; rows: [M] RowParams; mask: [M, ceil(V/32)] u32 bits (read when hasMask);
//           out: [M] i32
// Dispatch: (M) workgroups of 256 threads; thread i owns the contiguous vocabulary chunk [i·c, (i+1)·c), so
// chunk sums scanned in thread order are a scan in index order.

const THREADS: u32 = 256u;
const BISECTION_STEPS: u32 = 24u;
struct Params { V: u32, hasMask: u32 }
struct RowParams { temperature: f32, topP: f32, seed: u32, requestId: u32, position: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<RowParams>;
@group(0) @binding(3) var<storage, read> mask: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<i32>;

var<workgroup> partial: array<f32, 256>;
var<workgroup> partialIndex: array<u32, 256>;
var<workgroup> chunkSum: array<f32, 256>;
var<workgroup> temperatureTopP: vec2<f32>; // read back with workgroupUniformLoad: barriers follow branches on it

fn mix32(value: u32) -> u32 {
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
  return f32(h >> 8u) / 16777216.0;
}

fn allowed(m: u32, v: u32) -> bool {
  if (p.hasMask == 0u) { return true; }
  let words = (p.V + 31u) / 32u;
  return ((mask[m * words + v / 32u] >> (v % 32u)) & 1u) == 1u;
}

fn sumOverThreads(value: f32, lane: u32) -> f32 {
  partial[lane] = value;
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) { partial[lane] += partial[lane + stride]; }
    workgroupBarrier();
  }
  let total = partial[0];
  workgroupBarrier();
  return total;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let lane = lid.x;
  let m = wid.x;
  let row = rows[m];
  if (lane == 0u) { temperatureTopP = vec2(row.temperature, row.topP); }
  let mode = workgroupUniformLoad(&temperatureTopP);
  let temperature = mode.x;
  let base = m * p.V;
  let chunk = (p.V + THREADS - 1u) / THREADS;
  let begin = min(lane * chunk, p.V);
  let end = min(begin + chunk, p.V);

  // Argmax over allowed tokens; ties go to the lower index.
  var bestValue = -3.4e38;
  var bestIndex = 0xffffffffu;
  for (var v = begin; v < end; v++) {
    if (allowed(m, v) && (bestIndex == 0xffffffffu || logits[base + v] > bestValue)) {
      bestValue = logits[base + v];
      bestIndex = v;
    }
  }
  partial[lane] = bestValue;
  partialIndex[lane] = bestIndex;
  workgroupBarrier();
  for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      let otherIndex = partialIndex[lane + stride];
      let otherValue = partial[lane + stride];
      let mine = partialIndex[lane];
      if (otherIndex != 0xffffffffu && (mine == 0xffffffffu || otherValue > partial[lane] || (otherValue == partial[lane] && otherIndex < mine))) {
        partial[lane] = otherValue;
        partialIndex[lane] = otherIndex;
      }
    }
    workgroupBarrier();
  }
  let maxLogit = partial[0];
  let argmax = partialIndex[0];
  workgroupBarrier();
  if (temperature <= 0.0) {
    if (lane == 0u) { out[m] = i32(argmax); }
    return;
  }

  // Unnormalised probabilities are recomputed on the fly: the vocabulary does not fit in workgroup memory.
  var threshold = 0.0;
  if (mode.y < 1.0) {
    var localTotal = 0.0;
    for (var v = begin; v < end; v++) {
      if (allowed(m, v)) { localTotal += exp((logits[base + v] - maxLogit) / temperature); }
    }
    let targetMass = mode.y * sumOverThreads(localTotal, lane);
    var lo = 0.0;
    var hi = 1.0;
    for (var step = 0u; step < BISECTION_STEPS; step++) {
      let mid = (lo + hi) / 2.0;
      var localMass = 0.0;
      for (var v = begin; v < end; v++) {
        let pv = select(0.0, exp((logits[base + v] - maxLogit) / temperature), allowed(m, v));
        if (pv >= mid) { localMass += pv; }
      }
      if (sumOverThreads(localMass, lane) >= targetMass) { lo = mid; } else { hi = mid; }
    }
    threshold = lo;
  }
  var localKept = 0.0;
  for (var v = begin; v < end; v++) {
    let pv = select(0.0, exp((logits[base + v] - maxLogit) / temperature), allowed(m, v));
    if (pv > 0.0 && pv >= threshold) { localKept += pv; }
  }
  chunkSum[lane] = localKept;
  workgroupBarrier();
  if (lane != 0u) { return; }
  var kept = 0.0;
  for (var i = 0u; i < THREADS; i++) { kept += chunkSum[i]; }
  let r = uniform01(row.seed, row.requestId, row.position) * kept;
  var cumulative = 0.0;
  var chosen = argmax;
  var found = false;
  for (var i = 0u; i < THREADS && !found; i++) {
    if (chunkSum[i] == 0.0) { continue; }
    if (cumulative + chunkSum[i] <= r) {
      cumulative += chunkSum[i];
      continue;
    }
    let chunkEnd = min(i * chunk + chunk, p.V);
    for (var v = i * chunk; v < chunkEnd; v++) {
      let pv = select(0.0, exp((logits[base + v] - maxLogit) / temperature), allowed(m, v));
      if (pv > 0.0 && pv >= threshold) {
        cumulative += pv;
        if (cumulative > r) {
          chosen = v;
          found = true;
          break;
        }
      }
    }
  }
  if (!found) {
    // Rounding left r at or past the total: the last kept token, as in the reference.
    for (var v = p.V; v > 0u; v--) {
      let pv = select(0.0, exp((logits[base + v - 1u] - maxLogit) / temperature), allowed(m, v - 1u));
      if (pv > 0.0 && pv >= threshold) { chosen = v - 1u; break; }
    }
  }
  out[m] = i32(chosen);
}
