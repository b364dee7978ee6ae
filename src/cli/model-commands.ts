// Commands that inspect a model: logits, generate, and the seeded constructors init-model and init-adapter.

import { join, resolve } from 'node:path';
import type { Backend, WeightStorage } from '../backend/backend.js';
import { openBackend, type BackendChoice } from '../backend/select.js';
import { loadConfig, loadModel, randomModel, saveModel } from '../model/checkpoint.js';
import { TINY_CONFIGS } from '../model/config.js';
import { LlamaModel } from '../model/llama.js';
import { LoraBank } from '../model/lora-bank.js';
import { writeNpy } from '../model/npy.js';
import { LORA_MODULES, loadPeftAdapter, maxLoraRank, randomAdapter, rankExceeds, savePeftAdapter, type LoraModule } from '../model/peft.js';
import type { StoredDType } from '../model/safetensors.js';
import { generateText } from '../model/text-stream.js';
import { ARITH_ALPHABET, charTokenizerJson, loadTokenizer } from '../model/tokenizer.js';
import { TEMPERATURE_EXPECTED } from '../scenario/scenario.js';
import { UsageError } from './run-command.js';

export interface ModelOptions {
  model: string;
  adapter?: string;
  backend: BackendChoice;
  threads?: number; // the CPU backend's (default: one per core)
  weights?: WeightStorage;
}

/** Loads a model (and optionally one adapter into bank slot 0), runs `use`, then releases the device. */
export async function withModel<T>(options: ModelOptions, use: (model: LlamaModel, bank: LoraBank | undefined, adapterSlot: number) => Promise<T>): Promise<T> {
  const { config, weights } = loadModel(options.model);
  const adapter = options.adapter ? loadPeftAdapter(options.adapter, config) : undefined;
  const backend: Backend = await openBackend(options.backend, undefined, options.threads);
  try {
    const model = LlamaModel.upload(backend, config, weights, { storage: options.weights });
    const bank = adapter ? new LoraBank(backend, config, 1, adapter.rank, adapter.targetModules) : undefined;
    if (adapter) bank!.load(0, adapter);
    return await use(model, bank, adapter ? 0 : -1);
  } finally {
    backend.destroy();
  }
}

export async function logitsCommand(options: ModelOptions & { tokens: string; out: string }): Promise<void> {
  const tokens = parseTokenIds(options.tokens);
  await withModel(options, async (model, bank, slot) => {
    const logits = await model.logits(tokens, slot, bank);
    writeNpy(options.out, logits, [tokens.length, model.config.vocabSize]);
    console.log(`wrote logits [${tokens.length}, ${model.config.vocabSize}] to ${options.out} (${model.backend.deviceDescription})`);
  });
}

/** "1,2,3" → [1, 2, 3], or a UsageError naming --tokens. */
export function parseTokenIds(text: string): number[] {
  return text.split(',').map((part) => {
    const id = Number(part.trim());
    if (part.trim() === '' || !Number.isInteger(id)) throw new UsageError(`--tokens: "${part}" is not an integer token id (expected e.g. 1,2,3)`);
    return id;
  });
}

export async function generateCommand(options: ModelOptions & { prompt: string; stop: string[]; seed: number; maxTokens: number; temperature: number; topP: number }): Promise<void> {
  // The same bounds as a scenario's sampling fields: a negative temperature would flip the distribution.
  if (options.temperature < 0) throw new UsageError(`--temperature: ${TEMPERATURE_EXPECTED}, got ${options.temperature}`);
  if (!(options.topP > 0 && options.topP <= 1)) throw new UsageError(`--top-p: expected a number in (0, 1], got ${options.topP}`);
  if (options.maxTokens < 1) throw new UsageError(`--max-tokens: expected an integer >= 1, got ${options.maxTokens}`);
  if (options.stop.includes('')) throw new UsageError('--stop: a stop string is empty (it would end the generation at once)');
  const tokenizer = loadTokenizer(join(options.model, 'tokenizer.json'));
  const prompt = tokenizer.encodePrompt(options.prompt);
  if (prompt.length === 0) throw new UsageError('--prompt: no tokens (this tokenizer adds no BOS to an empty prompt); give some text');
  await withModel(options, async (model, bank, slot) => {
    const stopTokens = [...model.config.eosTokenIds, ...(tokenizer.eosTokenId === null ? [] : [tokenizer.eosTokenId])];
    const request = { requestId: 0, prompt, adapter: slot, maxTokens: options.maxTokens, seed: options.seed, temperature: options.temperature, topP: options.topP, stopTokens, stopStrings: options.stop };
    process.stdout.write(options.prompt);
    // One readback a token, so the text streams as it is sampled (the device loop's default reads every 16).
    await generateText(model, tokenizer, [request], { bank, stepsPerRead: 1, onText: (_, piece) => process.stdout.write(piece) });
    process.stdout.write('\n');
  });
}

export async function initModelCommand(options: { out: string; preset: string; seed: number; dtype: StoredDType }): Promise<void> {
  const config = TINY_CONFIGS[options.preset];
  if (!config) throw new UsageError(`--preset: unknown "${options.preset}"; choose one of ${Object.keys(TINY_CONFIGS).join(', ')}`);
  const tokenizerJson = config.vocabSize >= ARITH_ALPHABET.length + 3 ? charTokenizerJson(ARITH_ALPHABET) : undefined;
  saveModel(options.out, config, randomModel(config, options.seed), { dtype: options.dtype, tokenizerJson });
  console.log(`wrote a ${options.preset} model (seed ${options.seed}, ${options.dtype}) to ${options.out}`);
}

export async function initAdapterCommand(options: { model: string; out: string; rank: number; alpha?: number; targets: string; seed: number; init: 'peft' | 'gaussian' }): Promise<void> {
  const config = loadConfig(options.model);
  const targets = options.targets.split(',').map((m) => m.trim());
  const unknown = targets.filter((m) => !(LORA_MODULES as readonly string[]).includes(m));
  if (unknown.length > 0) throw new UsageError(`--targets: unknown module ${unknown.map((m) => `"${m}"`).join(', ')}; choose from ${LORA_MODULES.join(', ')}`);
  const repeated = targets.find((m, i) => targets.indexOf(m) !== i);
  if (repeated) throw new UsageError(`--targets: ${repeated} is named twice; name each module once`);
  if (options.rank < 1) throw new UsageError(`--rank must be at least 1, got ${options.rank}`);
  const limit = maxLoraRank(config, targets as LoraModule[]);
  if (options.rank > limit.rank) throw new UsageError(`--rank ${options.rank} ${rankExceeds(limit, config)} (${options.model})`);
  if (options.alpha !== undefined && !(options.alpha > 0)) throw new UsageError(`--alpha must be a positive number (the delta is scaled by alpha / rank), got ${options.alpha}`);
  const adapter = randomAdapter(config, { rank: options.rank, alpha: options.alpha ?? 2 * options.rank, targets: targets as LoraModule[], seed: options.seed, init: options.init });
  savePeftAdapter(options.out, { ...adapter, baseModel: resolve(options.model) }); // absolute: PEFT finds the base from any folder
  console.log(`wrote a rank-${options.rank} adapter on ${targets.join(', ')} to ${options.out}`);
}
