// Reading run folders for the science scripts (bench/science-diagnose.ts, bench/science-table.ts): which runs a
// path stands for, and what their event logs say about the held-out evaluations (each member's verdict on each
// task); and the base model's own verdicts on the same tasks, through the engine and verifier a run uses.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BenchUsageError } from './args.js';
import { CpuBackend } from '../src/backend/cpu.js';
import type { Task } from '../src/domains/domain.js';
import { domainNamed } from '../src/domains/index.js';
import { promptSet } from '../src/domains/prompts.js';
import { LocalEngineCore } from '../src/engine/core.js';
import { readEventLog, type RunEvent } from '../src/runtime/event-log.js';
import type { Scenario } from '../src/scenario/scenario.js';
import { buildModel, coreSettings } from '../src/sim/population.js';

export interface RunFolder {
  dir: string;
  group: string; // the sweep's group, or the folder's path for a lone run
}

/** Run folders: each argument, or a sweep folder's finished runs with their group. */
export function runFolders(paths: readonly string[]): RunFolder[] {
  if (paths.length === 0) throw new BenchUsageError('give at least one run folder or sweep folder');
  return paths.flatMap((path) => {
    const sweep = join(path, 'sweep.json');
    if (existsSync(sweep)) {
      const { runs } = JSON.parse(readFileSync(sweep, 'utf8')) as { runs: Array<{ dir: string; group: string; status: string }> };
      return runs.filter((r) => r.status === 'finished').map((r) => ({ dir: join(path, r.dir), group: r.group }));
    }
    if (!existsSync(join(path, 'scenario.json'))) throw new BenchUsageError(`${path}: neither a run folder (scenario.json) nor a sweep folder (sweep.json)`);
    return [{ dir: path, group: path }];
  });
}

export const scenarioOf = (dir: string) => JSON.parse(readFileSync(join(dir, 'scenario.json'), 'utf8')) as Scenario;

/** The parts of the actors' messages the science scripts read (actors/protocol.ts, evaluator.ts, verifier.ts). */
export interface LoggedMessage {
  type: string;
  requests?: Array<{ requestId: number; slot?: number; format?: string; greedy?: boolean }>;
  results?: Array<{ requestId: number; text?: string; check?: { correct: boolean }; validation?: { valid: boolean; task?: Task } }>;
  members?: Array<{ id: string; slot: number; role: string }>;
  heldOut?: number[]; // the matchmaker's 'proposed': held-out tasks a teacher proposed
}

export const messageOf = (event: RunEvent) => (event.payload as { message: LoggedMessage }).message;

/** One held-out evaluation: each member's verdict (right or not) on each task of the set, in order, and the tasks proposed by then. */
export interface Evaluation {
  step: number;
  verdicts: Map<string, boolean[]>;
  excluded: Set<number>; // tasks a teacher of the run had proposed by then: trained on, so not held out for this run
}

/** Every evaluation of a run's event log, in step order. */
export function evaluations(events: readonly RunEvent[]): Evaluation[] {
  const out: Evaluation[] = [];
  const excluded = new Set<number>();
  let members = new Map<number, string[]>(); // slot → member ids, of the evaluation in progress
  let requests = new Map<number, { slot: number; index: number }>();
  for (const event of events) {
    const message = messageOf(event);
    if (message.type === 'proposed') message.heldOut!.forEach((i) => excluded.add(i));
    else if (message.type === 'evaluate') {
      members = new Map();
      for (const m of message.members!) members.set(m.slot, [...(members.get(m.slot) ?? []), m.id]);
      requests = new Map();
      out.push({ step: event.step, verdicts: new Map(), excluded: new Set(excluded) });
    } else if (message.type === 'generate' && event.actor === 'evaluator') {
      const perSlot = new Map<number, number>();
      for (const r of message.requests!) {
        const index = perSlot.get(r.slot!) ?? 0;
        perSlot.set(r.slot!, index + 1);
        requests.set(r.requestId, { slot: r.slot!, index });
      }
    } else if (message.type === 'checked') {
      for (const r of message.results!) {
        const request = requests.get(r.requestId);
        if (!request || !r.check) continue;
        const { verdicts } = out.at(-1)!;
        for (const id of members.get(request.slot) ?? []) ((verdicts.get(id) ?? verdicts.set(id, []).get(id))!)[request.index] = r.check.correct;
      }
    }
  }
  return out;
}

/** A run's last evaluation. */
export function lastEvaluation(dir: string): Evaluation {
  const last = evaluations(readEventLog(join(dir, 'events.msgpack')).events).at(-1);
  if (last === undefined) throw new BenchUsageError(`${dir}: the run has no held-out evaluation (give its scenario an "evaluation")`);
  return last;
}

/**
 * The base model's verdicts on a scenario's held-out tasks: greedy, through the engine core a run uses (its token
 * masks, its token budget) with no adapter, checked by the domain's verifier; the CPU backend.
 */
export async function baseVerdicts(scenario: Scenario): Promise<{ tasks: Task[]; verdicts: boolean[] }> {
  const domain = domainNamed(scenario.domain);
  const { evaluation } = scenario;
  if (!evaluation || !domain.heldOutTasks) throw new BenchUsageError(`scenario ${scenario.name}: no held-out evaluation`);
  const tasks = domain.heldOutTasks(evaluation.seed, evaluation.tasks, evaluation.part);
  const parts = buildModel(scenario, new CpuBackend(), 'scenario.json');
  const core = new LocalEngineCore(parts.model, coreSettings(scenario, parts), [0]); // one slot: a bank needs one; the requests use none (-1)
  const prompts = promptSet(domain, scenario.prompts);
  const eos = parts.tokenizer.eosTokenId!;
  const requests = tasks.map((task, i) => ({ requestId: i, prompt: parts.tokenizer.encodePrompt(domain.solvePrompt(task, prompts)), adapter: -1, maxTokens: scenario.sampling.maxTokens, seed: scenario.seed >>> 0, temperature: 0, stopTokens: [eos] }));
  const results = await core.generate(requests, tasks.map((task) => `answer/${task.type}` as const));
  const pool = domain.verifierPool(1, { fuel: scenario.tasks.fuel, guardMs: scenario.tasks.guardMs });
  try {
    const outcomes = await pool.verify(results.map((r, i) => ({ kind: 'check' as const, task: tasks[i]!, answer: parts.tokenizer.decode(r.tokens) })));
    return { tasks, verdicts: outcomes.map((o) => o.kind === 'check' && o.check.correct) };
  } finally {
    await pool.close();
    await core.close();
    parts.model.destroy();
  }
}
