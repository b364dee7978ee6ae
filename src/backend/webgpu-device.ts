// The Dawn side of the WebGPU backend: one GPU instance per process, the device with the adapter's limits, and
// the kernel library (kernels/*.wgsl compiled once, pipelines cached per kernel and variant, errors named by file).

import { readdirSync } from 'node:fs';
import { create, globals } from 'webgpu';
import { kernelsDirectory, kernelSource } from './kernel-files.js';
import { parseParams, type ParamLayout } from './kernel-params.js';

Object.assign(globalThis, globals);

// Dawn wants one instance per process, and Node only exits once it is dropped: the instance lives while at least
// one device made from it is open. Its flags are fixed by the first device opened.
let instance: GPU | undefined;
let openDevices = 0;

function gpuInstance(validate: boolean): GPU {
  // Validation runs keep Dawn's bounds checks; otherwise they are dropped (the kernels clamp their indices).
  instance ??= create(validate ? ['validate=1'] : ['enable-dawn-features=disable_robustness']) as GPU;
  return instance;
}

/** Called when a device is destroyed; the last one drops the instance so Node can exit. */
export function releaseInstance(): void {
  openDevices = Math.max(0, openDevices - 1);
  if (openDevices === 0) instance = undefined;
}

export interface OpenedDevice {
  device: GPUDevice;
  /** vendor / architecture / device / description of the adapter, in one line. */
  description: string;
  /** A software adapter running on the CPU (Mesa lavapipe, SwiftShader): the fused kernels pick their CPU layout. */
  software: boolean;
}

/** Storage buffers the fused linear kernel binds (kernels/linear.wgsl). */
export const FUSED_STORAGE_BUFFERS = 12;

export async function openDevice(validate: boolean): Promise<OpenedDevice> {
  const adapter = await gpuInstance(validate).requestAdapter();
  if (!adapter) {
    if (openDevices === 0) instance = undefined;
    throw new Error('no WebGPU adapter found (install a Vulkan or Metal driver; on Linux without a GPU, Mesa lavapipe)');
  }
  // Big weights and KV caches need the adapter's real buffer limits; attention's scores need 17 KiB of
  // workgroup memory, over the 16 KiB default (every desktop and laptop GPU offers 32 KiB or more). The fused
  // linear kernel binds 12 storage buffers (the default is 8; Dawn offers 16 on Vulkan, Metal and D3D12), and
  // packed weights bind their parts at the adapter's own offset alignment (often 16 or 64 bytes, not 256).
  const { maxStorageBufferBindingSize, maxBufferSize, maxComputeWorkgroupStorageSize, maxStorageBuffersPerShaderStage, minStorageBufferOffsetAlignment } = adapter.limits;
  if (maxStorageBuffersPerShaderStage < FUSED_STORAGE_BUFFERS) {
    if (openDevices === 0) instance = undefined;
    throw new Error(`the WebGPU adapter binds ${maxStorageBuffersPerShaderStage} storage buffers per shader stage; populora's fused kernels need ${FUSED_STORAGE_BUFFERS}`);
  }
  // Timestamp queries, where the adapter has them, serve kernel profiles (bench/kernel-profile.ts); no run uses them.
  const requiredFeatures: GPUFeatureName[] = adapter.features.has('timestamp-query') ? ['timestamp-query'] : [];
  const device = await adapter.requestDevice({
    label: 'populora',
    requiredFeatures,
    requiredLimits: { maxStorageBufferBindingSize, maxBufferSize, maxComputeWorkgroupStorageSize, maxStorageBuffersPerShaderStage, minStorageBufferOffsetAlignment },
  });
  openDevices++;
  const info = adapter.info;
  const parts = [info.vendor, info.architecture, info.device, info.description].filter((s) => s);
  return { device, description: parts.join(' / ') || 'unknown WebGPU adapter', software: info.isFallbackAdapter || info.architecture === 'software' };
}

/**
 * The bind group layout of a kernel, read from its declarations: `@binding(0) var<uniform>` is the parameter
 * block (bound at a dynamic offset into the uniform arena), `var<storage, read>` and `var<storage, read_write>`
 * the tensors. Explicit layouts (rather than 'auto') let every variant of a kernel share bind groups.
 */
