// What making the run folder durable costs: the time a run spends in fsync (the event log at every step, a
// checkpoint's files and folders before its rename, metrics.jsonl before each checkpoint) and in writing, per step
// and against the step's wall time. The quick start's population (8 members) on the tiny preset, checkpointed at
// every step (the most syncing a scenario asks for). The syncs are timed inside the run's injected disk, each
// attributed to the file it syncs. Prints a table; writes JSON.
//
//   node dist/bench/run-folder.js [--backend cpu|webgpu] [--steps 10] [--checkpoint-every 1] [--dir DIR] [--out bench/results/run-folder.json]

import { mkdirSync, mkdtempSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { benchArgs } from './args.js';
import { openBackend, type BackendChoice } from '../src/backend/select.js';
import { nodeDisk, type Disk } from '../src/runtime/durable.js';
import { runScenario } from '../src/sim/run.js';
import { parseScenario } from '../src/scenario/scenario.js';

const args = benchArgs(import.meta.url, { options: { backend: { type: 'string', default: 'cpu' }, steps: { type: 'string', default: '10' }, 'checkpoint-every': { type: 'string', default: '1' }, dir: { type: 'string', default: tmpdir() }, out: { type: 'string', default: 'bench/results/run-folder.json' } } });
const steps = Number(args.steps);
const scenario = parseScenario(
  `name: bench-run-folder
seed: 1
steps: ${steps}
model: { preset: tiny, seed: 0 }
population: { subpopulations: 2, teachers: 2, students: 2, lora: { rank: 8, modules: [q_proj, v_proj, up_proj, down_proj] } }
tasks: { perTeacher: 2 }
matchmaking: { policy: cross, studentsPerTask: 2 }
sampling: { answersPerStudent: 4, maxTokens: 24 }
evolution: { every: 4, fraction: 0.25 }
checkpointEvery: ${Number(args['checkpoint-every'])}
`,
  'bench-run-folder',
);

type Kind = 'log' | 'metrics' | 'checkpoint' | 'other';
const kindOf = (path: string): Kind => (path.endsWith('events.msgpack') ? 'log' : path.endsWith('metrics.jsonl') ? 'metrics' : path.includes('/checkpoints') ? 'checkpoint' : 'other');
const syncs = { log: { ms: 0, calls: 0 }, metrics: { ms: 0, calls: 0 }, checkpoint: { ms: 0, calls: 0 }, other: { ms: 0, calls: 0 } };
const written = { ms: 0, bytes: 0 };
const checkpoints = new Set<string>(); // the checkpoints whose files were synced
const timedDisk: Disk = {
  write: (fd, bytes, offset, length) => {
    const start = performance.now();
    const n = nodeDisk.write(fd, bytes, offset, length);
    written.ms += performance.now() - start;
    written.bytes += n;
    return n;
  },
  fsync: (fd) => {
    const path = readlinkSync(`/proc/self/fd/${fd}`);
    const kind = kindOf(path);
    const checkpoint = /step-\d+\.partial/.exec(path)?.[0];
    if (checkpoint) checkpoints.add(checkpoint);
    const start = performance.now();
    nodeDisk.fsync(fd);
    syncs[kind].ms += performance.now() - start;
    syncs[kind].calls++;
  },
};

const backend = await openBackend(args.backend as BackendChoice);
mkdirSync(args.dir!, { recursive: true });
const outDir = mkdtempSync(join(args.dir!, 'populora-bench-run-folder-'));
let stepStart = performance.now();
let totalMs = 0;
try {
  await runScenario(scenario, {
    outDir,
    backend,
    disk: timedDisk,
    onStart: () => (stepStart = performance.now()),
    onStep: () => {
      totalMs += performance.now() - stepStart;
      stepStart = performance.now();
    },
  });
  const syncMs = Object.values(syncs).reduce((n, s) => n + s.ms, 0);
  const row = {
    backend: backend.deviceDescription,
    folder: args.dir,
    steps,
    checkpointEvery: scenario.checkpointEvery,
    msPerStep: totalMs / steps,
    fsyncMsPerStep: syncMs / steps,
    fsyncShare: syncMs / totalMs,
    logFsyncMsPerStep: syncs.log.ms / steps,
    checkpoints: checkpoints.size,
    checkpointFsyncMsPerCheckpoint: syncs.checkpoint.ms / checkpoints.size,
    checkpointFsyncsPerCheckpoint: syncs.checkpoint.calls / checkpoints.size,
    metricsFsyncMsPerStep: syncs.metrics.ms / steps,
    writeMsPerStep: written.ms / steps,
    bytesWrittenPerStep: written.bytes / steps,
  };
  const ms = (x: number) => x.toFixed(2);
  console.log('| backend | ms/step | fsync ms/step (share) | log fsync ms/step | checkpoint fsync ms (calls) each | metrics fsync ms/step | write ms/step | bytes/step |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  console.log(`| ${row.backend} | ${row.msPerStep.toFixed(0)} | ${ms(row.fsyncMsPerStep)} (${(100 * row.fsyncShare).toFixed(1)}%) | ${ms(row.logFsyncMsPerStep)} | ${ms(row.checkpointFsyncMsPerCheckpoint)} (${row.checkpointFsyncsPerCheckpoint.toFixed(0)}) | ${ms(row.metricsFsyncMsPerStep)} | ${ms(row.writeMsPerStep)} | ${row.bytesWrittenPerStep.toFixed(0)} |`);
  mkdirSync(dirname(args.out!), { recursive: true });
  writeFileSync(args.out!, `${JSON.stringify(row, null, 2)}\n`);
} finally {
  rmSync(outDir, { recursive: true, force: true });
  backend.destroy();
}
