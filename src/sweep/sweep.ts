// `sweep` as a library function: plan a sweep file (importing the plug-ins its runs name), then run it, each run an
// ordinary run folder in `out` (runner.ts), N processes at a time.

import { join } from 'node:path';
import { pluginLabel } from '../scenario/plugin-fields.js';
import { openSweep, type SweepPlan } from './grid.js';
import { defaultParallel, runSweep, type SweepOptions, type SweepResult } from './runner.js';

export interface SweepCallOptions extends Partial<Omit<SweepOptions, 'out'>> {
  out?: string; // default: runs/<sweep name>
}

/** Each plug-in the sweep's runs use, by field: its file@sha256, and which runs use it. */
export function sweepPlugins(plan: SweepPlan): Array<{ field: string; plugin: string; runs: string[] }> {
  const byLabel = new Map<string, { field: string; plugin: string; runs: string[] }>();
  for (const run of plan.runs) {
    for (const record of run.scenario.plugins ?? []) {
      const key = `${record.field} ${pluginLabel(record)}`;
      const entry = byLabel.get(key) ?? { field: record.field, plugin: pluginLabel(record), runs: [] };
      entry.runs.push(run.dir);
      byLabel.set(key, entry);
    }
  }
  return [...byLabel.values()];
}

/** Plans and runs a sweep file; resolves with the plan and the sweep's final state. */
export async function sweep(file: string, options: SweepCallOptions = {}): Promise<SweepResult & { plan: SweepPlan; out: string }> {
  const plan = await openSweep(file);
  const out = options.out ?? join('runs', plan.name);
  const result = await runSweep(plan, { ...options, out, parallel: options.parallel ?? defaultParallel(plan.runs.length), resume: options.resume ?? false });
  return { ...result, plan, out };
}
