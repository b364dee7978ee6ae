// `populora serve`: a local web server over run and sweep folders, read as they grow (folders.ts polls them and
// reads only what was appended). Pages are plain HTML and JavaScript (assets/); data comes as JSON from /api/...,
// and changes are pushed over one server-sent-events stream (/api/stream), so nothing reloads a whole page.
//
// Security (docs/dashboard.md, "Security"):
//   - it serves only the named folders: a URL names a folder by its id among those found by scanning, never by a
//     path; the files read are a fixed set of names, each through its real path (safe-path.ts);
//   - everything a run holds is shown as text: pages build the DOM with textContent, the JSON API escapes `<`,
//     and the Content-Security-Policy allows no inline script on the dashboard's own pages (a report page from
//     src/report/ has its inline scripts, and is shown in a sandboxed frame of its own origin);
//   - bound to loopback unless told otherwise, and then only with a token (a cookie after the first visit);
//     on loopback it also checks the Host header, so that a web page cannot reach it through DNS rebinding;
//   - it never writes: the folders are opened read-only, and a page only reads.

import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { loadRun, reportPage, ReportError, type RunData } from '../report/report.js';
import { Library, ServeError } from './folders.js';
import { asset, ASSET_NAMES } from './assets.js';
import { eventPage, indexPage, runPage, sweepPage } from './pages.js';
import type { RunFolder } from './run-folder.js';
import { fileInside, linkOutOf } from './safe-path.js';

export interface ServeOptions {
  dirs: readonly string[];
  port: number; // 0: any free port
  host: string; // default 127.0.0.1
  token?: string | null; // required (made up when absent) unless the host is a loopback address
  pollMs?: number; // how often the folders are read again (default 500)
  clockMs?: () => number; // the ETA's clock where a run records no step timing
}

export interface Dashboard {
  url: string; // with the token, when there is one
  host: string;
  port: number;
  token: string | null;
  library: Library;
  close(): Promise<void>;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);
export const isLoopback = (host: string) => LOOPBACK.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
/** Most open event streams at once (a bound on what the server holds per page). */
const MAX_STREAMS = 64;
const HEARTBEAT_MS = 15_000;
const GZIP_OVER_BYTES = 8 << 10;
const TOKEN_COOKIE = 'populora_token';

