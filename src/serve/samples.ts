// What the population said, step by step, rebuilt from the event log: each teacher's proposals (prompt, text,
// verdict, metrics, the students that got the task, their solve rate, the teacher's reward), each student's
// answers (the task, prompt, text, verdict, reward), the evolution events, and the lineage so far. The index takes
// the log's records in order, once each, as they are appended (log-tail.ts), so a growing run is indexed
// incrementally and a step switch in the browser costs a lookup, not a pass over the log.
//
// Which message says what (actors/*.ts; every message is recorded with its sender, receiver and step):
//   teacher → engine   generate   requests: {requestId, prompt, format}     a proposal's prompt
//   engine  → teacher  generated  results: {requestId, text}                its text
//   teacher → verifier validate   requests: {requestId, taskType, given?}   its task type
//   verifier → teacher validated  results: {requestId, validation | fault}  its verdict, task and metrics
//   teacher → matchmaker offers   offers: {taskId}                          offered (a valid task too long for the
//                                                                           students' context is not: the teacher's call)
//   matchmaker → student assign   tasks: {taskId, teacher, task}            the tasks a student got, in order
//   student → engine   generate   requests (answersPerStudent per task, in assignment order)
//   engine  → student  generated / verifier → student checked               an answer's text, verdict
//   student → teacher  outcomes   {taskId, correct, total}                  the task's solve rate, as the teacher saw it
//   member  → engine   train      samples: {requestId, reward}              the reward each generation trained with
//   population-manager → engine evolve  children: {slot, parentSlots, operator, seed}   evolution, lineage
//
// Older logs (git log of actors/): before the batched protocol (31f11d4) each message carried one item instead of
// a list; before 7636d0f training samples carried token ids and no request id, so rewards are matched to a
// member's proposals or answers in order (as those versions built them). Anything else unreadable is named in
// `notes`, never guessed.

import type { LoggedEvent } from './log-tail.js';

type Json = Record<string, unknown>;
export type Task = { type: string } & Json;

export interface Member {
  id: string;
  role: 'teacher' | 'student';
  subpopulation: number;
  slot: number;
  rating: number;
  sigma?: number;
}

/** Record numbers of the log events about one proposal or answer (the event page shows each). */
export type EventRefs = Partial<Record<'generate' | 'generated' | 'validate' | 'verdict' | 'offer' | 'assign' | 'outcome' | 'train', number>>;

export interface ProposalSample {
  kind: 'proposal';
  step: number;
  requestId: number; // also the task's id once offered
  teacher: string;
  taskType: string | null;
  prompt: string | null;
  given: string | null; // what the prompt gave of the proposal (a program to write inputs for)
  text: string | null;
  valid: boolean | null; // null: not judged yet, or a fault
  reason: string | null; // why it is invalid
  fault: string | null; // the verifier could not judge it: dropped
  task: Task | null;
  metrics: Json | null;
  offered: boolean;
  students: string[]; // who got the task
  correct: number; // answers correct over every matched student (the students' outcomes)
  answers: number;
  solveRate: number | null;
  reward: number | null;
  events: EventRefs;
}

export interface AnswerSample {
  kind: 'answer';
  step: number;
  requestId: number;
  student: string;
  teacher: string | null;
  taskId: number | null;
  taskType: string | null;
  task: Task | null;
  prompt: string | null;
  text: string | null;
  correct: boolean | null;
  reason: string | null;
  fault: string | null;
  reward: number | null;
  events: EventRefs;
}

/** One lineage record as `lineage.json` holds it (actors/population-manager.ts). */
export interface LineageRecord {
  child: string;
  parents: string[];
  operator: string;
  parameters: Json;
  seed: number;
  step: number;
}

export interface EvolutionSample {
  kind: 'evolution';
  step: number;
  slot: number;
  replaced: string[]; // the members in the slot (twins share one)
  operator: string;
  parents: string[]; // adapters
  children: string[]; // adapters
  seed: number;
  event: number;
}

export interface StepSamples {
  step: number;
  members: Member[];
  proposals: ProposalSample[];
  answers: AnswerSample[];
  evolution: EvolutionSample[];
  firstEvent: number;
  events: number;
}

/** A run's samples, built from its log's records in order. */
export class SampleIndex {
  private readonly steps = new Map<number, StepBuilder>();
  private readonly members = new Map<string, Member>();
  private readonly generation = new Map<string, number>();
  readonly lineage: LineageRecord[] = [];
  readonly notes = new Set<string>();
  lastStep = -1;
  events = 0;

