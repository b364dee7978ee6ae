// node-llama-cpp lives in bench/peers/node_modules, installed on demand (install.ts), so a clone's type check cannot
// see its types. The names the peer scripts use are declared here, untyped; a script that needs another adds it.
// With node-llama-cpp installed, its own declarations (bench/peers/node_modules/node-llama-cpp/dist/*.d.ts) are
// the API's reference.
declare module 'node-llama-cpp' {
  export type ControlledEvaluateInputItem = any;
  export type LlamaContext = any;
  export type LlamaContextSequence = any;
  export type LlamaLogLevel = any;
  export type Token = any;
  export const getLlama: any;
  export const LlamaLogLevel: any;
  export class NoBinaryFoundError extends Error {}
}
