// Wall-clock timing of a run's steps, for the `timing` field of metrics.jsonl: the step's time, the time in the
// engine's and the verifier's batches (the engine's split into generation and training, timed at its core), and
// the verifier's throughput (validations and checks per second of its own time). The clock is given by the caller (`populora run` passes performance.now): runtime code reads none,
// and nothing here reaches an actor, a message or the run hash. Wall-clock figures differ from run to run, so
// replay leaves the field out of what it compares (metrics.ts, replay.ts).

import { ENGINE, VERIFIER } from '../../actors/protocol.js';
import type { EngineCore } from '../engine/core.js';
import type { StepTiming } from './metrics.js';
import type { Delivery, Service } from '../runtime/world.js';

/** Verifier jobs in a batch's replies, by kind: each 'validated' or 'checked' reply holds one result per job. */
function jobsOf(deliveries: readonly Delivery[]): { validations: number; checks: number } {
  const count = (type: string) => deliveries.filter((d) => d.message.type === type).reduce((n, d) => n + (d.message as unknown as { results: unknown[] }).results.length, 0);
  return { validations: count('validated'), checks: count('checked') };
}

export class StepTimer {
  private stepStart = 0;
  private engineMs = 0;
  private core = { generateMs: 0, trainMs: 0 };
  private verifier = { validationMs: 0, checkMs: 0, validations: 0, checks: 0 };

  constructor(private readonly clock: () => number) {}

  /** The service, timed: each flush's time is added to the step's (a verifier batch's split between its kinds of job). */
  wrap(service: Service): Service {
    return {
      name: service.name,
      hasPending: () => service.hasPending(),
      flush: async (world) => {
        const start = this.clock();
        const deliveries = await service.flush(world);
        const ms = this.clock() - start;
        if (service.name === ENGINE) this.engineMs += ms;
        if (service.name === VERIFIER) {
          const { validations, checks } = jobsOf(deliveries);
          const jobs = validations + checks;
          this.verifier.validationMs += jobs === 0 ? 0 : (ms * validations) / jobs;
          this.verifier.checkMs += jobs === 0 ? ms : (ms * checks) / jobs;
          this.verifier.validations += validations;
          this.verifier.checks += checks;
        }
        return deliveries;
      },
    };
  }

  /** The engine's core, its generation and training timed. */
  wrapCore(core: EngineCore): EngineCore {
    const timed = async <T>(phase: keyof StepTimer['core'], work: () => Promise<T>): Promise<T> => {
      const start = this.clock();
      try {
        return await work();
      } finally {
        this.core[phase] += this.clock() - start;
      }
    };
    return {
      generate: (requests, formats) => timed('generateMs', () => core.generate(requests, formats)),
      train: (samples) => timed('trainMs', () => core.train(samples)),
      evolve: (spec) => core.evolve(spec),
      load: (adapters, optimizer) => core.load(adapters, optimizer),
      state: () => core.state(),
      close: () => core.close(),
    };
  }

  startStep(): void {
    this.stepStart = this.clock();
    this.engineMs = 0;
    this.core = { generateMs: 0, trainMs: 0 };
    this.verifier = { validationMs: 0, checkMs: 0, validations: 0, checks: 0 };
  }

  /** The step's figures, from startStep until now. */
  endStep(): StepTiming {
    const stepMs = this.clock() - this.stepStart;
    const { validationMs, checkMs, validations, checks } = this.verifier;
    const verifierMs = validationMs + checkMs;
    const perSecond = (jobs: number, ms: number) => (ms > 0 ? (1000 * jobs) / ms : null);
    return { stepMs, engineMs: this.engineMs, ...this.core, verifierMs, verifierShare: stepMs > 0 ? verifierMs / stepMs : 0, validations, validationsPerSecond: perSecond(validations, validationMs), checks, checksPerSecond: perSecond(checks, checkMs) };
  }
}
