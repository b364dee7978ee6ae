// One llama.cpp backend (Vulkan or CPU) in a child process of bench/peers/llama-cpp.ts, driven over IPC.
//
// A process per backend, because node-llama-cpp's Vulkan and CPU builds are separate native binaries linking
// libraries of the same names, and because GGML_VK_VISIBLE_DEVICES must be in the environment before ggml's
// Vulkan backend starts. It times itself (IPC is not counted) and mirrors bench/inference.ts: a warm-up prefill,
// a timed prefill of every prompt, then decode steps that each produce one token per sequence.

import { cpus } from 'node:os';
import type { ControlledEvaluateInputItem, LlamaContext, LlamaContextSequence, LlamaLogLevel as LogLevel, Token } from 'node-llama-cpp';
import { importNodeLlamaCpp } from './install.js';
import type { PeerReply, PeerRequest, PeerSetup, LlamaCppInfo, TimedShape } from './protocol.js';

const seconds = (start: number) => (performance.now() - start) / 1000;

/** The sequences a backend serves: one alone, `batch` in one context, and one per adapter in its own context. */
interface Sequences {
  single: LlamaContextSequence;
  batched: LlamaContextSequence[];
  perAdapter: LlamaContextSequence[]; // llama.cpp applies a LoRA set to a whole context, so one context each
}

async function start(setup: PeerSetup): Promise<{ info: LlamaCppInfo; sequencesAt: (threads: number) => Promise<Sequences> }> {
  const { getLlama, LlamaLogLevel, NoBinaryFoundError } = await importNodeLlamaCpp();
  const vulkan = setup.backend === 'vulkan';
  // llama.cpp resolves flash attention's "auto" per context and only says which way in its info log.
  let flashAttention = 'not reported';
  const logger = (level: LogLevel, message: string) => {
    const resolved = /Flash Attention (enabled|not supported)/.exec(message);
    if (resolved) flashAttention = resolved[1] === 'enabled' ? 'enabled' : 'disabled (not supported)';
    if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) process.stderr.write(`[llama.cpp ${setup.backend}] ${message}\n`);
  };
  const llama = await getLlama({ gpu: vulkan ? 'vulkan' : false, build: 'never', maxThreads: Math.max(...setup.threads), logLevel: LlamaLogLevel.info, logger }).catch((error: unknown) => {
    const binary = vulkan ? '@node-llama-cpp/linux-x64-vulkan (or your platform\'s -vulkan package)' : `@node-llama-cpp/${process.platform}-${process.arch}`;
    if (error instanceof NoBinaryFoundError) throw new Error(`node-llama-cpp has no working prebuilt llama.cpp binary for ${vulkan ? 'Vulkan' : 'the CPU'}: is its optional dependency ${binary} installed, and (Vulkan) a Vulkan loader (Debian: libvulkan1)? (${error.message})`);
    throw error;
  });
  const gpuDevices = vulkan ? await llama.getGpuDeviceNames() : [];
  if (vulkan && gpuDevices.length === 0) {
    // Without this check llama.cpp would report "vulkan", offload nothing and quietly run on the CPU.
    throw new Error(`ggml's Vulkan backend lists no device (GGML_VK_VISIBLE_DEVICES=${process.env['GGML_VK_VISIBLE_DEVICES'] ?? 'unset'}); it skips CPU-type devices such as lavapipe unless GGML_VK_VISIBLE_DEVICES names one`);
  }
  const model = await llama.loadModel({ modelPath: setup.modelPath, gpuLayers: vulkan ? 'max' : 0 });
  const totalLayers = model.fileInsights.totalLayers;
  // One set of contexts a thread count (made at its first use): a context's threads are fixed when it is made.
  const sets = new Map<number, Promise<Sequences>>();
  const sequencesAt = (threads: number): Promise<Sequences> => {
    const context = (sequences: number, lora?: string): Promise<LlamaContext> =>
      model.createContext({ sequences, contextSize: setup.contextSize, threads: { ideal: threads, min: threads }, ...(lora && { lora: { adapters: [{ filePath: lora }] } }) });
    const made = async (): Promise<Sequences> => {
      const [single, batched] = [await context(1), await context(setup.batch)];
      const perAdapter = await Promise.all(setup.adapterPaths.map((path) => context(1, path)));
      return { single: single.getSequence(), batched: Array.from({ length: setup.batch }, () => batched.getSequence()), perAdapter: perAdapter.map((c) => c.getSequence()) };
    };
    if (!sets.has(threads)) sets.set(threads, made());
    return sets.get(threads)!;
  };
  await sequencesAt(setup.threads[0]!);
  const info: LlamaCppInfo = {
    backend: setup.backend,
    // A model with no layer offloaded runs on the CPU whatever the binary is called: name what really ran.
    device: model.gpuLayers > 0 ? gpuDevices.join(', ') : `${cpus()[0]?.model ?? 'cpu'} (ggml CPU backend)`,
    gpuLayers: model.gpuLayers,
    totalLayers,
    threads: setup.threads,
    flashAttention,
    llamaCppRelease: llama.llamaCppRelease.release,
  };
  return { info, sequencesAt };
}

