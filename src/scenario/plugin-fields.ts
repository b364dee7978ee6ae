// The scenario fields that may name a plug-in module where they name a built-in (docs/plugins.md), how a module is
// told from a built-in's name, and what a run records of each plug-in (scenario.json's `plugins`).
//
//   domain: ./domains/sorting/index.js                  matchmaking: { policy: ./policies/elo-window.js, options: {...} }
//   evolution: { mutation: ./ops/svd-noise.js, mutationOptions: {...}, crossover: ./ops/dare.js, crossoverOptions: {...} }
//   rating: { system: ./ratings/glicko.js, options: {...} }   rewards: { hook: ./rewards/r-zero.js, options: {...} }
//
// A module is named by its path, relative to the scenario file; scenario.json holds it absolute, with the sha256 of
// the module and of every local file it imports. No file in `src/` changes for a new plug-in.

import { basename, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

export type PluginKind = 'domain' | 'policy' | 'operator' | 'rating' | 'reward';

export const PLUGIN_FIELDS: ReadonlyArray<{ field: string; kind: PluginKind }> = [
  { field: 'domain', kind: 'domain' },
  { field: 'matchmaking.policy', kind: 'policy' },
  { field: 'evolution.mutation', kind: 'operator' },
  { field: 'evolution.crossover', kind: 'operator' },
  { field: 'rating.system', kind: 'rating' },
  { field: 'rewards.hook', kind: 'reward' },
];

/** A module's path, not a built-in's name: it has a "/" (or "\"), or ends in a script extension. */
export const isPluginReference = (value: unknown): value is string => typeof value === 'string' && (/[/\\]/.test(value) || /\.[cm]?[jt]s$/.test(value));

/** What scenario.json records of one plug-in: the field that names it, its module and the local files it imports. */
export interface PluginRecord {
  field: string;
  path: string; // absolute
  sha256: string;
  imports: Array<{ path: string; sha256: string }>;
}

const hashed = z.strictObject({ path: z.string(), sha256: z.string().regex(/^[0-9a-f]{64}$/, { error: 'expected a sha256 in hex' }) });
export const pluginRecordsSchema = z.array(z.strictObject({ field: z.string(), path: z.string(), sha256: hashed.shape.sha256, imports: z.array(hashed) }), { error: 'expected the list a run records of its plug-ins' });

/** The short name a plug-in goes by where a path would tie a run to a folder (messages, lineage, tables): file@sha256[:12]. */
export const pluginLabel = (record: Pick<PluginRecord, 'path' | 'sha256'>) => `${basename(record.path)}@${record.sha256.slice(0, 12)}`;

/** The value at a dotted path of a plain object (undefined where a section is missing). */
export function fieldOf(raw: unknown, field: string): unknown {
  return field.split('.').reduce<unknown>((node, name) => (typeof node === 'object' && node !== null && !Array.isArray(node) ? (node as Record<string, unknown>)[name] : undefined), raw);
}

function setFieldOf(raw: Record<string, unknown>, field: string, value: unknown): void {
  const names = field.split('.');
  const parent = names.slice(0, -1).reduce<Record<string, unknown>>((node, name) => node[name] as Record<string, unknown>, raw);
  parent[names.at(-1)!] = value;
}

/** The plug-ins a raw scenario names: each field, its kind and the module's absolute path (relative ones taken from `baseDir`). */
export function pluginReferences(raw: unknown, baseDir: string): Array<{ field: string; kind: PluginKind; path: string }> {
  return PLUGIN_FIELDS.flatMap(({ field, kind }) => {
    const value = fieldOf(raw, field);
    if (!isPluginReference(value)) return [];
    const path = value.startsWith('file:') ? fileURLToPath(value) : isAbsolute(value) ? value : resolve(baseDir, value);
    return [{ field, kind, path }];
  });
}

/** The raw scenario with each plug-in reference made absolute (a sweep moves scenarios to other folders). */
export function withAbsolutePluginPaths<T>(raw: T, baseDir: string): T {
  const copy = structuredClone(raw);
  for (const { field, path } of pluginReferences(raw, baseDir)) setFieldOf(copy as Record<string, unknown>, field, path);
  return copy;
}

/**
 * A resolved scenario with every plug-in named by its label (file@sha256) instead of its absolute path: what is
 * the same on every machine that has the same code (a cluster's workers compare it: src/cluster/scenario-hash.ts).
 */
export function withPluginLabels<T extends { plugins?: PluginRecord[] }>(scenario: T): T {
  if (!scenario.plugins) return scenario;
  const copy = structuredClone(scenario) as T & Record<string, unknown>;
  for (const record of scenario.plugins) setFieldOf(copy, record.field, pluginLabel(record));
  copy.plugins = scenario.plugins.map((record) => ({ field: record.field, path: pluginLabel(record), sha256: record.sha256, imports: record.imports.map((file) => ({ path: basename(file.path), sha256: file.sha256 })) }));
  return copy;
}
