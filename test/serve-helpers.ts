// What the dashboard's tests share: a small real run, the samples a step holds as read straight from the event log
// (the project's own reader, and nothing of src/serve/: the independent expectation), a run folder written with
// hostile text in it, a snapshot of a folder's files (to show nothing was written), and Chromium.

import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EventLog, readEventLog, type RunEvent } from '../src/runtime/event-log.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { runScenario } from '../src/sim/run.js';

/** Two sub-populations of one teacher and two students on the pretrained toy model: some answers right, some wrong. */
export const SMALL_SCENARIO = `
name: serve-test
seed: 11
steps: 4
backend: cpu
model: { path: models/arith-tiny }
population: { subpopulations: 2, teachers: 1, students: 2, lora: { rank: 4, modules: [q_proj, v_proj] } }
tasks: { perTeacher: 2 }
matchmaking: { policy: cross, studentsPerTask: 2 }
sampling: { answersPerStudent: 2, maxTokens: 24 }
evolution: { every: 2, fraction: 0.5 }
checkpointEvery: 2
`;

export async function smallRun(dir: string, text = SMALL_SCENARIO): Promise<string> {
  return (await runScenario(parseScenario(text, 'serve-test.yaml'), { outDir: dir })).outDir;
}

type Message = Record<string, any>;
const messagesOf = (events: readonly RunEvent[], step: number) =>
  events.filter((e) => e.step === step).map((e) => ({ from: e.actor, to: (e.payload as Message).to as string, type: e.type, message: (e.payload as Message).message as Message }));

/** What a step's log says, read message by message: proposals (teacher, text, valid), answers (student, text, correct), assignments, outcomes. */
export function stepFromLog(events: readonly RunEvent[], step: number) {
  const messages = messagesOf(events, step);
  const replies = (type: string, prefix: string): Message[] => messages.filter((m) => m.type === type && m.to.startsWith(prefix)).flatMap((m) => (m.message.results as Message[]).map((r) => ({ ...r, to: m.to })));
  const validity = new Map(replies('validated', 'teacher-').map((r) => [r.requestId as number, r.validation?.valid as boolean]));
  const correct = new Map(replies('checked', 'student-').map((r) => [r.requestId as number, r.check?.correct as boolean]));
  const proposals = replies('generated', 'teacher-').map((r) => ({ requestId: r.requestId as number, teacher: r.to, text: r.text as string, valid: validity.get(r.requestId) ?? null }));
  const answers = replies('generated', 'student-').map((r) => ({ requestId: r.requestId as number, student: r.to, text: r.text as string, correct: correct.get(r.requestId) ?? null }));
  const assigned = messages.filter((m) => m.type === 'assign').flatMap((m) => (m.message.tasks as Message[]).map((t) => ({ student: m.to, taskId: t.taskId as number, teacher: t.teacher as string })));
  const answerTypes = new Map(messages.filter((m) => m.type === 'check').flatMap((m) => (m.message.requests as Message[]).flatMap((r) => (r.answers as Message[]).map((a) => [a.requestId as number, r.task.type as string] as const))));
  const proposalTypes = new Map(messages.filter((m) => m.type === 'validate').flatMap((m) => (m.message.requests as Message[]).map((r) => [r.requestId as number, r.taskType as string] as const)));
  const outcomes = messages.filter((m) => m.type === 'outcomes' && m.to.startsWith('teacher-')).flatMap((m) => m.message.outcomes as Array<{ taskId: number; teacher: string; student: string; correct: number; total: number }>);
  return { proposals, answers, assigned, outcomes, answerTypes, proposalTypes };
}

export const logOf = (dir: string) => readEventLog(join(dir, 'events.msgpack')).events;

/** Text a model might write to attack whoever reads it: markup, script, a terminal escape. */
export const HOSTILE = `<script>window.__pwned = 'script'</script><img src=x onerror="window.__pwned = 'img'">"'&amp; \u001b[2J`;
export const HOSTILE_ID = `<img src=x onerror="window.__pwned = 'id'">`;

/**
 * A run folder holding one step whose teacher proposed HOSTILE (and whose student answered it), written with the
 * run's own log writer: what a run of a domain with free-text outputs records, shaped as actors/*.ts send it.
 */
