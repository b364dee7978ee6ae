// A kernel's parameter block, declared once: its WGSL `struct Params` (binding 0, a uniform) is parsed when the
// kernel loads, and a dispatch names its values (`{ T, K, N, hasBias: 1 }`) instead of listing them in an order
// that had to match the WGSL silently. A missing, unknown or non-finite value is an error naming the kernel and
// field; values are written as the field's type (u32, i32, f32) at its offset under WGSL's uniform layout rules.

export type ScalarType = 'u32' | 'i32' | 'f32';

export interface ParamField {
  name: string;
  type: ScalarType; // of each component
  word: number; // offset in 4-byte words
  components: 1 | 2 | 3 | 4; // a scalar or a vecN
}

export interface ParamLayout {
  kernel: string;
  fields: readonly ParamField[];
  words: number; // the end of the last field: the words a parameter block must fill
}

const SCALARS: Record<string, ScalarType> = { u32: 'u32', i32: 'i32', f32: 'f32' };

/** `u32`, `vec4u`, `vec4<u32>` → its component type and count; null for anything else. */
function parseType(text: string): { type: ScalarType; components: 1 | 2 | 3 | 4 } | null {
  if (SCALARS[text]) return { type: SCALARS[text]!, components: 1 };
  const vector = /^vec([234])(?:<(u32|i32|f32)>|([uif]))$/.exec(text);
  if (!vector) return null;
  const type = vector[2] ? SCALARS[vector[2]]! : ({ u: 'u32', i: 'i32', f: 'f32' } as const)[vector[3] as 'u' | 'i' | 'f'];
  return { type, components: Number(vector[1]) as 2 | 3 | 4 };
}

/** The layout of `struct Params` in a kernel's source (comments allowed inside). */
export function parseParams(kernel: string, code: string): ParamLayout {
  const body = /struct\s+Params\s*\{([^}]*)\}/.exec(code.replace(/\/\/[^\n]*/g, ''))?.[1];
  if (body === undefined) throw new Error(`populora: kernels/${kernel}.wgsl declares no struct Params (its binding 0)`);
  const fields: ParamField[] = [];
  let word = 0;
  for (const member of body.split(',').map((m) => m.trim()).filter(Boolean)) {
    const [name, typeText] = member.split(':').map((s) => s.trim());
    const parsed = typeText === undefined ? null : parseType(typeText);
    if (!name || !parsed) throw new Error(`populora: kernels/${kernel}.wgsl: struct Params member "${member}" is not a u32, i32, f32 or vector of them`);
    const align = parsed.components === 1 ? 1 : parsed.components === 2 ? 2 : 4; // vec3 aligns as vec4
    word = Math.ceil(word / align) * align;
    fields.push({ name, word, ...parsed });
    word += parsed.components;
  }
  return { kernel, fields, words: word };
}

/** Writes named scalar values into `words` (little-endian) by the layout; every field must be given, nothing else. */
export function layOut(layout: ParamLayout, values: Readonly<Record<string, number>>, words: Uint32Array): number {
  const view = new DataView(words.buffer, words.byteOffset, words.byteLength);
  let given = 0;
  for (const field of layout.fields) {
    const value = values[field.name];
    if (field.components !== 1) throw new Error(`populora: kernels/${layout.kernel}.wgsl: Params.${field.name} is a vector; lay the block out word by word (dispatchVariant)`);
    if (value === undefined) throw new Error(`populora: kernels/${layout.kernel}.wgsl: no value given for Params.${field.name}`);
    if (!Number.isFinite(value) && field.type !== 'f32') throw new Error(`populora: kernels/${layout.kernel}.wgsl: Params.${field.name} = ${value} is not a ${field.type}`);
    if (field.type === 'f32') view.setFloat32(4 * field.word, value, true);
    else if (field.type === 'i32') view.setInt32(4 * field.word, value, true);
    else view.setUint32(4 * field.word, value, true);
    given++;
  }
  if (Object.keys(values).length !== given) {
    const unknown = Object.keys(values).filter((name) => !layout.fields.some((f) => f.name === name));
    throw new Error(`populora: kernels/${layout.kernel}.wgsl: struct Params has no field ${unknown.join(', ')} (it has ${layout.fields.map((f) => f.name).join(', ')})`);
  }
  return layout.words;
}

/** Each field's word offset, for a hot caller that writes its block in place; `names` must be the struct's fields. */
export function wordOffsets<Name extends string>(layout: ParamLayout, names: readonly Name[]): Readonly<Record<Name, number>> {
  const declared = layout.fields.map((f) => f.name);
  const missing = names.filter((n) => !declared.includes(n));
  const extra = declared.filter((n) => !(names as readonly string[]).includes(n));
  if (missing.length > 0 || extra.length > 0) {
    throw new Error(`populora: kernels/${layout.kernel}.wgsl: struct Params ${missing.length ? `lacks ${missing.join(', ')}` : ''}${missing.length && extra.length ? ' and ' : ''}${extra.length ? `has ${extra.join(', ')} unknown to its caller` : ''}`);
  }
  return Object.fromEntries(layout.fields.map((f) => [f.name, f.word])) as Record<Name, number>;
}
