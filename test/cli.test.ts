// The populora command line, run as users run it: the built binary in a child process.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { CpuBackend } from '../src/backend/cpu.js';
import { runCommand } from '../src/cli/run-command.js';
import { loadModel } from '../src/model/checkpoint.js';
import { LlamaModel } from '../src/model/llama.js';
import { LoraBank } from '../src/model/lora-bank.js';
import { readNpy } from '../src/model/npy.js';
import { loadPeftAdapter, savePeftAdapter, type LoraAdapter, type LoraModule } from '../src/model/peft.js';
import { readSafetensors } from '../src/model/safetensors.js';
import { ActorFailure } from '../src/runtime/world.js';
import { maxAbs, maxAbsDiff } from './reference-llama.js';
import { gpu } from './webgpu.js';

const bin = join(import.meta.dirname, '..', 'dist', 'src', 'cli', 'main.js');
const dir = mkdtempSync(join(tmpdir(), 'populora-cli-'));
const modelDir = join(dir, 'model');
const adapterDir = join(dir, 'adapter');

function populora(...args: string[]) {
  const result = spawnSync('node', [bin, ...args], { encoding: 'utf8' });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** A failure as the issue wants it: exit code 1, and one line on stderr (no stack trace) that matches `line`. */
function expectOneLine(result: { code: number | null; stderr: string }, line: RegExp | string) {
  expect(result.code, result.stderr).toBe(1);
  expect(result.stderr.trim().split('\n'), result.stderr).toHaveLength(1);
  if (typeof line === 'string') expect(result.stderr.trim()).toBe(line);
  else expect(result.stderr.trim()).toMatch(line);
}

execFileSync('node', [bin, 'init-model', '--preset', 'qwen2-tiny', '--seed', '3', '--out', modelDir]);
execFileSync('node', [bin, 'init-adapter', '--model', modelDir, '--rank', '4', '--targets', 'q_proj,v_proj,down_proj', '--init', 'gaussian', '--seed', '5', '--out', adapterDir]);

async function libraryLogits(tokens: number[], withAdapter: boolean): Promise<Float32Array> {
  const { config, weights } = loadModel(modelDir);
  const cpu = new CpuBackend();
  const model = LlamaModel.upload(cpu, config, weights);
  if (!withAdapter) return model.logits(tokens);
  const adapter = loadPeftAdapter(adapterDir, config);
  const bank = new LoraBank(cpu, config, 1, adapter.rank, adapter.targetModules);
  bank.load(0, adapter);
  return model.logits(tokens, 0, bank);
}

describe('populora logits', () => {
  it('writes [tokens, vocab] float32 logits equal to the library forward pass', async () => {
    const out = join(dir, 'base.npy');
    const run = populora('logits', '--model', modelDir, '--tokens', '1,2,3,4', '--backend', 'cpu', '--out', out);
    expect(run.code, run.stderr).toBe(0);
    const { data, shape } = readNpy(out);
    expect(shape).toEqual([4, loadModel(modelDir).config.vocabSize]);
    expect(data).toEqual(await libraryLogits([1, 2, 3, 4], false));
  });

  it('applies a PEFT adapter', async () => {
    const out = join(dir, 'adapted.npy');
    expect(populora('logits', '--model', modelDir, '--adapter', adapterDir, '--tokens', '5,6,7', '--backend', 'cpu', '--out', out).code).toBe(0);
    const { data } = readNpy(out);
    expect(data).toEqual(await libraryLogits([5, 6, 7], true));
    expect(maxAbsDiff(data, await libraryLogits([5, 6, 7], false))).toBeGreaterThan(1e-3);
  });

  it.skipIf(!gpu)('on webgpu agrees with cpu within 1e-4 relative', () => {
    const [onGpu, onCpu] = ['webgpu', 'cpu'].map((backend) => {
      const out = join(dir, `${backend}.npy`);
      expect(populora('logits', '--model', modelDir, '--adapter', adapterDir, '--tokens', '3,1,4,1,5', '--backend', backend, '--out', out).code).toBe(0);
      return readNpy(out).data;
    });
    expect(maxAbsDiff(onGpu!, onCpu!)).toBeLessThanOrEqual(1e-4 * (1 + maxAbs(onCpu!)));
  });

  it('rejects bad input with one clear line and no stack trace', () => {
    const badToken = populora('logits', '--model', modelDir, '--tokens', '1,x', '--backend', 'cpu', '--out', join(dir, 'x.npy'));
    expect(badToken.code).toBe(1);
    expect(badToken.stderr.trim()).toBe('populora: --tokens: "x" is not an integer token id (expected e.g. 1,2,3)');
    const outside = populora('logits', '--model', modelDir, '--tokens', '1,100000', '--backend', 'cpu', '--out', join(dir, 'x.npy'));
    expect(outside.stderr).toMatch(/^populora: token id 100000 .*vocabulary/);
    expect(outside.stderr).not.toMatch(/\n\s+at /);
    const missing = populora('logits', '--model', join(dir, 'nowhere'), '--tokens', '1', '--backend', 'cpu', '--out', join(dir, 'x.npy'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^populora: .*nowhere.*config\.json/);
    expect(missing.stderr).not.toMatch(/\n\s+at /);
  });

  it('names the adapter key when an adapter does not fit its config', () => {
    const broken = join(dir, 'broken-adapter');
    cpSync(adapterDir, broken, { recursive: true });
    const configFile = join(broken, 'adapter_config.json');
    writeFileSync(configFile, JSON.stringify({ ...JSON.parse(readFileSync(configFile, 'utf8')), r: 8 }));
    const run = populora('logits', '--model', modelDir, '--adapter', broken, '--tokens', '1', '--backend', 'cpu', '--out', join(dir, 'x.npy'));
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^populora: .*lora_[AB]\.weight.*(\[8, 64\]|\[\d+, 8\])/);
  });
});

/** Σ_{t>=1} log p(tokens[t] | tokens[<t]) on the CPU through an adapter. */
async function logLikelihood(tokens: number[], adapter: LoraAdapter): Promise<number> {
  const { config, weights } = loadModel(modelDir);
  const cpu = new CpuBackend();
  const bank = new LoraBank(cpu, config, 1, adapter.rank, adapter.targetModules);
  bank.load(0, adapter);
  const logits = await LlamaModel.upload(cpu, config, weights).logits(tokens, 0, bank);
  const V = config.vocabSize;
  let total = 0;
  for (let t = 1; t < tokens.length; t++) {
    const row = Array.from(logits.subarray((t - 1) * V, t * V));
    const max = Math.max(...row);
    total += row[tokens[t]!]! - max - Math.log(row.reduce((s, z) => s + Math.exp(z - max), 0));
  }
  return total;
}

describe('populora grad', () => {
  it('writes the log-likelihood gradient in the adapter\'s PEFT layout; a step along it changes the log-likelihood by its norm', async () => {
    const out = join(dir, 'grad');
    const tokens = [1, 9, 4, 22, 7];
    const run = populora('grad', '--model', modelDir, '--adapter', adapterDir, '--tokens', tokens.join(','), '--backend', 'cpu', '--out-dir', out);
    expect(run.code, run.stderr).toBe(0);
    const { config } = loadModel(modelDir);
    const [adapter, gradient] = [loadPeftAdapter(adapterDir, config), loadPeftAdapter(out, config)];
    expect({ ...gradient, layers: undefined }).toEqual({ ...adapter, layers: undefined, baseModel: modelDir });
    const factors = (a: LoraAdapter) => a.layers.flatMap((l) => Object.values(l)).flatMap((f) => [f.a, f.b]);
    factors(gradient).forEach((g, i) => expect(g.length).toBe(factors(adapter)[i]!.length));
    const norm = Math.sqrt(factors(gradient).reduce((s, g) => s + g.reduce((q, v) => q + v * v, 0), 0));
    // Directional derivative along the unit gradient: (f(θ + εu) - f(θ - εu)) / 2ε = |∇f|.
    const step = (sign: number) => ({ ...adapter, layers: adapter.layers.map((l, i) => Object.fromEntries(Object.entries(l).map(([m, f]) => {
      const g = gradient.layers[i]![m as LoraModule]!;
      return [m, { a: f.a.map((v, k) => v + (sign * 1e-2 * g.a[k]!) / norm), b: f.b.map((v, k) => v + (sign * 1e-2 * g.b[k]!) / norm) }];
    }))) });
    const directional = ((await logLikelihood(tokens, step(1))) - (await logLikelihood(tokens, step(-1)))) / 2e-2;
    expect(Math.abs(directional - norm)).toBeLessThanOrEqual(0.01 * norm);
  });

  it('rejects a single token and a missing adapter by name', () => {
    const one = populora('grad', '--model', modelDir, '--adapter', adapterDir, '--tokens', '5', '--backend', 'cpu', '--out-dir', join(dir, 'g1'));
    expect(one.code).toBe(1);
    expect(one.stderr).toMatch(/^populora: --tokens: 1 token\(s\) given; at least 2 are needed/);
    const missing = populora('grad', '--model', modelDir, '--adapter', join(dir, 'nowhere'), '--tokens', '5,6', '--backend', 'cpu', '--out-dir', join(dir, 'g2'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/nowhere.*adapter_config\.json: missing/);
    expect(missing.stderr).not.toMatch(/at .*\.js:\d+/);
  });
});

describe('populora generate', () => {
  it('refuses a negative temperature as a scenario does', () => {
    expectOneLine(populora('generate', '--model', modelDir, '--prompt', '1+', '--temperature', '-1', '--backend', 'cpu'), 'populora: --temperature: expected a number >= 0 (0 = greedy), got -1');
  });

  it('is reproducible from its seed and varies with it', () => {
    const text = (seed: string) => {
      const run = populora('generate', '--model', modelDir, '--prompt', '1+2=', '--seed', seed, '--max-tokens', '12', '--backend', 'cpu');
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout.startsWith('1+2=')).toBe(true);
      return run.stdout;
    };
    expect(text('4')).toBe(text('4'));
    expect(new Set([text('4'), text('5'), text('6')]).size).toBeGreaterThan(1);
  });

  it('--stop ends the completion before the first stop string (repeatable); an empty one is refused', () => {
    const run = (...stops: string[]) => populora('generate', '--model', modelDir, '--prompt', '1+2=', '--seed', '8', '--max-tokens', '24', '--backend', 'cpu', ...stops.flatMap((s) => ['--stop', s]));
    const free = run();
    const completion = free.stdout.slice('1+2='.length, -1);
    expect(completion.length, free.stderr).toBeGreaterThanOrEqual(4);
    const stop = completion.slice(2, 4);
    expect(run(stop, 'never written').stdout).toBe(`1+2=${completion.slice(0, completion.indexOf(stop))}\n`);
    expectOneLine(run(''), 'populora: --stop: a stop string is empty (it would end the generation at once)');
  });
});

describe('populora init-adapter', () => {
  it('writes an absolute base_model_name_or_path, so PEFT finds the base from any folder', () => {
    const out = join(dir, 'relative-adapter');
    execFileSync('node', [bin, 'init-adapter', '--model', relative(dir, modelDir), '--out', out], { cwd: dir });
    expect(JSON.parse(readFileSync(join(out, 'adapter_config.json'), 'utf8')).base_model_name_or_path).toBe(modelDir);
  });
});

describe('populora evolve', () => {
  it('mutates and crosses adapters in PEFT layout, recording lineage', () => {
    const child = join(dir, 'mutant');
    const run = populora('evolve', 'mutate', '--adapter', adapterDir, '--sigma', '0.05', '--seed', '7', '--out', child);
    expect(run.code, run.stderr).toBe(0);
    const { config } = loadModel(modelDir);
    const [p, c] = [loadPeftAdapter(adapterDir, config), loadPeftAdapter(child, config)];
    expect([c.rank, c.targetModules]).toEqual([p.rank, p.targetModules]);
    expect(maxAbsDiff(c.layers[0]!.q_proj!.a, p.layers[0]!.q_proj!.a)).toBeGreaterThan(0);
    expect(JSON.parse(readFileSync(join(child, 'lineage.json'), 'utf8'))).toEqual({ child, parents: [adapterDir], operator: 'mutate', parameters: { sigma: 0.05, fraction: 1, modules: null, layers: null }, seed: 7, step: null });

    const crossed = join(dir, 'crossed');
    expect(populora('evolve', 'crossover', '--a', adapterDir, '--b', child, '--kind', 'svd', '--weights', '0.5,0.5', '--seed', '7', '--out', crossed).code).toBe(0);
    expect(JSON.parse(readFileSync(join(crossed, 'lineage.json'), 'utf8'))).toMatchObject({ parents: [adapterDir, child], operator: 'crossover', parameters: { kind: 'svd', weights: [0.5, 0.5] } });
    expect(loadPeftAdapter(crossed, config).rank).toBe(4);
  });

  it('writes the child of a bf16 parent in float32, which keeps noise finer than bf16 can hold', () => {
    const { config } = loadModel(modelDir);
    const bf16 = join(dir, 'adapter-bf16');
    savePeftAdapter(bf16, loadPeftAdapter(adapterDir, config), { dtype: 'BF16' });
    const child = join(dir, 'mutant-of-bf16');
    expect(populora('evolve', 'mutate', '--adapter', bf16, '--sigma', '0.0001', '--seed', '3', '--out', child).code).toBe(0);
    expect(new Set([...readSafetensors(join(child, 'adapter_model.safetensors')).tensors.values()].map((t) => t.dtype))).toEqual(new Set(['F32']));
    const [p, c] = [loadPeftAdapter(bf16, config).layers[0]!.q_proj!.a, loadPeftAdapter(child, config).layers[0]!.q_proj!.a];
    // σ = 1e-4 of the RMS moves most entries by less than half a bf16 step (2^-9 relative): rounded, they would not move.
    const moved = p.filter((v, i) => c[i] !== v).length;
    expect(moved).toBeGreaterThan(0.9 * p.length);
    expect(maxAbsDiff(c, p)).toBeLessThan(1e-3 * maxAbs(p));
  });

  it('rejects mismatched parents and bad options by name', () => {
    const other = join(dir, 'rank2');
    execFileSync('node', [bin, 'init-adapter', '--model', modelDir, '--rank', '2', '--targets', 'q_proj,v_proj,down_proj', '--out', other]);
    const mismatch = populora('evolve', 'crossover', '--a', adapterDir, '--b', other, '--kind', 'svd', '--out', join(dir, 'never'));
    expect(mismatch.code).toBe(1);
    expect(mismatch.stderr.trim()).toBe('populora: parents are not compatible for crossover: rank 4 vs 2');
    expect(populora('evolve', 'crossover', '--a', adapterDir, '--b', other, '--kind', 'blend', '--out', join(dir, 'never')).stderr).toMatch(/--kind: "blend" is not one of svd, module, rank, interpolate/);
    expect(populora('evolve', 'mutate', '--adapter', adapterDir, '--sigma', '0.1', '--modules', 'k_proj', '--out', join(dir, 'never')).stderr).toMatch(/--modules: the adapter does not target k_proj/);
  });
});

describe('populora run and replay', () => {
  const scenarioFile = join(dir, 'tiny-run.yaml');
  writeFileSync(scenarioFile, 'name: tiny-run\nseed: 2\nsteps: 2\nbackend: cpu\nmodel: { preset: tiny }\npopulation: { subpopulations: 2, lora: { rank: 2 } }\ntasks: { perTeacher: 1, types: [deduce] }\nmatchmaking: { studentsPerTask: 1 }\nsampling: { answersPerStudent: 2, maxTokens: 16 }\n');

  it('writes the run folder and prints the summary; replay says identical; a tampered log exits 1 naming the event', () => {
    const out = join(dir, 'run');
    const ran = populora('run', scenarioFile, '--out', out);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toMatch(/student-1-0 +\d+ +solve rate/);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    expect(loadPeftAdapter(join(out, 'checkpoints', 'step-2', 'teacher-0-0')).rank).toBe(2);
    const replayed = populora('replay', out);
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(replayed.stdout).toContain(`identical: ${summary.events} events, run hash ${summary.hash}`);

    expect(populora('run', scenarioFile, '--out', out).stderr).toMatch(/already holds a run: choose another --out, or continue it with --resume/);
    const log = readFileSync(join(out, 'events.msgpack'));
    log.writeUInt8(log.readUInt8(log.length - 5) ^ 1, log.length - 5); // the last record's payload: its checksum no longer matches
    writeFileSync(join(out, 'events.msgpack'), log);
    const tampered = populora('replay', out);
    expect(tampered.code).toBe(1);
    expect(tampered.stderr).toMatch(/record \d+ at byte \d+ fails its checksum: the log is corrupt/);
  });

  it('names the file and field of a bad scenario, without a stack trace', () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, readFileSync(scenarioFile, 'utf8').replace('answersPerStudent: 2', 'answersPerStudent: 0'));
    const result = populora('run', bad, '--out', join(dir, 'bad-run'));
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(`populora: ${bad}: field "sampling.answersPerStudent": expected an integer >= 1`);
  });
});

