// What goes wrong in a cluster, as errors a user can act on (the CLI prints their message in one line, with no
// stack), and the exit code of a process that stopped with work abandoned.

/**
 * The exit code of a cluster process that stopped without finishing what it held: a worker that gave up its drain
 * or its server, a coordinator that gave up the step in progress (its folder resumes from the last checkpoint), a
 * second SIGINT or SIGTERM. It is sysexits' EX_TEMPFAIL: nothing is wrong with the command, run it again (or
 * `--resume` the run) once the server is back. A clean stop is 0 for a worker, 130 or 143 for a stopped run.
 */
export const EXIT_ABANDONED = 75;

/** A cluster problem a user can act on: the server, a worker, the credentials. */
export class ClusterError extends Error {}

/** A worker's refusal of a coordinator (another scenario): final, the asker does not try another worker. */
export class RefusedError extends ClusterError {}

/** The responder failed on the request (its error, named): final, as it would be in one process. */
export class RemoteError extends ClusterError {}

/** No responder answered in time: the responder may be lost (a worker to replace). */
export class NoReplyError extends ClusterError {}

/**
 * The NATS server was given up: unreachable for longer than the limit, or while a stop was asked. The process stops
 * with what it held abandoned (a coordinator at its last checkpoint), with exit code EXIT_ABANDONED.
 */
export class ServerLostError extends ClusterError {
  readonly exitCode = EXIT_ABANDONED;
}
