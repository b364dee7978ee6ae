// The scenario hash a coordinator and its workers compare before any work: sha256 over the resolved scenario's
// canonical JSON, with the model folder reduced to its name and each plug-in to its file name and content hashes
// (each machine resolves the paths on its own disk).
// A worker started for one scenario refuses a coordinator running another (issue 20, "Security").

import { createHash } from 'node:crypto';
import { basename } from 'node:path';
import { canonical } from '../runtime/event-log.js';
import { withPluginLabels } from '../scenario/plugin-fields.js';
import { withoutMachineSettings, type Scenario } from '../scenario/scenario.js';

export function scenarioHash(scenario: Scenario): string {
  const model = 'path' in scenario.model ? { ...scenario.model, path: basename(scenario.model.path) } : scenario.model;
  return createHash('sha256').update(JSON.stringify(canonical({ ...withPluginLabels(withoutMachineSettings(scenario)), model }))).digest('hex');
}
