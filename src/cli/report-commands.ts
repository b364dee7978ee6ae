// `populora report`, `populora compare` and `populora export`: a run folder's report.html; several runs on the
// same axes in one report, with a summary table (and, for runs repeated over seeds, the groups' intervals and
// tests); a checkpoint's population in PEFT layout with population.json.

import { join } from 'node:path';
import { exportPopulation } from '../sim/export.js';
import { compare } from '../report/compare.js';
import { loadRun, writeReport } from '../report/report.js';

export async function reportCommand(dir: string, options: { out?: string }): Promise<void> {
  const file = writeReport([loadRun(dir)], options.out ?? join(dir, 'report.html'));
  console.log(`report: ${file}`);
}

export async function compareCommand(dirs: string[], options: { out: string }): Promise<void> {
  const result = compare(dirs, options.out);
  if (result.groups) {
    console.log(`${result.groups.summary.length} group(s) of runs that differ only in seed; mean [95% bootstrap interval] over each group's runs:`);
    console.table(result.groups.summary);
    console.log(`against ${result.groups.baseline} (two-sided permutation tests):`);
    console.table(result.groups.tests);
  } else console.table(result.summary);
  if (result.plugins.length > 0) {
    console.log('plug-ins (file@sha256 of the code each run ran):');
    console.table(result.plugins);
  }
  console.log(`report: ${result.file}`);
}

export async function exportCommand(dir: string, options: { step?: number; out: string }): Promise<void> {
  const { step, members } = exportPopulation(dir, options.step, options.out);
  console.log(`exported ${members.length} adapters of step ${step} to ${options.out} (PEFT layout; population.json lists roles, ratings and lineage)`);
}
