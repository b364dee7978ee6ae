// How long a cluster's processes take to stop, and what a server restart costs (issue 36), on this machine's
// loopback: a scenario (default scenarios/quickstart.yaml on the CPU backend, or --backend) with one engine worker
// and one verifier worker, every process the built CLI. Per round, on a fresh cluster and server each:
//   clean        the server there: SIGTERM to the coordinator (it finishes its step and checkpoints: exit 143),
//                then to each worker (it answers what it holds and drains: exit 0)
//   server away  the server stopped, then SIGTERM to every process: each gives the server up after the drain
//                limit (--drain seconds: exit 75)
//   server gone  the server stopped, no signal: each gives it up after the reconnect limit (--reconnect: exit 75)
//   restart      the server restarted in the middle of a step of a run with an in-process coordinator: that
//                step's time against the median of the others (the run's hash must be unchanged)
// Per process and fault: ms from the signal (or the server's stop) to the exit, the exit code, and for the limits
// the time past the limit. Prints a table; writes JSON.
//
//   node dist/bench/cluster-stops.js [--scenario scenarios/quickstart.yaml] [--backend cpu] [--rounds 3] [--drain 2] [--reconnect 5] [--out bench/results/cluster-stops.json]

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { benchArgs, BenchUsageError } from './args.js';
import { clusterRunOptions } from '../src/cli/cluster-options.js';
import { startLocalNatsServer } from '../src/cluster/local-server.js';
import { loadScenario } from '../src/scenario/scenario.js';
import { checkpointDir } from '../src/sim/checkpoints.js';
import { runScenario } from '../src/sim/run.js';

const args = benchArgs(import.meta.url, { options: { scenario: { type: 'string', default: 'scenarios/quickstart.yaml' }, backend: { type: 'string', default: 'cpu' }, rounds: { type: 'string', default: '3' }, drain: { type: 'string', default: '2' }, reconnect: { type: 'string', default: '5' }, out: { type: 'string', default: 'bench/results/cluster-stops.json' } } });
const positive = (name: string, text: string) => {
  const value = Number(text);
  if (!(value > 0)) throw new BenchUsageError(`--${name}: "${text}" is not a positive number`);
  return value;
};
const [rounds, drainSeconds, reconnectSeconds] = [positive('rounds', args.rounds), positive('drain', args.drain), positive('reconnect', args.reconnect)];
const env = { ...process.env, POPULORA_NATS_DRAIN_SECONDS: String(drainSeconds), POPULORA_NATS_RECONNECT_SECONDS: String(reconnectSeconds) };
const dir = mkdtempSync(join(tmpdir(), 'populora-bench-stops-'));
const cli = join(import.meta.dirname, '..', 'src', 'cli', 'main.js');
const STEPS = 40; // more than any fault here lets a run finish

const file = join(dir, 'scenario.yaml');
const text = readFileSync(args.scenario, 'utf8').replace(/^steps: .*$/m, `steps: ${STEPS}`).replace(/^checkpointEvery: .*$/m, '').replace(/^backend: .*$/m, `backend: ${args.backend}`);
writeFileSync(file, `${text}\ncheckpointEvery: 1\ncluster: { engineWorkers: 1, deadlineSeconds: 10 }\n`.replace(/^model: \{ path: (.*) \}$/m, (_, path: string) => `model: { path: ${join(process.cwd(), path)} }`));

interface Process {
  role: string;
  child: ChildProcess;
  printed(pattern: RegExp): Promise<void>;
  exit: Promise<{ code: number | null; atMs: number }>;
}

