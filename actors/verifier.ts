// The verifier: validates teachers' proposals and checks students' answers. Its handler only queues the work;
// at the step barrier the queued jobs run as one batch on the worker pool (src/domains/verifier-pool.ts) and the
// verdicts come back as messages in request-id order (DESIGN.md rule 4).

import type { ArithTask, ArithTaskType, AnswerCheck, Validation } from '../src/domains/arith/tasks.js';
import type { VerifyJob } from '../src/domains/verify-jobs.js';
import type { VerifierPool } from '../src/domains/verifier-pool.js';
import type { Delivery, Handler, Service } from '../src/runtime/world.js';
import { VERIFIER } from './protocol.js';

export type VerifierState = null;

export type VerifierMessage =
  | { type: 'validate'; requestId: number; replyTo: string; taskType: ArithTaskType; text: string }
  | { type: 'check'; requestId: number; replyTo: string; task: ArithTask; answer: string };

export type VerifierReply = { type: 'validated'; requestId: number; validation: Validation } | { type: 'checked'; requestId: number; check: AnswerCheck };

export class VerifierService implements Service {
  readonly name = VERIFIER;
  private queue: VerifierMessage[] = [];

  constructor(private readonly pool: VerifierPool) {}

  readonly handler: Handler<VerifierState, VerifierMessage> = (state, message) => {
    this.queue.push(message);
    return state;
  };

  hasPending(): boolean {
    return this.queue.length > 0;
  }

  async flush(): Promise<Delivery[]> {
    const requests = this.queue.splice(0);
    const jobs: VerifyJob[] = requests.map((r) => (r.type === 'validate' ? { kind: 'validate', taskType: r.taskType, text: r.text } : { kind: 'check', task: r.task, answer: r.answer }));
    const results = await this.pool.verify(jobs);
    return requests.map((r, i) => {
      const result = results[i]!;
      const message: VerifierReply = result.kind === 'validate' ? { type: 'validated', requestId: r.requestId, validation: result.validation } : { type: 'checked', requestId: r.requestId, check: result.check };
      return { requestId: r.requestId, to: r.replyTo, message };
    });
  }
}
