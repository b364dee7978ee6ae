// Field schemas shared by every YAML file populora reads (scenarios, pretraining scenarios, a domain's fields of
// them), so that the same mistake gets the same words everywhere. No imports beyond zod: domains use it while the
// scenario module, which imports the domain registry, is still loading.

import { z } from 'zod';

/** A whole number in [min, max]. */
export const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.number({ error: 'expected a number' }).int({ error: 'expected an integer' }).min(min, { error: `expected an integer >= ${min}` }).max(max, { error: `expected an integer from ${min} to ${max}` });
