// The error of a command line given something it cannot use: its message alone is printed (run-command.ts). A
// file of its own so that commands outside src/cli (a domain's) can throw it without importing the command line.

/** An error in what the user gave the command line: printed as its message alone. */
export class UsageError extends Error {}
