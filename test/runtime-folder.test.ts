// The run folder defends itself: writes that are whole or fail the run (short writes and a full disk injected
// through the run's disk), one run per folder, checkpoints checked against their manifests, resumes that verify
// the log, the scenario and the metrics they continue, replays that check every file, exports that are whole or
// absent, and a stop on a signal that a resume continues. Each damage is made at a chosen place, and what the
// runtime says is held against what the test knows it did.
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadPeftAdapter } from '../src/model/peft.js';
import { nodeDisk, type Disk } from '../src/runtime/durable.js';
import { readEventLog } from '../src/runtime/event-log.js';
import { exportPopulation } from '../src/sim/export.js';
import { planMembers } from '../src/sim/population.js';
import { replayRun } from '../src/sim/replay.js';
import { runScenario, type RunOptions } from '../src/sim/run.js';
import { parseScenario, type Scenario } from '../src/scenario/scenario.js';

const text = `
name: folder
seed: 5
steps: 3
backend: cpu
model: { preset: tiny, seed: 1 }
population: { subpopulations: 2, teachers: 1, students: 1, lora: { rank: 4 } }
tasks: { perTeacher: 1, types: [deduce, abduce] }
matchmaking: { policy: cross, studentsPerTask: 1 }
sampling: { answersPerStudent: 2, maxTokens: 16 }
evolution: { every: 2, fraction: 0.5 }
checkpointEvery: 1
`;
const scenario = parseScenario(text, 'folder.yaml');
const fresh = () => join(mkdtempSync(join(tmpdir(), 'populora-folder-')), 'run');
const run = (options: Partial<RunOptions> & { outDir: string }, s: Scenario = scenario) => runScenario(s, options);
const copyOf = (dir: string) => {
  const copy = fresh();
  cpSync(dir, copy, { recursive: true });
  return copy;
};
const flipByte = (file: string, at: number) => {
  const bytes = readFileSync(file);
  bytes[at] = bytes[at]! ^ 0x01;
  writeFileSync(file, bytes);
};
const ENOSPC = () => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });

/** A disk that runs full on the first write to a file whose path `isVictim` picks, after writing `partBytes` of it. */
function fullDiskFor(isVictim: (path: string) => boolean, partBytes = 0): Disk & { failed: string | null } {
  const disk = {
    failed: null as string | null,
    write(fd: number, bytes: Uint8Array, offset: number, length: number): number {
      const path = readlinkSync(`/proc/self/fd/${fd}`);
      if (disk.failed === null && isVictim(path)) {
        disk.failed = path;
        if (partBytes > 0) return writeSync(fd, bytes, offset, Math.min(partBytes, length)); // the next write finds the disk full
      }
      if (disk.failed === path) throw ENOSPC();
      return writeSync(fd, bytes, offset, length);
    },
    fsync: nodeDisk.fsync,
  };
  return disk;
}

/** The uninterrupted run every other is held against, and a copy of it crashed after two of its three steps. */
let reference: { dir: string; hash: string; metrics: string; summary: string };
let crashed: string;
beforeAll(async () => {
  const dir = fresh();
  const result = await run({ outDir: dir });
  reference = { dir, hash: result.hash, metrics: readFileSync(join(dir, 'metrics.jsonl'), 'utf8'), summary: readFileSync(join(dir, 'summary.json'), 'utf8') };
  crashed = fresh();
  expect((await run({ outDir: crashed, stopAfterSteps: 2 })).stepsRun).toBe(2);
});

/** Resumes `dir` and checks that it ends as the uninterrupted run did. */
async function resumesToReference(dir: string, options: Partial<RunOptions> = {}) {
  const resumed = await run({ outDir: dir, resume: true, ...options });
  expect(resumed.hash).toBe(reference.hash);
  expect(readFileSync(join(dir, 'metrics.jsonl'), 'utf8')).toBe(reference.metrics);
  expect(readFileSync(join(dir, 'summary.json'), 'utf8')).toBe(reference.summary);
  return resumed;
}

