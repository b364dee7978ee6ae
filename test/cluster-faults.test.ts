// The fault matrix of a cluster (issue 36), on a real nats-server on loopback, with workers (and, where the fault is
// the coordinator's, the coordinator too) as users start them: `populora worker` and `populora run --nats`, the
// built CLI, a process each. Each case checks the run (the one-process run's hash, or a folder that resumes to it)
// and that every process ended, by pid. Limits are short here (POPULORA_NATS_RECONNECT_SECONDS and
// POPULORA_NATS_DRAIN_SECONDS); the bounds asserted on how long a process took to stop are the limit, plus a slack
// for a loaded machine.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { clusterRunOptions } from '../src/cli/cluster-options.js';
import { EXIT_ABANDONED } from '../src/cluster/errors.js';
import { freePort, startLocalNatsServer, type LocalNatsServer } from '../src/cluster/local-server.js';
import { loadScenario } from '../src/scenario/scenario.js';
import { checkpointDir } from '../src/sim/checkpoints.js';
import { runScenario, type RunOptions } from '../src/sim/run.js';
import { until } from './cli-process.js';
import { alive, beforeEngineAt, killWorkerProcesses, natsInstalled, spawnCli, type CliProcess } from './nats.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-faults-'));
const fresh = () => mkdtempSync(join(dir, 'run-'));
const STEPS = 12;

/** The smallest population with an engine on workers: 2 teachers, 2 students, a checkpoint every step. */
function scenarioFile(engineWorkers: number): string {
  const file = join(dir, `faults-${engineWorkers}.yaml`);
  writeFileSync(
    file,
    `name: faults
seed: 3
steps: ${STEPS}
backend: cpu
model: { preset: tiny, seed: 1 }
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 2 } }
tasks: { perTeacher: 1 }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 1, maxTokens: 12 }
rl: { lr: 0.01 }
checkpointEvery: 1
cluster: { engineWorkers: ${engineWorkers}, deadlineSeconds: 3 }
`,
  );
  return file;
}

const limits = (reconnectSeconds: number, drainSeconds: number) => ({ POPULORA_NATS_RECONNECT_SECONDS: String(reconnectSeconds), POPULORA_NATS_DRAIN_SECONDS: String(drainSeconds) });
/** What a process may take beyond a limit to end, on a loaded 2-core machine. */
const SLACK_MS = 15_000;

const servers: LocalNatsServer[] = [];
async function natsServer(port?: number): Promise<LocalNatsServer> {
  const server = await startLocalNatsServer([], 'nats-server', port);
  servers.push(server);
  return server;
}

afterEach(async () => {
  killWorkerProcesses();
  await Promise.all(servers.splice(0).map((s) => (s.resume(), s.stop())));
  vi.unstubAllEnvs();
});

/** `engines` engine workers e0, e1, … and one verifier worker, each a process; resolves once all serve. */
async function startWorkers(file: string, url: string, cluster: string, engines: number, env: Record<string, string>, ready = true): Promise<CliProcess[]> {
  const roles = [...Array.from({ length: engines }, (_, i) => ['--engine', '--id', `e${i}`]), ['--verifier', '--threads', '1']];
  const workers = roles.map((role) => spawnCli(['worker', file, '--nats', url, '--cluster', cluster, ...role], env));
  if (ready) await Promise.all(workers.map((w) => w.printed(/worker .*for scenario/)));
  return workers;
}

/**
 * A cluster of processes on a server of its own: one engine worker, one verifier worker and the coordinator
 * (`populora run --nats`), returned once the run has written checkpoint `step`.
 */
async function processCluster(cluster: string, env: Record<string, string>, step: number) {
  const server = await natsServer();
  const file = scenarioFile(1);
  const workers = await startWorkers(file, server.url, cluster, 1, env);
  const outDir = fresh();
  const coordinator = spawnCli(['run', file, '--out', outDir, '--nats', server.url, '--cluster', cluster], env);
  await until(() => existsSync(checkpointDir(outDir, step)), `the run reaches checkpoint ${step}`);
  return { server, file, workers, outDir, coordinator };
}

