// A sweep file (scenarios/sweeps/*.yaml): a base scenario and a grid of overrides, each a scenario field by its
// dotted path with a list of values; optionally `variants`, named bundles of overrides that change together (a
// single-agent baseline needs other population and sampling fields than a population to spend the same compute),
// which make one more axis of the grid. The runs are every combination. Before anything runs, each is resolved
// and validated as an ordinary scenario (a bad field or value is named, with the run it makes), and their compute
// is compared: proposals and answers per step.
//
//   name: paper-toy                       # default: the file's name
//   base: ../paper-toy/cross-population.yaml   # relative to this file (or `scenario:` inline)
//   overrides: { rating.system: trueskill }   # for every run
//   variants: { single-agent: { population.subpopulations: 1, matchmaking.policy: self, ... }, cross: {} }
//   grid: { seed: [1..8] }                # "A..B" stands for the integers A to B
//   equalCompute: true                    # refuse a grid whose runs differ in proposals or answers per step

import { readFileSync } from 'node:fs';
import { basename, dirname, extname, resolve } from 'node:path';
import { z } from 'zod';
import { parseScenario, parseYamlWith, ScenarioError, type Scenario } from '../scenario/scenario.js';
import { fieldOf, withAbsolutePluginPaths } from '../scenario/plugin-fields.js';
import { loadScenarioPlugins } from '../scenario/plugins.js';

const overrides = z.record(z.string(), z.unknown(), { error: 'expected a mapping of scenario fields (dotted paths) to values' });

export const sweepSchema = z
  .strictObject({
    name: z.string({ error: 'expected a name' }).regex(/^[A-Za-z0-9._-]+$/, { error: 'expected letters, digits, ".", "_" or "-"' }).optional(),
    base: z.string({ error: 'expected the path of a scenario file' }).optional(),
    scenario: z.record(z.string(), z.unknown(), { error: 'expected a scenario (a mapping)' }).optional(),
    overrides: overrides.default({}),
    variants: z.record(z.string().regex(/^[A-Za-z0-9._-]+$/, { error: 'a variant name has letters, digits, ".", "_" or "-"' }), overrides).optional(),
    grid: z.record(z.string(), z.array(z.unknown(), { error: 'expected a list of values, e.g. [1, 2, 3] or [1..8]' }).min(1, { error: 'expected at least one value' }), { error: 'expected a mapping of scenario fields to lists of values' }).default({}),
    equalCompute: z.boolean({ error: 'expected true or false' }).default(true),
  })
  .refine((s) => (s.base === undefined) !== (s.scenario === undefined), { error: 'give the base scenario either as `base: FILE` or inline as `scenario:`, one of them' });

/** What one run spends per step (the same for every run of a sweep at equal compute). */
export interface Compute {
  proposalsPerStep: number;
  answersPerStep: number; // upper bound: every proposal valid and matched
  maxTokens: number;
  steps: number;
}

export interface PlannedRun {
  dir: string; // the run folder's name inside the sweep folder
  group: string; // what its group across seeds is called: the variant and the other non-seed overrides
  variant: string | null;
  overrides: Record<string, unknown>; // field path → value: the sweep's, then the variant's, then the grid's
  scenario: Scenario;
  compute: Compute;
}

export interface SweepPlan {
  file: string; // absolute
  name: string;
  base: string | null; // absolute path of the base scenario file
  equalCompute: boolean;
  runs: PlannedRun[];
}

export function computeOf(s: Scenario): Compute {
  const proposalsPerStep = s.population.subpopulations * s.population.teachers * s.tasks.types.length * s.tasks.perTeacher;
  return { proposalsPerStep, answersPerStep: proposalsPerStep * s.matchmaking.studentsPerTask * s.sampling.answersPerStudent, maxTokens: s.sampling.maxTokens, steps: s.steps };
}

/**
 * Reads a sweep file, expands its grid and validates every run; throws a ScenarioError naming the field. The
 * plug-ins the runs name must be loaded already: openSweep does that.
 */
export function planSweep(file: string): SweepPlan {
  const { runs, ...plan } = expandSweep(file);
  const resolved = runs.map(({ raw, ...run }) => {
    const scenario = resolveRun(raw, run.overrides, file, run.dir);
    return { ...run, scenario, compute: computeOf(scenario) };
  });
  if (plan.equalCompute) checkEqualCompute(resolved, file);
  return { ...plan, runs: resolved };
}

