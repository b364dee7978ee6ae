// The verifier: validates teachers' proposals and checks students' answers. Its handler only queues the work;
// at the step barrier the queued jobs run as one batch on the domain's worker pool (src/domains/*/verifier-pool.ts)
// and the verdicts come back as messages in request-id order (DESIGN.md rule 4). A job whose worker failed twice
// comes back as a fault, not a verdict (rule 5): the asker drops that proposal or answer and reports it.

import type { AnswerCheck, Task, TaskType, Validation, VerifierPool, VerifyJob, VerifyOutcome } from '../src/domains/domain.js';
import { delivery, type Address, type Delivery, type Handler, type Service } from '../src/runtime/world.js';
import { VERIFIER, groupBy } from './protocol.js';

export type VerifierState = null;

export type VerifierMessage =
  | { type: 'validate'; replyTo: Address<Validated>; requests: Array<{ requestId: number; taskType: TaskType; text: string; given?: string }> }
  | { type: 'check'; replyTo: Address<Checked>; requests: Array<{ task: Task; answers: Array<{ requestId: number; answer: string }> }> };

/** A verdict, or the fault that stopped one (a worker that crashed or hung twice). */
export type Verdict<T> = { requestId: number; fault?: undefined } & T;
export type Faulted = { requestId: number; fault: string };

export type Validated = { type: 'validated'; results: Array<Verdict<{ validation: Validation }> | Faulted> };
export type Checked = { type: 'checked'; results: Array<Verdict<{ check: AnswerCheck }> | Faulted> };
export type VerifierReply = Validated | Checked;

/** A queued job and where its verdict goes: a validation's in a `validated` reply, a check's in a `checked` one. */
type QueuedJob = { requestId: number; job: VerifyJob; reply: { type: 'validated'; to: Address<Validated> } | { type: 'checked'; to: Address<Checked> } };

export class VerifierService implements Service {
  readonly name = VERIFIER;
  private queue: QueuedJob[] = [];

  constructor(private readonly pool: VerifierPool) {}

  readonly handler: Handler<VerifierState, VerifierMessage> = (state, message) => {
    if (message.type === 'validate') {
      const reply = { type: 'validated', to: message.replyTo } as const;
      this.queue.push(...message.requests.map((r) => ({ reply, requestId: r.requestId, job: { kind: 'validate', taskType: r.taskType, text: r.text, ...(r.given === undefined ? {} : { given: r.given }) } as const })));
    } else {
      const reply = { type: 'checked', to: message.replyTo } as const;
      this.queue.push(...message.requests.flatMap(({ task, answers }) => answers.map((a) => ({ reply, requestId: a.requestId, job: { kind: 'check', task, answer: a.answer } as const }))));
    }
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
    return [...groupBy(answered, (a) => `${a.reply.type} ${a.reply.to}`).values()].map((group) => {
      const item = ({ requestId, result }: { requestId: number; result: VerifyOutcome }) =>
        result.kind === 'fault' ? { requestId, fault: result.detail } : result.kind === 'validate' ? { requestId, validation: result.validation } : { requestId, check: result.check };
      const results = group.map(item); // a group is one kind of job: its verdicts are all of that kind, or faults
      const { requestId, reply } = group[0]!;
      return reply.type === 'validated'
        ? delivery(requestId, reply.to, { type: 'validated', results: results as Validated['results'] })
        : delivery(requestId, reply.to, { type: 'checked', results: results as Checked['results'] });
    });
  }
}
