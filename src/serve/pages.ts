// The dashboard's pages: HTML shells whose scripts (assets/) fetch the data and build the DOM as text. The only
// value a shell carries is the id of what it shows, escaped into a data attribute.

const escapeAttribute = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function shell(title: string, data: Record<string, string>, scripts: readonly string[], body: string): string {
  const attributes = Object.entries(data).map(([key, value]) => ` data-${key}="${escapeAttribute(value)}"`).join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeAttribute(title)}</title>
<link rel="stylesheet" href="/assets/uplot.css"><link rel="stylesheet" href="/assets/dashboard.css">
${scripts.map((name) => `<script src="/assets/${name}" defer></script>`).join('\n')}
</head><body${attributes}>
<header><a href="/" class="home">populora</a> <span id="crumbs"></span> <span id="live" class="live" title="server-sent events from the dashboard">connecting…</span></header>
<main>
${body}
</main>
</body></html>
`;
}

export const indexPage = () =>
  shell('populora: runs', { page: 'index' }, ['common.js', 'index.js'], `<h1>Runs and sweeps</h1>
<p class="note">Every run and sweep in the served folders, read as they grow.</p>
<table id="list" class="list"><thead><tr><th>run</th><th>status</th><th>step</th><th>ETA</th><th>solve rate</th><th>teacher reward</th><th>validity</th><th>coverage</th><th>folder</th></tr></thead><tbody></tbody></table>
<p id="empty" class="empty" hidden>No run folder yet. Start one (populora run SCENARIO --out DIR) in a served folder: it appears here.</p>`);

export const runPage = (id: string) =>
  shell(`populora: ${id}`, { page: 'run', run: id }, ['common.js', 'uplot.js', 'report-page.js', 'samples.js', 'run.js'], `<h1 id="title"></h1>
<p id="status" class="status"></p>
<ul id="notes" class="notes"></ul>
<nav class="tabs"><a href="#samples">samples</a> <a href="#at-step">matchmaking and lineage at the step</a> <a href="#plots">plots</a></nav>
<section id="samples-section">
<h2 id="samples">Samples</h2>
<div id="controls" class="controls">
  <button id="first" title="first step">|◀</button><button id="prev" title="previous step (←)">◀</button>
  <input id="step" type="range" min="0" max="0" value="0" aria-label="step">
  <button id="next" title="next step (→)">▶</button><button id="last" title="last step">▶|</button>
  <label>step <output id="step-number">-</output></label>
  <label><input id="follow" type="checkbox" checked> follow the run</label>
  <label>member <select id="member"><option value="">every member</option></select></label>
</div>
<div id="filters" class="controls">
  <label>task type <select id="type"><option value="">any</option></select></label>
  <label>proposals <select id="validity"><option value="">valid and invalid</option><option value="valid">valid</option><option value="invalid">invalid</option></select></label>
  <label>answers <select id="answers"><option value="">correct and wrong</option><option value="correct">correct</option><option value="wrong">wrong</option></select></label>
  <label>solved <select id="solved"><option value="">any</option><option value="all">by all</option><option value="none">by none</option><option value="some">by some</option></select></label>
  <label>teacher <select id="teacher"><option value="">any</option></select></label>
  <label>student <select id="student"><option value="">any</option></select></label>
  <label>search <input id="search" type="search" placeholder="text in a prompt, proposal, answer, verdict"></label>
</div>
<p class="note">The log column links each message a sample went through to its record in the event log: assign (the matchmaker's), gen (the request to the engine), text (the engine's reply), val and verdict (the verifier's), offer, outcome (the students' results to the teacher), train (the reward it was trained with).</p>
<p id="step-note" class="note"></p>
<div id="step-view"></div>
</section>
<section id="at-step-section">
<h2 id="at-step">Matchmaking and lineage at step <span class="at-step-number">-</span></h2>
<div id="at-step-view" class="columns"></div>
</section>
<section id="plots-section">
<h2 id="plots">Plots</h2>
<p class="note">The run report's plots (src/report/), drawn again as metrics.jsonl grows; its matchmaking matrix and lineage tree are over the whole run so far.</p>
<div id="charts"></div>
<div id="tables"></div>
</section>`);

export const eventPage = (id: string, index: number) =>
  shell(`populora: ${id}, event ${index}`, { page: 'event', run: id, event: String(index) }, ['common.js', 'event.js'], `<h1 id="title"></h1>
<p id="where" class="note"></p>
<nav><a id="previous-event">← previous record</a> <a id="next-event">next record →</a> <a id="back">back to the run</a></nav>
<pre id="event" class="event"></pre>`);

export const sweepPage = (id: string) =>
  shell(`populora: ${id}`, { page: 'sweep', sweep: id }, ['common.js', 'sweep.js'], `<h1 id="title"></h1>
<p id="status" class="status"></p>
<table id="runs" class="list"><thead><tr><th>run</th><th>group</th><th>status</th><th>step</th><th>ETA</th><th>solve rate</th><th>teacher reward</th><th>validity</th><th>coverage</th></tr></thead><tbody></tbody></table>
<h2>Comparison of its finished runs</h2>
<p class="note">What <code>populora compare</code> shows for this sweep (groups across seeds, intervals and tests), made again whenever a run finishes.</p>
<iframe id="compare" class="compare" sandbox="allow-scripts" title="comparison of the sweep's finished runs"></iframe>`);
