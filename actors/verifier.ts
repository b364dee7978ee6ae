// The verifier: validates teachers' proposals and checks students' answers. Its handler only queues the work;
// at the step barrier the queued jobs run as one batch on the worker pool (src/domains/verifier-pool.ts) and the
// verdicts come back as messages in request-id order (DESIGN.md rule 4).

import type { ArithTask, ArithTaskType, AnswerCheck, Validation } from '../src/domains/arith/tasks.js';
import type { VerifyJob, VerifyResult } from '../src/domains/verify-jobs.js';
import type { VerifierPool } from '../src/domains/verifier-pool.js';
import type { Delivery, Handler, Service } from '../src/runtime/world.js';
import { VERIFIER, groupBy } from './protocol.js';

export type VerifierState = null;

export type VerifierMessage =
  | { type: 'validate'; replyTo: string; requests: Array<{ requestId: number; taskType: ArithTaskType; text: string }> }
  | { type: 'check'; replyTo: string; requests: Array<{ task: ArithTask; answers: Array<{ requestId: number; answer: string }> }> };

export type VerifierReply =
  | { type: 'validated'; results: Array<{ requestId: number; validation: Validation }> }
  | { type: 'checked'; results: Array<{ requestId: number; check: AnswerCheck }> };

type QueuedJob = { replyTo: string; requestId: number; job: VerifyJob };

export class VerifierService implements Service {
  readonly name = VERIFIER;
  private queue: QueuedJob[] = [];

  constructor(private readonly pool: VerifierPool) {}

  readonly handler: Handler<VerifierState, VerifierMessage> = (state, message) => {
    const { replyTo } = message;
    if (message.type === 'validate') this.queue.push(...message.requests.map((r) => ({ replyTo, requestId: r.requestId, job: { kind: 'validate', taskType: r.taskType, text: r.text } as const })));
    else this.queue.push(...message.requests.flatMap(({ task, answers }) => answers.map((a) => ({ replyTo, requestId: a.requestId, job: { kind: 'check', task, answer: a.answer } as const }))));
    return state;
  };

  hasPending(): boolean {
    return this.queue.length > 0;
  }

  /** Verifies every queued job as one batch; one reply per actor and kind, its results in request order. */
  async flush(): Promise<Delivery[]> {
    const queued = this.queue.splice(0);
    const results = await this.pool.verify(queued.map((q) => q.job));
    const answered = queued.map((q, i) => ({ ...q, result: results[i]! }));
    return [...groupBy(answered, (a) => `${a.result.kind} ${a.replyTo}`).values()].map((group) => {
      const message: VerifierReply =
        group[0]!.result.kind === 'validate'
          ? { type: 'validated', results: group.map((a) => ({ requestId: a.requestId, validation: (a.result as Extract<VerifyResult, { kind: 'validate' }>).validation })) }
          : { type: 'checked', results: group.map((a) => ({ requestId: a.requestId, check: (a.result as Extract<VerifyResult, { kind: 'check' }>).check })) };
      return { requestId: group[0]!.requestId, to: group[0]!.replyTo, message };
    });
  }
}
