#!/usr/bin/env node
// The populora command line. Each command is a thin shell over the library; errors print one clear line.

import { Command, InvalidArgumentError, Option } from 'commander';
import { integer } from './integer-option.js';
import { BACKEND_CHOICES } from '../backend/select.js';
import { MAX_THREADS } from '../backend/cpu-threads.js';
import { CROSSOVER_KINDS } from '../evolution/operators.js';
import { runDemo } from './demo.js';
import { initCommand } from './init-command.js';
import { crossoverCommand, mutateCommand } from './evolve-commands.js';
import { generateCommand, initAdapterCommand, initModelCommand, logitsCommand } from './model-commands.js';
import { runCommand } from './run-command.js';
import { gradCommand } from './train-commands.js';
import { pretrainCommand } from './pretrain-command.js';
import { compareCommand, exportCommand, reportCommand } from './report-commands.js';
import { replayCommand, runScenarioCommand } from './run-commands.js';
import type { DomainCommand } from '../domains/domain.js';
import { domains } from '../domains/index.js';
import { sweepCommand } from './sweep-command.js';
import { workerCommand } from './worker-command.js';
import { addServeCommand } from './serve-command.js';
import { addSamplesCommand } from './samples-command.js';
import { DEFAULT_CLUSTER } from '../cluster/nats.js';
import { LIMITS } from '../scenario/scenario.js';

const number = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isFinite(n)) throw new InvalidArgumentError(`${name} must be a number, got "${value}"`);
  return n;
};
/** `--batch-tokens`: a whole number of tokens, auto or unbounded (src/engine/budget.ts). */
const batchTokens = (value: string) => {
  if (value === 'auto' || value === 'unbounded') return value;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`--batch-tokens must be a whole number of tokens >= 1, auto or unbounded, got "${value}"`);
  return n;
};
const batchTokensOption = () => new Option('--batch-tokens <n>', "tokens the engine's micro-batches hold, auto (from the memory available) or unbounded; overrides the scenario's batchTokens; the run is the same with any (docs/scale.md)").argParser(batchTokens);
const backendOption = () => new Option('--backend <name>', 'compute backend').choices(BACKEND_CHOICES).default('auto');
const verifierWorkersOption = () => new Option('--verifier-workers <n>', 'verifier sandbox processes (results do not depend on it)').argParser(integer('--verifier-workers', 1, LIMITS.threads)).default(1);
const threadsOption = () => new Option('--threads <n>', 'CPU backend threads (default: the scenario\'s, else one per core; results do not depend on it)').argParser(integer('--threads', 1, MAX_THREADS));
const clusterOption = () => new Option('--cluster <name>', 'cluster name: the NATS subjects\' prefix, which keeps runs sharing a server apart').default(DEFAULT_CLUSTER);
const storageOption = () => new Option('--weights <storage>', 'device storage of weight matrices (default: as stored in the file)').choices(['f32', 'f16']);

const program = new Command('populora').description('Population self-play of LoRA adapters on WebGPU').option('--verbose', 'print the stack trace of an error').showHelpAfterError();

program
  .command('logits')
  .description('write the float32 logits [tokens, vocab] of one forward pass as .npy')
  .requiredOption('--model <dir>', 'Hugging Face model folder (config.json, model.safetensors)')
  .option('--adapter <dir>', 'PEFT LoRA adapter folder')
  .requiredOption('--tokens <ids>', 'comma-separated token ids, e.g. 1,2,3')
  .requiredOption('--out <file>', 'output .npy file')
  .addOption(backendOption())
  .addOption(threadsOption())
  .addOption(storageOption())
  .action(runCommand(logitsCommand));

program
  .command('grad')
  .description('write the gradient of a sequence\'s log-likelihood with respect to every LoRA factor, as a PEFT adapter')
  .requiredOption('--model <dir>', 'Hugging Face model folder (config.json, model.safetensors)')
  .requiredOption('--adapter <dir>', 'PEFT LoRA adapter folder')
  .requiredOption('--tokens <ids>', 'comma-separated token ids, e.g. 1,2,3,4 (the gradient is of Σ_{t>=1} log p(token_t | tokens_<t))')
  .requiredOption('--out-dir <dir>', 'output folder: adapter_model.safetensors + adapter_config.json, same keys and shapes as the adapter')
  .addOption(backendOption())
  .addOption(threadsOption())
  .addOption(storageOption())
  .action(runCommand(gradCommand));

