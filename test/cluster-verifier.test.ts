// Runs whose verification is done by verifier workers over NATS (issue 20), on a local nats-server, the workers as
// users start them (`populora worker SCENARIO --nats URL --verifier`, the built binary, a process each): the same
// run hash and metrics.jsonl as the run in one process; a worker killed mid-chunk costs a re-sent chunk, never a
// verdict; a worker started for another scenario is refused by name; a server restarted mid-run is ridden out,
// with the run's hash (test/cluster-faults.test.ts has the server's other faults). (1 and 2 verifier workers in
// one process: selfplay.test.ts.)
import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { clusterRunOptions } from '../src/cli/cluster-options.js';
import { ClusterError, connectNats, decode, subjects } from '../src/cluster/nats.js';
import { NatsVerifierPool, type VerifyRequest } from '../src/cluster/remote-verifier.js';
import { scenarioHash } from '../src/cluster/scenario-hash.js';
import { startVerifierWorker, type VerifierWorker } from '../src/cluster/verifier-worker.js';
import type { VerifierPool, VerifyJob } from '../src/domains/domain.js';
import { loadScenario, type Scenario } from '../src/scenario/scenario.js';
import { runScenario, type RunOptions, type RunResult } from '../src/sim/run.js';
import { cliBinary, killWorkerProcesses, localNatsServer, natsInstalled, startWorker } from './nats.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-cluster-'));
const fresh = () => mkdtempSync(join(dir, 'run-'));

/** A scenario file (workers load it as the coordinator does); `cluster` and `perTeacher` vary by test. */
function scenarioFile(name: string, { seed = 3, steps = 2, perTeacher = 2, cluster = '{ deadlineSeconds: 2, verifierChunk: 2 }' } = {}): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    `name: ${name}
seed: ${seed}
steps: ${steps}
backend: cpu
model: { preset: tiny, seed: 1 }
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }
tasks: { perTeacher: ${perTeacher} }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 2, maxTokens: 16 }
rl: { lr: 0.01 }
evolution: { every: 2, fraction: 0.5 }
cluster: ${cluster}
`,
  );
  return file;
}

afterEach(killWorkerProcesses);

/** A verifier worker in a process of its own, as a user starts one; resolves once it serves. */
const startWorkerProcess = (file: string, url: string, cluster: string) => startWorker(file, url, cluster, ['--verifier', '--threads', '1']);

