// A kind's loaded plug-ins (evolution operators, rating systems, reward hooks), each under its module's absolute
// path with its options schema as zod (options.ts). kinds.ts registers them; the kind's code looks them up.

import type { z } from 'zod';

export class PluginRegistry<T> {
  private readonly entries = new Map<string, { plugin: T; options: z.ZodType<unknown> }>();

  register(key: string, plugin: T, options: z.ZodType<unknown>): void {
    this.entries.set(key, { plugin, options });
  }

  get(key: string): { plugin: T; options: z.ZodType<unknown> } | undefined {
    return this.entries.get(key);
  }

  /** The options schema of the plug-in under `key`; undefined when none is registered there. */
  options(key: string): z.ZodType<unknown> | undefined {
    return this.entries.get(key)?.options;
  }
}
