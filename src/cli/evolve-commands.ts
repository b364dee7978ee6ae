// populora evolve mutate | crossover: make one child adapter in PEFT layout, with its lineage beside it.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CROSSOVER_KINDS, crossover, mutate, type CrossoverKind } from '../evolution/operators.js';
import type { LineageRecord } from '../evolution/selection.js';
import { LORA_MODULES, loadPeftAdapter, savePeftAdapter, type LoraAdapter, type LoraModule } from '../model/peft.js';
import { UsageError } from './run-command.js';

function list<T>(flag: string, text: string | undefined, parse: (item: string) => T, valid: (item: T) => boolean, expected: string): T[] | undefined {
  if (text === undefined) return undefined;
  return text.split(',').map((raw) => {
    const item = parse(raw.trim());
    if (!valid(item)) throw new UsageError(`${flag}: "${raw}" is not ${expected}`);
    return item;
  });
}

function writeChild(out: string, child: LoraAdapter, lineage: Omit<LineageRecord, 'child' | 'step'>): void {
  savePeftAdapter(out, child);
  const record: LineageRecord = { child: out, ...lineage, step: null };
  writeFileSync(join(out, 'lineage.json'), `${JSON.stringify(record, null, 2)}\n`);
  console.log(`wrote a rank-${child.rank} ${lineage.operator} child of ${lineage.parents.join(' and ')} to ${out}`);
}

export async function mutateCommand(o: { adapter: string; sigma: number; seed: number; out: string; modules?: string; layers?: string; fraction?: number }): Promise<void> {
  if (!(o.sigma >= 0)) throw new UsageError(`--sigma must be a number >= 0 (the noise's std relative to each matrix's RMS), got ${o.sigma}`);
  if (o.fraction !== undefined && !(o.fraction > 0 && o.fraction <= 1)) throw new UsageError(`--fraction must be in (0, 1] (the share of entries perturbed), got ${o.fraction}`);
  const parent = loadPeftAdapter(o.adapter);
  const modules = list('--modules', o.modules, (m) => m as LoraModule, (m) => (LORA_MODULES as readonly string[]).includes(m), `one of ${LORA_MODULES.join(', ')}`);
  const layers = list('--layers', o.layers, Number, (l) => Number.isInteger(l) && l >= 0 && l < parent.layers.length, `a layer index in [0, ${parent.layers.length})`);
  const untargeted = modules?.filter((m) => !parent.targetModules.includes(m)) ?? [];
  if (untargeted.length > 0) throw new UsageError(`--modules: the adapter does not target ${untargeted.join(', ')} (it targets ${parent.targetModules.join(', ')})`);
  const parameters = { sigma: o.sigma, fraction: o.fraction ?? 1, modules: modules ?? null, layers: layers ?? null };
  writeChild(o.out, mutate(parent, { sigma: o.sigma, seed: o.seed, modules, layers, fraction: o.fraction }), { parents: [o.adapter], operator: 'mutate', parameters, seed: o.seed });
}

export async function crossoverCommand(o: { a: string; b: string; kind: CrossoverKind; weights?: string; seed: number; out: string }): Promise<void> {
  if (!CROSSOVER_KINDS.includes(o.kind)) throw new UsageError(`--kind: "${o.kind}" is not one of ${CROSSOVER_KINDS.join(', ')}`);
  const weights = list('--weights', o.weights, Number, Number.isFinite, 'a number');
  if (weights && weights.length !== 2) throw new UsageError(`--weights takes two numbers, e.g. 0.5,0.5 (got ${weights.length})`);
  const [p1, p2] = [loadPeftAdapter(o.a), loadPeftAdapter(o.b)];
  const pair = weights as [number, number] | undefined;
  const child = crossover(p1, p2, { kind: o.kind, weights: pair, seed: o.seed });
  writeChild(o.out, child, { parents: [o.a, o.b], operator: 'crossover', parameters: { kind: o.kind, weights: pair ?? [0.5, 0.5] }, seed: o.seed });
}
