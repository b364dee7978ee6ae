// `populora report`, `populora compare` and `populora export`: a run folder's report.html; several runs on the
// same axes in one report, with a summary table (and, for runs repeated over seeds, the groups' intervals and
// tests); a checkpoint's population in PEFT layout with population.json.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { exportPopulation } from '../sim/export.js';
import { groupSummaryRows, groupTestRows, loadRun, seedGroups, summaryRows, writeReport } from '../report/report.js';
import { presentHeadlines, summarizeGroups, testGroups } from '../report/across-seeds.js';
import { sweepRunFolders } from '../sweep/state.js';
import { UsageError } from './run-command.js';

export async function reportCommand(dir: string, options: { out?: string }): Promise<void> {
  const file = writeReport([loadRun(dir)], options.out ?? join(dir, 'report.html'));
  console.log(`report: ${file}`);
}

export async function compareCommand(dirs: string[], options: { out: string }): Promise<void> {
  // A sweep's folder stands for its finished runs.
  const folders = dirs.flatMap((dir) => (existsSync(join(dir, 'sweep.json')) ? sweepRunFolders(dir) : [dir]));
  if (folders.length < 2) throw new UsageError('compare needs two or more run folders (or a sweep folder with two or more finished runs)');
  const runs = folders.map(loadRun);
  const groups = seedGroups(runs);
  if (groups) {
    const headlines = presentHeadlines(runs);
    console.log(`${groups.length} group(s) of runs that differ only in seed; mean [95% bootstrap interval] over each group's runs:`);
    console.table(groupSummaryRows(summarizeGroups(groups, headlines), headlines));
    console.log(`against ${groups[0]!.label} (two-sided permutation tests):`);
    console.table(groupTestRows(testGroups(groups, headlines)));
  } else console.table(summaryRows(runs));
  const file = writeReport(runs, options.out);
  console.log(`report: ${file}`);
}

export async function exportCommand(dir: string, options: { step?: number; out: string }): Promise<void> {
  const { step, members } = exportPopulation(dir, options.step, options.out);
  console.log(`exported ${members.length} adapters of step ${step} to ${options.out} (PEFT layout; population.json lists roles, ratings and lineage)`);
}