describe('the run folder from the command line', () => {
  const longRun = join(dir, 'long-run.yaml');
  // Long enough (40 steps, a few seconds) that the first run is still going when the second command starts.
  writeFileSync(longRun, 'name: long-run\nseed: 4\nsteps: 40\nbackend: cpu\nmodel: { preset: tiny }\npopulation: { subpopulations: 2, lora: { rank: 2 } }\ntasks: { perTeacher: 1, types: [deduce] }\nmatchmaking: { studentsPerTask: 1 }\nsampling: { answersPerStudent: 2, maxTokens: 16 }\n');
  const summaryOf = (out: string) => JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { hash: string };
  let finished: string; // an uninterrupted run of long-run.yaml
  beforeAll(() => {
    finished = join(dir, 'long-finished');
    expect(populora('run', longRun, '--out', finished).code).toBe(0);
  });

  it('refuses a second run --overwrite into a running run\'s folder, naming it; SIGINT stops the first after a step, and --resume ends as the uninterrupted run', async () => {
    const out = join(dir, 'contested');
    const first = spawn('node', [bin, 'run', longRun, '--out', out], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    first.stdout.on('data', (chunk) => (stdout += chunk));
    first.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => first.on('exit', resolve));
    while (!existsSync(join(out, 'metrics.jsonl')) || readFileSync(join(out, 'metrics.jsonl'), 'utf8') === '') await sleep(50); // step 0 is done

    const second = populora('run', longRun, '--out', out, '--overwrite');
    expectOneLine(second, `populora: ${out} is in use by populora (pid ${first.pid} on ${hostname()}: ${bin} run ${longRun} --out ${out}): wait for it to finish, or choose another --out. If no such process runs any more, delete ${join(out, 'run.lock')}`);
    first.kill('SIGINT');
    expect(await exited, stderr).toBe(130);
    expect(stderr).toContain('SIGINT: finishing the step in progress, then saving a checkpoint and stopping');
    const stop = /stopped on SIGINT after step (\d+) of 40, with a checkpoint there; continue the run with: populora run --resume (.*)$/m.exec(stdout);
    expect(stop, stdout).not.toBeNull();
    expect(Number(stop![1])).toBeLessThan(40);
    expect(stop![2]).toBe(out);
    expect(existsSync(join(out, 'checkpoints', `step-${stop![1]}`, 'manifest.json'))).toBe(true);

    const resumed = populora('run', '--resume', out);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(summaryOf(out).hash).toBe(summaryOf(finished).hash);
  });

  it('names damage, a missing file and a wrong path in one line, never a stack trace', () => {
    const copy = (name: string) => {
      const to = join(dir, name);
      cpSync(finished, to, { recursive: true });
      return to;
    };
    const state = copy('damaged-state');
    const stateFile = join(state, 'checkpoints', 'step-40', 'state.msgpack');
    writeFileSync(stateFile, readFileSync(stateFile).subarray(0, 500));
    expectOneLine(populora('run', '--resume', state), `populora: ${stateFile} does not match its checksum in manifest.json: the file is damaged. To go on, start the run again (the same scenario gives the same run) with: populora run ${join(state, 'scenario.json')} --out ${state} --overwrite`);
    expectOneLine(populora('report', state), `populora: ${stateFile} does not match its checksum in manifest.json: the file is damaged; populora replay ${state} names every difference in the run folder`);

    const metrics = copy('torn-metrics');
    const lines = readFileSync(join(metrics, 'metrics.jsonl'), 'utf8').split('\n');
    writeFileSync(join(metrics, 'metrics.jsonl'), [...lines.slice(0, 3), lines[3]!.slice(0, 40), ...lines.slice(4)].join('\n'));
    expectOneLine(populora('run', '--resume', metrics), new RegExp(`^populora: ${join(metrics, 'metrics.jsonl')}: line 4 is not JSON \\(the file is damaged\\)`));

    const garbled = copy('garbled');
    writeFileSync(join(garbled, 'scenario.json'), '{"name": "long-run", "seed":');
    expectOneLine(populora('report', garbled), new RegExp(`^populora: ${join(garbled, 'scenario.json')}: not valid JSON \\(.*\\): the file is damaged; each checkpoint's manifest.json records the scenario`));
    expectOneLine(populora('export', garbled, '--out', join(dir, 'garbled-export')), new RegExp(`^populora: ${join(garbled, 'scenario.json')}: not valid JSON`));
    expect(existsSync(join(dir, 'garbled-export'))).toBe(false);
    const lineage = copy('garbled-lineage');
    appendFileSync(join(lineage, 'lineage.json'), ']');
    expectOneLine(populora('report', lineage), new RegExp(`^populora: ${join(lineage, 'lineage.json')}: not valid JSON .*run the scenario again`));

    const noLog = copy('no-log');
    rmSync(join(noLog, 'events.msgpack'));
    expectOneLine(populora('replay', noLog), `populora: ${join(noLog, 'events.msgpack')} is missing: there is no recorded run to replay (a run writes its log from its first step; was it started?)`);

    // Over NATS the verifier's processes are workers of their own: a --verifier-workers there would be ignored.
    expectOneLine(populora('run', longRun, '--nats', 'nats://127.0.0.1:1', '--verifier-workers', '2'), 'populora: --verifier-workers has no effect with --nats: over NATS the verifier runs on verifier workers; start them with populora worker SCENARIO --nats URL --verifier --threads N');

    const aFile = join(dir, 'a-file');
    writeFileSync(aFile, 'x');
    expectOneLine(populora('run', longRun, '--out', aFile), `populora: ${aFile} is a file, not a folder: give --out a folder (a new one, or a run's to --resume)`);

    const bomb = join(dir, 'bomb.yaml');
    writeFileSync(bomb, ['a: &a [x, x, x, x, x, x, x, x, x]', ...'bcdefgh'.split('').map((k, i) => `${k}: &${k} [${Array(9).fill(`*${'abcdefg'[i]}`).join(', ')}]`)].join('\n'));
    expectOneLine(populora('run', bomb, '--out', join(dir, 'bomb-run')), new RegExp(`^populora: ${bomb}: not valid YAML: Excessive alias count`));

    const noModel = join(dir, 'no-model.yaml');
    writeFileSync(noModel, readFileSync(longRun, 'utf8').replace('{ preset: tiny }', `{ path: ${join(dir, 'nowhere')} }`));
    expectOneLine(populora('run', noModel, '--out', join(dir, 'no-model-run')), `populora: ${noModel}: field "model.path": the model folder ${join(dir, 'nowhere')} does not exist; give the path of a Hugging Face model folder (config.json, model.safetensors, tokenizer.json), or use {preset: tiny}`);
  });
});