function bindingLayout(device: GPUDevice, name: string, code: string): { layout: GPUBindGroupLayout; buffers: number } {
  const entries: GPUBindGroupLayoutEntry[] = [];
  for (const match of code.matchAll(/@group\(0\)\s*@binding\((\d+)\)\s*var<(uniform|storage)\s*(?:,\s*(read|read_write))?>/g)) {
    const [binding, space, access] = [Number(match[1]), match[2], match[3] ?? 'read'];
    const type: GPUBufferBindingType = space === 'uniform' ? 'uniform' : access === 'read' ? 'read-only-storage' : 'storage';
    entries.push({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type, hasDynamicOffset: space === 'uniform' } });
  }
  if (entries[0]?.binding !== 0 || entries[0].buffer?.type !== 'uniform') {
    throw new Error(`populora: kernels/${name}.wgsl must declare its parameters as @group(0) @binding(0) var<uniform>`);
  }
  return { layout: device.createBindGroupLayout({ label: `kernels/${name}.wgsl`, entries }), buffers: entries.length - 1 };
}

interface Kernel {
  module: GPUShaderModule;
  bindGroupLayout: GPUBindGroupLayout;
  pipelineLayout: GPUPipelineLayout;
  params: ParamLayout; // its struct Params (kernel-params.ts)
  buffers: number; // its storage bindings (1 ..)
}

export class KernelLibrary {
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  /** Error scopes around pipeline creations not yet checked: each resolves to an error message or null. */
  private pendingChecks: Array<Promise<string | null>> = [];

  private constructor(
    private readonly device: GPUDevice,
    private readonly kernels: ReadonlyMap<string, Kernel>,
  ) {}

  /** Compiles every kernels/*.wgsl once, so a WGSL error surfaces at startup with its file, line and message. */
  static async load(device: GPUDevice): Promise<KernelLibrary> {
    const directory = kernelsDirectory();
    const kernels = new Map<string, Kernel>();
    for (const file of readdirSync(directory).filter((f) => f.endsWith('.wgsl')).sort()) {
      const name = file.slice(0, -'.wgsl'.length);
      const { code, origin } = kernelSource(name);
      const module = device.createShaderModule({ label: `kernels/${file}`, code });
      const errors = (await module.getCompilationInfo()).messages.filter((m) => m.type === 'error');
      if (errors.length > 0) {
        const first = errors[0]!;
        throw new Error(`populora: ${origin(first.lineNum)}:${first.linePos}: ${first.message}`);
      }
      const { layout: bindGroupLayout, buffers } = bindingLayout(device, name, code);
      const pipelineLayout = device.createPipelineLayout({ label: `kernels/${file}`, bindGroupLayouts: [bindGroupLayout] });
      kernels.set(name, { module, bindGroupLayout, pipelineLayout, params: parseParams(name, code), buffers });
    }
    return new KernelLibrary(device, kernels);
  }

  private kernel(name: string): Kernel {
    const kernel = this.kernels.get(name);
    if (!kernel) throw new Error(`populora: no kernel kernels/${name}.wgsl`);
    return kernel;
  }

  bindGroupLayout(name: string): GPUBindGroupLayout {
    return this.kernel(name).bindGroupLayout;
  }

  /** The layout of the kernel's parameter block, and how many buffers it binds after it. */
  signature(name: string): { params: ParamLayout; buffers: number } {
    return this.kernel(name);
  }

  /** The pipeline of kernels/<name>.wgsl with the given override constants (its variant), created once. */
  pipeline(name: string, constants: Record<string, number>): GPUComputePipeline {
    const key = `${name}${JSON.stringify(constants)}`;
    let pipeline = this.pipelines.get(key);
    if (!pipeline) {
      const { module, pipelineLayout } = this.kernel(name);
      const label = `kernels/${name}.wgsl ${JSON.stringify(constants)}`;
      this.device.pushErrorScope('internal');
      this.device.pushErrorScope('validation');
      pipeline = this.device.createComputePipeline({ label, layout: pipelineLayout, compute: { module, entryPoint: 'main', constants } });
      const errors = [this.device.popErrorScope(), this.device.popErrorScope()];
      this.pendingChecks.push(
        Promise.all(errors).then(
          ([validation, internal]) => {
            const error = validation ?? internal;
            return error ? `creating the pipeline of ${label}: ${error.message}` : null;
          },
          (error: unknown) => `creating the pipeline of ${label}: ${(error as Error).message}`,
        ),
      );
      this.pipelines.set(key, pipeline);
    }
    return pipeline;
  }

  /** The first error from pipeline creations since the last call, or null. */
  async takeError(): Promise<string | null> {
    const checks = this.pendingChecks;
    this.pendingChecks = [];
    const messages = await Promise.all(checks);
    return messages.find((m) => m !== null) ?? null;
  }
}
