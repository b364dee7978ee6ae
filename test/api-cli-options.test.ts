// Options that cannot make sense are refused by name, as a new user meets them: the built command line in a child
// process, one line on stderr naming the option and what to use, exit code 1, and nothing written.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseScenario } from '../src/scenario/scenario.js';

const bin = join(import.meta.dirname, '..', 'dist', 'src', 'cli', 'main.js');
const dir = mkdtempSync(join(tmpdir(), 'populora-options-'));
const modelDir = join(dir, 'model');
execFileSync('node', [bin, 'init-model', '--preset', 'tiny', '--out', modelDir]);
const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8')) as { hidden_size: number; num_attention_heads: number; num_key_value_heads: number; head_dim?: number };
const headDim = config.head_dim ?? config.hidden_size / config.num_attention_heads;

function populora(...args: string[]) {
  const result = spawnSync('node', [bin, ...args], { encoding: 'utf8' });
  return { code: result.status, stderr: result.stderr.trim() };
}

/** Refused: exit code 1, `pattern` in the first line of stderr, and `out` (when given) not written. */
function expectRefused(result: { code: number | null; stderr: string }, pattern: RegExp, out?: string) {
  expect(result.code, result.stderr).toBe(1);
  expect(result.stderr.split('\n')[0], result.stderr).toMatch(pattern);
  expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
  if (out) expect(existsSync(out)).toBe(false);
}

describe('populora init-adapter refuses what cannot make sense', () => {
  it('a rank above the smallest width of the targeted modules, naming the module and the largest rank that fits', () => {
    const out = join(dir, 'rank-1000');
    // q_proj maps hidden_size to heads x head_dim: 64 x 64 in the tiny preset; k_proj to kv_heads x head_dim: 32.
    const qWidth = Math.min(config.hidden_size, config.num_attention_heads * headDim);
    const kWidth = Math.min(config.hidden_size, config.num_key_value_heads * headDim);
    expectRefused(populora('init-adapter', '--model', modelDir, '--rank', '1000', '--targets', 'q_proj', '--out', out), new RegExp(`^populora: --rank 1000 exceeds q_proj's .*use at most ${qWidth}\\b`), out);
    expectRefused(populora('init-adapter', '--model', modelDir, '--rank', String(kWidth + 1), '--out', out), new RegExp(`--rank ${kWidth + 1} exceeds [kv]_proj's .*use at most ${kWidth}\\b`), out);
    // at the limit it is written
    expect(populora('init-adapter', '--model', modelDir, '--rank', String(kWidth), '--out', out).code).toBe(0);
    expect(JSON.parse(readFileSync(join(out, 'adapter_config.json'), 'utf8')).r).toBe(kWidth);
  });

  it('alpha <= 0, a repeated or unknown target, a rank of 0 and a negative seed', () => {
    const out = join(dir, 'never');
    expectRefused(populora('init-adapter', '--model', modelDir, '--alpha', '0', '--out', out), /--alpha must be a positive number/, out);
    expectRefused(populora('init-adapter', '--model', modelDir, '--alpha', '-2', '--out', out), /--alpha must be a positive number/, out);
    expectRefused(populora('init-adapter', '--model', modelDir, '--targets', 'q_proj,q_proj', '--out', out), /--targets: q_proj is named twice/, out);
    expectRefused(populora('init-adapter', '--model', modelDir, '--targets', 'q_proj,attn', '--out', out), /--targets: unknown module "attn"; choose from q_proj/, out);
    expectRefused(populora('init-adapter', '--model', modelDir, '--rank', '0', '--out', out), /--rank must be from 1 to \d+, got 0/, out);
    expectRefused(populora('init-adapter', '--model', modelDir, '--seed', '-1', '--out', out), /--seed must be at least 0, got -1/, out);
  });
});

describe('other commands refuse nonsense by name', () => {
  it('a negative mutation sigma, a fraction outside (0, 1], zero verifier workers, a budget that is no number of tokens', () => {
    const adapter = join(dir, 'adapter');
    execFileSync('node', [bin, 'init-adapter', '--model', modelDir, '--rank', '2', '--out', adapter]);
    const out = join(dir, 'never-child');
    expectRefused(populora('evolve', 'mutate', '--adapter', adapter, '--sigma', '-0.1', '--out', out), /--sigma must be a number >= 0/, out);
    expectRefused(populora('evolve', 'mutate', '--adapter', adapter, '--sigma', '0.1', '--fraction', '1.5', '--out', out), /--fraction must be in \(0, 1\]/, out);
    expectRefused(populora('run', 'scenarios/quickstart.yaml', '--verifier-workers', '0', '--out', join(dir, 'never-run')), /--verifier-workers must be from 1 to \d+, got 0/, join(dir, 'never-run'));
    expectRefused(populora('run', 'scenarios/quickstart.yaml', '--batch-tokens', '1.5', '--out', join(dir, 'never-run')), /--batch-tokens must be a whole number of tokens >= 1, auto or unbounded, got "1.5"/, join(dir, 'never-run'));
  });

  it('a scenario naming a LoRA module twice', () => {
    const text = 'name: twice\nseed: 1\nsteps: 1\nmodel: { preset: tiny }\npopulation: { lora: { modules: [q_proj, v_proj, q_proj] } }\n';
    expect(() => parseScenario(text, 'twice.yaml')).toThrow('twice.yaml: field "population.lora.modules": a module is named twice; name each once');
  });
});
