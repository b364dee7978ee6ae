// A piscina worker: verifies one chunk of arith jobs, in order.
import type { VerifyJob, VerifyOutcome } from '../domain.js';
import { verifyArith } from './verify-jobs.js';

export default function verifyChunk(jobs: VerifyJob[]): VerifyOutcome[] {
  return jobs.map(verifyArith);
}