  /** `answersPerStudent`: the scenario's answers per assigned task (scenario.json `sampling.answersPerStudent`). */
  constructor(private readonly answersPerStudent: number | null) {}

  get stepNumbers(): number[] {
    return [...this.steps.keys()];
  }

  /** The step's samples (proposals and answers in request order), or null before its first event. */
  step(step: number): StepSamples | null {
    return this.steps.get(step)?.view() ?? null;
  }

  /** The lineage up to and including `step`. */
  lineageUpTo(step: number): LineageRecord[] {
    return this.lineage.filter((r) => r.step <= step);
  }

  add(event: LoggedEvent): void {
    this.events++;
    const { step } = event;
    this.lastStep = Math.max(this.lastStep, step);
    let builder = this.steps.get(step);
    if (!builder) this.steps.set(step, (builder = new StepBuilder(step, event.index, this.notes)));
    builder.events = event.index - builder.firstEvent + 1;
    const payload = (event.payload ?? {}) as { to?: unknown; message?: unknown };
    const message = (payload.message ?? {}) as Json;
    const to = typeof payload.to === 'string' ? payload.to : '';
    const from = event.actor;
    switch (event.type) {
      case 'roster':
        this.roster(builder, message);
        break;
      case 'generate':
        if (this.roleOf(from) === 'teacher') builder.proposed(from, itemsOf(message, 'requests'), event.index);
        else if (this.roleOf(from) === 'student') builder.asked(from, itemsOf(message, 'requests'), event.index, this.answersPerStudent);
        break; // the evaluator's greedy answers (held-out scores are in metrics.jsonl)
      case 'generated':
        builder.generated(itemsOf(message, 'results'), event.index);
        break;
      case 'validate':
        builder.validating(itemsOf(message, 'requests'), event.index);
        break;
      case 'validated':
        builder.validated(itemsOf(message, 'results'), event.index);
        break;
      case 'offers':
      case 'offer':
        builder.offered(itemsOf(message, 'offers'), event.index);
        break;
      case 'assign':
        builder.assigned(to, itemsOf(message, 'tasks'), event.index);
        break;
      case 'checked':
        builder.checked(itemsOf(message, 'results'), event.index);
        break;
      case 'outcomes':
      case 'outcome':
        if (this.roleOf(to) === 'teacher') builder.outcomes(itemsOf(message, 'outcomes'), event.index);
        break;
      case 'train':
        builder.trained(from, Array.isArray(message.samples) ? (message.samples as Json[]) : [], event.index);
        break;
      case 'evolve':
        this.evolve(builder, message, event.index);
        break;
    }
  }

  private roleOf(id: string): 'teacher' | 'student' | null {
    const known = this.members.get(id)?.role;
    if (known) return known;
    return id.startsWith('teacher-') ? 'teacher' : id.startsWith('student-') ? 'student' : null;
  }

  private roster(builder: StepBuilder, message: Json): void {
    const members = (Array.isArray(message.members) ? (message.members as Json[]) : []).map((m): Member => ({
      id: String(m.id),
      role: m.role === 'teacher' ? 'teacher' : 'student',
      subpopulation: Number(m.subpopulation),
      slot: Number(m.adapterSlot ?? m.slot),
      rating: Number(m.rating),
      ...(typeof m.sigma === 'number' ? { sigma: m.sigma } : {}),
    }));
    for (const m of members) {
      this.members.set(m.id, m);
      if (!this.generation.has(m.id)) this.generation.set(m.id, 0);
    }
    builder.members = members;
  }

