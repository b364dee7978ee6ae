// Plug-ins named by path in a scenario (a matchmaking policy here; test/plugins-kinds.test.ts has the other kinds):
// loaded relative to the scenario file, checked against their interface with the missing member named, their
// options validated by their own schema; recorded with their content hashes, so that replay and resume refuse a
// changed one by name; kept to the replay rules (no Math.random, no clock) at run time; and a policy that answers
// differently on a replay is named as the first divergent event.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readEventLog } from '../src/runtime/event-log.js';
import { openScenario, readScenario, ScenarioError } from '../src/scenario/scenario.js';
import { replayRun } from '../src/sim/replay.js';
import { runScenario } from '../src/sim/run.js';

const dir = mkdtempSync(join(tmpdir(), 'populora-plugins-'));
mkdirSync(join(dir, 'policies'));
writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');

/** A Standard Schema by hand (what zod's schemas implement): { offset: integer >= 0, default 0 }. */
const OFFSET_SCHEMA = `{
  '~standard': {
    version: 1, vendor: 'test',
    validate(value) {
      const extra = Object.keys(value).filter((k) => k !== 'offset');
      if (extra.length > 0) return { issues: [{ message: 'unknown option ' + extra[0], path: [extra[0]] }] };
      const offset = value.offset ?? 0;
      if (!Number.isInteger(offset) || offset < 0) return { issues: [{ message: 'expected a whole number >= 0', path: ['offset'] }] };
      return { value: { offset } };
    },
  },
}`;

/**
 * The policy under test: the students of other sub-populations in id order, starting `offset` places on, one
 * more place on for each task id (so that it is checkable from the log). Its helper lives in a file it imports.
 */
writeFileSync(join(dir, 'policies', 'rotate.js'), `import { rotated } from './rotate-lib.js';
export default {
  options: ${OFFSET_SCHEMA},
  reach: ({ subpopulations, students }) => (subpopulations - 1) * students,
  choose: ({ teacher, students, count, options }) => rotated(students.filter((s) => s.subpopulation !== teacher.subpopulation), options.offset).slice(0, count),
};
`);
const LIB = 'export const rotated = (list, by) => list.map((_, i) => list[(i + by) % list.length]);\n';
writeFileSync(join(dir, 'policies', 'rotate-lib.js'), LIB);

const scenarioText = (policy: string, options = '{ offset: 1 }', extra = '') => `name: plug
seed: 5
steps: 2
backend: cpu
model: { preset: tiny, seed: 1 }
population: { subpopulations: 2, teachers: 1, students: 2, lora: { rank: 2 } }
tasks: { perTeacher: 1 }
matchmaking: { policy: ${policy}, studentsPerTask: 1, options: ${options} }
sampling: { answersPerStudent: 2, maxTokens: 16 }
checkpointEvery: 1
${extra}`;

