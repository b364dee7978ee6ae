// One parser for every whole-number option of the command line (main.ts and the commands in files of their own).

import { InvalidArgumentError } from 'commander';

/** A whole number in [min, max]; anything else is refused by the option's name (a rank of 0, a seed of -1). */
export const integer =
  (name: string, min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER) =>
  (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n)) throw new InvalidArgumentError(`${name} must be an integer, got "${value}"`);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be ${max === Number.MAX_SAFE_INTEGER ? `at least ${min}` : `from ${min} to ${max}`}, got ${n}`);
    return n;
  };