const exited = (child: ChildProcess) => new Promise<number | null>((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', (code) => resolve(code))));

/** Counts the chunk requests sent to the verifier workers (a plain subscriber sees each one; it does not answer). */
async function chunkCounter(url: string, cluster: string) {
  const nc = await connectNats(url);
  let chunks = 0;
  nc.subscribe(subjects(cluster).verify, {
    callback: (_, msg) => {
      if ('jobs' in decode<VerifyRequest>(msg.data)) chunks++;
    },
  });
  await nc.flush();
  return { chunks: () => chunks, close: () => nc.close() };
}

/** A run over NATS: the actors' messages on the server, the verifier's jobs on the workers. */
async function clusterRun(scenario: Scenario, url: string, cluster: string, options: Partial<RunOptions> & { wrapPool?: (pool: VerifierPool) => VerifierPool } = {}): Promise<RunResult> {
  const { wrapPool, ...rest } = options;
  const parts = await clusterRunOptions(scenario, url, cluster);
  try {
    return await runScenario(scenario, { outDir: fresh(), transport: parts.transport, verifierPool: wrapPool ? wrapPool(parts.verifierPool) : parts.verifierPool, ...rest });
  } finally {
    await parts.close();
  }
}

const metricsOf = (run: RunResult) => readFileSync(join(run.outDir, 'metrics.jsonl'), 'utf8');

describe.skipIf(!natsInstalled)('verifier workers over NATS', () => {
  const nats = localNatsServer();

  it('give the hash and the metrics.jsonl of the run in one process (two worker processes)', async () => {
    const file = scenarioFile('parity');
    const scenario = loadScenario(file);
    const plain = await runScenario(scenario, { outDir: fresh() });
    const workers = await Promise.all([startWorkerProcess(file, nats.server.url, 'parity'), startWorkerProcess(file, nats.server.url, 'parity')]);
    const counter = await chunkCounter(nats.server.url, 'parity');
    const distributed = await clusterRun(scenario, nats.server.url, 'parity');
    await counter.close();

    expect(distributed.hash).toBe(plain.hash);
    expect(distributed.events).toBe(plain.events);
    expect(metricsOf(plain)).not.toContain('"timing"'); // no clock given: the files hold no wall-clock field to set aside
    expect(metricsOf(distributed)).toBe(metricsOf(plain));
    expect(counter.chunks()).toBeGreaterThan(2 * scenario.steps); // validations and checks, every step, in chunks of 2
    for (const worker of workers) worker.kill('SIGTERM');
    expect(await Promise.all(workers.map(exited))).toEqual([0, 0]); // SIGTERM: drained, exit 0
  });

  it('re-send a chunk whose worker was killed with SIGKILL mid-chunk, and the run keeps its hash', async () => {
    // 16 validations in chunks of 1 at each step: the victim surely holds some when it dies; their deadline is 1 s.
    const file = scenarioFile('kill', { steps: 3, perTeacher: 8, cluster: '{ deadlineSeconds: 1, verifierChunk: 1 }' });
    const scenario = loadScenario(file);
    const plain = await runScenario(scenario, { outDir: fresh() });
    const [victim] = await Promise.all([startWorkerProcess(file, nats.server.url, 'kill'), startWorkerProcess(file, nats.server.url, 'kill')]);
    const counter = await chunkCounter(nats.server.url, 'kill');
    let step = 0;
    let chunksAsked = 0;
    const killMidChunk = (pool: VerifierPool): VerifierPool => ({
      ready: () => pool.ready!(),
      close: () => pool.close(),
      verify: (jobs) => {
        chunksAsked += jobs.length; // chunks of one job
        if (step !== 1 || victim!.signalCode !== null) return pool.verify(jobs);
        victim!.kill('SIGSTOP'); // it takes its chunks and answers none
        const outcomes = pool.verify(jobs);
        void sleep(200).then(() => victim!.kill('SIGKILL'));
        return outcomes;
      },
    });
    const run = await clusterRun(scenario, nats.server.url, 'kill', { wrapPool: killMidChunk, onStep: (m) => (step = m.step + 1) });
    await counter.close();

    expect(victim!.signalCode).toBe('SIGKILL');
    expect(run.hash).toBe(plain.hash);
    expect(metricsOf(run)).toBe(metricsOf(plain));
    expect(counter.chunks()).toBeGreaterThan(chunksAsked); // the victim's chunks, sent again to the other worker
  });

  it('refuse a coordinator running another scenario, naming both hashes', async () => {
    const scenario = loadScenario(scenarioFile('ours'));
    const other = loadScenario(scenarioFile('theirs', { seed: 4 }));
    const [ours, theirs] = [scenarioHash(scenario), scenarioHash(other)];
    expect(ours).not.toBe(theirs);
    const workerConnection = await connectNats(nats.server.url);
    const worker: VerifierWorker = await startVerifierWorker(workerConnection, subjects('refuse'), { scenario: other, scenarioHash: theirs, threads: 1 });
    const nc = await connectNats(nats.server.url);
    try {
      const pool = new NatsVerifierPool(nc, subjects('refuse'), ours, { deadlineMs: 2000, tries: 3 }, 2);
      const named = new RegExp(`refused: this verifier worker was started for scenario "theirs" \\(hash ${theirs.slice(0, 12)}…\\), the coordinator runs another \\(hash ${ours.slice(0, 12)}…\\)`);
      await expect(pool.ready()).rejects.toThrow(named);
      const job: VerifyJob = { kind: 'validate', taskType: scenario.tasks.types[0]!, text: '1+2' };
      await expect(pool.verify([job])).rejects.toThrow(named);
      await expect(pool.verify([job])).rejects.toBeInstanceOf(ClusterError);
    } finally {
      await worker.close();
      await Promise.all([nc.close(), workerConnection.close()]);
    }
  });

  it('say how to start a worker when none answers', async () => {
    const nc = await connectNats(nats.server.url);
    try {
      const pool = new NatsVerifierPool(nc, subjects('nobody'), 'hash', { deadlineMs: 500, tries: 3 }, 2);
      await expect(pool.ready()).rejects.toThrow(/^no verifier worker answers on nobody\.verify after 2 tries over 0\.5 s \(.*\): start one: populora worker SCENARIO --nats URL --verifier$/);
    } finally {
      await nc.close();
    }
  });

  it('on the command line: a run with no worker, and a worker with no role, end in one line', () => {
    const file = scenarioFile('lonely', { cluster: '{ deadlineSeconds: 0.5 }' });
    const run = spawnSync('node', [cliBinary, 'run', file, '--out', fresh(), '--overwrite', '--nats', nats.server.url, '--cluster', 'lonely'], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(1);
    expect(run.stderr.trim()).toMatch(/^populora: no verifier worker answers on lonely\.verify after 2 tries over 0\.5 s \(.*\): start one: populora worker SCENARIO --nats URL --verifier$/);
    const worker = spawnSync('node', [cliBinary, 'worker', file, '--nats', nats.server.url], { encoding: 'utf8' });
    expect(worker.status).toBe(1);
    expect(worker.stderr.trim()).toBe('populora: give exactly one of --engine, --verifier: what this worker does');
  });

  it('outlive a NATS server restarted mid-run, with the run\'s hash', async () => {
    const file = scenarioFile('restart', { steps: 3, cluster: '{ deadlineSeconds: 1, verifierChunk: 2 }' });
    const scenario = loadScenario(file);
    const plain = await runScenario(scenario, { outDir: fresh() });
    const connections = await Promise.all([connectNats(nats.server.url), connectNats(nats.server.url)]);
    const workers = await Promise.all(connections.map((nc) => startVerifierWorker(nc, subjects('restart'), { scenario, scenarioHash: scenarioHash(scenario), threads: 1 })));
    let restarted: Promise<void> | null = null;
    let [serverBack, backBeforeLastStep] = [false, false];
    const onStep = ({ step }: { step: number }) => {
      if (step === 0) restarted = nats.server.restart().then(() => void (serverBack = true)); // lands in step 1
      if (step === scenario.steps - 1) backBeforeLastStep = serverBack;
    };
    try {
      const run = await clusterRun(scenario, nats.server.url, 'restart', { onStep });
      expect(backBeforeLastStep).toBe(true); // the server was down and up again while the run went on
      expect(run.hash).toBe(plain.hash);
    } finally {
      await restarted;
      await Promise.all(workers.map((w) => w.close()));
      await Promise.all(connections.map((nc) => nc.close()));
    }
  });
});