function start(role: string, cliArgs: string[]): Process {
  const child = spawn('node', [cli, ...cliArgs], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let output = '';
  for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<{ code: number | null; atMs: number }>((resolve) => child.once('exit', (code) => resolve({ code, atMs: performance.now() })));
  const printed = async (pattern: RegExp) => {
    while (!pattern.test(output)) {
      if (child.exitCode !== null) throw new Error(`${role} exited before printing ${pattern}:\n${output}`);
      await sleep(20);
    }
  };
  return { role, child, printed, exit };
}

/** A server, an engine worker and a verifier worker serving, and (with `outDir`) the coordinator past checkpoint 1. */
async function cluster(name: string, outDir?: string) {
  const server = await startLocalNatsServer();
  const workers = [start('engine worker', ['worker', file, '--nats', server.url, '--cluster', name, '--engine', '--id', 'e0']), start('verifier worker', ['worker', file, '--nats', server.url, '--cluster', name, '--verifier', '--threads', '1'])];
  await Promise.all(workers.map((w) => w.printed(/worker .*for scenario/)));
  if (!outDir) return { server, workers, all: workers };
  const coordinator = start('coordinator', ['run', file, '--out', outDir, '--nats', server.url, '--cluster', name]);
  while (!existsSync(checkpointDir(outDir, 1))) await sleep(20);
  return { server, workers, all: [coordinator, ...workers] };
}

interface Stop {
  fault: string;
  role: string;
  ms: number;
  code: number | null;
  pastLimitMs: number | null;
}

async function stops(fault: string, processes: Process[], fromMs: number, limitMs: number | null): Promise<Stop[]> {
  return Promise.all(processes.map(async (p) => {
    const { code, atMs } = await p.exit;
    return { fault, role: p.role, ms: atMs - fromMs, code, pastLimitMs: limitMs === null ? null : atMs - fromMs - limitMs };
  }));
}

async function clean(round: number): Promise<Stop[]> {
  const { server, all } = await cluster(`clean-${round}`, mkdtempSync(join(dir, 'run-')));
  try {
    const [coordinator, ...workers] = all;
    const signalled = performance.now();
    coordinator!.child.kill('SIGTERM');
    const first = await stops('clean', [coordinator!], signalled, null);
    const workersSignalled = performance.now();
    for (const w of workers) w.child.kill('SIGTERM');
    return [...first, ...(await stops('clean', workers, workersSignalled, null))];
  } finally {
    await server.stop();
  }
}

async function serverLost(round: number, signal: boolean): Promise<Stop[]> {
  const { server, all } = await cluster(`${signal ? 'away' : 'gone'}-${round}`, mkdtempSync(join(dir, 'run-')));
  const stopped = performance.now();
  await server.stop();
  if (!signal) return stops('server gone', all, stopped, reconnectSeconds * 1000);
  await Promise.all(all.map((p) => p.printed(/^lost the NATS server/m)));
  const signalled = performance.now();
  for (const p of all) p.child.kill('SIGTERM');
  return stops('server away + SIGTERM', all, signalled, drainSeconds * 1000);
}

/** A run with the coordinator here, the server restarted as the engine's work of step 3 begins: the steps' times. */
async function restart(round: number): Promise<{ restartedStepMs: number; otherStepsMsMedian: number; hash: string }> {
  const name = `restart-${round}`;
  const { server, workers } = await cluster(name);
  const restartAt = 3;
  const marks: number[] = [];
  let restarted: Promise<void> | null = null;
  const remote = await clusterRunOptions(loadScenario(file), server.url, name, { onEvent: () => undefined });
  try {
    const result = await runScenario(loadScenario(file), {
      outDir: mkdtempSync(join(dir, 'run-')),
      stopAfterSteps: 8,
      transport: remote.transport,
      verifierPool: remote.verifierPool,
      engineCore: remote.engineCore,
      onStart: () => marks.push(performance.now()),
      onStep: () => marks.push(performance.now()),
      wrapService: (service) => (service.name !== 'engine' ? service : { name: service.name, hasPending: () => service.hasPending(), flush: (world) => ((restarted ??= world.step === restartAt ? server.restart() : null), service.flush(world)) }),
    });
    const stepMs = marks.slice(1).map((t, i) => t - marks[i]!);
    const others = stepMs.filter((_, step) => step !== restartAt).sort((a, b) => a - b);
    return { restartedStepMs: stepMs[restartAt]!, otherStepsMsMedian: others[Math.floor(others.length / 2)]!, hash: result.hash };
  } finally {
    await remote.close();
    await restarted;
    for (const w of workers) w.child.kill('SIGTERM');
    await Promise.all(workers.map((w) => w.exit));
    await server.stop();
  }
}

const load = loadavg()[0]!;
const all: Stop[] = [];
const restarts: Array<Awaited<ReturnType<typeof restart>>> = [];
for (let round = 0; round < rounds; round++) {
  all.push(...(await clean(round)), ...(await serverLost(round, true)), ...(await serverLost(round, false)));
  restarts.push(await restart(round));
  console.error(`round ${round + 1}/${rounds} done`);
}
const hashes = new Set(restarts.map((r) => r.hash));
if (hashes.size !== 1) throw new Error(`a restarted server changed the run: hashes ${[...hashes].join(', ')}`);

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const groups = [...new Set(all.map((s) => `${s.fault}|${s.role}`))].map((key) => {
  const [fault, role] = key.split('|') as [string, string];
  const of = all.filter((s) => s.fault === fault && s.role === role);
  const past = of.flatMap((s) => (s.pastLimitMs === null ? [] : [s.pastLimitMs]));
  return { fault, role, msMedian: median(of.map((s) => s.ms)), msMax: Math.max(...of.map((s) => s.ms)), codes: [...new Set(of.map((s) => s.code))], pastLimitMsMedian: past.length > 0 ? median(past) : null };
});
console.log(`${args.scenario} on ${args.backend}, 1 engine worker + 1 verifier worker, ${rounds} rounds, drain limit ${drainSeconds} s, reconnect limit ${reconnectSeconds} s; ${cpus().length} cores, load ${load.toFixed(1)}\n`);
console.log('| fault | process | ms to exit (median) | max | exit code | past the limit (median ms) |\n|---|---|---|---|---|---|');
for (const g of groups) console.log(`| ${g.fault} | ${g.role} | ${g.msMedian.toFixed(0)} | ${g.msMax.toFixed(0)} | ${g.codes.join(', ')} | ${g.pastLimitMsMedian === null ? '—' : g.pastLimitMsMedian.toFixed(0)} |`);
console.log(`\nserver restarted mid-step: that step ${restarts.map((r) => r.restartedStepMs.toFixed(0)).join(', ')} ms against a median ${restarts.map((r) => r.otherStepsMsMedian.toFixed(0)).join(', ')} ms of the others (per round); the run hash ${[...hashes][0]!.slice(0, 16)} every time`);
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, `${JSON.stringify({ scenario: args.scenario, backend: args.backend, rounds, drainSeconds, reconnectSeconds, cores: cpus().length, load, stops: groups, restarts, perStop: all }, null, 2)}\n`);
console.log(`written: ${args.out}`);
