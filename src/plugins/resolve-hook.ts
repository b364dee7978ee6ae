// A Node module hook (module.register, src/plugins/load.ts): a plug-in may `import ... from 'populora'` wherever it
// lives. Where Node's own lookup finds a populora (the plug-in's folder has one installed), that one is used;
// elsewhere (a plug-in folder made by `npx populora init`, with populora in npx's cache) the name resolves to the
// populora that is running.

import type { InitializeHook, ResolveHook } from 'node:module';

let self = '';

export const initialize: InitializeHook<{ self: string }> = (data) => {
  self = data.self;
};

export const resolve: ResolveHook = async (specifier, context, next) => {
  if (specifier !== 'populora') return next(specifier, context);
  try {
    return await next(specifier, context);
  } catch {
    return { url: self, shortCircuit: true };
  }
};