/** planSweep, after importing the plug-ins its runs name (the base scenario's, and any an override names). */
export async function openSweep(file: string): Promise<SweepPlan> {
  const { runs, file: path } = expandSweep(file);
  for (const run of runs) await loadScenarioPlugins(run.raw, `${file} (run ${run.dir})`, dirname(path));
  return planSweep(file);
}

/** A sweep's runs before validation: each run's raw scenario, plug-in paths made absolute. */
function expandSweep(file: string): Omit<SweepPlan, 'runs'> & { runs: Array<Omit<PlannedRun, 'scenario' | 'compute'> & { raw: Record<string, unknown> }> } {
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ScenarioError(`${file}: cannot read the sweep file (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  const sweep = parseYamlWith(sweepSchema, text, file);
  const basePath = sweep.base === undefined ? null : resolve(dirname(path), sweep.base);
  // a plug-in is named relative to the file that names it: the base scenario's, or the sweep's
  const base = basePath === null ? withAbsolutePluginPaths(sweep.scenario!, dirname(path)) : withAbsolutePluginPaths(readBase(basePath, file), dirname(basePath));
  const name = sweep.name ?? basename(path, extname(path));
  const axes: Array<{ field: string; values: unknown[] }> = Object.entries(sweep.grid).map(([field, values]) => ({ field, values: expandRanges(values, field, file) }));
  const variants: Array<[string | null, Record<string, unknown>]> = sweep.variants ? Object.entries(sweep.variants) : [[null, {}]];
  if (variants.length === 0) throw new ScenarioError(`${file}: field "variants": expected at least one variant (or leave "variants" out)`);
  for (const { field } of axes) checkPath(field, file, 'grid');
  for (const field of Object.keys(sweep.overrides)) checkPath(field, file, 'overrides');
  for (const [variant, fields] of variants) for (const field of Object.keys(fields)) checkPath(field, file, `variants.${variant}`);

  // Variants vary fastest (seed 1 of every variant, then seed 2, ...): a sweep stopped part-way has run every group.
  const runs: Array<Omit<PlannedRun, 'scenario' | 'compute'> & { raw: Record<string, unknown> }> = [];
  for (const point of product(axes)) {
    for (const [variant, fields] of variants) {
      const overrides: Record<string, unknown> = { ...sweep.overrides, ...fields, ...Object.fromEntries(point) };
      const dir = runName(variant, point, axes);
      const group = [variant, ...point.filter(([field]) => field !== 'seed').map(([field, value]) => `${leafOf(field, axes)}=${shownValue(value)}`)].filter(Boolean).join(', ') || name;
      const raw = structuredClone(base);
      for (const [field, value] of Object.entries(overrides)) setField(raw, field, pluginPathsOf(field, value, dirname(path)), file, variant);
      if (!('name' in overrides)) raw.name = `${name}.${dir}`;
      runs.push({ dir, group, variant, overrides, raw });
    }
  }
  const dirs = new Set<string>();
  for (const run of runs) {
    if (dirs.has(run.dir)) throw new ScenarioError(`${file}: two runs would share the folder "${run.dir}": give the variants or values names that differ`);
    dirs.add(run.dir);
  }
  return { file: path, name, base: basePath, equalCompute: sweep.equalCompute, runs };
}

/** An override's value with the plug-in paths in it made absolute (relative to the sweep file's folder). */
function pluginPathsOf(field: string, value: unknown, baseDir: string): unknown {
  const holder: Record<string, unknown> = {};
  let node = holder;
  const names = field.split('.');
  for (const name of names.slice(0, -1)) node = node[name] = {};
  node[names.at(-1)!] = value;
  return fieldOf(withAbsolutePluginPaths(holder, baseDir), field);
}

function readBase(path: string, file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ScenarioError(`${file}: field "base": cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); the path is taken relative to the sweep file`);
  }
  return parseYamlWith(z.record(z.string(), z.unknown(), { error: 'expected a scenario (a mapping)' }), text, path);
}

const RANGE = /^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$/;

/** Values with every "A..B" replaced by the integers A, A+1, ..., B. */
function expandRanges(values: unknown[], field: string, file: string): unknown[] {
  return values.flatMap((value) => {
    const range = typeof value === 'string' ? RANGE.exec(value) : null;
    if (!range) return [value];
    const [from, to] = [Number(range[1]), Number(range[2])];
    if (to < from || to - from > 10_000) throw new ScenarioError(`${file}: field "grid.${field}": the range "${value}" must run upwards and hold at most 10001 values`);
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  });
}

function checkPath(field: string, file: string, where: string): void {
  if (!/^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$/.test(field)) throw new ScenarioError(`${file}: field "${where}": "${field}" is not a scenario field path (names joined by ".", e.g. matchmaking.policy)`);
}

/** The grid's points: every combination of one value per axis, the first axis slowest. */
function product(axes: ReadonlyArray<{ field: string; values: unknown[] }>): Array<Array<[string, unknown]>> {
  return axes.reduce<Array<Array<[string, unknown]>>>((points, { field, values }) => points.flatMap((point) => values.map((value): Array<[string, unknown]> => [...point, [field, value]])), [[]]);
}

/** A field's last name, or its whole path where two axes share a last name. */
function leafOf(field: string, axes: ReadonlyArray<{ field: string }>): string {
  const leaf = field.split('.').at(-1)!;
  return axes.filter((a) => a.field.split('.').at(-1) === leaf).length > 1 ? field : leaf;
}

const shownValue = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));

/** A run's folder name: the variant, then leaf-value per grid field, e.g. "cross_seed-3". */
function runName(variant: string | null, point: ReadonlyArray<[string, unknown]>, axes: ReadonlyArray<{ field: string }>): string {
  const parts = [...(variant === null ? [] : [variant]), ...point.map(([field, value]) => `${leafOf(field, axes)}-${shownValue(value)}`)];
  return (parts.join('_') || 'run').replace(/[^A-Za-z0-9._-]+/g, '-');
}

/** Sets `value` at a dotted path, making the sections on the way; a value that is not a section is refused. */
function setField(target: Record<string, unknown>, field: string, value: unknown, file: string, variant: string | null): void {
  const names = field.split('.');
  let node = target;
  names.slice(0, -1).forEach((name, i) => {
    const next = node[name];
    if (next === undefined || next === null) node[name] = {};
    else if (typeof next !== 'object' || Array.isArray(next)) {
      throw new ScenarioError(`${file}: override "${field}"${variant === null ? '' : ` (variant ${variant})`}: "${names.slice(0, i + 1).join('.')}" is ${JSON.stringify(next)} in the base scenario, not a section with fields`);
    }
    node = node[name] as Record<string, unknown>;
  });
  node[names.at(-1)!] = structuredClone(value);
}

/** Validates one run's scenario; an error names the override that caused it (or the run's overrides). */
function resolveRun(raw: Record<string, unknown>, overrides: Record<string, unknown>, file: string, dir: string): Scenario {
  const label = `${file} (run ${dir})`;
  try {
    return parseScenario(JSON.stringify(raw), label);
  } catch (error) {
    if (!(error instanceof ScenarioError)) throw error;
    const message = error.message.startsWith(`${label}: `) ? error.message.slice(label.length + 2) : error.message;
    const field = /^field "([^"]+)"/.exec(message)?.[1];
    const related = field === undefined ? [] : Object.keys(overrides).filter((path) => path === field || path.startsWith(`${field}.`) || field.startsWith(`${path}.`));
    // the field itself, else one named in the message (an unknown field's name), else the first on its path
    const culprit = related.find((path) => path === field) ?? related.find((path) => message.includes(`"${path.split('.').at(-1)}"`)) ?? related[0];
    if (culprit !== undefined) throw new ScenarioError(`${file}: override "${culprit}" = ${JSON.stringify(overrides[culprit])} (run ${dir}): ${message}`);
    throw new ScenarioError(`${file}: run ${dir} (${Object.entries(overrides).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(', ') || 'the base scenario'}): ${message}`);
  }
}

function checkEqualCompute(runs: readonly PlannedRun[], file: string): void {
  const first = runs[0]!;
  const other = runs.find((r) => r.compute.proposalsPerStep !== first.compute.proposalsPerStep || r.compute.answersPerStep !== first.compute.answersPerStep);
  if (!other) return;
  const show = (r: PlannedRun) => `${r.dir}: ${r.compute.proposalsPerStep} proposals and ${r.compute.answersPerStep} answers per step`;
  throw new ScenarioError(`${file}: the runs do not spend equal compute (${show(first)}; ${show(other)}): make the variants' population, tasks.perTeacher, matchmaking.studentsPerTask and sampling.answersPerStudent agree, or set "equalCompute: false" to run them anyway`);
}