export function hostileRun(dir: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'scenario.json'), JSON.stringify({ name: `hostile ${HOSTILE}`, seed: 1, steps: 1, sampling: { answersPerStudent: 1 }, tasks: { types: ['deduce'] } }));
  const log = new EventLog(join(dir, 'events.msgpack'));
  const send = (actor: string, to: string, message: Message) => log.append({ step: 0, actor, type: message.type, payload: { to, message } });
  // Even a member's id is hostile here (a real run makes them from numbers; a folder handed over can hold anything).
  const [teacher, student] = ['teacher-0-0', `student-1-0${HOSTILE_ID}`];
  const task = { type: 'deduce', expr: HOSTILE, inputs: [1], outputs: [2] };
  send('population-manager', 'matchmaker', { type: 'roster', members: [{ id: student, role: 'student', subpopulation: 1, adapterSlot: 1, rating: 1000 }, { id: teacher, role: 'teacher', subpopulation: 0, adapterSlot: 0, rating: 1000 }] });
  send(teacher, 'engine', { type: 'generate', replyTo: teacher, requests: [{ requestId: 0, slot: 0, prompt: `prompt ${HOSTILE}`, format: 'proposal/deduce' }] });
  send('engine', teacher, { type: 'generated', results: [{ requestId: 0, text: HOSTILE }] });
  send(teacher, 'verifier', { type: 'validate', replyTo: teacher, requests: [{ requestId: 0, taskType: 'deduce', text: HOSTILE }] });
  send('verifier', teacher, { type: 'validated', results: [{ requestId: 0, validation: { valid: true, task, fuelUsed: 1, metrics: { size: 1, depth: 1, operators: [HOSTILE], signature: HOSTILE } } }] });
  send(teacher, 'matchmaker', { type: 'offers', offers: [{ taskId: 0, teacher, task }] });
  send('matchmaker', student, { type: 'assign', tasks: [{ taskId: 0, teacher, task }] });
  send(student, 'engine', { type: 'generate', replyTo: student, requests: [{ requestId: 1, slot: 1, prompt: `solve ${HOSTILE}`, format: 'answer/deduce' }] });
  send('engine', student, { type: 'generated', results: [{ requestId: 1, text: HOSTILE }] });
  send('verifier', student, { type: 'checked', results: [{ requestId: 1, check: { correct: false, reason: `wrong ${HOSTILE}` } }] });
  send('population-manager', 'engine', { type: 'evolve', requestId: 2, replyTo: 'population-manager', children: [{ slot: 1, parentSlots: [1], operator: 'mutate', seed: 3, inheritOptimizerFrom: null }], sigma: 0.05, crossover: 'svd' });
  log.close();
  const members = { [teacher]: { rating: 1000, rewardMean: 1, validity: 1 }, [student]: { rating: 1000, solveRate: 0 } };
  writeFileSync(join(dir, 'metrics.jsonl'), `${JSON.stringify({ step: 0, solveRate: 0, teacherReward: 1, validity: 1, coverage: 1, members, matches: [{ teacher, student, tasks: 1, correct: 0, answers: 1 }], subpopulations: [], evolution: [] })}\n`);
  return dir;
}

/** Every file under `dir` with its size, modification time and content hash: equal snapshots, nothing written. */
export function snapshot(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isSymbolicLink()) files[path] = `-> ${readlinkSync(path)}`;
      else if (entry.isDirectory()) walk(path);
      else files[path] = `${statSync(path).size} ${statSync(path).mtimeMs} ${createHash('sha256').update(readFileSync(path)).digest('hex')}`;
    }
  };
  walk(dir);
  return files;
}

/** Debian's Chromium; missing on a developer's machine (the browser tests skip), never in CI (POPULORA_REQUIRE_CHROMIUM). */
export const chromiumPath =
  ['chromium', 'chromium-browser', 'google-chrome'].map((name) => spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim()).find((path) => path !== '' && spawnSync(path, ['--version']).status === 0) ?? null;
if (!chromiumPath && process.env.POPULORA_REQUIRE_CHROMIUM === '1') throw new Error('POPULORA_REQUIRE_CHROMIUM=1 but no chromium (.ci/install-chromium installs it)');

/** The flags the machine's notes ask for: no sandbox (root, containers), no GPU, nothing reaching out. */
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
