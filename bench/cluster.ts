// The cluster on this machine's loopback (issue 20): one scenario (default scenarios/quickstart.yaml, on its own
// backend or --backend's) run in one process, and over a local nats-server in five settings that add one part at a
// time: the actors' messages alone; a verifier worker; one engine worker in the coordinator's process (the trips
// and copies without a second process); one engine worker in a process of its own (the whole cluster); two. Each
// worker but the in-process one is `populora worker` in a process of its own. Rounds alternate the settings (the
// machine is shared and noisy). Per setting: steps/min and the median step, the messages and bytes per step
// through the coordinator's connection; and what going over NATS costs, 1 - (one-process step / whole-cluster
// step), the transport's share of a step. Every run must give the same run hash. Prints a table; writes JSON.
//
//   node dist/bench/cluster.js [--scenario scenarios/quickstart.yaml] [--backend cpu|webgpu] [--steps 6] [--rounds 3] [--out bench/results/cluster.json]

import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { benchArgs } from './args.js';
import { clusterRunOptions } from '../src/cli/cluster-options.js';
import { openBackend } from '../src/backend/select.js';
import { startEngineWorker } from '../src/cluster/engine-worker.js';
import { startLocalNatsServer, startWorkerProcess } from '../src/cluster/local-server.js';
import { connectNats, subjects } from '../src/cluster/nats.js';
import { scenarioHash } from '../src/cluster/scenario-hash.js';
import { loadScenario } from '../src/scenario/scenario.js';
import { runScenario, type RunOptions } from '../src/sim/run.js';

const args = benchArgs(import.meta.url, { options: { scenario: { type: 'string', default: 'scenarios/quickstart.yaml' }, steps: { type: 'string', default: '6' }, backend: { type: 'string' }, rounds: { type: 'string', default: '3' }, out: { type: 'string', default: 'bench/results/cluster.json' } } });
const steps = Number(args.steps);
const rounds = Number(args.rounds);
const dir = mkdtempSync(join(tmpdir(), 'populora-bench-cluster-'));
const cli = join(import.meta.dirname, '..', 'src', 'cli', 'main.js');

/** The scenario, `steps` long (on --backend, if given), with `engineWorkers` engine workers (0: the engine in the coordinator). */
function scenarioFile(engineWorkers: number): string {
  let text = readFileSync(args.scenario, 'utf8').replace(/^steps: .*$/m, `steps: ${steps}`).replace(/^checkpointEvery: .*$/m, '');
  if (args.backend) text = text.replace(/^backend: .*$/m, `backend: ${args.backend}`);
  const file = join(dir, `engines-${engineWorkers}.yaml`);
  writeFileSync(file, `${text}\ncluster: { engineWorkers: ${engineWorkers} }\n`);
  return file;
}

const startWorker = (file: string, url: string, cluster: string, role: string[]) => startWorkerProcess(cli, file, url, cluster, role);

interface Measured {
  setting: string;
  hash: string;
  stepMsMedian: number;
  stepsPerMin: number;
  messagesPerStep: number | null;
  bytesPerStep: number | null;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** One run: step times from the first step's start, the coordinator's traffic over those steps. */
async function measure(setting: string, file: string, options: Partial<RunOptions>, stats: () => { msgs: number; bytes: number } | null): Promise<Measured> {
  const marks: number[] = [];
  let before: { msgs: number; bytes: number } | null = null;
  const result = await runScenario(loadScenario(file), {
    outDir: mkdtempSync(join(dir, 'run-')),
    onStart: () => {
      before = stats();
      marks.push(performance.now());
    },
    onStep: () => marks.push(performance.now()),
    ...options,
  });
  const after = stats();
  const stepMs = marks.slice(1).map((t, i) => t - marks[i]!);
  const perStep = (key: 'msgs' | 'bytes') => (before && after ? (after[key] - before[key]) / steps : null);
  return { setting, hash: result.hash, stepMsMedian: median(stepMs), stepsPerMin: (steps * 60_000) / (marks.at(-1)! - marks[0]!), messagesPerStep: perStep('msgs'), bytesPerStep: perStep('bytes') };
}

/**
 * What goes over NATS: the actors' messages always; the verifier's jobs when `verifier`; the engine's with `engines`
 * > 0, on worker processes, or on one worker in this process (`inProcess`: the trips and the copies without a
 * second process).
 */
async function overNats(setting: string, engines: number, verifier: boolean, url: string, round: number, inProcess = false): Promise<Measured> {
  const file = scenarioFile(engines);
  const cluster = `bench-${round}-${engines}-${verifier}-${inProcess}`;
  const workers: ChildProcess[] = [];
  const local = inProcess ? await localEngineWorker(file, url, cluster) : null;
  for (let e = 0; e < engines && !inProcess; e++) workers.push(await startWorker(file, url, cluster, ['--engine', '--id', `engine-${e}`]));
  if (verifier) workers.push(await startWorker(file, url, cluster, ['--verifier', '--threads', '1']));
  const remote = await clusterRunOptions(loadScenario(file), url, cluster);
  try {
    const stats = () => {
      const s = remote.connection.stats();
      return { msgs: s.inMsgs + s.outMsgs, bytes: s.inBytes + s.outBytes };
    };
    const { transport, verifierPool, engineCore } = remote;
    return await measure(setting, file, { transport, ...(verifier ? { verifierPool } : {}), engineCore }, stats);
  } finally {
    await remote.close();
    await Promise.all(workers.map(stopWorker));
    await local?.close();
  }
}

/** An engine worker in this process, on its own connection and backend. */
async function localEngineWorker(file: string, url: string, cluster: string) {
  const scenario = loadScenario(file);
  const nc = await connectNats(url);
  const worker = startEngineWorker(nc, subjects(cluster), { scenario, scenarioFile: file, scenarioHash: scenarioHash(scenario), backend: await openBackend(scenario.backend), id: 'local' });
  await nc.flush();
  return { close: async () => (await worker.close(), await nc.close()) };
}

/** SIGTERM, and SIGKILL if the worker has not exited 10 s later. */
async function stopWorker(child: ChildProcess): Promise<void> {
  const exited = new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(10_000).then(() => child.kill('SIGKILL'))]);
  await exited;
}