describe('writes into a run folder', () => {
  it('complete a short write: every write of the run cut to 100 bytes still gives the uninterrupted run', async () => {
    let writes = 0;
    const short: Disk = { write: (fd, bytes, offset, length) => (writes++, writeSync(fd, bytes, offset, Math.min(length, 100))), fsync: nodeDisk.fsync };
    const dir = fresh();
    expect((await run({ outDir: dir, disk: short })).hash).toBe(reference.hash);
    expect(writes).toBeGreaterThan(100);
    expect(readFileSync(join(dir, 'metrics.jsonl'), 'utf8')).toBe(reference.metrics);
    expect(await replayRun(dir)).toMatchObject({ identical: true });
  });

  it('fail the run at once when the disk fills during a step\'s flush, saying so and how to resume; the resume ends as the uninterrupted run', async () => {
    const dir = fresh();
    let flushes = 0;
    // The log's third flush (step 2) writes 20 bytes, then the disk is full; every later write would succeed.
    const disk = fullDiskFor((path) => path.endsWith('events.msgpack') && ++flushes === 3, 20);
    await expect(run({ outDir: dir, disk })).rejects.toThrow(`${join(dir, 'events.msgpack')}: the disk is full (ENOSPC: no space left on device, write); free some space, then continue the run from its last checkpoint with: populora run --resume ${dir}`);
    expect(readEventLog(join(dir, 'events.msgpack')).tornTailBytes).toBe(0); // the 20 bytes were taken back
    expect(existsSync(join(dir, 'summary.json'))).toBe(false);
    await resumesToReference(dir);
  });

  it('fail the run when the disk fills while a checkpoint is written, leaving the previous checkpoint as the newest', async () => {
    const dir = fresh();
    const disk = fullDiskFor((path) => path.endsWith(join('step-2.partial', 'state.msgpack')));
    await expect(run({ outDir: dir, disk })).rejects.toThrow(/step-2\.partial\/state\.msgpack: the disk is full .*populora run --resume/);
    expect(readdirSync(join(dir, 'checkpoints'))).toEqual(['step-1']);
    await resumesToReference(dir);
  });

  it('are synced where a power loss would otherwise lose them: the log at every step, a checkpoint\'s files and the metrics before its rename', async () => {
    const dir = fresh();
    const synced: string[] = [];
    const recording: Disk = { write: nodeDisk.write, fsync: (fd) => (synced.push(readlinkSync(`/proc/self/fd/${fd}`)), nodeDisk.fsync(fd)) };
    await run({ outDir: dir, disk: recording });
    const indexOf = (path: string, from = 0) => synced.indexOf(path, from);
    for (const step of [1, 2, 3]) {
      const partial = join(dir, 'checkpoints', `step-${step}.partial`);
      const files = readdirSync(join(dir, 'checkpoints', `step-${step}`), { recursive: true }).map((f) => join(partial, String(f)));
      const renamed = synced.findIndex((path, i) => path === join(dir, 'checkpoints') && i > indexOf(partial)); // the sync after the rename
      expect(renamed, `checkpoint ${step}`).toBeGreaterThan(0);
      for (const file of files) expect(indexOf(file), file).toBeGreaterThanOrEqual(0); // every file and member folder
      expect(Math.max(...files.map((f) => indexOf(f)), indexOf(partial))).toBeLessThan(renamed);
      const previousCheckpoint = synced.lastIndexOf(join(dir, 'checkpoints'), renamed - 1);
      expect(synced.lastIndexOf(join(dir, 'metrics.jsonl'), renamed), `metrics before checkpoint ${step}`).toBeGreaterThan(previousCheckpoint);
    }
    expect(synced.filter((path) => path === join(dir, 'events.msgpack')).length).toBeGreaterThanOrEqual(3); // one per step at least
  });

  it('fail the run when the disk fills while metrics.jsonl is written', async () => {
    const dir = fresh();
    const disk = fullDiskFor((path) => path.endsWith('metrics.jsonl'), 3);
    await expect(run({ outDir: dir, disk })).rejects.toThrow(/metrics\.jsonl: the disk is full/);
    expect(readFileSync(join(dir, 'metrics.jsonl'), 'utf8')).toBe(''); // the 3 bytes were taken back
  });
});