/** Every process has exited and no process has its pid any more (Node reaps a child when it exits). */
async function expectNoneLeft(processes: readonly CliProcess[]): Promise<void> {
  await Promise.all(processes.map((p) => p.exit));
  for (const p of processes) expect(alive(p.child.pid!), `pid ${p.child.pid} (${p.child.spawnargs.slice(2, 4).join(' ')})`).toBe(false);
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe.skipIf(!natsInstalled)('a cluster that fails cleanly', () => {
  let reference: string; // the run hash of the scenario in one process
  beforeAll(async () => {
    reference = (await runScenario(loadScenario(scenarioFile(1)), { outDir: fresh() })).hash;
  });

  /** The run folder resumes, in one process, to the one-process run; returns the step it resumed from. */
  async function expectResumable(outDir: string, file: string): Promise<number> {
    const resumed = await runScenario(loadScenario(file), { outDir, resume: true });
    expect(resumed.hash).toBe(reference);
    return STEPS - resumed.stepsRun;
  }

  it('server stopped and not restarted: every process gives it up after the reconnect limit, the run at its last checkpoint', async () => {
    const { server, file, workers, outDir, coordinator } = await processCluster('stopped', limits(3, 1.5), 1);
    const stoppedAt = performance.now();
    await server.stop();

    const all = [coordinator, ...workers];
    for (const p of all) {
      const { code, atMs } = await p.exit;
      expect(code, p.stderr()).toBe(EXIT_ABANDONED);
      expect(atMs - stoppedAt).toBeGreaterThanOrEqual(3000); // it gave the server the whole limit
      expect(atMs - stoppedAt).toBeLessThan(3000 + SLACK_MS);
      expect(p.stderr()).toMatch(new RegExp(`^lost the NATS server at ${escape(server.url)} at \\d\\d:\\d\\d:\\d\\d; reconnecting \\(every 0.25 s, backing off to 2 s\\) for up to 3 s \\(POPULORA_NATS_RECONNECT_SECONDS\\); (the coordinator|engine worker e0|verifier worker), (in hand: |nothing in hand)`, 'm'));
    }
    const gaveUp = new RegExp(`^populora: the NATS server at ${escape(server.url)} has been unreachable since \\d\\d:\\d\\d:\\d\\d, for 3 s, the limit \\(POPULORA_NATS_RECONNECT_SECONDS\\): `, 'm');
    const resume = coordinator.stderr().match(new RegExp(`${gaveUp.source}the run stops; its folder keeps its last checkpoint \\(step (\\d+) of ${STEPS}\\): continue it once the server is back with: populora run --resume ${escape(outDir)} --nats ${escape(server.url)} --cluster stopped$`, 'm'));
    expect(resume, coordinator.stderr()).not.toBeNull();
    expect(workers[0]!.stderr()).toMatch(new RegExp(`${gaveUp.source}engine worker e0 exits.*; start it again once the server is back$`, 'm'));
    expect(workers[1]!.stderr()).toMatch(new RegExp(`${gaveUp.source}verifier worker exits.*; start it again once the server is back$`, 'm'));
    await expectNoneLeft(all);
    expect(await expectResumable(outDir, file)).toBe(Number(resume![1]));
  });

  it('server stopped, then SIGTERM to every process: each stops within the drain limit, with work abandoned', async () => {
    const { server, file, workers, outDir, coordinator } = await processCluster('signalled', limits(60, 1.5), 1); // a reconnect limit no process waits out here
    await server.stop();
    const all = [coordinator, ...workers];
    await Promise.all(all.map((p) => p.printed(/^lost the NATS server/m)));
    await sleep(300); // the coordinator is inside a step, waiting for the server
    const signalledAt = performance.now();
    for (const p of all) p.child.kill('SIGTERM');
    const [verifier] = workers.slice(1); // signalled twice: it stops at once
    await verifier!.printed(/^SIGTERM: verifier worker stops taking requests/m);
    verifier!.child.kill('SIGTERM');
    expect((await verifier!.exit).code).toBe(EXIT_ABANDONED);
    expect(verifier!.stderr()).toMatch(/^SIGTERM again: verifier worker stops now$/m);

    for (const p of all.slice(0, 2)) {
      const { code, atMs } = await p.exit;
      expect(code, p.stderr()).toBe(EXIT_ABANDONED);
      expect(atMs - signalledAt).toBeGreaterThanOrEqual(1500);
      expect(atMs - signalledAt).toBeLessThan(1500 + SLACK_MS);
      expect(p.stderr()).toMatch(new RegExp(`^SIGTERM: the NATS server at ${escape(server.url)} has been unreachable since \\d\\d:\\d\\d:\\d\\d; waiting at most 1.5 s more for it \\(POPULORA_NATS_DRAIN_SECONDS\\), then stopping with what is in hand abandoned$`, 'm'));
    }
    const gaveUp = `^populora: SIGTERM, and the NATS server at ${escape(server.url)} has been unreachable since \\d\\d:\\d\\d:\\d\\d: gave up waiting for it after 1.5 s \\(POPULORA_NATS_DRAIN_SECONDS\\): `;
    const resume = coordinator.stderr().match(new RegExp(`${gaveUp}the run stops; its folder keeps its last checkpoint \\(step (\\d+) of ${STEPS}\\): continue it once the server is back with: populora run --resume ${escape(outDir)} --nats ${escape(server.url)} --cluster signalled$`, 'm'));
    expect(resume, coordinator.stderr()).not.toBeNull();
    expect(workers[0]!.stderr()).toMatch(/^SIGTERM: engine worker e0 stops taking requests/m);
    expect(workers[0]!.stderr()).toMatch(new RegExp(`${gaveUp}engine worker e0 exits`, 'm'));
    await expectNoneLeft(all);
    expect(await expectResumable(outDir, file)).toBe(Number(resume![1]));
  });

  it('server restarted mid-step: every process rides it out, and the run has the one-process hash', async () => {
    const server = await natsServer();
    const file = scenarioFile(2);
    const env = limits(30, 5);
    vi.stubEnv('POPULORA_NATS_RECONNECT_SECONDS', '30');
    const workers = await startWorkers(file, server.url, 'restarted', 2, env);
    const events: string[] = [];
    const remote = await clusterRunOptions(loadScenario(file), server.url, 'restarted', { onEvent: (e) => events.push(e) });
    let restarted: Promise<void> | null = null;
    const midStep = beforeEngineAt(2, async () => void (restarted = server.restart())); // not awaited: the step's requests meet it
    try {
      const run = await runScenario(loadScenario(file), { outDir: fresh(), transport: remote.transport, verifierPool: remote.verifierPool, engineCore: remote.engineCore, ...midStep });
      expect(run.hash).toBe(reference);
    } finally {
      await remote.close();
    }
    await restarted;
    expect(events.join('\n')).toMatch(new RegExp(`^lost the NATS server at ${escape(server.url)} at .* for up to 30 s .*\\nreconnected to the NATS server at ${escape(server.url)} after [\\d.]+ s; carrying on$`, 'm'));
    for (const w of workers) {
      expect(w.stderr()).toMatch(/^reconnected to the NATS server/m); // still serving: it rode the restart out
      w.child.kill('SIGTERM');
    }
    for (const w of workers) {
      expect((await w.exit).code, w.stderr()).toBe(0);
      expect(w.stderr()).toMatch(/stopped cleanly: every request it took was answered$/m);
    }
    await expectNoneLeft(workers);
  });

  it('a worker SIGKILLed during its drain: its shard moves to the other worker, and the run has the one-process hash', async () => {
    const server = await natsServer();
    const file = scenarioFile(2);
    const workers = await startWorkers(file, server.url, 'drain-killed', 2, limits(30, 5));
    const spare = spawnCli(['worker', file, '--nats', server.url, '--cluster', 'drain-killed', '--verifier', '--threads', '1'], limits(30, 1));
    await spare.printed(/worker .*for scenario/);
    const [e0] = workers;
    const events: string[] = [];
    const remote = await clusterRunOptions(loadScenario(file), server.url, 'drain-killed', { onEvent: (e) => events.push(e) });
    // A frozen server confirms no drain: e0 is surely inside its own (for up to its 5 s limit) when killed, and the
    // spare verifier worker gives its drain up after its 1 s limit.
    const killInDrain = async () => {
      await server.pause();
      try {
        e0!.child.kill('SIGTERM');
        spare.child.kill('SIGTERM');
        await e0!.printed(/^SIGTERM: engine worker e0 stops taking requests/m, 10_000);
        e0!.child.kill('SIGKILL');
        const end = await e0!.exit;
        expect(end.signal, `${end.code} ${e0!.stderr()}`).toBe('SIGKILL');
        const spareEnd = await spare.exit;
        expect(spareEnd.code, `${spareEnd.signal} ${spare.stderr()}`).toBe(EXIT_ABANDONED);
        expect(spare.stderr()).toMatch(new RegExp(`^populora: SIGTERM: the NATS server at ${escape(server.url)} did not confirm verifier worker's drain within 1 s \\(POPULORA_NATS_DRAIN_SECONDS\\)`, 'm'));
      } finally {
        server.resume();
      }
    };
    try {
      const run = await runScenario(loadScenario(file), { outDir: fresh(), transport: remote.transport, verifierPool: remote.verifierPool, engineCore: remote.engineCore, ...beforeEngineAt(3, killInDrain) });
      expect(run.hash).toBe(reference);
    } finally {
      await remote.close();
    }
    expect(events.join('\n')).toMatch(/engine worker e0 lost .*shard 0 .* goes to e1/);
    for (const w of workers.slice(1)) w.child.kill('SIGTERM');
    for (const w of workers.slice(1)) expect((await w.exit).code, w.stderr()).toBe(0);
    await expectNoneLeft([...workers, spare]);
  });

  it('the coordinator SIGKILLed and resumed, with the workers left running: the one-process hash', async () => {
    const env = limits(30, 5);
    const { server, workers, outDir, coordinator: first } = await processCluster('resumed', env, 2);
    first.child.kill('SIGKILL');
    expect((await first.exit).signal).toBe('SIGKILL');

    const resumed = spawnCli(['run', '--resume', outDir, '--nats', server.url, '--cluster', 'resumed'], env);
    expect((await resumed.exit).code, resumed.stderr()).toBe(0);
    expect(resumed.stdout()).toMatch(/^resuming faults: 12 steps/m);
    expect(JSON.parse(readFileSync(join(outDir, 'summary.json'), 'utf8')).hash).toBe(reference);
    for (const w of workers) w.child.kill('SIGTERM');
    for (const w of workers) expect((await w.exit).code, w.stderr()).toBe(0);
    await expectNoneLeft([first, resumed, ...workers]);
  });

  it('a worker started before its server exists waits for it, then serves; one whose server never comes gives up', async () => {
    const file = scenarioFile(1);
    const [port, nowhere] = [await freePort(), await freePort()];
    const url = `nats://127.0.0.1:${port}`;
    const workers = await startWorkers(file, url, 'early', 1, limits(30, 5), false);
    for (const w of workers) await w.printed(new RegExp(`^waiting for the NATS server at ${escape(url)} \\(connection refused\\); trying again \\(every 0.25 s, backing off to 2 s\\) for up to 30 s \\(POPULORA_NATS_RECONNECT_SECONDS\\)$`, 'm'));
    const lonely = spawnCli(['worker', file, '--nats', `nats://127.0.0.1:${nowhere}`, '--verifier', '--threads', '1'], limits(1, 1));

    await natsServer(port);
    await Promise.all(workers.map((w) => w.printed(/worker .*for scenario/)));
    const remote = await clusterRunOptions(loadScenario(file), url, 'early');
    try {
      const run = await runScenario(loadScenario(file), { outDir: fresh(), transport: remote.transport, verifierPool: remote.verifierPool, engineCore: remote.engineCore } satisfies RunOptions);
      expect(run.hash).toBe(reference);
    } finally {
      await remote.close();
    }
    for (const w of workers) w.child.kill('SIGTERM');
    for (const w of workers) expect((await w.exit).code, w.stderr()).toBe(0);

    expect((await lonely.exit).code).toBe(EXIT_ABANDONED);
    expect(lonely.stderr()).toMatch(new RegExp(`^populora: no NATS server answers at nats://127.0.0.1:${nowhere} after [\\d.]+ s \\(connection refused; the limit: POPULORA_NATS_RECONNECT_SECONDS\\): start nats-server there, or check the URL$`, 'm'));
    await expectNoneLeft([...workers, lonely]);
  });
});