  /**
   * An evolution request: each child takes a slot; the members in it (a teacher and its twin under `self`) get the
   * next generation's adapter, made from the parents' current adapters (population-manager.ts requestEvolution).
   */
  private evolve(builder: StepBuilder, message: Json, index: number): void {
    const members = [...this.members.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
    const adapter = (id: string) => `${id}.g${this.generation.get(id) ?? 0}`;
    // The member that stands for a slot in selection: its teacher where a teacher and a student share it.
    const ownerOf = (slot: number) => members.find((m) => m.slot === slot && m.role === 'teacher') ?? members.find((m) => m.slot === slot);
    for (const child of Array.isArray(message.children) ? (message.children as Json[]) : []) {
      const slot = Number(child.slot);
      const parentSlots = Array.isArray(child.parentSlots) ? (child.parentSlots as number[]) : [];
      const parentMembers = parentSlots.map(ownerOf);
      if (parentMembers.some((m) => m === undefined) || !members.some((m) => m.slot === slot)) {
        this.notes.add(`evolve (record ${index}): a slot no member of the roster holds; its lineage is left out`);
        continue;
      }
      const parents = parentMembers.map((m) => adapter(m!.id));
      const operator = String(child.operator);
      const parameters = operator === 'mutate' ? { sigma: message.sigma } : { kind: message.crossover };
      const replaced = members.filter((m) => m.slot === slot);
      const children: string[] = [];
      for (const m of replaced) {
        this.generation.set(m.id, (this.generation.get(m.id) ?? 0) + 1);
        children.push(adapter(m.id));
        this.lineage.push({ child: adapter(m.id), parents, operator, parameters, seed: Number(child.seed), step: builder.step });
      }
      builder.evolution.push({ kind: 'evolution', step: builder.step, slot, replaced: replaced.map((m) => m.id), operator, parents, children, seed: Number(child.seed), event: index });
    }
  }
}

/** A message's list of items; before the batched protocol (31f11d4) the message was its one item. */
function itemsOf(message: Json, key: string): Json[] {
  const list = message[key];
  return Array.isArray(list) ? (list as Json[]) : [message];
}

const TOO_LONG = "too-long: valid, but its prompt does not fit the students' context beside an answer, so its teacher did not offer it";
const text = (value: unknown) => (typeof value === 'string' ? value : null);

/** One step's samples as its events arrive. */
class StepBuilder {
  members: Member[] = [];
  readonly proposals = new Map<number, ProposalSample>();
  readonly answers = new Map<number, AnswerSample>();
  readonly evolution: EvolutionSample[] = [];
  events = 0;
  private readonly assignments = new Map<string, Array<{ taskId: number; teacher: string | null; task: Task | null; event: number }>>(); // per student, in order
  private readonly asks = new Map<string, number>(); // answers each student asked for so far

  constructor(
    readonly step: number,
    readonly firstEvent: number,
    private readonly notes: Set<string>,
  ) {}

  /**
   * The step as it stands. A step's records reach the log together (the run flushes it at the step's end), so a
   * valid proposal with no offer was withheld by its teacher: its task's prompt does not fit the students' context
   * (actors/teacher.ts), which the run counts as invalid.
   */
  view(): StepSamples {
    const byId = <T extends { requestId: number }>(items: Iterable<T>) => [...items].sort((a, b) => a.requestId - b.requestId);
    const proposals = byId(this.proposals.values()).map((p) => (p.valid && !p.offered ? { ...p, valid: false, reason: TOO_LONG } : p));
    return { step: this.step, members: this.members, proposals, answers: byId(this.answers.values()), evolution: this.evolution, firstEvent: this.firstEvent, events: this.events };
  }

  proposed(teacher: string, items: Json[], index: number): void {
    for (const item of items) {
      const requestId = Number(item.requestId);
      const format = typeof item.format === 'string' ? item.format : null; // `proposal/TYPE`; older logs carried the grammar itself
      this.proposals.set(requestId, {
        kind: 'proposal', step: this.step, requestId, teacher, taskType: format?.split('/')[1] ?? null, prompt: text(item.prompt), given: null, text: null,
        valid: null, reason: null, fault: null, task: null, metrics: null, offered: false, students: [], correct: 0, answers: 0, solveRate: null, reward: null, events: { generate: index },
      });
    }
  }

  /** A student's answer requests: `answersPerStudent` per assigned task, in the order the tasks were assigned. */
  asked(student: string, items: Json[], index: number, answersPerStudent: number | null): void {
    const assigned = this.assignments.get(student) ?? [];
    for (const item of items) {
      const k = this.asks.get(student) ?? 0;
      this.asks.set(student, k + 1);
      const perTask = answersPerStudent ?? Math.max(1, Math.round(items.length / Math.max(1, assigned.length)));
      const assignment = assigned[Math.floor(k / perTask)];
      if (!assignment) this.notes.add(`generate from ${student} (record ${index}): more answers than its assigned tasks hold; those answers show no task`);
      const requestId = Number(item.requestId);
      this.answers.set(requestId, {
        kind: 'answer', step: this.step, requestId, student, teacher: assignment?.teacher ?? null, taskId: assignment?.taskId ?? null, taskType: assignment?.task?.type ?? null, task: assignment?.task ?? null,
        prompt: text(item.prompt), text: null, correct: null, reason: null, fault: null, reward: null, events: { ...(assignment ? { assign: assignment.event } : {}), generate: index },
      });
    }
  }