describe('one run per folder', () => {
  it('refuses a second run into a folder while the first runs, naming it, even with overwrite; the first finishes untouched', async () => {
    const dir = fresh();
    const first = run({ outDir: dir });
    const holder = new RegExp(`^${dir} is in use by populora \\(pid ${process.pid} on `);
    await expect(run({ outDir: dir, overwrite: true })).rejects.toThrow(holder);
    await expect(run({ outDir: dir, resume: true })).rejects.toThrow(holder);
    expect((await first).hash).toBe(reference.hash);
    expect(existsSync(join(dir, 'run.lock'))).toBe(false); // released
    expect(await replayRun(dir)).toMatchObject({ identical: true });
  });

  it('takes over the lock of a process that is gone, and refuses one held on another host', async () => {
    const dir = fresh();
    mkdirSync(dir, { recursive: true });
    const gone = spawnSync(process.execPath, ['-e', '0']).pid!; // exited: its pid names no process
    writeFileSync(join(dir, 'run.lock'), JSON.stringify({ pid: gone, host: hostname(), command: 'populora run' }));
    expect((await run({ outDir: dir, overwrite: true }, { ...scenario, steps: 1 })).stepsRun).toBe(1);
    writeFileSync(join(dir, 'run.lock'), JSON.stringify({ pid: gone, host: 'elsewhere', command: 'populora run x.yaml' }));
    await expect(run({ outDir: dir, overwrite: true })).rejects.toThrow(`${dir} is in use by populora (pid ${gone} on elsewhere: populora run x.yaml)`);
  });

  it('takes over a lock whose pid now names another process (pid reuse: its start time differs)', async () => {
    const dir = fresh();
    mkdirSync(dir, { recursive: true });
    const reused = { pid: process.pid, host: hostname(), command: 'populora run', started: '1' }; // this pid, started at boot + 1 tick
    writeFileSync(join(dir, 'run.lock'), JSON.stringify(reused));
    expect((await run({ outDir: dir, overwrite: true }, { ...scenario, steps: 1 })).stepsRun).toBe(1);
  });

  it('lets exactly one of many processes racing for a stale lock take it; the others name the winner', async () => {
    const lockModule = join(process.cwd(), 'dist/src/runtime/run-lock.js');
    for (let round = 0; round < 3; round++) {
      const dir = fresh();
      mkdirSync(dir, { recursive: true });
      const gone = spawnSync(process.execPath, ['-e', '0']).pid!;
      writeFileSync(join(dir, 'run.lock'), JSON.stringify({ pid: gone, host: hostname(), command: 'populora run' }));
      const startAt = Date.now() + 1500; // every child spins until then, so their attempts overlap
      const child = `const { acquireRunLock } = await import(${JSON.stringify(lockModule)});
        while (Date.now() < ${startAt});
        try { const lock = acquireRunLock(${JSON.stringify(dir)}); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500); lock.release(); console.log('won'); }
        catch (error) { console.log(error.message); }`;
      const outputs = await Promise.all(Array.from({ length: 6 }, () => new Promise<{ pid: number; text: string }>((done) => {
        const p = spawn(process.execPath, ['--input-type=module', '-e', child]);
        let text = '';
        p.stdout.on('data', (d) => (text += d));
        p.on('close', () => done({ pid: p.pid!, text: text.trim() }));
      })));
      const winners = outputs.filter((o) => o.text === 'won');
      expect(winners).toHaveLength(1);
      for (const loser of outputs.filter((o) => o.text !== 'won')) expect(loser.text).toMatch(new RegExp(`^${dir} is in use by populora \\(pid ${winners[0]!.pid} on `));
      expect(readdirSync(dir)).toEqual([]); // the winner released; no guard or own file left behind
    }
  });

  it('refuses an --out that is a file', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'populora-folder-')), 'a-file');
    writeFileSync(file, 'not a folder');
    await expect(run({ outDir: file })).rejects.toThrow(`${file} is a file, not a folder`);
  });
});

