// The report's page script: runs in the browser, inside report.html, with uPlot (bundled into the same file) and
// the runs' data. It is written here as one self-contained function (no imports, no outer names) because
// report.ts inlines its source text; TypeScript still checks it.
//
// Every chart container gets `data-points`: the number of finite points drawn, which the headless-browser test
// reads back; `body[data-rendered]` says the script ran to the end.


export interface PageRun {
  name: string;
  steps: any[]; // StepMetrics, one per step
  lineage: Array<{ child: string; parents: string[]; operator: string; parameters: Record<string, unknown>; step: number | null }>;
}

/** Runs grouped across seeds (across-seeds.ts): per group and headline, the mean curve and its 95% band. */
export interface PageGroups {
  steps: number[];
  window: number; // the trailing mean each run's values were smoothed by
  headlines: Array<{ key: string; title: string; sparse: boolean }>;
  groups: Array<{ label: string; runs: number; curves: Record<string, { mean: Array<number | null>; low: Array<number | null>; high: Array<number | null> }> }>;
}

export function renderPage(runs: PageRun[], grouped: PageGroups | null = null): void {
  const uPlot = (globalThis as any).uPlot;
  const palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
  const main = document.getElementById('charts')!;
  const compare = runs.length > 1;
  // Names and ids come from the run folder (a scenario's name is anyone's text): HTML-escaped wherever markup is built.
  const esc = (text: unknown) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

  /** One line chart over steps: each series is [label, values by step]. */
  function chart(title: string, steps: number[], series: Array<[string, Array<number | null>]>, note = ''): void {
    const box = document.createElement('section');
    box.className = 'chart';
    box.innerHTML = `<h3>${title}</h3>${note ? `<p class="note">${note}</p>` : ''}`;
    main.appendChild(box);
    const points = series.reduce((n, [, values]) => n + values.filter((v) => v !== null && Number.isFinite(v)).length, 0);
    box.dataset.points = String(points);
    if (points === 0) {
      box.insertAdjacentHTML('beforeend', '<p class="empty">no data in this run (nothing of this kind happened)</p>');
      return;
    }
    const options = {
      width: 540,
      height: 240,
      scales: { x: { time: false } },
      axes: [{ label: 'step', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, {}],
      series: [{ label: 'step' }, ...series.map(([label], i) => ({ label, stroke: palette[i % palette.length], width: 1.5, points: { show: steps.length < 40 }, spanGaps: true }))],
    };
    new uPlot(options, [steps, ...series.map(([, values]) => values)], box);
  }

  const stepsOf = (run: PageRun) => run.steps.map((m) => m.step as number);
  const field = (run: PageRun, get: (m: any) => number | null | undefined) => run.steps.map((m) => get(m) ?? null);
  // Compared runs may have different step counts: every series is laid on the longest run's steps.
  const longest = runs.reduce((a, b) => (b.steps.length > a.steps.length ? b : a));
  const aligned = (run: PageRun, get: (m: any) => number | null | undefined) => stepsOf(longest).map((step) => get(run.steps.find((m) => m.step === step)) ?? null);
  // Long runs are compared through a trailing mean (one step of self-play is noisy); short ones as they are.
  const window = longest.steps.length >= 30 ? Math.round(longest.steps.length / 10) : 1;
  const trailingMean = (values: Array<number | null>) =>
    values.map((_, i) => {
      const present = values.slice(Math.max(0, i - window + 1), i + 1).filter((v): v is number => v !== null);
      return present.length === 0 ? null : present.reduce((a, b) => a + b, 0) / present.length;
    });
  const smoothing = window > 1 ? `trailing mean over ${window} steps` : '';
  const perRun = (title: string, get: (m: any) => number | null | undefined, note = '') =>
    chart(title, stepsOf(longest), runs.map((run) => [run.name, trailingMean(aligned(run, get))]), [note, smoothing].filter(Boolean).join('; '));

  /** One chart per headline: each group's mean (a line) inside its 95% band (a fill between two thin lines). */
  function groupCharts(g: PageGroups): void {
    for (const h of g.headlines) {
      const box = document.createElement('section');
      box.className = 'chart';
      const smoothing = g.window > 1 && !h.sparse ? `; each run smoothed by a trailing mean over ${g.window} steps first` : '';
      box.innerHTML = `<h3>${h.title}</h3><p class="note">mean over seeds, 95% bootstrap band${smoothing}</p>`;
      main.appendChild(box);
      const curves = g.groups.map((group) => group.curves[h.key]!);
      const points = curves.reduce((n, c) => n + [c.mean, c.low, c.high].reduce((k, values) => k + values.filter((v) => v !== null && Number.isFinite(v)).length, 0), 0);
      box.dataset.points = String(points);
      if (points === 0) {
        box.insertAdjacentHTML('beforeend', '<p class="empty">no data in these runs</p>');
        continue;
      }
      const series: any[] = [{ label: 'step' }];
      const bands: any[] = [];
      const data: Array<Array<number | null>> = [g.steps];
      g.groups.forEach((group, i) => {
        const color = palette[i % palette.length]!;
        const c = group.curves[h.key]!;
        series.push({ label: `${group.label} (${group.runs} runs)`, stroke: color, width: 2, spanGaps: true, points: { show: h.sparse || g.steps.length < 40 } });
        series.push({ label: `${group.label} high`, stroke: color, width: 0.5, dash: [4, 4], spanGaps: true, points: { show: false } });
        series.push({ label: `${group.label} low`, stroke: color, width: 0.5, dash: [4, 4], spanGaps: true, points: { show: false } });
        data.push(c.mean, c.high, c.low);
        bands.push({ series: [data.length - 2, data.length - 1], fill: `${color}33` });
      });
      const options = { width: 540, height: 260, scales: { x: { time: false } }, axes: [{ label: 'step', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, {}], series, bands };
      new uPlot(options, data, box);
    }
  }

  if (grouped) {
    groupCharts(grouped);
  } else if (compare) {
    perRun('Student solve rate', (m) => m?.solveRate);
    perRun('Teacher reward', (m) => m?.teacherReward);
    perRun('Task validity', (m) => m?.validity);
    perRun('Task size (AST nodes)', (m) => m?.taskSize);
    perRun('Task depth', (m) => m?.taskDepth);
    perRun('Problem-space coverage (bins seen)', (m) => m?.coverage);
    perRun('Tasks solved by all or none', (m) => m?.extremeSolveRateShare, 'no learning signal in them');
    perRun('Distinct expressions seen', (m) => m?.distinctExpressions, 'finer than the bins: constants count');
    perRun('Task entropy over bins (bits)', (m) => m?.taskEntropy);
    if (runs.some((run) => run.steps.some((m) => m.heldOut))) perRun('Held-out solve rate (students, greedy)', (m) => m?.heldOut?.solveRate);
    perRun('Training loss', (m) => m?.trainLoss);
  } else {
    const run = runs[0]!;
    const steps = stepsOf(run);
    const last = run.steps.at(-1) ?? { members: {}, subpopulations: [] };
    const ids = Object.keys(last.members).sort();
    const students = ids.filter((id) => id.startsWith('student'));
    const subs = (last.subpopulations as Array<{ subpopulation: number }>).map((s) => s.subpopulation);
    const ofSub = (m: any, sub: number, key: string) => m.subpopulations.find((s: any) => s.subpopulation === sub)?.[key];
    chart('Student solve rate per member', steps, [['all', field(run, (m) => m.solveRate)], ...students.map((id): [string, Array<number | null>] => [id, field(run, (m) => m.members[id]?.solveRate)])]);
    chart('Student solve rate per sub-population', steps, subs.map((sub): [string, Array<number | null>] => [`sub-population ${sub}`, field(run, (m) => ofSub(m, sub, 'solveRate'))]));
    chart('Teacher reward', steps, [['all', field(run, (m) => m.teacherReward)], ...subs.map((sub): [string, Array<number | null>] => [`sub-population ${sub}`, field(run, (m) => ofSub(m, sub, 'teacherReward'))])]);
    chart('Task validity', steps, [['share of proposals valid', field(run, (m) => m.validity)]]);
    chart('Task complexity', steps, [['size (AST nodes)', field(run, (m) => m.taskSize)], ['depth', field(run, (m) => m.taskDepth)]]);
    const present = (key: string, label: string): Array<[string, Array<number | null>]> => (last[key] !== null && last[key] !== undefined ? [[label, field(run, (m) => m[key])]] : []);
    chart('Problem-space coverage', steps, [['bins seen', field(run, (m) => m.coverage)], ['new bins', field(run, (m) => m.newBins)], ...present('distinctPrograms', 'distinct programs'), ...present('distinctExpressions', 'distinct expressions')]);
    chart('Task entropy over bins (bits)', steps, [["this step's valid tasks", field(run, (m) => m.taskEntropy)]], 'where the bins saturate, how evenly the tasks spread over them');
    const evaluated = run.steps.filter((m) => m.heldOut);
    if (evaluated.length > 0) chart('Held-out solve rate (greedy)', steps, [['students (mean)', field(run, (m) => m.heldOut?.solveRate)], ['best student', field(run, (m) => m.heldOut?.best)], ['students, whole set', field(run, (m) => m.heldOut?.solveRateAllTasks)], ...ids.map((id): [string, Array<number | null>] => [id, field(run, (m) => m.heldOut?.members[id])])], `${evaluated.at(-1).heldOut.tasks} tasks never proposed in the run`);
    chart('Ratings', steps, ids.map((id): [string, Array<number | null>] => [id, field(run, (m) => m.members[id]?.rating)]));
    chart('Training loss', steps, [['loss', field(run, (m) => m.trainLoss)]]);
    if (run.steps.some((m) => m.timing)) {
      chart('Verifier (wall clock, not replayed)', steps, [['share of the step', field(run, (m) => m.timing?.verifierShare)]], 'the verifier\'s time over the step\'s');
      chart('Verifier throughput (per second of its time)', steps, [['validations/s', field(run, (m) => m.timing?.validationsPerSecond)], ['answer checks/s', field(run, (m) => m.timing?.checksPerSecond)]]);
    }
  }

  const tables = document.getElementById('tables')!;
  for (const run of grouped ? [] : runs) { // a grouped comparison's runs are many: their tables are in each run's report
    tables.insertAdjacentHTML('beforeend', `<h2>${esc(run.name)}: who met whom</h2>${matrix(run)}<h2>${esc(run.name)}: lineage</h2>${lineageTree(run)}`);
  }

  /** Teachers × students over the whole run: tasks matched, and the share of answers right. */
  function matrix(run: PageRun): string {
    const cells = new Map<string, { tasks: number; correct: number; answers: number }>();
    for (const m of run.steps) {
      for (const pair of m.matches ?? []) {
        const key = `${pair.teacher} ${pair.student}`;
        const cell = cells.get(key) ?? { tasks: 0, correct: 0, answers: 0 };
        cells.set(key, { tasks: cell.tasks + pair.tasks, correct: cell.correct + (pair.correct ?? 0), answers: cell.answers + (pair.answers ?? 0) });
      }
    }
    if (cells.size === 0) return '<p class="empty">no task was matched</p>';
    const teachers = [...new Set([...cells.keys()].map((k) => k.split(' ')[0]!))].sort();
    const students = [...new Set([...cells.keys()].map((k) => k.split(' ')[1]!))].sort();
    const most = Math.max(...[...cells.values()].map((c) => c.tasks));
    const td = (teacher: string, student: string) => {
      const cell = cells.get(`${teacher} ${student}`);
      if (!cell) return '<td></td>';
      const solve = cell.answers === 0 ? '–' : `${Math.round((100 * cell.correct) / cell.answers)}%`;
      return `<td style="background: rgba(31, 119, 180, ${(0.15 + (0.6 * cell.tasks) / most).toFixed(2)})">${cell.tasks} <small>(${solve})</small></td>`;
    };
    const head = `<tr><th>teacher \\ student</th>${students.map((s) => `<th>${esc(s)}</th>`).join('')}</tr>`;
    return `<table class="matrix" data-cells="${cells.size}">${head}${teachers.map((t) => `<tr><th>${esc(t)}</th>${students.map((s) => td(t, s)).join('')}</tr>`).join('')}</table><p class="note">tasks matched (students' solve rate on them), summed over the run</p>`;
  }

  /** Each replacement under its first (fitter) parent; the initial adapters are the roots. */
  function lineageTree(run: PageRun): string {
    if (run.lineage.length === 0) return '<p class="empty">no replacement happened</p>';
    const children = new Map<string, typeof run.lineage>();
    for (const record of run.lineage) children.set(record.parents[0]!, [...(children.get(record.parents[0]!) ?? []), record]);
    const made = new Set(run.lineage.map((r) => r.child));
    const roots = [...children.keys()].filter((adapter) => !made.has(adapter)).sort();
    const describe = (r: (typeof run.lineage)[number]) => {
      const kind = r.operator === 'crossover' ? `crossover (${esc(r.parameters.kind ?? '')}) with ${esc(r.parents.slice(1).join(', '))}` : `mutation (σ ${esc(r.parameters.sigma ?? '')})`;
      return `<b>${esc(r.child)}</b> at step ${esc(r.step)}: ${kind}`;
    };
    const branch = (adapter: string): string => {
      const below = children.get(adapter) ?? [];
      return below.length === 0 ? '' : `<ul>${below.map((r) => `<li>${describe(r)}${branch(r.child)}</li>`).join('')}</ul>`;
    };
    return `<ul class="lineage" data-records="${run.lineage.length}">${roots.map((root) => `<li>${esc(root)}${branch(root)}</li>`).join('')}</ul>`;
  }

  document.body.dataset.rendered = 'true';
}
