// Messages between bench/peers/llama-cpp.ts and its llama.cpp worker processes.

export type LlamaCppBackend = 'vulkan' | 'cpu';

export interface PeerSetup {
  backend: LlamaCppBackend;
  modelPath: string; // model.gguf
  adapterPaths: string[]; // one LoRA .gguf per adapter slot
  batch: number; // most sequences decoded together
  contextSize: number; // tokens per sequence
  threads: number[]; // thread counts to time at: a context each (llama.cpp's ideal and minimum: each evaluation uses them all)
}

/** What llama.cpp really ran on: a "vulkan" build with 0 layers offloaded is the CPU. */
export interface LlamaCppInfo {
  backend: LlamaCppBackend;
  device: string;
  gpuLayers: number; // layers offloaded to the GPU device (model.gpuLayers)
  totalLayers: number; // blocks + the output layer
  threads: number[]; // as set up
  flashAttention: string; // as llama.cpp resolved its default, "auto"
  llamaCppRelease: string;
}

/** One timed shape, with the same tokens populora is given: promptTokens[slot], decodeTokens[slot][step]. */
export interface TimedShape {
  batch: number;
  adapters: number; // 0 = base model only; else sequence s uses adapter s % adapters
  promptLen: number;
  decodeSteps: number;
  promptTokens: number[][];
  decodeTokens: number[][];
}

export type PeerRequest =
  | { type: 'start'; setup: PeerSetup }
  | { type: 'greedy'; prompt: number[]; steps: number; adapter: number; vocabSize: number }
  | { type: 'time'; shape: TimedShape; threads?: number }; // default: the first of setup.threads

export type PeerReply =
  | { type: 'started'; info: LlamaCppInfo }
  | { type: 'greedy'; tokens: number[]; firstLogits: number[] }
  | { type: 'time'; prefillTokPerS: number; decodeTokPerS: number }
  | { type: 'error'; message: string };
