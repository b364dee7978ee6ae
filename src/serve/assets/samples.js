// The sample browser's view of one step (/api/run/ID/step/N, built by src/serve/samples.ts): the proposals with
// their verdicts and metrics, the tasks each student got, every answer with its verdict and reward, and the
// evolution events, narrowed by a member and the filters; each row links to its events' places in the log.
// Every text from the run is set as text (common.js `el`), never as markup.
'use strict';

/** Rows shown per table before "show all": a step of a large population stays quick to draw. */
const ROWS_SHOWN = 400;
/** Characters of a long prompt shown before it folds (the code domain's prompts carry reference programs). */
const PROMPT_CHARACTERS = 160;

/** The events a sample lived through, in order, each with its short label in the log column. */
const EVENT_KINDS = { assign: 'assign', generate: 'gen', generated: 'text', validate: 'val', verdict: 'verdict', offer: 'offer', outcome: 'outcome', train: 'train' };

function eventLinks(runId, events) {
  return el('span', { class: 'events' }, Object.entries(EVENT_KINDS).filter(([kind]) => events[kind] !== undefined).map(([kind, label]) => el('a', { href: eventUrl(runId, events[kind]), title: `the ${kind} message: record ${events[kind]} of the event log` }, `${label} ${events[kind]}`)));
}

/** A text from the run, whole; a long one folds behind its first characters. */
function longText(text, className = 'text') {
  if (text === null || text === undefined) return el('span', { class: 'missing' }, '–');
  if (text.length <= PROMPT_CHARACTERS) return el('span', { class: className }, text);
  return el('details', { class: className }, el('summary', null, `${text.slice(0, PROMPT_CHARACTERS)}… (${text.length} characters)`), text);
}

