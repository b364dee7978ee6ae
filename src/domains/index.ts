// The registry of domains: a scenario's `domain` names one of these. Adding a domain is a folder beside arith/ and
// python/ whose index.ts exports a `Domain` (domain.ts says what it brings), and its line below; nothing outside
// src/domains/ changes. `registerDomain` adds one at run time: a test's, or a plug-in's under its module's absolute
// path (src/plugins/: `domain: ./domains/sorting/index.js`), which needs no change here at all.

import { arith } from './arith/index.js';
import type { Domain } from './domain.js';
import { python } from './python/index.js';

const registry = new Map<string, Domain>();

/** Adds a domain under `key` (its name, or a plug-in's path); a key already taken is refused, but for a plug-in's. */
export function registerDomain(domain: Domain, key = domain.name, replace = false): void {
  if (registry.has(key) && !replace) throw new RangeError(`a domain named "${key}" is already registered`);
  if (domain.taskTypes.length === 0) throw new RangeError(`the ${domain.name} domain has no task types`);
  registry.set(key, domain);
}

registerDomain(arith); // the first is a scenario's default
registerDomain(python);

export const DEFAULT_DOMAIN = arith.name;

export const domainNames = (): string[] => [...registry.keys()];
export const domains = (): Domain[] => [...registry.values()];
export const isDomain = (name: string): boolean => registry.has(name);

/** The domain of that name (a scenario's `domain`, checked at load). */
export function domainNamed(name: string): Domain {
  const domain = registry.get(name);
  if (!domain) throw new RangeError(`no domain named "${name}" (the domains are ${domainNames().join(', ')})`);
  return domain;
}
