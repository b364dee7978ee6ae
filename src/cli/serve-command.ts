// `populora serve [DIR...] [--port N] [--host ADDR] [--token T]`: the live dashboard over run and sweep folders
// (src/serve/). It prints its URL on one line and serves until SIGINT or SIGTERM. On a loopback address it needs
// nothing more; bound anywhere else it says so, and every request must carry its token.

import type { Command } from 'commander';
import { integer } from './integer-option.js';
import { isLoopback, startDashboard } from '../serve/server.js';
import { runCommand } from './run-command.js';

export const DEFAULT_PORT = 8470;

export async function serveCommand(dirs: string[], options: { port: number; host: string; token?: string; pollMs: number }): Promise<void> {
  const folders = dirs.length > 0 ? dirs : ['runs'];
  const dashboard = await startDashboard({ dirs: folders, port: options.port, host: options.host, token: options.token ?? null, pollMs: options.pollMs });
  const stopped = new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop).off('SIGTERM', stop);
      dashboard.close().then(resolve, resolve);
    };
    process.on('SIGINT', stop).on('SIGTERM', stop);
  });
  for (const missing of dashboard.library.missing()) console.log(`populora serve: ${missing} does not exist yet; it is served as soon as it does`);
  if (!isLoopback(options.host)) {
    console.log(`populora serve: listening on ${options.host}, not on loopback: anyone who reaches this machine on port ${dashboard.port} and holds the token can read these runs. The token is in the URL below${options.token ? '' : ' (made up now; --token T sets your own)'}; send it only to whom may read them.`);
  }
  console.log(`populora serve: ${dashboard.url} (${folders.join(', ')}; Ctrl-C stops it)`);
  await stopped;
}

/** Registers `populora serve` (main.ts). */
export function addServeCommand(program: Command): void {
  program
    .command('serve')
    .description('a live dashboard over run and sweep folders: the runs list, each run\'s plots, matchmaking and lineage at any step, and a browser of its tasks, answers and verdicts (loopback only unless --host)')
    .argument('[dirs...]', 'run folders, sweep folders, or folders that hold them (default: runs)')
    .option('--port <n>', 'port (0: any free one)', integer('--port', 0, 65535), DEFAULT_PORT)
    .option('--host <address>', 'address to listen on: a loopback one by default; any other needs the token the URL carries', '127.0.0.1')
    .option('--token <token>', 'the token requests must carry when --host is not loopback (default: made up at start)')
    .option('--poll-ms <ms>', 'how often the folders are read again', integer('--poll-ms', 0, 60_000), 500)
    .action(runCommand(serveCommand));
}
