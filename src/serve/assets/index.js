// The runs and sweeps list: one row each, updated in place from the event stream (no page reload).
'use strict';

const body = document.querySelector('#list tbody');

function row(item) {
  const link = el('a', { href: item.kind === 'sweep' ? sweepUrl(item.id) : runUrl(item.id) }, item.name);
  const kind = item.kind === 'sweep' ? el('span', { class: 'kind' }, ` sweep: ${item.finished} of ${item.runs} runs finished${item.running ? `, ${item.running} running` : ''}${item.failed ? `, ${item.failed} failed` : ''}`) : null;
  const h = item.headline ?? {};
  return el(
    'tr',
    { dataset: { id: item.id, kind: item.kind, status: item.status, step: String(item.step) } },
    el('td', null, link, kind, item.problem ? el('div', { class: 'error' }, item.problem) : null),
    el('td', null, statusBadge(item.status)),
    el('td', { class: 'number' }, item.steps === null ? String(item.step) : `${item.step} / ${item.steps}`, el('progress', { max: item.steps ?? 1, value: item.step })),
    el('td', { class: 'number' }, item.status === 'running' ? duration(item.etaSeconds) : '–'),
    el('td', { class: 'number' }, percent(h.solveRate)),
    el('td', { class: 'number' }, fixed(h.teacherReward)),
    el('td', { class: 'number' }, percent(h.validity)),
    el('td', { class: 'number' }, h.coverage ?? '–'),
    el('td', { class: 'path' }, item.path),
  );
}

function showList(list) {
  body.replaceChildren(...list.map(row));
  document.getElementById('empty').hidden = list.length > 0;
  document.body.dataset.listed = String(list.length);
}

crumbs('runs');
connect({ onList: showList });
