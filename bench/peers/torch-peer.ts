// PyTorch's side of the CPU benchmarks (bench/cpu-peers.ts, bench/cpu-builds.ts): bench/peers/torch_lora_step.py in
// Debian's python3 (TORCH_PYTHON overrides), driven by JSON lines.

import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { JsonLinesProcess } from './json-lines-process.js';

const here = dirname(fileURLToPath(import.meta.url));

/** PyTorch on the model folder and adapter folders (its requests: check, time; see torch_lora_step.py). */
export function startTorch(modelDir: string, adapterDirs: readonly string[]): JsonLinesProcess {
  const python = process.env['TORCH_PYTHON'] ?? '/usr/bin/python3'; // Debian's, where apt installs python3-torch
  const script = join(here.replace(/\/dist\/bench\/peers$/, '/bench/peers'), 'torch_lora_step.py');
  return JsonLinesProcess.start('torch', python, [script, modelDir, ...adapterDirs], ': is python3-torch installed? (apt-get install -y python3-torch, as root)');
}