program
  .command('generate')
  .description('generate a completion of a prompt')
  .requiredOption('--model <dir>', 'Hugging Face model folder (with tokenizer.json)')
  .option('--adapter <dir>', 'PEFT LoRA adapter folder')
  .requiredOption('--prompt <text>', 'prompt text')
  .option('--stop <text>', 'stop string: the completion ends before it (repeatable)', (value: string, previous: string[]) => [...previous, value], [] as string[])
  .option('--seed <n>', 'sampling seed', integer('--seed', 0), 0)
  .option('--max-tokens <n>', 'most tokens to generate', integer('--max-tokens', 1), 64)
  .option('--temperature <t>', 'sampling temperature; 0 = greedy', number('--temperature'), 1)
  .option('--top-p <p>', 'nucleus sampling mass', number('--top-p'), 1)
  .addOption(backendOption())
  .addOption(threadsOption())
  .addOption(storageOption())
  .action(runCommand(generateCommand));

program
  .command('init-model')
  .description('create a model with seeded random weights and save it in Hugging Face layout')
  .requiredOption('--out <dir>', 'output folder')
  .option('--preset <name>', 'model shape (tiny, qwen2-tiny, ...)', 'tiny')
  .option('--seed <n>', 'weight seed', integer('--seed', 0), 0)
  .addOption(new Option('--dtype <dtype>', 'stored dtype').choices(['F32', 'F16', 'BF16']).default('F32'))
  .action(runCommand(initModelCommand));

program
  .command('init-adapter')
  .description('create a LoRA adapter with seeded random factors and save it in PEFT layout')
  .requiredOption('--model <dir>', 'base model folder')
  .requiredOption('--out <dir>', 'output folder')
  .option('--rank <r>', 'LoRA rank', integer('--rank', 1, LIMITS.rank), 8)
  .option('--alpha <a>', 'LoRA alpha (default: 2 x rank)', number('--alpha'))
  .option('--targets <modules>', 'comma-separated modules', 'q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj')
  .option('--seed <n>', 'factor seed', integer('--seed', 0), 0)
  .addOption(new Option('--init <kind>', 'peft: B = 0 (delta starts at zero); gaussian: both factors random').choices(['peft', 'gaussian']).default('peft'))
  .action(runCommand(initAdapterCommand));

const evolve = program.command('evolve').description('make a child adapter in LoRA weight space (PEFT layout in and out)');
evolve
  .command('mutate')
  .description('Gaussian noise on A and B, scaled to each matrix\'s RMS')
  .requiredOption('--adapter <dir>', 'parent PEFT adapter folder')
  .requiredOption('--sigma <s>', 'noise std relative to each matrix\'s RMS', number('--sigma'))
  .requiredOption('--out <dir>', 'child adapter folder')
  .option('--seed <n>', 'noise seed', integer('--seed', 0), 0)
  .option('--modules <list>', 'only these modules, e.g. q_proj,v_proj')
  .option('--layers <list>', 'only these layers, e.g. 0,1')
  .option('--fraction <f>', 'perturb only this share of the entries (sparse mutation)', number('--fraction'))
  .action(runCommand(mutateCommand));
evolve
  .command('crossover')
  .description('a child of the same rank from two parents')
  .requiredOption('--a <dir>', 'first parent (the child keeps its scale)')
  .requiredOption('--b <dir>', 'second parent')
  .requiredOption('--kind <kind>', `${CROSSOVER_KINDS.join(' | ')}`)
  .requiredOption('--out <dir>', 'child adapter folder')
  .option('--weights <w1,w2>', 'svd/interpolate: blend weights; module/rank: w1 is the chance of taking parent a')
  .option('--seed <n>', 'seed', integer('--seed', 0), 0)
  .action(runCommand(crossoverCommand));

program
  .command('init')
  .description('a new experiment folder, runnable at once: a scenario on the embedded toy model, a matchmaking policy of its own to edit (a plug-in), a sweep of it against a built-in, a README')
  .argument('<dir>', 'the folder to create (new or empty)')
  .action(runCommand(initCommand));

program
  .command('run')
  .description('run a population self-play scenario: writes a run folder (events, metrics, checkpoints, lineage)')
  .argument('[scenario]', 'scenario file, e.g. scenarios/quickstart.yaml')
  .option('--out <dir>', 'run folder (default: runs/<scenario name>)')
  .option('--resume <dir>', 'continue a crashed run from its last checkpoint')
  .option('--overwrite', 'replace an earlier run in the --out folder')
  .addOption(verifierWorkersOption())
  .addOption(threadsOption())
  .addOption(batchTokensOption())
  .option('--nats <url>', 'run over NATS as the coordinator (e.g. nats://host:4222): messages on the server, verifier jobs on verifier workers (populora worker); credentials from the environment (docs/cluster.md)')
  .addOption(clusterOption())
  .action(runCommand(runScenarioCommand));
