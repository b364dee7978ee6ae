// `populora report`, `populora compare` and `populora export`: a run folder's report.html; several runs on the
// same axes in one report, with a summary table; a checkpoint's population in PEFT layout with population.json.

import { join } from 'node:path';
import { exportPopulation } from '../runtime/export.js';
import { loadRun, summaryRows, writeReport } from '../report/report.js';
import { UsageError } from './run-command.js';

export async function reportCommand(dir: string, options: { out?: string }): Promise<void> {
  const file = writeReport([loadRun(dir)], options.out ?? join(dir, 'report.html'));
  console.log(`report: ${file}`);
}

export async function compareCommand(dirs: string[], options: { out: string }): Promise<void> {
  if (dirs.length < 2) throw new UsageError('compare needs two or more run folders');
  const runs = dirs.map(loadRun);
  console.table(summaryRows(runs));
  const file = writeReport(runs, options.out);
  console.log(`report: ${file}`);
}

export async function exportCommand(dir: string, options: { step?: number; out: string }): Promise<void> {
  const { step, members } = exportPopulation(dir, options.step, options.out);
  console.log(`exported ${members.length} adapters of step ${step} to ${options.out} (PEFT layout; population.json lists roles, ratings and lineage)`);
}
