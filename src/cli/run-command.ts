// Wraps a command's action so that an error ends in one clear line (the file, what is wrong, what to do), never a
// bare stack trace; `--verbose` adds the stack, for a bug report.

import type { Command } from 'commander';
import { ClusterError, ServerLostError } from '../cluster/nats.js';
import { DeviceLimitError } from '../model/device-fit.js';
import { ModelFormatError } from '../model/errors.js';
import { ReportError } from '../report/report.js';
import { asDiskFull, RunFolderError } from '../runtime/durable.js';
import { EventLogError } from '../runtime/event-log.js';
import { ExportError } from '../sim/export.js';
import { ActorFailure } from '../runtime/world.js';
import { ScenarioError } from '../scenario/scenario.js';
import { PluginError } from '../plugins/errors.js';
import { UsageError } from './usage-error.js';

export { UsageError };

/** Errors whose message says all a user needs; anything else is unexpected, a bug to report. */
const USER_ERRORS = [UsageError, ClusterError, ModelFormatError, DeviceLimitError, ScenarioError, EventLogError, ReportError, ExportError, RunFolderError, ActorFailure, PluginError, RangeError];

export function runCommand<A extends unknown[]>(action: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await action(...args);
    } catch (thrown) {
      // A full disk can surface anywhere (a report, an export, a run's last file): say so, whichever it was.
      const error = asDiskFull(thrown, (thrown as NodeJS.ErrnoException)?.path ?? 'a file', 'free some space and run the command again') as Error;
      const known = USER_ERRORS.some((kind) => error instanceof kind) || (error as NodeJS.ErrnoException)?.code !== undefined;
      console.error(`populora: ${error?.message ?? String(error)}`);
      if (verbose(args)) console.error(stackOf(error));
      else if (!known) console.error('populora: this is unexpected; run the command again with --verbose for the stack trace, and report it');
      process.exitCode = error instanceof ServerLostError ? error.exitCode : 1; // a cluster's abandoned work: EXIT_ABANDONED
    }
  };
}

/** Commander passes the command last; `--verbose` is a global option. */
function verbose(args: unknown[]): boolean {
  const command = args.at(-1) as Command | undefined;
  return typeof command?.optsWithGlobals === 'function' && command.optsWithGlobals().verbose === true;
}

/** The stack, and the stacks of its causes (an actor's failure wraps the handler's error). */
function stackOf(error: unknown): string {
  const stacks: string[] = [];
  for (let e = error as Error | undefined; e; e = e.cause as Error | undefined) stacks.push(e.stack ?? String(e));
  return stacks.join('\ncaused by: ');
}