describe('a resume', () => {
  it('verifies the checkpoint: a flipped byte in state.msgpack or in an adapter is named, with the checkpoint to fall back to', async () => {
    for (const file of ['state.msgpack', join('teacher-1-0', 'adapter_model.safetensors')]) {
      const dir = copyOf(crashed);
      const damaged = join(dir, 'checkpoints', 'step-2', file);
      flipByte(damaged, 200);
      await expect(run({ outDir: dir, resume: true })).rejects.toThrow(`${damaged} does not match its checksum in manifest.json: the file is damaged. To go on from the checkpoint before it (step 1), delete ${join(dir, 'checkpoints', 'step-2')}`);
      rmSync(join(dir, 'checkpoints', 'step-2'), { recursive: true }); // as the message says
      await resumesToReference(dir);
    }
  });

  it('verifies the log against the checkpoint: records lost before it are named, never resumed over', async () => {
    const dir = copyOf(crashed);
    const file = join(dir, 'events.msgpack');
    const manifest = JSON.parse(readFileSync(join(dir, 'checkpoints', 'step-2', 'manifest.json'), 'utf8')) as { events: { count: number } };
    // Cut the log at the boundary of the record 10 before the checkpoint's count (offsets read from the framing).
    const bytes = readFileSync(file);
    const starts: number[] = [];
    for (let at = 0; at < bytes.length; at += 8 + bytes.readUInt32LE(at)) starts.push(at);
    const lost = manifest.events.count - 10;
    writeFileSync(file, bytes.subarray(0, starts[lost]));
    await expect(run({ outDir: dir, resume: true })).rejects.toThrow(`${file}: record ${lost} (from byte ${starts[lost]}) is missing, and every record after it`);
  });

  it('refuses a scenario.json edited after the start, naming the field; a longer "steps" extends the run', async () => {
    const dir = copyOf(crashed);
    const file = join(dir, 'scenario.json');
    const recorded = JSON.parse(readFileSync(file, 'utf8'));
    writeFileSync(file, JSON.stringify({ ...recorded, sampling: { ...recorded.sampling, temperature: 0.5 } }));
    await expect(run({ outDir: dir, resume: true, scenarioFile: file }, parseScenario(readFileSync(file, 'utf8'), file, { relativeTo: dir }))).rejects.toThrow(`${file}: field "sampling.temperature" is 0.5, but the run was started with 1 (checkpoint step-2)`);

    const longer = { ...scenario, steps: 4 };
    writeFileSync(file, JSON.stringify(longer));
    const extended = await run({ outDir: dir, resume: true }, longer);
    expect(extended.stepsRun).toBe(2);
    expect(extended.hash).toBe((await run({ outDir: fresh() }, longer)).hash);
  });

  it('writes summary.json when the kill came between the last checkpoint and the summary', async () => {
    const dir = copyOf(reference.dir);
    rmSync(join(dir, 'summary.json'));
    rmSync(join(dir, 'lineage.json'));
    expect((await resumesToReference(dir)).stepsRun).toBe(0);
    expect(readFileSync(join(dir, 'lineage.json'), 'utf8')).toBe(readFileSync(join(reference.dir, 'lineage.json'), 'utf8'));
  });

  it('drops a metrics line torn by the crash, and names a damaged or missing one before the checkpoint', async () => {
    const torn = copyOf(crashed);
    appendFileSync(join(torn, 'metrics.jsonl'), '{"step":2,"solveRa'); // the writes the crash cut off
    mkdirSync(join(torn, 'checkpoints', 'step-7.partial'));
    writeFileSync(join(torn, 'events.msgpack.resume'), 'half a log');
    await resumesToReference(torn);
    expect(readdirSync(join(torn, 'checkpoints'))).toEqual(['step-1', 'step-2', 'step-3']);
    expect(await replayRun(torn)).toMatchObject({ identical: true, notes: [] });

    const damaged = copyOf(crashed);
    const file = join(damaged, 'metrics.jsonl');
    const lines = readFileSync(file, 'utf8').split('\n');
    writeFileSync(file, [lines[0], lines[1]!.slice(0, 30), ...lines.slice(2)].join('\n'));
    await expect(run({ outDir: damaged, resume: true })).rejects.toThrow(`${file}: line 2 is not JSON (the file is damaged)`);
    writeFileSync(file, [lines[0], ...lines.slice(2)].join('\n'));
    await expect(run({ outDir: damaged, resume: true })).rejects.toThrow(`${file}: the metrics of step 1 are missing`);
  });
});

describe('a stop on a signal', () => {
  it('finishes the step in progress, checkpoints it, and says it stopped; the resume ends as the uninterrupted run', async () => {
    const dir = fresh();
    const controller = new AbortController();
    const once = { ...scenario, checkpointEvery: 0 }; // no checkpoint but the stop's (and the last): the events are the same
    const stopped = await run({ outDir: dir, signal: controller.signal, onStep: (m) => m.step === 0 && controller.abort('SIGINT') }, once);
    expect(stopped).toMatchObject({ stopped: 'SIGINT', step: 1, stepsRun: 1 });
    expect(readdirSync(join(dir, 'checkpoints'))).toEqual(['step-1']);
    expect(existsSync(join(dir, 'summary.json'))).toBe(false);
    const resumed = await run({ outDir: dir, resume: true }, once);
    expect([resumed.stepsRun, resumed.hash]).toEqual([2, reference.hash]);
  });
});