/** Tokens to evaluate, asking for the token after the last one (only then does llama.cpp compute logits, for it alone). */
function input(tokens: readonly number[], withLogits = false): ControlledEvaluateInputItem[] {
  const ids = tokens as Token[]; // node-llama-cpp brands token ids; these are ids of this model's vocabulary
  return [...ids.slice(0, -1), [ids[ids.length - 1]!, { generateNext: { token: true, ...(withLogits && { logits: true }) } }]];
}

async function evaluateNext(sequence: LlamaContextSequence, input: ControlledEvaluateInputItem[]): Promise<{ token: number; logits?: Map<number, number> }> {
  const results = await sequence.controlledEvaluate(input);
  const next = results[results.length - 1]?.next;
  if (next?.token == null) throw new Error('llama.cpp returned no next token');
  return { token: next.token, ...(next.logits && { logits: next.logits }) };
}

/** Greedy tokens after `prompt` (base model, or one adapter's context), and the logits of the first of them. */
async function greedy(sequences: Sequences, prompt: number[], steps: number, adapter: number, vocabSize: number) {
  const sequence = adapter < 0 ? sequences.single : sequences.perAdapter[adapter]!;
  await sequence.clearHistory();
  const first = await evaluateNext(sequence, input(prompt, true));
  const firstLogits = new Array<number>(vocabSize).fill(Number.NaN);
  for (const [token, logit] of first.logits!) firstLogits[token] = logit;
  const tokens = [first.token];
  while (tokens.length < steps) tokens.push((await evaluateNext(sequence, input([tokens[tokens.length - 1]!]))).token);
  return { tokens, firstLogits };
}

/** Prefill and decode seconds of these sequences run together (one llama_decode per step for all of them). */
async function timeTogether(group: LlamaContextSequence[], firstSlot: number, shape: TimedShape): Promise<{ prefillS: number; decodeS: number }> {
  const prefill = () => Promise.all(group.map((s, i) => evaluateNext(s, input(shape.promptTokens[firstSlot + i]!))));
  const clear = () => Promise.all(group.map((s) => s.clearHistory()));
  await clear();
  await prefill(); // warm-up: Vulkan pipelines compile, buffers are allocated
  await clear();
  let start = performance.now();
  await prefill();
  const prefillS = seconds(start);
  start = performance.now();
  for (let step = 0; step < shape.decodeSteps; step++) {
    await Promise.all(group.map((s, i) => evaluateNext(s, input([shape.decodeTokens[firstSlot + i]![step]!]))));
  }
  return { prefillS, decodeS: seconds(start) };
}

async function time(sequences: Sequences, shape: TimedShape) {
  const { batch, adapters, promptLen, decodeSteps } = shape;
  let prefillS = 0;
  let decodeS = 0;
  if (adapters === 0) {
    ({ prefillS, decodeS } = await timeTogether(batch === 1 ? [sequences.single] : sequences.batched.slice(0, batch), 0, shape));
  } else {
    // One adapter set at a time, as llama.cpp serves them: each adapter's sequences alone, the times summed.
    for (let slot = 0; slot < batch; slot++) {
      const t = await timeTogether([sequences.perAdapter[slot % adapters]!], slot, shape);
      prefillS += t.prefillS;
      decodeS += t.decodeS;
    }
  }
  return { prefillTokPerS: (batch * promptLen) / prefillS, decodeTokPerS: (batch * decodeSteps) / decodeS };
}

let started: { info: LlamaCppInfo; sequencesAt: (threads: number) => Promise<Sequences> } | undefined;

async function handle(request: PeerRequest): Promise<PeerReply> {
  switch (request.type) {
    case 'start':
      started = await start(request.setup);
      return { type: 'started', info: started.info };
    case 'greedy':
      return { type: 'greedy', ...(await greedy(await started!.sequencesAt(started!.info.threads[0]!), request.prompt, request.steps, request.adapter, request.vocabSize)) };
    case 'time':
      return { type: 'time', ...(await time(await started!.sequencesAt(request.threads ?? started!.info.threads[0]!), request.shape)) };
  }
}

process.on('message', (request: PeerRequest) => {
  handle(request).then(
    (reply) => process.send!(reply),
    (error: unknown) => process.send!({ type: 'error', message: error instanceof Error ? error.message : String(error) } satisfies PeerReply),
  );
});
process.on('disconnect', () => process.exit(0)); // the bench is done with this backend