const server = await startLocalNatsServer();
const rows: Measured[][] = [];
try {
  for (let round = 0; round < rounds; round++) {
    const measured: Measured[] = [await measure('one process', scenarioFile(0), {}, () => null)];
    measured.push(await overNats('NATS: actors\' messages only', 0, false, server.url, round));
    measured.push(await overNats('NATS: + 1 verifier worker', 0, true, server.url, round));
    measured.push(await overNats('NATS: + 1 engine worker in the coordinator\'s process', 1, true, server.url, round, true));
    measured.push(await overNats('NATS: + 1 engine worker (the whole cluster)', 1, true, server.url, round));
    measured.push(await overNats('NATS: + 2 engine workers', 2, true, server.url, round));
    rows.push(measured);
    console.error(`round ${round + 1}/${rounds}: ${rows.at(-1)!.map((m) => `${m.setting} ${m.stepMsMedian.toFixed(0)} ms/step`).join(', ')}`);
  }
} finally {
  await server.stop();
}

const hashes = new Set(rows.flat().map((m) => m.hash));
if (hashes.size !== 1) throw new Error(`the settings gave different run hashes: ${[...hashes].join(', ')}`);
const shares = rows.map((round) => 1 - round[0]!.stepMsMedian / round[4]!.stepMsMedian); // the whole cluster with one engine worker
const settings = rows[0]!.map((_, s) => {
  const of = rows.map((round) => round[s]!);
  return { setting: of[0]!.setting, stepMsMedian: median(of.map((m) => m.stepMsMedian)), stepsPerMin: median(of.map((m) => m.stepsPerMin)), messagesPerStep: of[0]!.messagesPerStep, bytesPerStep: of[0]!.bytesPerStep };
});
const table = [
  '| setting | ms/step (median) | steps/min | coordinator messages/step | coordinator bytes/step |',
  '|---|---|---|---|---|',
  ...settings.map((s) => `| ${s.setting} | ${s.stepMsMedian.toFixed(0)} | ${s.stepsPerMin.toFixed(1)} | ${s.messagesPerStep?.toFixed(0) ?? '—'} | ${s.bytesPerStep === null ? '—' : `${(s.bytesPerStep / 1024).toFixed(0)} KiB`} |`),
];
const backend = loadScenario(scenarioFile(0)).backend;
console.log(`${args.scenario}, ${steps} steps, backend ${backend}, ${cpus().length} cores, ${rounds} alternating rounds; run hash ${[...hashes][0]!.slice(0, 16)} in every run\n`);
console.log(table.join('\n'));
console.log(`\ntransport's share of a step (1 - one process / the whole cluster with 1 engine worker), per round: ${shares.map((s) => `${(100 * s).toFixed(1)}%`).join(', ')}; median ${(100 * median(shares)).toFixed(1)}%`);
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, `${JSON.stringify({ scenario: args.scenario, backend, steps, rounds, cores: cpus().length, hash: [...hashes][0], settings, transportShareMedian: median(shares), transportSharePerRound: shares, perRound: rows }, null, 2)}\n`);
console.log(`written: ${args.out}`);