function scenarioFile(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

const refusal = async (file: string) => {
  try {
    await openScenario(file);
  } catch (error) {
    expect(error).toBeInstanceOf(ScenarioError);
    return (error as Error).message;
  }
  throw new Error(`${file} was accepted`);
};

describe('a matchmaking policy named by path', () => {
  it('runs, records its hashes in scenario.json, matches as its code says, and replays identically', async () => {
    const file = scenarioFile('rotate.yaml', scenarioText('./policies/rotate.js'));
    const scenario = await openScenario(file);
    const policyPath = join(dir, 'policies', 'rotate.js');
    expect(scenario.matchmaking).toEqual({ policy: policyPath, studentsPerTask: 1, options: { offset: 1 } });
    const out = join(dir, 'run');
    const result = await runScenario(scenario, { outDir: out });

    // scenario.json records the module and the file it imports, with sha256s computed here independently
    const recorded = JSON.parse(readFileSync(join(out, 'scenario.json'), 'utf8'));
    const { createHash } = await import('node:crypto');
    const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
    expect(recorded.plugins).toEqual([{ field: 'matchmaking.policy', path: policyPath, sha256: sha(policyPath), imports: [{ path: join(dir, 'policies', 'rotate-lib.js'), sha256: sha(join(dir, 'policies', 'rotate-lib.js')) }] }]);

    // every task went to the student its rule names: of the two students of the other sub-population, the second
    const { events } = readEventLog(join(out, 'events.msgpack'));
    const assigned = events.filter((e) => e.type === 'assign').flatMap((e) => {
      const { to, message } = e.payload as { to: string; message: { tasks: Array<{ teacher: string }> } };
      return message.tasks.map((t) => ({ student: to, teacher: t.teacher }));
    });
    expect(assigned.length).toBeGreaterThan(0);
    for (const { student, teacher } of assigned) expect(student).toBe(`student-${teacher === 'teacher-0-0' ? 1 : 0}-1`);

    expect(await replayRun(out)).toMatchObject({ identical: true, hash: result.hash });
  });

  it('refuses, on replay and on resume, a plug-in whose module or imported file changed since the run, by name', async () => {
    const file = scenarioFile('changed.yaml', scenarioText('./policies/rotate.js'));
    const out = join(dir, 'changed-run');
    await runScenario(await openScenario(file), { outDir: out });
    const lib = join(dir, 'policies', 'rotate-lib.js');
    writeFileSync(lib, `${LIB}// a comment is a change too\n`);
    try {
      await expect(replayRun(out)).rejects.toThrow(new RegExp(`^${join(out, 'scenario.json')}: the plug-in ${join(dir, 'policies', 'rotate.js')} \\(matchmaking.policy\\) is not the code this run recorded: ${lib}, which it imports, has changed since the run`));
      const text = readFileSync(join(out, 'scenario.json'), 'utf8');
      await expect(readScenario(text, join(out, 'scenario.json'), { relativeTo: out })).rejects.toThrow(/is not the code this run recorded/);
      const resume = spawnSync('node', [join(import.meta.dirname, '..', 'dist', 'src', 'cli', 'main.js'), 'run', '--resume', out], { encoding: 'utf8' });
      expect(resume.status).toBe(1);
      expect(resume.stderr.trim()).toMatch(new RegExp(`^populora: ${join(out, 'scenario.json')}: the plug-in .*rotate\\.js \\(matchmaking\\.policy\\) is not the code this run recorded: ${lib}, which it imports, has changed since the run \\(sha256 [0-9a-f]{12}…, now [0-9a-f]{12}…\\)\\. A replay or a resume runs the recorded code`));
    } finally {
      writeFileSync(lib, LIB);
    }
    // put back, the run replays again
    expect((await replayRun(out)).identical).toBe(true);
  });

  it('refuses a plug-in changed after this process imported it (Node would run the old code), naming the file', async () => {
    const policy = join(dir, 'policies', 'edited.js');
    writeFileSync(policy, 'export default { choose: ({ students, count }) => students.slice(0, count) };\n');
    const file = scenarioFile('edited.yaml', scenarioText('./policies/edited.js', '{}'));
    await openScenario(file);
    writeFileSync(policy, 'export default { choose: ({ students, count }) => students.slice(-count) };\n');
    expect(await refusal(file)).toBe(`${file}: field "matchmaking.policy": ${policy} changed after this process imported the plug-in, and Node cannot import a changed module again; run it in a new process`);
  });

  it('names the missing member, a member of the wrong type, a missing file, and an option its schema refuses', async () => {
    writeFileSync(join(dir, 'policies', 'no-choose.js'), 'export default { reach: () => 1 };\n');
    writeFileSync(join(dir, 'policies', 'bad-options.js'), 'export default { options: { offset: 1 }, choose: () => [] };\n');
    writeFileSync(join(dir, 'policies', 'no-default.js'), 'export const choose = () => [];\n');
    expect(await refusal(scenarioFile('a.yaml', scenarioText('./policies/no-choose.js', '{}')))).toBe(`${join(dir, 'policies', 'no-choose.js')} (matchmaking.policy): its default export has no choose (function), which a matchmaking policy must have`);
    expect(await refusal(scenarioFile('b.yaml', scenarioText('./policies/bad-options.js', '{}')))).toMatch(/bad-options\.js \(matchmaking\.policy\): its default export has options is object, not an options schema/);
    expect(await refusal(scenarioFile('c.yaml', scenarioText('./policies/no-default.js', '{}')))).toMatch(/c\.yaml: field "matchmaking\.policy": the module has no default export/);
    expect(await refusal(scenarioFile('d.yaml', scenarioText('./policies/missing.js', '{}')))).toBe(`${join(dir, 'd.yaml')}: field "matchmaking.policy": ${join(dir, 'policies', 'missing.js')} does not exist`);
    expect(await refusal(scenarioFile('e.yaml', scenarioText('./policies/rotate.js', '{ offset: -2 }')))).toBe(`${join(dir, 'e.yaml')}: field "matchmaking.options.offset": expected a whole number >= 0`);
    expect(await refusal(scenarioFile('f.yaml', scenarioText('./policies/rotate.js', '{ ofset: 2 }')))).toBe(`${join(dir, 'f.yaml')}: field "matchmaking.options.ofset": unknown option ofset`);
  });

  it('stops a run whose policy reads Math.random or the clock, naming the plug-in and what to use', async () => {
    writeFileSync(join(dir, 'policies', 'dice.js'), 'export default { choose: ({ students, count }) => students.slice(Math.floor(Math.random() * 2), count) };\n');
    writeFileSync(join(dir, 'policies', 'clock.js'), 'export default { choose: ({ students, count }) => students.slice(new Date().getSeconds() % 2, count) };\n');
    for (const [name, call] of [['dice', 'Math.random()'], ['clock', 'new Date()']]) {
      const scenario = await openScenario(scenarioFile(`${name}.yaml`, scenarioText(`./policies/${name}.js`, '{}')));
      const error = await runScenario(scenario, { outDir: join(dir, `${name}-run`) }).then(() => null, (e: Error) => e);
      const messages = [];
      for (let e: Error | undefined = error ?? undefined; e; e = e.cause as Error | undefined) messages.push(e.message);
      expect(messages.join(' / ')).toContain(`the matchmaking policy ${join(dir, 'policies', `${name}.js`)}, choose() called ${call}: a plug-in's results must replay from the scenario's seed`);
    }
    // Math.random and the clock are themselves again once the plug-in returns
    expect(Math.random()).toBeLessThan(1);
    expect(Date.now()).toBeGreaterThan(0);
  });

  it('that keeps state between calls answers differently on a replay, and the replay names that first divergent event', async () => {
    // A breach the run-time guard cannot see: state kept across calls (here, across runs in one process).
    writeFileSync(join(dir, 'policies', 'stateful.js'), `let calls = 0;
export default { choose: ({ teacher, students, count }) => { calls++; const others = students.filter((s) => s.subpopulation !== teacher.subpopulation); return [others[calls % others.length]].slice(0, count); } };
`);
    const out = join(dir, 'stateful-run');
    await runScenario(await openScenario(scenarioFile('stateful.yaml', scenarioText('./policies/stateful.js', '{}'))), { outDir: out });
    const verdict = await replayRun(out);
    expect(verdict.identical).toBe(false);
    if (verdict.identical) return;
    const { events } = readEventLog(join(out, 'events.msgpack'));
    const firstAssign = events.findIndex((e) => e.type === 'assign');
    expect(verdict.index).toBe(firstAssign); // the matchmaker's first assignment is where the replay parts from the run
    expect(verdict.recorded?.type).toBe('assign');
    expect(verdict.replayed?.type).toBe('assign');
  });

  it('written in TypeScript: run as it is where Node strips types, else refused with what to do', () => {
    writeFileSync(join(dir, 'policies', 'typed.ts'), 'export default { choose: ({ students, count }: { students: unknown[]; count: number }) => students.slice(0, count) };\n');
    scenarioFile('typed.yaml', scenarioText('./policies/typed.ts', '{}').replace('steps: 2', 'steps: 1'));
    const bin = join(import.meta.dirname, '..', 'dist', 'src', 'cli', 'main.js');
    const run = spawnSync('node', [bin, 'run', join(dir, 'typed.yaml'), '--out', join(dir, 'typed-run')], { encoding: 'utf8' });
    if ((process.features as { typescript?: unknown }).typescript) {
      expect(run.status, run.stderr).toBe(0);
    } else {
      expect(run.status).toBe(1);
      expect(run.stderr.trim()).toBe(`populora: ${join(dir, 'typed.yaml')}: field "matchmaking.policy": this Node cannot import TypeScript; compile the plug-in to JavaScript (tsc, esbuild) and name the .js file, or run populora on a Node that strips types (node --experimental-strip-types, Node 22.6+) (docs/plugins.md, "TypeScript plug-ins")`);
    }
  });
});
