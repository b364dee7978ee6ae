// IEEE half (f16) and bfloat16 conversions. Node 20 has no Float16Array, so these are done by hand.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** f16 bits -> f32 value (exact: every half is representable as a float). */
export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24; // zero and subnormals
  if (exponent === 0x1f) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** f32 value -> f16 bits, rounding to nearest even; overflow goes to ±Infinity. */
export function f32ToF16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  let mantissa = x & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0); // inf / nan
  let e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign; // underflows to zero
    mantissa |= 0x800000; // make the implicit bit explicit, then shift into a subnormal
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mantissa & ((1 << shift) - 1);
    let m = mantissa >>> shift;
    if (rest > half || (rest === half && (m & 1))) m += 1;
    return sign | m;
  }
  let m = mantissa >>> 13;
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (m & 1))) {
    m += 1;
    if (m === 0x400) {
      m = 0;
      e += 1;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}

/** bf16 bits -> f32 value (exact: bf16 is the top half of a float). */
export function bf16BitsToF32(b: number): number {
  u32[0] = (b & 0xffff) << 16;
  return f32[0]!;
}

/** f32 value -> bf16 bits, rounding to nearest even. */
export function f32ToBf16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  if ((x & 0x7f800000) === 0x7f800000 && x & 0x7fffff) return (x >>> 16) | 0x40; // keep NaN a NaN
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Values rounded to the nearest half, as f32. */
export function roundToF16(data: Float32Array): Float32Array {
  const out = new Float32Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = f16BitsToF32(f32ToF16Bits(data[i]!));
  return out;
}
