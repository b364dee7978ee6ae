// A piscina worker: verifies one chunk of jobs, in order.
import { verify, type VerifyJob, type VerifyResult } from './verify-jobs.js';

export default function verifyChunk(jobs: VerifyJob[]): VerifyResult[] {
  return jobs.map(verify);
}
