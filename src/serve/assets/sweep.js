// A sweep's page: its runs (status, step, ETA, headline metrics; each links to its run page) and the grouped
// comparison of its finished runs (`populora compare`'s report, in a sandboxed frame), made again as runs finish.
'use strict';

(() => {
  const sweepId = document.body.dataset.sweep;
  let finished = null;

  async function load() {
    const data = await api(`/api/sweep/${encodeURIComponent(sweepId)}`);
    document.getElementById('title').textContent = `sweep ${data.name}`;
    crumbs(el('a', { href: '/' }, 'runs'), data.path);
    document.getElementById('status').replaceChildren(
      statusBadge(data.status), ` ${data.finished} of ${data.runs} runs finished, ${data.running} running${data.failed ? `, ${data.failed} failed` : ''}; step ${data.step}${data.steps === null ? '' : ` of ${data.steps}`} over its runs`,
      data.status === 'running' ? `; ETA ${duration(data.etaSeconds)}` : '', data.problem ? el('div', { class: 'error' }, data.problem) : null,
    );
    const groupOf = new Map((data.state?.runs ?? []).map((r) => [r.dir, r.group]));
    document.querySelector('#runs tbody').replaceChildren(...data.runs.map((r) => {
      const h = r.headline ?? {};
      const dir = r.id.slice(sweepId.length + 1);
      return el('tr', { dataset: { id: r.id, status: r.status, step: String(r.step) } },
        el('td', null, el('a', { href: runUrl(r.id) }, dir)), el('td', null, groupOf.get(dir) ?? '–'), el('td', null, statusBadge(r.status)),
        el('td', { class: 'number' }, r.steps === null ? String(r.step) : `${r.step} / ${r.steps}`), el('td', { class: 'number' }, r.status === 'running' ? duration(r.etaSeconds) : '–'),
        el('td', { class: 'number' }, percent(h.solveRate)), el('td', { class: 'number' }, fixed(h.teacherReward)), el('td', { class: 'number' }, percent(h.validity)), el('td', { class: 'number' }, h.coverage ?? '–'));
    }));
    if (finished !== data.finished) {
      finished = data.finished;
      document.getElementById('compare').src = `${sweepUrl(sweepId)}/compare?finished=${finished}`;
    }
    document.body.dataset.finished = String(finished);
  }

  load().catch(showError);
  connect({ onChange: (changed) => changed.some((id) => id === sweepId || id.startsWith(`${sweepId}/`)) && load().catch(showError) });
})();