/** A task as a compact line: its fields other than the type. */
function taskText(task) {
  if (!task) return '–';
  return Object.entries(task)
    .filter(([key]) => key !== 'type')
    .map(([key, value]) => `${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join('; ');
}

function proposalVerdict(p) {
  if (p.fault !== null) return el('span', { class: 'verdict fault', title: p.fault }, 'fault: ', p.fault);
  if (p.valid === null) return el('span', { class: 'verdict pending' }, 'not judged yet');
  return p.valid ? el('span', { class: 'verdict valid' }, 'valid') : el('span', { class: 'verdict invalid' }, 'invalid: ', p.reason ?? '');
}

function answerVerdict(a) {
  if (a.fault !== null) return el('span', { class: 'verdict fault' }, 'fault: ', a.fault);
  if (a.correct === null) return el('span', { class: 'verdict pending' }, 'not checked yet');
  return el('span', { class: `verdict ${a.correct ? 'valid' : 'invalid'}` }, a.correct ? 'correct' : 'wrong', a.reason && a.reason !== 'correct' ? `: ${a.reason}` : '');
}

function metricsText(m) {
  if (!m) return '–';
  return Object.entries(m)
    .filter(([key]) => key !== 'program')
    .map(([key, value]) => `${key} ${Array.isArray(value) ? value.join(' ') : value}`)
    .join(', ');
}

/** Which of a step's samples the member and filters keep. */
function sampleFilter(step, f) {
  const proposalOf = new Map(step.proposals.map((p) => [p.requestId, p]));
  const needle = f.search.trim().toLowerCase();
  const has = (...texts) => needle === '' || texts.some((t) => t !== null && t !== undefined && String(t).toLowerCase().includes(needle));
  const solvedClass = (rate) => (rate === null || rate === undefined ? null : rate === 1 ? 'all' : rate === 0 ? 'none' : 'some');
  const proposal = (p) =>
    (f.member === '' || p.teacher === f.member || p.students.includes(f.member)) &&
    (f.type === '' || p.taskType === f.type) &&
    (f.validity === '' || (f.validity === 'valid') === (p.valid === true)) &&
    (f.solved === '' || solvedClass(p.solveRate) === f.solved) &&
    (f.teacher === '' || p.teacher === f.teacher) &&
    (f.student === '' || p.students.includes(f.student)) &&
    has(p.prompt, p.text, p.reason, p.fault, p.teacher, p.given, taskText(p.task));
  const answer = (a) => {
    const task = proposalOf.get(a.taskId);
    return (
      (f.member === '' || a.student === f.member || a.teacher === f.member) &&
      (f.type === '' || a.taskType === f.type) &&
      (f.validity !== 'invalid') && // answers are to valid tasks only
      (f.answers === '' || (f.answers === 'correct') === (a.correct === true)) &&
      (f.solved === '' || solvedClass(task?.solveRate) === f.solved) &&
      (f.teacher === '' || a.teacher === f.teacher) &&
      (f.student === '' || a.student === f.student) &&
      has(a.prompt, a.text, a.reason, a.fault, a.student, a.teacher, taskText(a.task))
    );
  };
  return { proposal, answer };
}

/** A table of rows (arrays of cells), the first ROWS_SHOWN of them until "show all"; `narrow` columns never wrap. */
function table(id, head, rows, total, narrow) {
  const body = el('tbody');
  const shown = (limit) => body.replaceChildren(...rows.slice(0, limit).map((cells) => el('tr', { dataset: cells.dataset }, cells.map((cell, i) => el('td', { class: narrow.includes(i) ? 'narrow' : null }, cell)))));
  shown(ROWS_SHOWN);
  const more = rows.length > ROWS_SHOWN ? el('button', { onclick: (event) => (shown(rows.length), event.target.remove()) }, `show all ${rows.length}`) : null;
  const caption = el('p', { class: 'count' }, `${rows.length} of ${total} shown`, more);
  return el('div', { id, class: 'samples' }, caption, el('table', { class: 'samples' }, el('thead', null, el('tr', null, head.map((h) => el('th', null, h)))), body));
}

/** The step's samples as the page shows them. */
function renderStep(runId, data, filters) {
  const step = data.samples;
  if (!step) return el('p', { class: 'empty' }, `no event of step ${data.step} in the log yet`);
  const keep = sampleFilter(step, filters);
  const proposals = step.proposals.filter(keep.proposal);
  const answers = step.answers.filter(keep.answer);

  const proposalRows = proposals.map((p) => {
    const cells = [
      String(p.requestId), p.teacher, p.taskType ?? '–', longText(p.prompt, 'prompt'), longText(p.given === null ? p.text : `${p.given}\n${p.text ?? ''}`, 'proposal'),
      proposalVerdict(p), el('span', { class: 'task' }, taskText(p.task)), el('span', { class: 'metrics' }, metricsText(p.metrics)),
      p.students.join(' ') || '–', p.answers > 0 ? `${percent(p.solveRate)} (${p.correct}/${p.answers})` : '–', fixed(p.reward), eventLinks(runId, p.events),
    ];
    cells.dataset = { request: String(p.requestId), teacher: p.teacher, valid: String(p.valid), type: p.taskType ?? '' };
    return cells;
  });

  const answerRows = answers.map((a) => {
    const cells = [
      String(a.requestId), a.student, a.teacher ?? '–', a.taskType ?? '–', el('span', { class: 'task' }, taskText(a.task)), longText(a.prompt, 'prompt'), longText(a.text, 'answer'),
      answerVerdict(a), fixed(a.reward), eventLinks(runId, a.events),
    ];
    cells.dataset = { request: String(a.requestId), student: a.student, correct: String(a.correct), type: a.taskType ?? '' };
    return cells;
  });

  // The tasks each student got (in the order the matchmaker assigned them), with its own answers' tally.
  // A teacher chosen (as the member or the teacher filter): the students that got its tasks, and only those tasks.
  const teacher = filters.teacher || (step.members.find((m) => m.id === filters.member)?.role === 'teacher' ? filters.member : '');
  const ofStudent = (student) => step.answers.filter((a) => a.student === student && (teacher === '' || a.teacher === teacher) && (filters.type === '' || a.taskType === filters.type));
  const students = [...new Set(step.answers.map((a) => a.student))].filter((s) => (filters.member === '' || filters.member === teacher || s === filters.member) && (filters.student === '' || s === filters.student) && ofStudent(s).length > 0);
  const tasksOf = (student) => {
    const seen = new Map();
    for (const a of ofStudent(student)) {
      const entry = seen.get(a.taskId) ?? { a, correct: 0, total: 0 };
      if (a.correct !== null) entry.total++;
      if (a.correct) entry.correct++;
      seen.set(a.taskId, entry);
    }
    return [...seen.values()];
  };
  const assigned = el('div', { id: 'assigned', class: 'assigned' }, students.map((s) =>
    el('div', { class: 'student-tasks', dataset: { student: s } }, el('h4', null, s),
      el('ul', null, tasksOf(s).map(({ a, correct, total }) => el('li', null, `task ${a.taskId} from ${a.teacher ?? '?'} (${a.taskType ?? '?'}): `, el('span', { class: 'task' }, taskText(a.task)), ` — ${correct}/${total} correct`))))));

  const evolution = step.evolution.filter((e) => filters.member === '' || e.replaced.includes(filters.member) || e.parents.some((p) => p.startsWith(`${filters.member}.`)));
  const evolutionView = evolution.length === 0
    ? el('p', { class: 'empty' }, 'no evolution at this step')
    : el('ul', { id: 'evolution', class: 'evolution' }, evolution.map((e) =>
        el('li', null, `${e.replaced.join(' and ')} replaced by ${e.children.join(', ')}: ${e.operator === 'crossover' ? 'crossover' : 'mutation'} of ${e.parents.join(' and ')} (slot ${e.slot}, seed ${e.seed}) `, el('a', { href: eventUrl(runId, e.event) }, `evolve #${e.event}`))));

  return el('div', null,
    el('h3', null, 'Proposals'),
    table('proposals', ['#', 'teacher', 'type', 'prompt', 'proposal', 'verdict', 'task', 'metrics', 'students', 'solved', 'reward', 'log'], proposalRows, step.proposals.length, [0, 1, 2, 10]),
    el('h3', null, 'Tasks each student got'),
    students.length === 0 ? el('p', { class: 'empty' }, 'no task was assigned') : assigned,
    el('h3', null, 'Answers'),
    table('answers', ['#', 'student', 'teacher', 'type', 'task', 'prompt', 'answer', 'verdict', 'reward', 'log'], answerRows, step.answers.length, [0, 1, 2, 3, 8]),
    el('h3', null, 'Evolution'),
    evolutionView,
  );
}

/** The matchmaking matrix of one step (metrics.jsonl `matches`): tasks matched, and the students' solve rate on them. */
function stepMatrix(matches) {
  if (!matches) return el('p', { class: 'empty' }, 'this step has no metrics line yet');
  if (matches.length === 0) return el('p', { class: 'empty' }, 'no task was matched at this step');
  const teachers = [...new Set(matches.map((m) => m.teacher))].sort();
  const students = [...new Set(matches.map((m) => m.student))].sort();
  const cell = new Map(matches.map((m) => [`${m.teacher} ${m.student}`, m]));
  const most = Math.max(...matches.map((m) => m.tasks));
  return el('table', { class: 'matrix', id: 'step-matrix', dataset: { cells: String(matches.length) } },
    el('tr', null, el('th', null, 'teacher \\ student'), students.map((s) => el('th', null, s))),
    teachers.map((t) => el('tr', null, el('th', null, t), students.map((s) => {
      const m = cell.get(`${t} ${s}`);
      if (!m) return el('td');
      const td = el('td', null, `${m.tasks} `, el('small', null, m.answers ? `(${percent(m.correct / m.answers)})` : '(–)'));
      td.style.background = `rgba(31, 119, 180, ${(0.15 + (0.6 * m.tasks) / most).toFixed(2)})`;
      return td;
    }))));
}

/** The lineage up to the step: each child under its first (fitter) parent; the members' adapters at the step in bold. */
function stepLineage(lineage, members) {
  const current = new Map(members.map((m) => [m.id, `${m.id}.g0`]));
  for (const r of lineage) current.set(r.child.slice(0, r.child.lastIndexOf('.')), r.child);
  const live = new Set(current.values());
  const children = new Map();
  for (const r of lineage) children.set(r.parents[0], [...(children.get(r.parents[0]) ?? []), r]);
  const made = new Set(lineage.map((r) => r.child));
  const roots = [...new Set([...members.map((m) => `${m.id}.g0`), ...children.keys()])].filter((a) => !made.has(a)).sort();
  const name = (adapter) => (live.has(adapter) ? el('b', null, adapter) : el('span', { class: 'gone' }, adapter));
  const branch = (adapter) => {
    const below = children.get(adapter) ?? [];
    return below.length === 0 ? null : el('ul', null, below.map((r) => el('li', null, name(r.child), ` at step ${r.step}: ${r.operator === 'crossover' ? `crossover (${r.parameters.kind ?? ''}) with ${r.parents.slice(1).join(', ')}` : `mutation (σ ${r.parameters.sigma ?? ''})`}`, branch(r.child))));
  };
  return el('ul', { class: 'lineage', id: 'step-lineage', dataset: { records: String(lineage.length) } }, roots.map((root) => el('li', null, name(root), branch(root))));
}

/** The members as the step began (the population manager's roster), with their metrics of the step. */
function stepMembers(members, metrics) {
  if (members.length === 0) return el('p', { class: 'empty' }, 'no roster recorded for this step');
  return el('table', { class: 'members' },
    el('tr', null, ['member', 'role', 'sub-population', 'slot', 'rating at the start', 'this step'].map((h) => el('th', null, h))),
    members.map((m) => {
      const mine = metrics?.members?.[m.id];
      const step = !mine ? '–' : m.role === 'teacher' ? `reward ${fixed(mine.rewardMean)}, valid ${percent(mine.validity)}` : `solve rate ${percent(mine.solveRate)}`;
      return el('tr', null, el('td', null, m.id), el('td', null, m.role), el('td', null, String(m.subpopulation)), el('td', null, String(m.slot)), el('td', null, m.sigma === undefined ? fixed(m.rating, 0) : `${fixed(m.rating, 1)} ± ${fixed(m.sigma, 1)}`), el('td', null, step));
    }));
}
