// The engine sharded over NATS (src/cluster/remote-engine.ts, engine-worker.ts), against the same run in one
// process: the run hash, metrics.jsonl and the last checkpoint's state (every adapter, every optimizer moment) are
// identical, with 2 shards or 3, and when a worker is lost between steps or in the middle of one. The workers
// here live in the test's process, each on its own NATS connection and CPU backend (test/cluster-processes.test.ts
// runs them as separate processes and kills one with SIGKILL).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import { startEngineWorker, type EngineWorker } from '../src/cluster/engine-worker.js';
import { startLocalNatsServer, type LocalNatsServer } from '../src/cluster/local-server.js';
import { connectNats, subjects, type NatsConnection } from '../src/cluster/nats.js';
import { RemoteEngineCore } from '../src/cluster/remote-engine.js';
import { scenarioHash } from '../src/cluster/scenario-hash.js';
import { checkpointDir, STATE_FILE } from '../src/sim/checkpoints.js';
import { slotCount } from '../src/sim/population.js';
import { runScenario, type RunOptions } from '../src/sim/run.js';
import { parseScenario, type Scenario } from '../src/scenario/scenario.js';
import { beforeEngineAt, natsInstalled } from './nats.js';

const base = `
name: cluster-test
seed: 5
steps: 4
backend: cpu
model: { preset: tiny, seed: 1 }
population: { subpopulations: 4, teachers: 1, students: 1, lora: { rank: 4 } }
tasks: { perTeacher: 1 }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 2, maxTokens: 12 }
rl: { lr: 0.01 }
evolution: { every: 2, fraction: 0.5, crossoverProbability: 0.5, crossover: svd, optimizerState: inherit, threads: 1 }
`;
const scenarioOf = (cluster: string) => parseScenario(`${base}cluster: ${cluster}\n`, 'cluster-test.yaml');
const fresh = () => mkdtempSync(join(tmpdir(), 'populora-cluster-'));

/** What must be identical between two runs of one scenario: the hash, the metrics, the last checkpoint's state. */
function record(outDir: string, hash: string, steps: number) {
  return { hash, metrics: readFileSync(join(outDir, 'metrics.jsonl'), 'utf8'), state: readFileSync(join(checkpointDir(outDir, steps), STATE_FILE)) };
}

interface Cluster {
  workers: Map<string, { worker: EngineWorker; nc: NatsConnection }>;
  start(id: string, scenario: Scenario): Promise<void>;
  kill(id: string): Promise<void>; // the worker's connection closes without a goodbye
  stop(): Promise<void>;
}

