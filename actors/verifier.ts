// The verifier: validates teachers' proposals and checks students' answers. Its handler only queues the work;
// at the step barrier the queued jobs run as one batch on the domain's worker pool (src/domains/*/verifier-pool.ts)
// and the verdicts come back as messages in request-id order (DESIGN.md rule 4). A job whose worker failed twice
// comes back as a fault, not a verdict (rule 5): the asker drops that proposal or answer and reports it.

import type { AnswerCheck, Task, TaskType, Validation, VerifierPool, VerifyJob, VerifyOutcome } from '../src/domains/domain.js';
import type { Delivery, Handler, Service } from '../src/runtime/world.js';
import { VERIFIER, groupBy } from './protocol.js';

export type VerifierState = null;

export type VerifierMessage =
  | { type: 'validate'; replyTo: string; requests: Array<{ requestId: number; taskType: TaskType; text: string; given?: string }> }
  | { type: 'check'; replyTo: string; requests: Array<{ task: Task; answers: Array<{ requestId: number; answer: string }> }> };

/** A verdict, or the fault that stopped one (a worker that crashed or hung twice). */
export type Verdict<T> = { requestId: number; fault?: undefined } & T;
export type Faulted = { requestId: number; fault: string };

export type VerifierReply =
  | { type: 'validated'; results: Array<Verdict<{ validation: Validation }> | Faulted> }
  | { type: 'checked'; results: Array<Verdict<{ check: AnswerCheck }> | Faulted> };

type QueuedJob = { replyTo: string; requestId: number; job: VerifyJob };

export class VerifierService implements Service {
  readonly name = VERIFIER;
  private queue: QueuedJob[] = [];

  constructor(private readonly pool: VerifierPool) {}

  readonly handler: Handler<VerifierState, VerifierMessage> = (state, message) => {
    const { replyTo } = message;
    if (message.type === 'validate') this.queue.push(...message.requests.map((r) => ({ replyTo, requestId: r.requestId, job: { kind: 'validate', taskType: r.taskType, text: r.text, ...(r.given === undefined ? {} : { given: r.given }) } as const })));
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
    return [...groupBy(answered, (a) => `${a.job.kind} ${a.replyTo}`).values()].map((group) => {
      const item = ({ requestId, result }: { requestId: number; result: VerifyOutcome }) =>
        result.kind === 'fault' ? { requestId, fault: result.detail } : result.kind === 'validate' ? { requestId, validation: result.validation } : { requestId, check: result.check };
      const results = group.map(item);
      const message = (group[0]!.job.kind === 'validate' ? { type: 'validated', results } : { type: 'checked', results }) as VerifierReply;
      return { requestId: group[0]!.requestId, to: group[0]!.replyTo, message };
    });
  }
}
