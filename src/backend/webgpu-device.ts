// The Dawn device: one instance per process, kernels loaded from kernels/*.wgsl, pipelines cached per kernel
// and variant, errors turned into clear messages.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { create, globals } from 'webgpu';

Object.assign(globalThis, globals);

let instance: GPU | undefined;

/** Dawn wants one instance per process; it is dropped with the last device. */
function gpuInstance(validate: boolean): GPU {
  instance ??= create(validate ? ['validate=1'] : []) as GPU;
  return instance;
}

/** Drops the instance so Node can exit; a later device creates a new one. */
export function releaseInstance(): void {
  instance = undefined;
}

function kernelsDirectory(): string {
  // src/backend under vitest, dist/src/backend when compiled: walk up to the package root.
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++, dir = dirname(dir)) {
    if (existsSync(join(dir, 'kernels', 'matmul.wgsl'))) return join(dir, 'kernels');
  }
  throw new Error('populora: cannot find the kernels/ folder (expected beside src/ in the package)');
}

export async function openDevice(validate: boolean): Promise<{ device: GPUDevice; description: string }> {
  const adapter = await gpuInstance(validate).requestAdapter();
  if (!adapter) throw new Error('no WebGPU adapter found (install a Vulkan or Metal driver; on Linux without a GPU, Mesa lavapipe: .ci/install-lavapipe)');
  const { maxStorageBufferBindingSize, maxBufferSize, maxComputeWorkgroupStorageSize } = adapter.limits;
  const device = await adapter.requestDevice({ requiredLimits: { maxStorageBufferBindingSize, maxBufferSize, maxComputeWorkgroupStorageSize } });
  const info = adapter.info;
  const description = [info.vendor, info.architecture, info.device, info.description].filter((s) => s).join(' / ') || 'unknown WebGPU adapter';
  if (validate) device.pushErrorScope('validation');
  return { device, description };
}

export class PipelineCache {
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private readonly sources = new Map<string, string>();
  private readonly directory = kernelsDirectory();

  constructor(private readonly device: GPUDevice) {}

  /** The pipeline of `kernels/<name>.wgsl` with the given override constants. */
  get(name: string, constants: Record<string, number> = {}): GPUComputePipeline {
    const key = `${name}|${JSON.stringify(constants)}`;
    let pipeline = this.pipelines.get(key);
    if (!pipeline) {
      let code = this.sources.get(name);
      if (code === undefined) {
        code = readFileSync(join(this.directory, `${name}.wgsl`), 'utf8');
        this.sources.set(name, code);
      }
      const module = this.device.createShaderModule({ code, label: `kernels/${name}.wgsl` });
      pipeline = this.device.createComputePipeline({ layout: 'auto', label: `kernels/${name}.wgsl`, compute: { module, entryPoint: 'main', constants } });
      this.pipelines.set(key, pipeline);
    }
    return pipeline;
  }
}