describe('errors on the command line', () => {
  const printed: string[] = [];
  afterEach(() => {
    vi.restoreAllMocks();
    printed.length = 0;
    process.exitCode = 0;
  });
  const fail = (error: unknown, verbose: boolean) => {
    vi.spyOn(console, 'error').mockImplementation((line: string) => void printed.push(line));
    const command = { optsWithGlobals: () => ({ verbose }) };
    return runCommand(async (_options: object, _command: unknown) => {
      throw error;
    })({}, command);
  };

  it('print a failing actor\'s name, step and message in one line; its stack only with --verbose', async () => {
    const failure = new ActorFailure('teacher-1-0', 4, { type: 'validated' }, new Error('no proposal with request id 7'));
    await fail(failure, false);
    expect(printed).toEqual(['populora: actor teacher-1-0 failed at step 4 on message "validated": no proposal with request id 7']);
    expect(process.exitCode).toBe(1);
    printed.length = 0;
    await fail(failure, true);
    expect(printed).toHaveLength(2);
    expect(printed[1]).toMatch(/^Error: actor teacher-1-0 .*\n\s+at [\s\S]*caused by: Error: no proposal with request id 7\n\s+at /);
  });

  it('say that the disk is full, whichever file filled it', async () => {
    await fail(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', path: '/runs/x/report.html' }), false);
    expect(printed).toEqual(['populora: /runs/x/report.html: the disk is full (ENOSPC: no space left on device, write); free some space and run the command again']);
  });
});
