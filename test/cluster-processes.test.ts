// A whole run over NATS as users start it: a coordinator (`run --nats`'s options, in the test's process) with two
// engine workers and two verifier workers, each `populora worker` in a process of its own. The run hash and
// metrics.jsonl are those of the run in one process; an engine worker killed with SIGKILL in the middle of a step
// costs its shard a move to the other worker, never a bit of the run.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { clusterRunOptions } from '../src/cli/cluster-options.js';
import { loadScenario } from '../src/scenario/scenario.js';
import { runScenario, type RunOptions } from '../src/sim/run.js';
import { beforeEngineAt, killWorkerProcesses, localNatsServer, natsInstalled, startWorker } from './nats.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-processes-'));
const fresh = () => mkdtempSync(join(dir, 'run-'));

function scenarioFile(name: string, cluster: string): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    `name: ${name}
seed: 11
steps: 4
backend: cpu
model: { preset: tiny, seed: 1 }
population: { subpopulations: 2, teachers: 2, students: 1, lora: { rank: 4 } }
tasks: { perTeacher: 1 }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 2, maxTokens: 12 }
rl: { lr: 0.01 }
evolution: { every: 2, fraction: 0.5, crossover: svd, optimizerState: inherit, threads: 1 }
cluster: ${cluster}
`,
  );
  return file;
}

afterEach(killWorkerProcesses);

describe.skipIf(!natsInstalled)('a run on worker processes', () => {
  const nats = localNatsServer();

  /** The coordinator's run, with `engines` engine workers and 2 verifier workers started as processes first. */
  async function clusterRun(file: string, cluster: string, engines: string[], options: (workers: Map<string, ChildProcess>) => Partial<RunOptions> = () => ({})) {
    const workers = new Map<string, ChildProcess>();
    for (const id of engines) workers.set(id, await startWorker(file, nats.server.url, cluster, ['--engine', '--id', id]));
    for (let v = 0; v < 2; v++) await startWorker(file, nats.server.url, cluster, ['--verifier', '--threads', '1']);
    const scenario = loadScenario(file);
    const events: string[] = [];
    const remote = await clusterRunOptions(scenario, nats.server.url, cluster, { onEvent: (e) => events.push(e) });
    try {
      const { transport, verifierPool, engineCore } = remote;
      const result = await runScenario(scenario, { outDir: fresh(), transport, verifierPool, engineCore, ...options(workers) });
      return { result, events, metrics: readFileSync(join(result.outDir, 'metrics.jsonl'), 'utf8') };
    } finally {
      await remote.close();
    }
  }

  it('gives the one-process run\'s hash and metrics, and survives an engine worker killed mid-step', async () => {
    const file = scenarioFile('processes', '{ engineWorkers: 2, deadlineSeconds: 5 }');
    const alone = await runScenario(loadScenario(file), { outDir: fresh() });
    const aloneMetrics = readFileSync(join(alone.outDir, 'metrics.jsonl'), 'utf8');

    const whole = await clusterRun(file, 'whole', ['e0', 'e1']);
    expect(whole.result.hash).toBe(alone.hash);
    expect(whole.metrics).toBe(aloneMetrics);
    expect(whole.events).toEqual([]);

    // SIGKILL e0 as the engine's first job of step 2 begins: e1 takes its shard from the coordinator's copy.
    const killed = await clusterRun(file, 'killed', ['e0', 'e1'], (workers) => beforeEngineAt(2, async () => void workers.get('e0')!.kill('SIGKILL')));
    expect(killed.result.hash).toBe(alone.hash);
    expect(killed.metrics).toBe(aloneMetrics);
    expect(killed.events.join('\n')).toMatch(/engine worker e0 lost .*shard 0 .* goes to e1/);
  }, 180_000);
});
