// A plug-in's options schema: any Standard Schema validator (https://standardschema.dev), which zod's schemas are
// (`import { z } from 'populora'`), valibot's and arktype's too. populora validates a scenario's options for a
// plug-in with it, naming the field that is wrong, and hands the plug-in the parsed value (defaults filled in).

import { z } from 'zod';

/** The part of the Standard Schema interface populora uses (zod 3.24+ and 4 schemas implement it). */
export interface OptionsSchema<Output = unknown> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    validate(value: unknown): StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly types?: { readonly input: unknown; readonly output: Output } | undefined;
  };
}

type StandardResult<Output> = { readonly value: Output; readonly issues?: undefined } | { readonly issues: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined }> };

export const isOptionsSchema = (value: unknown): value is OptionsSchema =>
  typeof value === 'object' && value !== null && typeof (value as { '~standard'?: { validate?: unknown } })['~standard']?.validate === 'function';

/** An options schema that takes nothing: a plug-in without `options` gets this (any option given is named). */
export const NO_PLUGIN_OPTIONS = z.strictObject({}) as unknown as z.ZodType<unknown>;

/**
 * A plug-in's schema as a zod schema (what the scenario schema composes): its issues keep their paths, and an
 * asynchronous validator is refused (a scenario is validated at once). `who` names the plug-in in that refusal.
 */
export function asZod(schema: OptionsSchema | undefined, who: string): z.ZodType<unknown> {
  if (schema === undefined) return NO_PLUGIN_OPTIONS;
  if (schema instanceof z.ZodType) return schema as z.ZodType<unknown>;
  return z.unknown().transform((value, ctx) => {
    const result = schema['~standard'].validate(value);
    if (result instanceof Promise) throw new TypeError(`${who}: its options schema validates asynchronously; populora needs a synchronous one`);
    if (result.issues === undefined) return result.value;
    for (const issue of result.issues) {
      const path = (issue.path ?? []).map((key) => (typeof key === 'object' ? key.key : key)).filter((key): key is string | number => typeof key !== 'symbol');
      ctx.addIssue({ code: 'custom', message: issue.message, path });
    }
    return z.NEVER;
  });
}
