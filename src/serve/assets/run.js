// A run's page: its status, the sample browser (a step slider and buttons, a member, filters and a text search;
// samples.js draws the step), the matchmaking matrix and lineage at the chosen step, and the report's plots
// (src/report/page.ts), all kept up to date from the event stream as the run writes. The step, member and filters
// live in the URL's hash (#step=3&member=teacher-0-1), so a view can be linked to.
// For tests and benchmarks the body carries data-shown-step (the step drawn) and data-charts (the metrics lines plotted).
'use strict';

const runId = document.body.dataset.run;
const runApi = `/api/run/${encodeURIComponent(runId)}`;
const $ = (id) => document.getElementById(id);
const FILTERS = ['member', 'type', 'validity', 'answers', 'solved', 'teacher', 'student', 'search'];
/** The plots are drawn again at most this often while a run writes (a redraw of every chart costs tens of ms). */
const CHARTS_EVERY_MS = 2000;

const state = { run: null, metrics: [], generation: null, step: null, steps: new Map(), request: 0, chartsTimer: null, chartsAt: -Infinity };

function lastStep() {
  return Math.max(state.metrics.length - 1, state.run?.lastStep ?? -1);
}

/** Reads the run (all of it, or the metrics lines after those held); starts over when the folder holds a new run. */
async function loadRun() {
  const fresh = state.run === null;
  let data = await api(fresh ? runApi : `${runApi}?from=${state.metrics.length}`);
  if (!fresh && data.generation !== state.generation) {
    state.metrics = [];
    state.steps.clear();
    data = await api(runApi); // the folder was rewritten (populora run --overwrite): everything anew
  }
  state.generation = data.generation;
  state.metrics = data.from === 0 ? data.metrics : [...state.metrics, ...data.metrics];
  state.run = data;
  showHeader();
  updateSlider();
  scheduleCharts();
}

function showHeader() {
  const run = state.run;
  $('title').textContent = run.name;
  crumbs(el('a', { href: '/' }, 'runs'), run.path);
  $('status').replaceChildren(
    statusBadge(run.status), ` step ${run.step}${run.steps === null ? '' : ` of ${run.steps}`}`,
    run.status === 'running' ? `, ETA ${duration(run.etaSeconds)}` : '',
    `; ${run.events} events in the log; checkpoints at ${run.checkpoints.length ? run.checkpoints.join(', ') : 'none yet'}; folder ${run.path}`,
  );
  $('notes').replaceChildren(...[run.problem, ...run.notes].filter(Boolean).map((note) => el('li', null, note)));
}

function updateSlider() {
  const slider = $('step');
  const last = lastStep();
  slider.max = String(Math.max(0, last));
  slider.disabled = last < 0;
  // Members and task types for the selects, from the roster and the metrics (ids never change in a run).
  const members = Object.keys(state.metrics.at(-1)?.members ?? {}).sort();
  fillSelect($('member'), members, 'every member');
  fillSelect($('teacher'), members.filter((id) => id.startsWith('teacher')), 'any');
  fillSelect($('student'), members.filter((id) => id.startsWith('student')), 'any');
  const types = state.run?.scenario?.tasks?.types;
  if (Array.isArray(types)) fillSelect($('type'), types, 'any');
  if (last < 0) return;
  if (state.step === null) showStep(initialStep(last));
  else if (($('follow').checked && state.step !== last) || state.step > last) showStep(last); // following, or the folder holds a shorter run now
  else if (state.steps.get(state.step)?.complete === false) showStep(state.step, { refetch: true });
}

function fillSelect(select, values, anyLabel) {
  const now = [...select.options].slice(1).map((o) => o.value);
  if (now.join(' ') === values.join(' ')) return;
  const chosen = select.value;
  select.replaceChildren(el('option', { value: '' }, anyLabel), ...values.map((v) => el('option', { value: v }, v)));
  select.value = values.includes(chosen) ? chosen : '';
}

/** The step named in the URL's hash (and the filters with it), else the last. */
function initialStep(last) {
  const hash = new URLSearchParams(location.hash.slice(1));
  for (const name of FILTERS) if (hash.has(name)) $(name).value = hash.get(name);
  if (!hash.has('step')) return last;
  $('follow').checked = false;
  return Math.min(last, Math.max(0, Number(hash.get('step')) || 0));
}

