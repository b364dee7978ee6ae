// `compare` as a library function (the command prints what it returns): several run folders (or sweep folders,
// standing for their finished runs) in one report, a summary table, the groups of runs that differ only in seed
// with their intervals and tests, and which plug-in version each run used (file@sha256, from its scenario.json).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { presentHeadlines, summarizeGroups, testGroups } from './across-seeds.js';
import { groupSummaryRows, groupTestRows, loadRun, ReportError, seedGroups, summaryRows, writeReport, type RunData } from './report.js';
import { pluginLabel, type PluginRecord } from '../scenario/plugin-fields.js';
import { sweepRunFolders } from '../sweep/state.js';

export interface Comparison {
  runs: RunData[];
  /** One row per run (when no two runs differ only in seed), else null. */
  summary: Array<Record<string, string | number>> | null;
  /** Runs that differ only in seed, grouped: each group's mean and 95% interval per metric; null when there are none. */
  groups: { summary: Array<Record<string, string | number>>; tests: Array<Record<string, string | number>>; baseline: string } | null;
  /** Each run's plug-ins: the field that names one and its file@sha256. */
  plugins: Array<{ run: string; field: string; plugin: string }>;
  /** The report written (an HTML file that opens offline). */
  file: string;
}

/** Compares run folders (a sweep folder stands for its finished runs) and writes the report to `out`. */
export function compare(dirs: readonly string[], out: string): Comparison {
  const folders = dirs.flatMap((dir) => (existsSync(join(dir, 'sweep.json')) ? sweepRunFolders(dir) : [dir]));
  if (folders.length < 2) throw new ReportError('compare needs two or more run folders (or a sweep folder with two or more finished runs)');
  const runs = folders.map(loadRun);
  const seeded = seedGroups(runs);
  let groups: Comparison['groups'] = null;
  if (seeded) {
    const headlines = presentHeadlines(runs);
    groups = { summary: groupSummaryRows(summarizeGroups(seeded, headlines), headlines), tests: groupTestRows(testGroups(seeded, headlines)), baseline: seeded[0]!.label };
  }
  const plugins = runs.flatMap((run) => ((run.scenario['plugins'] as PluginRecord[] | undefined) ?? []).map((record) => ({ run: run.name, field: record.field, plugin: pluginLabel(record) })));
  return { runs, summary: seeded ? null : summaryRows(runs), groups, plugins, file: writeReport(runs, out) };
}