  generated(results: Json[], index: number): void {
    for (const result of results) {
      const sample = this.proposals.get(Number(result.requestId)) ?? this.answers.get(Number(result.requestId));
      if (!sample) continue; // the evaluator's
      sample.text = text(result.text);
      sample.events.generated = index;
    }
  }

  validating(requests: Json[], index: number): void {
    for (const request of requests) {
      const p = this.proposals.get(Number(request.requestId));
      if (!p) continue;
      p.taskType = text(request.taskType) ?? p.taskType;
      p.given = text(request.given);
      p.events.validate = index;
    }
  }

  validated(results: Json[], index: number): void {
    for (const result of results) {
      const p = this.proposals.get(Number(result.requestId));
      if (!p) continue;
      p.events.verdict = index;
      if (typeof result.fault === 'string') {
        p.fault = result.fault;
        continue;
      }
      const validation = (result.validation ?? {}) as Json;
      p.valid = validation.valid === true;
      p.reason = p.valid ? null : (text(validation.reason) ?? 'invalid');
      p.task = (validation.task as Task | undefined) ?? null;
      p.metrics = (validation.metrics as Json | undefined) ?? null;
    }
  }

  offered(offers: Json[], index: number): void {
    for (const offer of offers) {
      const p = this.proposals.get(Number(offer.taskId));
      if (!p) continue;
      p.offered = true;
      p.events.offer = index;
    }
  }

  assigned(student: string, tasks: Json[], index: number): void {
    const list = this.assignments.get(student) ?? [];
    for (const t of tasks) {
      const taskId = Number(t.taskId);
      list.push({ taskId, teacher: text(t.teacher), task: (t.task as Task | undefined) ?? null, event: index });
      this.proposals.get(taskId)?.students.push(student);
    }
    this.assignments.set(student, list);
  }

  checked(results: Json[], index: number): void {
    for (const result of results) {
      const a = this.answers.get(Number(result.requestId));
      if (!a) continue; // the evaluator's
      a.events.verdict = index;
      if (typeof result.fault === 'string') {
        a.fault = result.fault;
        continue;
      }
      const check = (result.check ?? {}) as Json;
      a.correct = check.correct === true;
      a.reason = text(check.reason);
    }
  }

  /** A student's outcomes as its tasks' teacher received them: the proposals' solve rates. */
  outcomes(outcomes: Json[], index: number): void {
    for (const o of outcomes) {
      const p = this.proposals.get(Number(o.taskId));
      if (!p) continue;
      p.correct += Number(o.correct);
      p.answers += Number(o.total);
      p.solveRate = p.answers > 0 ? p.correct / p.answers : null;
      p.events.outcome = index;
    }
  }

  /**
   * A member's training samples: each names its generation by request id. Logs before 7636d0f name none: there a
   * member trained on every proposal or answer of the step, in order, so the rewards are matched in that order.
   */
  trained(member: string, samples: Json[], index: number): void {
    const byRequest = samples.every((s) => typeof s.requestId === 'number');
    let own: Array<ProposalSample | AnswerSample> = [];
    if (!byRequest) {
      own = [...this.proposals.values(), ...this.answers.values()].filter((s) => (s.kind === 'proposal' ? s.teacher : s.student) === member && s.fault === null).sort((a, b) => a.requestId - b.requestId);
      this.notes.add('training samples without request ids (logs written before 7636d0f): each reward is matched to the member\'s proposals or answers in order, as those versions trained on them');
      if (samples.length !== own.length) {
        this.notes.add(`train from ${member} at step ${this.step} (record ${index}): ${samples.length} samples for ${own.length} generations; their rewards are not shown`);
        return;
      }
    }
    samples.forEach((s, i) => {
      const sample = byRequest ? (this.proposals.get(s.requestId as number) ?? this.answers.get(s.requestId as number)) : own[i];
      if (!sample) return;
      sample.reward = typeof s.reward === 'number' ? s.reward : null;
      sample.events.train = index;
    });
  }
}