function filters() {
  return Object.fromEntries(FILTERS.map((name) => [name, $(name).value]));
}

function remember() {
  const hash = new URLSearchParams({ step: String(state.step) });
  for (const [name, value] of Object.entries(filters())) if (value !== '') hash.set(name, value);
  history.replaceState(null, '', `#${hash}`);
}

/** Fetches a step's samples (kept while whole) and draws it with the matrix and lineage at that step. */
async function showStep(step, { refetch = false } = {}) {
  state.step = step;
  $('step').value = String(step);
  $('step-number').textContent = `${step} of ${lastStep()}`;
  document.querySelectorAll('.at-step-number').forEach((node) => (node.textContent = String(step)));
  const request = ++state.request;
  let data = state.steps.get(step);
  if (!data || refetch || data.generation !== state.generation) {
    data = await api(`${runApi}/step/${step}`);
    state.steps.set(step, data);
  }
  if (request !== state.request) return; // a later step was asked for meanwhile
  drawStep(data);
}

function drawStep(data) {
  $('step-note').textContent = data.complete ? '' : 'this step is still being written: it fills in as the run goes on';
  $('step-view').replaceChildren(renderStep(runId, data, filters()));
  const members = data.samples?.members ?? [];
  $('at-step-view').replaceChildren(
    el('div', null, el('h3', null, 'Who met whom at this step'), stepMatrix(data.matches), el('p', { class: 'note' }, 'tasks matched (the students\' solve rate on them)')),
    el('div', null, el('h3', null, 'Lineage up to this step'), stepLineage(data.lineage, members), el('p', { class: 'note' }, 'each child under its first (fitter) parent; in bold the adapters the members hold after this step')),
    el('div', null, el('h3', null, 'Members'), stepMembers(members, state.metrics.find((m) => m.step === data.step))),
  );
  document.body.dataset.shownStep = String(data.step);
  remember();
}

function redraw() {
  const data = state.steps.get(state.step);
  if (data) drawStep(data);
}

/** The report's plots over every step so far (src/report/page.ts draws them), at most every CHARTS_EVERY_MS. */
function scheduleCharts() {
  if (state.chartsTimer !== null) return;
  const wait = Math.max(0, state.chartsAt + CHARTS_EVERY_MS - performance.now()); // wall-clock-ok: the page's redraw pace, display only
  state.chartsTimer = setTimeout(() => {
    state.chartsTimer = null;
    state.chartsAt = performance.now(); // wall-clock-ok: display only
    if (state.metrics.length === 0) return;
    $('charts').replaceChildren();
    $('tables').replaceChildren();
    window.renderReportPage([{ name: state.run.name, steps: state.metrics, lineage: state.run.lineage }]);
    document.body.dataset.charts = String(state.metrics.length);
  }, wait);
}

function move(step) {
  const last = lastStep();
  if (last < 0) return;
  const next = Math.min(last, Math.max(0, step));
  $('follow').checked = next === last && $('follow').checked;
  showStep(next).catch(showError);
}

$('step').addEventListener('input', (event) => {
  $('follow').checked = false;
  move(Number(event.target.value));
});
$('first').addEventListener('click', () => move(0));
$('prev').addEventListener('click', () => move(state.step - 1));
$('next').addEventListener('click', () => move(state.step + 1));
$('last').addEventListener('click', () => {
  $('follow').checked = true;
  move(lastStep());
});
$('follow').addEventListener('change', (event) => event.target.checked && move(lastStep()));
for (const name of FILTERS) $(name).addEventListener(name === 'search' ? 'input' : 'change', redraw);
document.addEventListener('keydown', (event) => {
  if (event.target.closest?.('input, select, textarea, button')) return; // a range input moves itself
  if (event.key === 'ArrowLeft') move(state.step - 1);
  if (event.key === 'ArrowRight') move(state.step + 1);
});

loadRun().catch(showError);
connect({ onChange: (changed) => changed.includes(runId) && loadRun().catch(showError) });
