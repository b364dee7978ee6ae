// Commands that train or differentiate: grad (the LoRA gradient of a sequence's log-likelihood).

import { savePeftAdapter } from '../model/peft.js';
import { packSequences } from '../train/batch.js';
import { LlamaTrainer, loraGradKey } from '../train/llama-backward.js';
import { logLikelihoodWeights } from '../train/objective.js';
import { gradientsOf } from '../train/steps.js';
import { parseTokenIds, withModel, type ModelOptions } from './model-commands.js';
import { UsageError } from './run-command.js';

/**
 * Writes ∂/∂θ Σ_{t>=1} log p(token_t | tokens_<t) for every LoRA factor θ of the adapter, in the adapter's own
 * PEFT layout (same keys, shapes and adapter_config.json), so that it can be compared with PyTorch/PEFT.
 */
export async function gradCommand(options: ModelOptions & { tokens: string; outDir: string }): Promise<void> {
  if (!options.adapter) throw new UsageError('--adapter is required: grad differentiates with respect to a LoRA adapter');
  const tokens = parseTokenIds(options.tokens);
  if (tokens.length < 2) throw new UsageError(`--tokens: ${tokens.length} token(s) given; at least 2 are needed (a context and a token to predict)`);
  await withModel(options, async (model, bank) => {
    const trainer = new LlamaTrainer(model, bank);
    const batch = packSequences([{ tokens, adapter: 0 }], model.config.vocabSize, model.maxContext);
    const { weights, grads } = await gradientsOf(trainer, batch, 'lora', (logProbs) => logLikelihoodWeights(batch, logProbs));
    const gradient = await bank!.readSlotOf(0, (layer, module) => ({ a: grads.get(loraGradKey(layer, module, 'a'))!, b: grads.get(loraGradKey(layer, module, 'b'))! }));
    savePeftAdapter(options.outDir, { ...gradient, baseModel: options.model });
    const norm = Math.sqrt(gradient.layers.flatMap((l) => Object.values(l)).reduce((s, f) => s + [...f.a, ...f.b].reduce((q, v) => q + v * v, 0), 0));
    console.log(`log-likelihood ${weights.loss.toFixed(6)} over ${tokens.length - 1} predicted tokens; gradient norm ${norm.toExponential(4)}`);
    console.log(`wrote the gradient as a PEFT adapter to ${options.outDir} (${model.backend.deviceDescription})`);
  });
}
