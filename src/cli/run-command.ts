// Wraps a command's action so that bad input ends in one clear line, and anything unexpected in its stack too.

import { ModelFormatError } from '../model/errors.js';
import { ReportError } from '../report/report.js';
import { EventLogError } from '../runtime/event-log.js';
import { ExportError } from '../runtime/export.js';
import { ScenarioError } from '../scenario/scenario.js';

/** An error in what the user gave the command line: printed as its message alone. */
export class UsageError extends Error {}

const USER_ERRORS = [UsageError, ModelFormatError, ScenarioError, EventLogError, ReportError, ExportError, RangeError];

export function runCommand<A extends unknown[]>(action: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await action(...args);
    } catch (error) {
      const known = USER_ERRORS.some((kind) => error instanceof kind);
      console.error(`populora: ${(error as Error).message}`);
      if (!known) console.error((error as Error).stack);
      process.exitCode = 1;
    }
  };
}
