// What every dashboard page shares: building DOM from data (always as text: a run's content is hostile and never
// becomes markup), fetching the JSON API, the one server-sent-events stream, and number formats.
'use strict';

/**
 * An element with attributes and children; a child that is not a Node becomes a text node, so text from a run
 * (a proposal, an answer, a verdict) is shown exactly as written and can never become markup.
 */
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path) {
  const response = await fetch(path, { headers: { Accept: 'application/json' } });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${(await response.text()).trim()}`);
  return response.json();
}

const runUrl = (id) => `/run/${encodeURIComponent(id)}`;
const sweepUrl = (id) => `/sweep/${encodeURIComponent(id)}`;
const eventUrl = (runId, index) => `${runUrl(runId)}/event/${index}`;

const percent = (x) => (typeof x === 'number' && Number.isFinite(x) ? `${(100 * x).toFixed(0)}%` : '–');
const fixed = (x, digits = 2) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(digits) : '–');
function duration(seconds) {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return '–';
  const s = Math.round(seconds);
  if (s >= 3600) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

/** The dashboard's event stream: `list` (every run and sweep) at once and with every `change` (ids that changed). */
function connect({ onList, onChange }) {
  const live = document.getElementById('live');
  const source = new EventSource('/api/stream');
  source.addEventListener('open', () => {
    live.textContent = 'live';
    live.className = 'live on';
  });
  source.addEventListener('error', () => {
    live.textContent = 'reconnecting…';
    live.className = 'live off';
  });
  source.addEventListener('list', (event) => onList?.(JSON.parse(event.data).list));
  source.addEventListener('change', (event) => {
    const data = JSON.parse(event.data);
    onList?.(data.list);
    onChange?.(data.changed);
  });
  return source;
}

/** A status badge: running, finished, stopped, failed, pending. */
const statusBadge = (status) => el('span', { class: `status-badge ${status}` }, status);

/** The breadcrumb after "populora" in the header. */
function crumbs(...parts) {
  const where = document.getElementById('crumbs');
  where.replaceChildren(...parts.flatMap((part) => [' / ', part]));
}

/** Shows an error where the page's content would be. */
function showError(error) {
  const main = document.querySelector('main');
  main.prepend(el('p', { class: 'error' }, String(error?.message ?? error)));
}