describe.skipIf(!natsInstalled)('the engine sharded over NATS', () => {
  let server: LocalNatsServer;
  let coordinator: NatsConnection;
  const names = subjects('test-engine');

  beforeAll(async () => {
    server = await startLocalNatsServer();
    coordinator = await connectNats(server.url);
  });
  afterAll(async () => {
    await coordinator?.close();
    await server?.stop();
  });

  const cluster = (): Cluster => {
    const workers = new Map<string, { worker: EngineWorker; nc: NatsConnection }>();
    return {
      workers,
      start: async (id, scenario) => {
        const nc = await connectNats(server.url);
        workers.set(id, { nc, worker: startEngineWorker(nc, names, { scenario, scenarioFile: 'cluster-test.yaml', scenarioHash: scenarioHash(scenario), backend: new CpuBackend(), id }) });
        await nc.flush(); // its subscriptions are on the server before the coordinator looks for it
      },
      kill: async (id) => {
        const { nc } = workers.get(id)!;
        workers.delete(id);
        await nc.close();
      },
      stop: async () => {
        for (const { worker, nc } of workers.values()) {
          await worker.close();
          await nc.close();
        }
      },
    };
  };

  const remoteRun = (scenario: Scenario, events: string[], options: Partial<RunOptions> = {}) =>
    runScenario(scenario, {
      outDir: options.outDir ?? fresh(),
      engineCore: () => RemoteEngineCore.connect(coordinator, names, { scenarioHash: scenarioHash(scenario), slots: slotCount(scenario), shards: scenario.cluster!.engineWorkers, assignment: scenario.cluster!.assignment, deadlineMs: scenario.cluster!.deadlineSeconds * 1000, onWorkerLoss: scenario.cluster!.onWorkerLoss, onEvent: (e) => events.push(e) }),
      ...options,
    });

  it('gives the one-process run bit for bit, over 2 and 3 shards', async () => {
    const scenario = scenarioOf('{ engineWorkers: 2 }');
    const alone = await runScenario(scenario, { outDir: fresh() });
    const expected = record(alone.outDir, alone.hash, scenario.steps);
    for (const [shards, assignment] of [[2, 'round-robin'], [3, 'blocks']] as const) {
      const sharded = scenarioOf(`{ engineWorkers: ${shards}, assignment: ${assignment} }`);
      const workers = cluster();
      for (let w = 0; w < shards; w++) await workers.start(`w${w}`, sharded);
      try {
        const events: string[] = [];
        const run = await remoteRun(sharded, events);
        expect(record(run.outDir, run.hash, scenario.steps), `${shards} shards, ${assignment}`).toEqual(expected);
        expect(events).toEqual([]);
      } finally {
        await workers.stop();
      }
    }
  }, 120_000);

  it('moves a lost worker\'s shard to a spare, or to a worker that joins later, and the run is the same', async () => {
    const scenario = scenarioOf('{ engineWorkers: 2, deadlineSeconds: 2 }');
    const alone = await runScenario(scenario, { outDir: fresh() });
    const expected = record(alone.outDir, alone.hash, scenario.steps);

    // A spare takes the shard: w0 is lost in step 1 (it holds shard 0: workers are given shards in name order).
    const workers = cluster();
    for (const id of ['w0', 'w1', 'w2']) await workers.start(id, scenario);
    const events: string[] = [];
    try {
      const run = await remoteRun(scenario, events, beforeEngineAt(1, () => workers.kill('w0')));
      expect(record(run.outDir, run.hash, scenario.steps)).toEqual(expected);
    } finally {
      await workers.stop();
    }
    expect(events).toHaveLength(1);
    expect(events[0]).toMatch(/engine worker w0 lost .*shard 0 .* goes to w2/);

    // `wait`: no spare; the run waits for a new worker, started once the loss is seen.
    const waiting = scenarioOf('{ engineWorkers: 2, deadlineSeconds: 5, onWorkerLoss: wait }');
    const again = cluster();
    for (const id of ['w0', 'w1']) await again.start(id, waiting);
    const waited: string[] = [];
    try {
      const run = await remoteRun(waiting, waited, beforeEngineAt(2, async () => {
        await again.kill('w1');
        await again.start('w3', waiting);
      }));
      expect(record(run.outDir, run.hash, scenario.steps)).toEqual(expected);
    } finally {
      await again.stop();
    }
    expect(waited.join('\n')).toMatch(/engine worker w1 lost .*shard 1 .* goes to w3/);
  }, 180_000);

  it('resumes from a checkpoint when the coordinator died: run --resume hands the saved slots to the workers', async () => {
    const scenario = { ...scenarioOf('{ engineWorkers: 2 }'), checkpointEvery: 2 };
    const alone = await runScenario(scenario, { outDir: fresh() });
    const workers = cluster();
    for (const id of ['w0', 'w1']) await workers.start(id, scenario);
    try {
      const crashed = await remoteRun(scenario, [], { stopAfterSteps: 3 }); // a checkpoint at 2, then step 3 lost
      const resumed = await remoteRun(scenario, [], { outDir: crashed.outDir, resume: true });
      expect(resumed.stepsRun).toBe(2);
      expect(record(resumed.outDir, resumed.hash, scenario.steps)).toEqual(record(alone.outDir, alone.hash, scenario.steps));
    } finally {
      await workers.stop();
    }
  }, 120_000);

  it('rides out a NATS server restarted in the middle of a step: the run is the one in one process, and no worker is lost', async () => {
    const scenario = scenarioOf('{ engineWorkers: 2, deadlineSeconds: 3 }');
    const alone = await runScenario(scenario, { outDir: fresh() });
    const workers = cluster();
    for (const id of ['w0', 'w1']) await workers.start(id, scenario);
    try {
      let restarted: Promise<void> | null = null;
      const events: string[] = [];
      const run = await remoteRun(scenario, events, beforeEngineAt(1, async () => void (restarted = server.restart()))); // the step's requests meet it
      await restarted;
      expect(record(run.outDir, run.hash, scenario.steps)).toEqual(record(alone.outDir, alone.hash, scenario.steps));
      expect(events).toEqual([]); // the workers' absence while they reconnected was the server's, not theirs
    } finally {
      await workers.stop();
    }
  }, 120_000);

  it('refuses workers started for another scenario, naming both hashes', async () => {
    const scenario = scenarioOf('{ engineWorkers: 1, deadlineSeconds: 2 }');
    const other = { ...scenario, seed: 6 };
    const workers = cluster();
    await workers.start('w0', other);
    try {
      await expect(remoteRun(scenario, [])).rejects.toThrow(new RegExp(`refused.*hash ${scenarioHash(other).slice(0, 12)}.*hash ${scenarioHash(scenario).slice(0, 12)}`));
    } finally {
      await workers.stop();
    }
  }, 60_000);
});
