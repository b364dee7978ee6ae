// Plug-in evolution operators (`evolution: { mutation: ./op.js, crossover: ./op.js }`), registered under their
// module's absolute path by src/plugins/. The engine core runs one on the host: it reads the parents out of the
// bank, calls the operator and loads the child, after checking that the child has the parents' rank, modules and
// shapes and holds finite numbers only (a child that would poison the bank is named, never loaded).

import type { z } from 'zod';
import type { LoraAdapter } from '../model/peft.js';
import type { EvolutionOperator } from '../plugins/define.js';
import { guarded } from '../plugins/guard.js';
import { PluginRegistry } from '../plugins/registry.js';
import { Streams } from '../runtime/streams.js';
import { checkCompatible } from './operators.js';

const operators = new PluginRegistry<EvolutionOperator<unknown>>();

export const registerEvolutionOperator = (key: string, operator: EvolutionOperator<unknown>, options: z.ZodType<unknown>) => operators.register(key, operator, options);

/** The options schema of the operator registered under `key`; undefined when there is none. */
export const evolutionOperatorOptions = (key: string) => operators.options(key);

export const isEvolutionOperator = (key: string, role: 'mutate' | 'crossover'): boolean => typeof operators.get(key)?.plugin[role] === 'function';

/** A plug-in operator ready to make children: parents in, the child out (checked). */
export type ChildMaker = (parents: readonly LoraAdapter[], seed: number) => LoraAdapter;

/** The operator under `key` in one role, with the scenario's options parsed. */
export function childMaker(key: string, role: 'mutate' | 'crossover', options: unknown): ChildMaker {
  const registered = operators.get(key);
  const make = registered?.plugin[role];
  if (!registered || !make) throw new RangeError(`the evolution operator ${key} is not loaded with a ${role} function (a scenario's plug-ins are loaded by loadScenario)`);
  const parsed = registered.options.parse(options ?? {});
  const who = `the evolution operator ${key}, ${role}()`;
  const call = guarded(who, make.bind(registered.plugin) as (...args: unknown[]) => LoraAdapter);
  return (parents, seed) => {
    const context = { seed, random: new Streams(seed).stream('plugin-operator'), options: parsed };
    const child = role === 'mutate' ? call(parents[0], context) : call(parents[0], parents[1], context);
    checkChild(child, parents[0]!, who);
    return child;
  };
}

function checkChild(child: LoraAdapter, parent: LoraAdapter, who: string): void {
  if (typeof child !== 'object' || child === null || !Array.isArray(child.layers)) throw new TypeError(`${who} returned ${String(child)}, not an adapter ({ rank, alpha, targetModules, layers, ... })`);
  try {
    checkCompatible(parent, child);
  } catch (error) {
    throw new RangeError(`${who} returned a child unlike its parent: ${(error as Error).message.replace('parents are not compatible for crossover: ', '')}`);
  }
  child.layers.forEach((layer, l) => {
    for (const [module, factors] of Object.entries(layer)) {
      for (const [name, values] of [['A', factors!.a], ['B', factors!.b]] as const) {
        if (!(values instanceof Float32Array)) throw new TypeError(`${who} returned a child whose layer ${l} ${module} ${name} is not a Float32Array`);
        const bad = values.findIndex((v) => !Number.isFinite(v));
        if (bad >= 0) throw new RangeError(`${who} returned a child whose layer ${l} ${module} ${name}[${bad}] is ${values[bad]}: a child holds finite numbers only`);
      }
    }
  });
}
