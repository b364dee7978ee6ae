// A scenario's plug-ins (plugin-fields.ts says which fields may name one): loaded before the scenario is validated
// (importing is asynchronous), and recorded in the resolved scenario as `plugins`, the sha256 of each module and of
// each local file it imports. A scenario that carries such a record (a run folder's scenario.json, a sweep's run)
// is checked against the files as they are now: a replay, a resume or a sweep's run refuses a plug-in that changed
// since, naming the file.

import { ScenarioError } from './errors.js';
import { changedFile, currentFiles, loadedRecord, loadPlugin } from '../plugins/load.js';
import { PluginError } from '../plugins/errors.js';
import { fieldOf, pluginRecordsSchema, pluginReferences, withAbsolutePluginPaths, type PluginRecord } from './plugin-fields.js';

const asFiles = (record: PluginRecord) => ({ module: { path: record.path, sha256: record.sha256 }, imports: record.imports });

/** What a recorded plug-in and the one named now differ in, as a sentence; null when they are the same. */
function difference(recorded: PluginRecord, now: PluginRecord): string | null {
  if (recorded.path !== now.path) return `the run recorded ${recorded.path}, the scenario now names ${now.path}`;
  const changed = changedFile(asFiles(recorded), asFiles(now));
  if (changed === null) return null;
  const before = [recorded, ...recorded.imports].find((f) => f.path === changed)?.sha256;
  const after = [now, ...now.imports].find((f) => f.path === changed)?.sha256;
  const what = changed === recorded.path ? changed : `${changed}, which it imports,`;
  if (before === undefined) return `it now imports ${changed}, which the run did not record`;
  if (after === undefined) return `it no longer imports ${changed}`;
  return `${what} has changed since the run (sha256 ${before.slice(0, 12)}…, now ${after.slice(0, 12)}…)`;
}

/** The recorded `plugins` of a raw scenario (none: an empty list); a malformed record is refused by name. */
function recordedOf(raw: unknown, file: string): PluginRecord[] {
  const given = fieldOf(raw, 'plugins');
  if (given === undefined) return [];
  const parsed = pluginRecordsSchema.safeParse(given);
  if (!parsed.success) throw new ScenarioError(`${file}: field "plugins": ${parsed.error.issues[0]!.message} (populora writes this field; remove it to record the plug-ins afresh)`);
  return parsed.data;
}

/** Refuses a scenario whose plug-ins are not the ones it recorded (`now`: each field's current record). */
function checkRecorded(recorded: readonly PluginRecord[], now: ReadonlyMap<string, PluginRecord>, file: string): void {
  for (const entry of recorded) {
    const current = now.get(entry.field);
    const problem = current === undefined ? `the field no longer names a plug-in` : difference(entry, current);
    if (problem) {
      throw new ScenarioError(`${file}: the plug-in ${entry.path} (${entry.field}) is not the code this run recorded: ${problem}. A replay or a resume runs the recorded code: put the file back as it was, or start a new run`);
    }
  }
}

const asScenarioError = (error: unknown) => (error instanceof PluginError ? new ScenarioError(error.message) : error);

/**
 * Imports the plug-ins a raw scenario names (paths relative to `baseDir`) and registers them, after checking any
 * recorded `plugins` against the files as they are. Errors name the scenario file and the field.
 */
export async function loadScenarioPlugins(raw: unknown, file: string, baseDir: string): Promise<void> {
  const references = pluginReferences(raw, baseDir);
  try {
    const now = new Map<string, PluginRecord>();
    for (const { field, path } of references) {
      const files = await currentFiles(path, `${file}: field "${field}"`);
      now.set(field, { field, path: files.module.path, sha256: files.module.sha256, imports: files.imports });
    }
    checkRecorded(recordedOf(raw, file), now, file); // before importing: a changed plug-in is named as changed since the run
    for (const { field, kind, path } of references) await loadPlugin(kind, path, field, `${file}: field "${field}"`);
  } catch (error) {
    throw asScenarioError(error);
  }
}

/** The raw scenario as it is validated: plug-in paths absolute, `plugins` recorded (plug-ins loaded first). */
export function withPluginRecords(raw: unknown, file: string, baseDir: string): unknown {
  const references = pluginReferences(raw, baseDir);
  const recorded = recordedOf(raw, file);
  if (references.length === 0 && recorded.length === 0) return raw;
  try {
    const now = new Map<string, PluginRecord>();
    for (const { field, kind, path } of references) {
      const record = loadedRecord(kind, path, field, `${file}: field "${field}"`);
      if (!record) throw new ScenarioError(`${file}: field "${field}": the plug-in ${path} is not loaded; read the scenario with loadScenario or readScenario, which import its plug-ins`);
      now.set(field, record);
    }
    checkRecorded(recorded, now, file);
    const resolved = withAbsolutePluginPaths(raw, baseDir) as Record<string, unknown>;
    if (now.size === 0) delete resolved['plugins'];
    else resolved['plugins'] = [...now.values()];
    return resolved;
  } catch (error) {
    throw asScenarioError(error);
  }
}
