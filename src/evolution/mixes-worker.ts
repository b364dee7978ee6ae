// A piscina worker: the SVD crossover's small factorisations (svdMixes) for a chunk of modules, in order.
import { matrix, type Matrix } from './linalg.js';
import { svdMixes } from './operators.js';

export interface MixesJob {
  gramB: Float64Array<ArrayBuffer>; // [2r, 2r]
  gramA: Float64Array<ArrayBuffer>; // [2r, 2r]
  r: number;
  w1: number;
  w2: number;
}

export default function mixesChunk(jobs: MixesJob[]): Array<{ mixB: Matrix; mixA: Matrix }> {
  return jobs.map((j) => svdMixes(matrix(2 * j.r, 2 * j.r, j.gramB), matrix(2 * j.r, 2 * j.r, j.gramA), j.r, j.w1, j.w2));
}
