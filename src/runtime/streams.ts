// Named seeded random streams (DESIGN.md rule 1). A stream is keyed by the scenario seed and a path such as
// ("teacher-3", "propose", step): one stream per actor, purpose and step, so an extra draw in one never shifts
// another, and replay needs no saved generator state.

import seedrandom from 'seedrandom';

export type StreamKey = readonly (string | number)[];

export interface RandomStream {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [0, n). */
  int(n: number): number;
  /** A uniform u32, e.g. a sampling seed for the device. */
  u32(): number;
  /** k distinct indices of [0, n), in draw order. */
  sample(n: number, k: number): number[];
  /** Fisher–Yates shuffle of a copy. */
  shuffle<T>(items: readonly T[]): T[];
}

export class Streams {
  constructor(readonly seed: number) {
    if (!Number.isSafeInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
  }

  stream(...key: StreamKey): RandomStream {
    for (const part of key) {
      if (typeof part === 'string' && part.includes('/')) throw new RangeError(`stream key part "${part}" may not contain "/"`);
    }
    const draw = seedrandom.alea(`${this.seed}/${key.join('/')}`);
    const int = (n: number) => {
      if (!Number.isInteger(n) || n <= 0) throw new RangeError(`int(n) needs a positive integer, got ${n}`);
      return Math.floor(draw() * n);
    };
    return {
      next: () => draw(),
      int,
      u32: () => draw.int32() >>> 0,
      sample: (n, k) => {
        if (k > n) throw new RangeError(`cannot draw ${k} distinct of ${n}`);
        return this.shuffleWith(Array.from({ length: n }, (_, i) => i), int).slice(0, k);
      },
      shuffle: (items) => this.shuffleWith([...items], int),
    };
  }

  private shuffleWith<T>(items: T[], int: (n: number) => number): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    return items;
  }
}