/** Headers on every page the dashboard makes itself: scripts only from its own files. */
const OWN_PAGE_POLICY = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'";
/** A report page (inline uPlot and data): in a sandboxed frame, with no way to fetch or send anything. */
const REPORT_POLICY = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; sandbox allow-scripts; base-uri 'none'; form-action 'none'; frame-ancestors 'self'";

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function startDashboard(options: ServeOptions): Promise<Dashboard> {
  const clockMs = options.clockMs ?? (() => performance.now()); // wall-clock-ok: the dashboard's polls and ETAs, it reads runs and decides nothing in them
  const library = new Library(options.dirs, clockMs);
  library.scan();
  const loopback = isLoopback(options.host);
  const token = loopback ? (options.token ?? null) : (options.token ?? randomBytes(18).toString('base64url'));
  const streams = new Set<ServerResponse>();
  const compareCache = new Map<string, { key: string; html: string }>();
  const finishedRuns = new Map<string, { generation: number; run: RunData }>();

  const server: Server = createServer((request, response) => {
    try {
      handle(request, response);
    } catch (error) {
      const status = error instanceof HttpError ? error.status : 500;
      const message = error instanceof HttpError || error instanceof ServeError || error instanceof ReportError ? error.message : `unexpected: ${(error as Error).message}`;
      if (!response.headersSent) send(response, status, 'text/plain; charset=utf-8', `${message}\n`, OWN_PAGE_POLICY);
      else response.end();
    }
  });

  function handle(request: IncomingMessage, response: ServerResponse): void {
    if (request.method !== 'GET' && request.method !== 'HEAD') throw new HttpError(405, 'the dashboard only reads: GET');
    if (loopback && !hostAllowed(request.headers.host)) throw new HttpError(421, 'this server answers only to its loopback address (a Host header naming another host is refused, against DNS rebinding)');
    const url = new URL(request.url ?? '/', 'http://dashboard.invalid');
    if (token !== null) authorize(request, response, url);
    const parts = url.pathname.split('/').slice(1).map(decodeSegment);
    const [first, second, third, fourth] = parts;
    const run = (id: string | undefined) => library.runs.get(id ?? '') ?? notFound(`no run ${JSON.stringify(id)} among the served folders`);
    if (parts.length === 1 && first === '') return page(response, indexPage());
    if (parts.length === 1 && first === 'favicon.ico') return send(response, 204, 'image/x-icon', '', OWN_PAGE_POLICY);
    if (first === 'assets' && parts.length === 2 && ASSET_NAMES.has(second!)) {
      const { type, body } = asset(second!);
      return send(response, 200, type, body, OWN_PAGE_POLICY, request, 'public, max-age=60');
    }
    if (first === 'run' && parts.length === 2) return page(response, runPage(run(second).id));
    if (first === 'run' && third === 'event' && parts.length === 4) return page(response, eventPage(run(second).id, wholeNumber(fourth, 'event')));
    if (first === 'sweep' && parts.length === 2) return page(response, sweepPage(sweep(second).id));
    if (first === 'sweep' && third === 'compare' && parts.length === 3) return send(response, 200, 'text/html; charset=utf-8', compare(second!), REPORT_POLICY, request);
    if (first !== 'api') throw new HttpError(404, `no page ${url.pathname}`);
    if (second === 'list' && parts.length === 2) return json(response, request, { list: library.list() });
    if (second === 'stream' && parts.length === 2) return stream(request, response);
    if (second === 'run' && parts.length === 3) return json(response, request, runData(run(third), url.searchParams.get('from')));
    if (second === 'run' && fourth === 'step' && parts.length === 5) return json(response, request, stepData(run(third), wholeNumber(parts[4], 'step')));
    if (second === 'run' && fourth === 'event' && parts.length === 5) return json(response, request, eventData(run(third), wholeNumber(parts[4], 'event')));
    if (second === 'sweep' && parts.length === 3) return json(response, request, sweepData(third!));
    throw new HttpError(404, `no data at ${url.pathname}`);
  }

  function sweep(id: string | undefined) {
    return library.sweeps.get(id ?? '') ?? notFound(`no sweep ${JSON.stringify(id)} among the served folders`);
  }

  function authorize(request: IncomingMessage, response: ServerResponse, url: URL): void {
    const given = url.searchParams.get('token') ?? cookie(request.headers.cookie, TOKEN_COOKIE) ?? bearer(request.headers.authorization);
    if (given === null || !sameSecret(given, token!)) throw new HttpError(401, 'this dashboard needs its token: open the URL `populora serve` printed (it ends in ?token=...)');
    if (url.searchParams.has('token')) response.setHeader('Set-Cookie', `${TOKEN_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`);
  }

  function hostAllowed(header: string | undefined): boolean {
    if (!header) return false;
    const name = header.startsWith('[') ? header.slice(1, header.indexOf(']')) : header.split(':')[0]!;
    return isLoopback(name);
  }

  function page(response: ServerResponse, html: string): void {
    send(response, 200, 'text/html; charset=utf-8', html, OWN_PAGE_POLICY);
  }

  function runData(run: RunFolder, from: string | null) {
    const start = from === null ? 0 : wholeNumber(from, 'from');
    const index = run.samples();
    return {
      ...run.summary(),
      generation: run.generation,
      scenario: run.scenario,
      metrics: run.metrics.slice(start),
      from: start,
      lastStep: index.lastStep,
      lineage: index.lineage,
      checkpoints: run.checkpoints(),
      events: index.events,
      notes: [...index.notes],
    };
  }

  function stepData(run: RunFolder, step: number) {
    const samples = run.step(step);
    const index = run.samples();
    // A step is whole once a later one began, or the run stopped writing (its records are flushed at the step's end).
    const complete = index.lastStep > step || (run.status() !== 'running' && samples !== null);
    return { generation: run.generation, step, complete, samples, lineage: index.lineageUpTo(step), matches: run.metrics.find((m) => m.step === step)?.matches ?? null };
  }

  function eventData(run: RunFolder, index: number) {
    const event = run.event(index);
    if (!event) throw new HttpError(404, `${run.id}: no record ${index} in its log (it holds ${run.eventCount})`);
    const payload = (event.payload ?? {}) as { to?: unknown; message?: unknown };
    return { index: event.index, offset: event.offset, bytes: event.bytes, step: event.step, from: event.actor, to: payload.to ?? null, type: event.type, message: payload.message ?? event.payload, events: run.eventCount };
  }

  function sweepData(id: string) {
    const folder = sweep(id);
    return { ...folder.summary(), runs: [...folder.runs.values()].map((r) => r.summary()), state: folder.state };
  }

  /** The grouped comparison of the sweep's finished runs (src/report/, as `populora compare SWEEP` makes it), made again when one finishes. */
  function compare(id: string): string {
    const folder = sweep(id);
    const finished = [...folder.runs.values()].filter((r) => r.status() === 'finished');
    const key = finished.map((r) => `${r.id}:${r.generation}`).join(' ');
    const cached = compareCache.get(id);
    if (cached?.key === key) return cached.html;
    let html: string;
    if (finished.length === 0) html = '<!doctype html><meta charset="utf-8"><p style="font: 14px system-ui">No run of this sweep has finished yet: the comparison appears when one has.</p>';
    else {
      try {
        html = reportPage(finished.map((r) => loaded(r, folder.dir)));
      } catch (error) {
        if (!(error instanceof ReportError)) throw error;
        html = `<!doctype html><meta charset="utf-8"><p>${escapeText(error.message)}</p>`;
      }
    }
    compareCache.set(id, { key, html });
    return html;
  }

  /** A finished run as the report reads it (its checkpoints verified once; a finished run no longer changes). */
  function loaded(run: RunFolder, sweepDir: string): RunData {
    const cached = finishedRuns.get(run.id);
    if (cached?.generation === run.generation) return cached.run;
    // The report reads the folder (and the sweep's sweep.json) by its own paths: none may lead out of what is served.
    const out = linkOutOf(run.root, run.dir) ?? (fileInside(run.root, sweepDir, 'sweep.json') ? null : join(sweepDir, 'sweep.json'));
    if (out) throw new ReportError(`${run.path}: ${out} is a link out of the served folders; it is not read`);
    const data = loadRun(run.dir);
    finishedRuns.set(run.id, { generation: run.generation, run: data });
    return data;
  }

  function stream(request: IncomingMessage, response: ServerResponse): void {
    if (streams.size >= MAX_STREAMS) throw new HttpError(503, `${MAX_STREAMS} pages are open on this dashboard already`);
    response.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' });
    response.write(`event: list\ndata: ${safeJson({ list: library.list() })}\n\n`);
    streams.add(response);
    request.on('close', () => streams.delete(response));
  }

  const poll = setInterval(() => {
    let changed: string[];
    try {
      changed = library.scan();
    } catch (error) {
      changed = [];
      console.error(`populora serve: ${(error as Error).message}`);
    }
    if (changed.length === 0 || streams.size === 0) return;
    const message = `event: change\ndata: ${safeJson({ changed, list: library.list() })}\n\n`;
    for (const response of streams) response.write(message);
  }, options.pollMs ?? 500);
  const heartbeat = setInterval(() => {
    for (const response of streams) response.write(': still here\n\n');
  }, HEARTBEAT_MS);

  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => reject(error.code === 'EADDRINUSE' ? new ServeError(`port ${options.port} on ${options.host} is in use: give another --port (or --port 0 for any free one)`) : error));
    server.listen(options.port, options.host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const shownHost = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${shownHost}:${port}/${token === null ? '' : `?token=${token}`}`,
    host: options.host,
    port,
    token,
    library,
    close: async () => {
      clearInterval(poll);
      clearInterval(heartbeat);
      for (const response of streams) response.end();
      streams.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function notFound(message: string): never {
  throw new HttpError(404, message);
}

/** A path segment, percent-decoded once; anything that does not decode is refused (never guessed at). */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, `a path segment that is not valid percent-encoding: ${JSON.stringify(segment)}`);
  }
}

function wholeNumber(text: string | undefined, what: string): number {
  if (text === undefined || !/^\d{1,9}$/.test(text)) throw new HttpError(400, `${what} must be a whole number, got ${JSON.stringify(text)}`);
  return Number(text);
}

function cookie(header: string | undefined, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return null;
}

const bearer = (header: string | undefined) => (header?.startsWith('Bearer ') ? header.slice(7) : null);

function sameSecret(given: string, token: string): boolean {
  const [a, b] = [Buffer.from(given), Buffer.from(token)];
  return a.length === b.length && timingSafeEqual(a, b);
}

const escapeText = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** JSON that is also safe inside HTML: no `<` (nor the line separators JavaScript once refused) survives as itself. */
export const safeJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');

function json(response: ServerResponse, request: IncomingMessage, value: unknown): void {
  send(response, 200, 'application/json; charset=utf-8', safeJson(value), OWN_PAGE_POLICY, request);
}

function send(response: ServerResponse, status: number, type: string, body: string | Buffer, policy: string, request?: IncomingMessage, cache = 'no-store'): void {
  let bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const headers: Record<string, string | number> = { 'Content-Type': type, 'Content-Security-Policy': policy, 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer', 'Cache-Control': cache };
  if (request && bytes.length > GZIP_OVER_BYTES && /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''))) {
    bytes = gzipSync(bytes, { level: 1 });
    headers['Content-Encoding'] = 'gzip';
  }
  headers['Content-Length'] = bytes.length;
  response.writeHead(status, headers);
  response.end(request?.method === 'HEAD' ? undefined : bytes);
}
