// The first place where two JSON-like values differ, as a field path ("sampling.temperature", "members[2].rating"):
// what a refused resume and a replay name instead of "they differ".

import { isDeepStrictEqual } from 'node:util';

export interface Difference {
  field: string;
  recorded: unknown;
  other: unknown;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value) && !ArrayBuffer.isView(value);

export function firstDifference(recorded: unknown, other: unknown, field = ''): Difference | null {
  if (isDeepStrictEqual(recorded, other)) return null;
  if (isRecord(recorded) && isRecord(other)) {
    for (const key of [...new Set([...Object.keys(recorded), ...Object.keys(other)])].sort()) {
      const found = firstDifference(recorded[key], other[key], field === '' ? key : `${field}.${key}`);
      if (found) return found;
    }
  }
  if (Array.isArray(recorded) && Array.isArray(other) && recorded.length === other.length) {
    for (let i = 0; i < recorded.length; i++) {
      const found = firstDifference(recorded[i], other[i], `${field}[${i}]`);
      if (found) return found;
    }
  }
  return { field: field === '' ? '(top level)' : field, recorded, other };
}

/** A value as a difference shows it: JSON, cut short. */
export const shown = (value: unknown) => (value === undefined ? '(absent)' : JSON.stringify(value).slice(0, 120));
