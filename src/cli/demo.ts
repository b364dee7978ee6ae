// The quick start's main job until the actor runtime exists: a seeded tiny model serves one batch of requests
// through four LoRA adapters (and the bare base), then checks that each request's tokens are the same when it
// runs alone (DESIGN.md rules 2 and 3).

import { join } from 'node:path';
import { openBackend, type BackendChoice } from '../backend/select.js';
import { randomModel, saveModel } from '../model/checkpoint.js';
import { TINY_CONFIGS } from '../model/config.js';
import { generate, type GenerationRequest } from '../model/generate.js';
import { LlamaModel } from '../model/llama.js';
import { LoraBank } from '../model/lora-bank.js';
import { randomAdapter, savePeftAdapter } from '../model/peft.js';
import { ARITH_ALPHABET, CHAR_SPECIALS, charTokenizerJson, loadTokenizer } from '../model/tokenizer.js';

const ADAPTERS = 4;
const PROMPTS = ['1+2=', '(3*x)%7=', 'x=5;x*x=', '12//5=', '9-4=', 'x+x=', '(1+1)*3=', '8%3='];

export async function runDemo(options: { out: string; backend: BackendChoice }): Promise<void> {
  const config = TINY_CONFIGS['qwen2-tiny']!;
  const modelDir = join(options.out, 'model');
  const weights = randomModel(config, 1);
  saveModel(modelDir, config, weights, { tokenizerJson: charTokenizerJson(ARITH_ALPHABET) });
  const tokenizer = loadTokenizer(join(modelDir, 'tokenizer.json'));
  const adapters = Array.from({ length: ADAPTERS }, (_, i) => {
    const adapter = randomAdapter(config, { rank: 8, alpha: 16, targets: ['q_proj', 'v_proj', 'up_proj', 'down_proj'], seed: 100 + i, init: 'gaussian' });
    savePeftAdapter(join(options.out, `adapter-${i}`), adapter);
    return adapter;
  });
  console.log(`model and ${ADAPTERS} adapters written to ${options.out}`);

  const backend = await openBackend(options.backend);
  try {
    console.log(`backend: ${backend.deviceDescription}`);
    const model = LlamaModel.upload(backend, config, weights);
    const bank = new LoraBank(backend, config, ADAPTERS, 8, adapters[0]!.targetModules);
    adapters.forEach((adapter, slot) => bank.load(slot, adapter));
    const requests: GenerationRequest[] = PROMPTS.map((text, i) => ({
      requestId: i,
      prompt: tokenizer.encodePrompt(text),
      adapter: (i % (ADAPTERS + 1)) - 1, // -1 = the bare base model
      maxTokens: 16,
      seed: 7,
      temperature: 0.8,
      topP: 0.95,
    }));
    // The token mask (the hook grammar-constrained decoding uses) keeps a random model to the alphabet's characters.
    const characters = new Uint32Array(Math.ceil(config.vocabSize / 32));
    for (let id = CHAR_SPECIALS.length; id < tokenizer.vocabSize; id++) characters[id >>> 5]! |= 1 << (id & 31);
    const options = { bank, mask: () => characters };
    const started = process.hrtime.bigint(); // wall-clock-ok: display only
    const batched = await generate(model, requests, options);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9; // wall-clock-ok: display only
    const generatedTokens = batched.reduce((n, r) => n + r.tokens.length, 0);
    for (const [i, result] of batched.entries()) {
      const adapter = requests[i]!.adapter < 0 ? 'base     ' : `adapter ${requests[i]!.adapter}`;
      console.log(`  ${adapter}  ${PROMPTS[i]!.padEnd(10)} → ${JSON.stringify(tokenizer.decode(result.tokens))}`);
    }
    console.log(`${requests.length} requests, ${generatedTokens} tokens in ${seconds.toFixed(2)} s (${(generatedTokens / seconds).toFixed(0)} tokens/s, one batch)`);

    let invariant = true;
    for (const request of requests) {
      const [alone] = await generate(model, [request], options);
      invariant &&= alone!.tokens.join() === batched[request.requestId]!.tokens.join();
    }
    console.log(invariant ? 'batch invariance: every request yields the same tokens alone as in the batch' : 'batch invariance: VIOLATED');
    if (!invariant) process.exitCode = 1;
  } finally {
    backend.destroy();
  }
}
