// One record of a run's event log, as written: its number, step, sender, receiver, type, where it lies in the file,
// and the message (JSON, set as text).
'use strict';

(async () => {
  const runId = document.body.dataset.run;
  const index = Number(document.body.dataset.event);
  const data = await api(`/api/run/${encodeURIComponent(runId)}/event/${index}`);
  document.getElementById('title').textContent = `${data.type}: ${data.from} → ${data.to ?? '?'}`;
  crumbs(el('a', { href: '/' }, 'runs'), el('a', { href: runUrl(runId) }, runId), `event ${index}`);
  document.getElementById('where').textContent = `record ${data.index} of ${data.events} in events.msgpack, step ${data.step}, at byte ${data.offset} (${data.bytes} bytes with its length and checksum)`;
  const link = (id, target) => {
    const a = document.getElementById(id);
    if (target >= 0 && target < data.events) a.href = eventUrl(runId, target);
    else a.remove();
  };
  link('previous-event', index - 1);
  link('next-event', index + 1);
  document.getElementById('back').href = `${runUrl(runId)}#step=${data.step}`;
  document.getElementById('event').textContent = JSON.stringify(data.message, null, 2);
  document.body.dataset.ready = 'true';
})().catch(showError);
connect({});