describe('replay', () => {
  it('says identical only when every file agrees: an edited metric, a damaged checkpoint and bytes after the log\'s last record are each named', async () => {
    const cases: Array<[string, (dir: string) => void, RegExp[]]> = [
      ['metrics', (dir) => {
        const file = join(dir, 'metrics.jsonl');
        const lines = readFileSync(file, 'utf8').split('\n');
        lines[1] = JSON.stringify({ ...JSON.parse(lines[1]!), validity: 0.123 });
        writeFileSync(file, lines.join('\n'));
      }, [/metrics\.jsonl: line 2 \(step 1\), field "validity" is 0\.123, the replay has /]],
      ['checkpoint', (dir) => flipByte(join(dir, 'checkpoints', 'step-2', 'state.msgpack'), 100), [/step-2\/state\.msgpack does not match its checksum in manifest\.json/, /step-2\/state\.msgpack: differs from the replay's from byte 100 /]],
      ['tail', (dir) => appendFileSync(join(dir, 'events.msgpack'), Buffer.from([1, 2, 3])), [/events\.msgpack: 3 bytes after the last whole record, which the run did not write/]],
    ];
    for (const [name, damage, named] of cases) {
      const dir = copyOf(reference.dir);
      damage(dir);
      const verdict = await replayRun(dir);
      expect(verdict.identical, name).toBe(false);
      expect(verdict.differences, name).toHaveLength(named.length);
      for (const pattern of named) expect(verdict.differences.some((line) => pattern.test(line)), `${name}: ${pattern}`).toBe(true);
    }
  });
  it('names a scenario.json edited after the run, against what each checkpoint recorded', async () => {
    const dir = copyOf(reference.dir);
    const file = join(dir, 'scenario.json');
    writeFileSync(file, readFileSync(file, 'utf8').replace('"temperature": 1', '"temperature": 0.5'));
    const verdict = await replayRun(dir);
    expect(verdict.identical).toBe(false);
    for (const step of [1, 2, 3]) expect(verdict.differences).toContain(`${file}: field "sampling.temperature" is 0.5, but checkpoint step-${step} recorded 1`);
  });
});

describe('export', () => {
  it('refuses a damaged adapter and leaves no folder behind', () => {
    const dir = copyOf(reference.dir);
    const damaged = join(dir, 'checkpoints', 'step-3', 'student-0-0', 'adapter_model.safetensors');
    flipByte(damaged, 300);
    const out = join(fresh(), 'population');
    expect(() => exportPopulation(dir, undefined, out)).toThrow(`${damaged} does not match its checksum in manifest.json: the file is damaged. Export another checkpoint with --step (the run also has step 1, step 2)`);
    expect(existsSync(out)).toBe(false);
  });

  it('leaves nothing behind when the disk fills at its last file', () => {
    const parent = fresh();
    const out = join(parent, 'population');
    const disk = fullDiskFor((path) => path.endsWith('population.json.partial'));
    expect(() => exportPopulation(reference.dir, undefined, out, disk)).toThrow(/population\.json: the disk is full .*; free some space and export again$/);
    expect(readdirSync(parent)).toEqual([]); // neither the folder nor its temporary twin
  });
});

describe('paths in a run folder', () => {
  it('are absolute, so that replay and export work from any working directory and PEFT finds the base model', async () => {
    const here = mkdtempSync(join(tmpdir(), 'populora-paths-'));
    cpSync('models/arith-tiny', join(here, 'base'), { recursive: true });
    const withPath = parseScenario(text.replace('{ preset: tiny, seed: 1 }', '{ path: base }').replace('steps: 3', 'steps: 1'), join(here, 's.yaml'), { relativeTo: here });
    expect(withPath.model).toEqual({ path: join(here, 'base') });
    const dir = join(here, 'run');
    await run({ outDir: dir }, withPath);
    expect(JSON.parse(readFileSync(join(dir, 'scenario.json'), 'utf8')).model.path).toBe(join(here, 'base'));
    exportPopulation(dir, undefined, join(here, 'exported'));
    expect(loadPeftAdapter(join(here, 'exported', 'teacher-0-0')).baseModel).toBe(join(here, 'base'));
    const replay = spawnSync(process.execPath, [join(import.meta.dirname, '..', 'dist', 'src', 'cli', 'main.js'), 'replay', dir], { cwd: '/', encoding: 'utf8' });
    expect(replay.status, replay.stderr).toBe(0);
    expect(replay.stdout).toMatch(/^identical: /m);
  });
});

describe('planMembers', () => {
  it('gives each student its own slot, or under "self" its teacher twin\'s, at the largest population a scenario allows', () => {
    const big = { ...scenario, population: { ...scenario.population, subpopulations: 4, teachers: 128, students: 128 } };
    const slotOf = (members: ReturnType<typeof planMembers>, id: string) => members.find((m) => m.id === id)!.slot;
    const cross = planMembers(big);
    expect(new Set(cross.map((m) => m.slot)).size).toBe(1024);
    const self = planMembers({ ...big, matchmaking: { policy: 'self', studentsPerTask: 1 } });
    for (const id of ['student-0-0', 'student-3-127', 'student-2-5']) expect(slotOf(self, id)).toBe(slotOf(self, id.replace('student', 'teacher')));
    expect(new Set(self.map((m) => m.slot)).size).toBe(512);
  });
});