program
  .command('worker')
  .description('a worker of runs over NATS, for one scenario (it refuses a coordinator running another): serves until SIGINT or SIGTERM')
  .argument('<scenario>', 'the scenario file the coordinator runs')
  .requiredOption('--nats <url>', 'the NATS server, e.g. nats://host:4222 (credentials from the environment: docs/cluster.md)')
  .option('--engine', 'run the engine for a shard of the population\'s adapters (loads the scenario\'s base model on its backend)')
  .option('--verifier', 'verify proposals and answers for the coordinator (the verifier workers\' queue group)')
  .option('--id <name>', 'an engine worker\'s name on the cluster (default: host-pid); shards go to workers in name order')
  .option('--threads <n>', 'verifier threads or sandbox processes, or an engine worker\'s CPU backend threads (default: one per core)', integer('--threads', 1, LIMITS.threads))
  .addOption(clusterOption())
  .action(runCommand(workerCommand));
program
  .command('sweep')
  .description('a base scenario and a grid of overrides: every run as an ordinary run folder, N processes at a time, with sweep.json listing them; validated (and its compute compared) before anything runs')
  .argument('<sweep>', 'sweep file, e.g. scenarios/sweeps/paper-toy.yaml')
  .option('--out <dir>', 'sweep folder (default: runs/<sweep name>)')
  .option('--parallel <n>', 'runs at a time (default: as many as the cores and the free memory allow)', integer('--parallel', 1))
  .option('--resume', 'continue a stopped or killed sweep in --out: finished runs are kept, interrupted ones resume from their checkpoints')
  .action(runCommand(sweepCommand));
program
  .command('replay')
  .description('re-execute a run from its recorded scenario and check every file of the run folder against the replay (the event log event by event, metrics, lineage, summary, checkpoints and their manifests)')
  .argument('<dir>', 'run folder')
  .addOption(verifierWorkersOption())
  .addOption(threadsOption())
  .addOption(batchTokensOption())
  .action(runCommand(replayCommand));
program
  .command('pretrain')
  .description('train a tiny base model from scratch on a domain\'s task text (arith or python); writes it in Hugging Face layout with its loss curve and held-out scores')
  .argument('<scenario>', 'pretraining scenario, e.g. scenarios/pretrain/arith-tiny.yaml or scenarios/pretrain/python-tiny.yaml')
  .option('--out <dir>', 'model folder (default: the scenario\'s "out")')
  .action(runCommand(pretrainCommand));
program
  .command('report')
  .description('write a run\'s report.html: plots over steps, the matchmaking matrix, the lineage tree (opens offline)')
  .argument('<dir>', 'run folder')
  .option('--out <file>', 'report file (default: DIR/report.html)')
  .action(runCommand(reportCommand));
program
  .command('compare')
  .description('several runs on the same axes in one report, and a table of final and mean metrics; runs that differ only in seed are grouped: mean curves with 95% bootstrap bands, intervals, and permutation tests against the first group')
  .argument('<dirs...>', 'run folders, or sweep folders (their finished runs)')
  .option('--out <file>', 'report file', 'compare.html')
  .action(runCommand(compareCommand));
program
  .command('export')
  .description('every member\'s adapter at a checkpoint, in PEFT layout, with population.json (role, sub-population, rating, lineage)')
  .argument('<dir>', 'run folder')
  .option('--step <n>', 'checkpoint step (default: the last)', integer('--step', 0))
  .requiredOption('--out <dir>', 'output folder (new or empty)')
  .action(runCommand(exportCommand));
addServeCommand(program);
addSamplesCommand(program);
/** A command a domain brings (domain.ts: DomainCommand), as commander takes it. */
function addDomainCommand(spec: DomainCommand): void {
  const command = program.command(spec.name).description(spec.description);
  for (const o of spec.options) {
    const option = new Option(o.flags, o.description).makeOptionMandatory(o.required ?? false);
    if (o.repeatable) option.argParser((value: string, previous: string[] = []) => [...previous, value]).default([]);
    if (o.integer) option.argParser(integer(o.flags.split(' ')[0]!));
    if (o.default !== undefined) option.default(o.default);
    command.addOption(option);
  }
  command.action(runCommand((options: Record<string, unknown>) => spec.run(options)));
}

for (const command of domains().flatMap((domain) => domain.commands ?? [])) addDomainCommand(command);
program
  .command('demo')
  .description('the quick start: a seeded tiny model serves a batch of requests through several LoRA adapters')
  .option('--out <dir>', 'folder for the demo model and adapters', 'out/demo')
  .addOption(backendOption())
  .action(runCommand(runDemo));

await program.parseAsync();
