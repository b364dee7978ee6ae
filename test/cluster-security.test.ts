// The cluster's connection settings (src/cluster/nats.ts): credentials come from the environment or a file, never
// the command line; a token-protected server admits the right token and names the problem otherwise. And what a
// worker checks before it works for a coordinator: the scenario hash, and the scenario's cluster: section.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalNatsServer, type LocalNatsServer } from '../src/cluster/local-server.js';
import { ClusterError, connectNats, natsOptions, subjects } from '../src/cluster/nats.js';
import { scenarioHash } from '../src/cluster/scenario-hash.js';
import { parseScenario } from '../src/scenario/scenario.js';
import { natsInstalled } from './nats.js';

describe('NATS connection settings', () => {
  it('refuse credentials in the URL, and name a missing credentials or TLS file', () => {
    expect(() => natsOptions('nats://alice:secret@host:4222', {})).toThrow(/credentials in the URL.*POPULORA_NATS_TOKEN/);
    expect(() => natsOptions('nats://alice:secret@host:4222', {})).not.toThrow(/secret/);
    expect(() => natsOptions('nats://host:4222', { POPULORA_NATS_CREDS: '/nonexistent/user.creds' })).toThrow('POPULORA_NATS_CREDS=/nonexistent/user.creds: no such file');
    expect(() => natsOptions('nats://host:4222', { POPULORA_NATS_TLS_CA: '/nonexistent/ca.pem' })).toThrow('POPULORA_NATS_TLS_CA');
  });

  it('take a token, a user and password, and TLS files from the environment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'populora-tls-'));
    const [ca, cert, key] = ['ca.pem', 'cert.pem', 'key.pem'].map((name) => join(dir, name));
    for (const file of [ca, cert, key]) writeFileSync(file!, '');
    expect(natsOptions('nats://h:1', { POPULORA_NATS_TOKEN: 't0ken' }).token).toBe('t0ken');
    expect(natsOptions('nats://h:1', { POPULORA_NATS_USER: 'u', POPULORA_NATS_PASSWORD: 'p' })).toMatchObject({ user: 'u', pass: 'p' });
    expect(natsOptions('nats://h:1', { POPULORA_NATS_TLS_CA: ca, POPULORA_NATS_TLS_CERT: cert, POPULORA_NATS_TLS_KEY: key }).tls).toEqual({ caFile: ca, certFile: cert, keyFile: key });
    expect(natsOptions('nats://h:1', {}).tls).toBeUndefined();
  });

  it('make cluster names subject-safe, and refuse one that is not', () => {
    expect(subjects('run-1').actor('teacher-0-1')).toBe('run-1.actor.teacher-0-1');
    expect(() => subjects('a.b')).toThrow(ClusterError);
  });
});

describe.skipIf(!natsInstalled)('a token-protected NATS server', () => {
  let server: LocalNatsServer;
  beforeAll(async () => {
    server = await startLocalNatsServer(['--auth', 's3cret-token']);
  });
  afterAll(() => server?.stop());

  it('admits the token from POPULORA_NATS_TOKEN and refuses a wrong one with a named error', async () => {
    const nc = await connectNats(server.url, { POPULORA_NATS_TOKEN: 's3cret-token' });
    await nc.close();
    await expect(connectNats(server.url, { POPULORA_NATS_TOKEN: 'wrong' })).rejects.toThrow(new RegExp(`cannot reach the NATS server at ${server.url}.*credentials`));
  });
});

describe('the scenario hash a worker checks', () => {
  const text = (extra: string) => `name: hashed\nseed: 1\nsteps: 2\nmodel: { path: models/arith-tiny }\npopulation: { subpopulations: 2 }\n${extra}`;
  const root = join(import.meta.dirname, '..');

  it('is the same wherever the model folder sits, and changes with anything the run depends on', () => {
    const here = parseScenario(text(''), 'a.yaml', { relativeTo: root });
    const copy = { ...here, model: { ...here.model, path: '/elsewhere/models/arith-tiny' } };
    expect(scenarioHash(copy)).toBe(scenarioHash(here));
    expect(scenarioHash(parseScenario(text(''), 'b.yaml', { relativeTo: root }))).toBe(scenarioHash(here));
    expect(scenarioHash({ ...here, seed: 2 })).not.toBe(scenarioHash(here));
    expect(scenarioHash(parseScenario(text('sampling: { temperature: 0.5 }\n'), 'a.yaml', { relativeTo: root }))).not.toBe(scenarioHash(here));
  });

  it('comes with a cluster: section whose bad fields are named', () => {
    const parse = (cluster: string) => parseScenario(text(`cluster: ${cluster}\n`), 'c.yaml', { relativeTo: root });
    expect(parse('{ engineWorkers: 2 }').cluster).toEqual({ engineWorkers: 2, assignment: 'round-robin', deadlineSeconds: 120, onWorkerLoss: 'reassign', verifierChunk: 16 });
    expect(() => parse('{ engineWorkers: -1 }')).toThrow(/c\.yaml.*cluster\.engineWorkers/);
    expect(() => parse('{ assignment: random }')).toThrow(/cluster\.assignment/);
    expect(() => parse('{ onWorkerLoss: retry }')).toThrow(/cluster\.onWorkerLoss/);
    expect(() => parse('{ workers: 2 }')).toThrow(/cluster.*workers/);
  });
});
