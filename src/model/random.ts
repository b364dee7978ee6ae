// Seeded draws for constructing weights (Box–Muller over a seedrandom stream).
import seedrandom from 'seedrandom';

/** A standard-normal generator from a named alea stream. */
export function normalStream(name: string): { uniform: () => number; normal: () => number } {
  const rng = seedrandom.alea(name);
  return { uniform: rng, normal: () => Math.sqrt(-2 * Math.log(1 - rng())) * Math.cos(2 * Math.PI * rng()) };
}
