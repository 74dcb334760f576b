/**
 * startTestServer end to end over HTTP (a real server on 127.0.0.1), and the same control over the
 * admin routes and the CLI: the clock (DaysOnMarket, tokens, login throttling, change timestamps,
 * nextLink idle expiry), reset and checkpoints, faults (identical for identical seeds; drop,
 * truncate, slow, latency, statuses), rate and limit profiles, the journal, bad admin input.
 */
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../src/index.js';
import { collectCli, startServe } from '../service/helpers.js';

const NOW = '2025-06-01T00:00:00Z';
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;
/** A response body as the tests read it (any shape). */
const asJson = (value: unknown): Json => value;
const ADMIN = 'admin-token-for-tests';
const PROPERTY = '/v1/listings/data/Property';

async function get(server: TestServer, token: string, pathAndQuery: string): Promise<Response> {
  return fetch(`${server.url}${pathAndQuery}`, { headers: { Authorization: `Bearer ${token}` } });
}

/** What a client gets: the status and body, or the error that cut it (a dropped connection, a truncated body). */
async function outcome(server: TestServer, token: string, pathAndQuery: string): Promise<string> {
  try {
    const r = await get(server, token, pathAndQuery);
    try {
      // the port differs from server to server: the context URL names it
      return `${r.status} ${(await r.text()).replaceAll(server.url, 'URL')}`;
    } catch {
      return `${r.status} body cut`;
    }
  } catch {
    return 'connection cut';
  }
}

function admin(server: TestServer, route: string, method = 'GET', body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${server.url}/admin/${route}`, {
    method,
    headers: { Authorization: `Bearer ${ADMIN}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** A server of the tests' own, at NOW, with the admin routes, and a token of the demo account. */
async function started(): Promise<{ server: TestServer; token: string }> {
  const server = await startTestServer({ now: NOW, adminToken: ADMIN });
  return { server, token: await server.token() };
}

describe('startTestServer', () => {
  let server: TestServer;
  let token: string;

  beforeAll(async () => ({ server, token } = await started()));
  afterAll(() => server?.close());

  it('is a listening server on 127.0.0.1 that answers the /v1 API, and token() logs in', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const r = await get(server, token, `${PROPERTY}?$top=2&$select=ListingKey`);
    expect(r.status).toBe(200);
    expect((await r.json().then(asJson)).value).toHaveLength(2);
    await expect(server.token('nobody')).rejects.toThrow(/no password is known for 'nobody'/);
  });

  it('moves DaysOnMarket, now() and tokens with the clock', async () => {
    const fresh = await server.token();
    const dom = async (t: string): Promise<number> =>
      (await (await get(server, t, `${PROPERTY}?$top=1&$select=DaysOnMarket`)).json().then(asJson)).value[0].DaysOnMarket;
    const before = await dom(fresh);
    server.clock.advance('PT59M');
    expect(await dom(fresh)).toBe(before);
    // the token's hour is over: 401, and a new one sees the days moved
    server.clock.advance('P2D');
    expect((await get(server, fresh, `${PROPERTY}?$top=1`)).status).toBe(401);
    const later = await server.token();
    expect(await dom(later)).toBe(before + 2);
    const r = await get(server, later, `${PROPERTY}?$filter=ModificationTimestamp lt now()&$count=true&$top=0`);
    expect(r.status).toBe(200);
    server.clock.set(NOW);
    token = await server.token();
  });

  it('throttles failed logins in the clock’s window, and lifts it when the clock moves', async () => {
    const login = (password: string): Promise<Response> =>
      fetch(`${server.url}/v1/token`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: `username=partner&password=${password}`,
      });
    for (let i = 0; i < 10; i++) expect((await login('wrong')).status).toBe(400);
    const locked = await login('partner-password');
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    server.clock.advance('PT61S');
    expect((await login('partner-password')).status).toBe(200);
    server.clock.set(NOW);
  });

  it('logs changes as EntityEvents, and reset undoes them (to the data as loaded or a checkpoint), tokens kept', async () => {
    server.clock.set('2031-02-03T04:05:06Z');
    const [key] = server.engine.keys('Property');
    await server.engine.upsert('Property', [{ ...(server.engine.entity('Property', key, '') as object), ListPrice: 1 }]);
    const events = server.engine.query('EntityEvent', '$orderby=EntityEventSequence desc&$top=1');
    expect(events.value[0].ResourceRecordKey).toBe(key);
    expect(server.engine.query('Property', `$filter=ListingKey eq '${key}'&$select=ListPrice`).value[0].ListPrice).toBe(1);
    server.checkpoint('priced');
    await server.engine.remove('Property', [key]);
    await server.reset('priced');
    expect(server.engine.query('Property', `$filter=ListingKey eq '${key}'&$select=ListPrice`).value[0].ListPrice).toBe(1);
    await server.reset();
    expect(server.engine.query('Property', `$filter=ListingKey eq '${key}'&$select=ListPrice`).value[0].ListPrice).not.toBe(1);
    // a token from before the reset still works (its hour, by the clock, is not over)
    server.clock.set(NOW);
    expect((await get(server, token, `${PROPERTY}?$top=1`)).status).toBe(200);
    await expect(server.reset('never-taken')).rejects.toMatchObject({ code: 'UnknownCheckpoint' });
    expect(() => server.checkpoint('no spaces')).toThrow(expect.objectContaining({ code: 'InvalidCheckpoint' }));
  });

  it('expires a nextLink left idle longer than the profile allows, as the clock moves', async () => {
    server.limits.set({ nextLinkIdleSeconds: 60, defaultPageSize: 10 });
    try {
      const first = await (await get(server, token, `${PROPERTY}?$select=ListingKey`)).json().then(asJson);
      const next = new URL(first['@odata.nextLink'] as string);
      server.clock.advance('PT59S');
      const second = await get(server, token, next.pathname + next.search);
      expect(second.status).toBe(200);
      const third = new URL((await second.json().then(asJson))['@odata.nextLink'] as string);
      server.clock.advance('PT61S');
      const expired = await get(server, token, third.pathname + third.search);
      expect(expired.status).toBe(400);
      expect((await expired.json().then(asJson)).error.code).toBe('SkipTokenExpired');
    } finally {
      server.limits.set({});
      server.clock.set(NOW);
      token = await server.token();
    }
  });

  it('applies the request limits of a profile: default page size, $top maxima, the OriginatingSystemName filter', async () => {
    server.limits.set({ defaultPageSize: 4, maxTop: 50, maxExpandTop: 2, requireOriginatingSystemName: true });
    try {
      const osn = "$filter=OriginatingSystemName eq 'CRMLS'";
      const page = await (await get(server, token, `${PROPERTY}?${osn}&$select=ListingKey`)).json().then(asJson);
      expect(page.value).toHaveLength(4);
      expect(page['@odata.nextLink']).toBeDefined();
      const codes = async (q: string): Promise<[number, string]> => {
        const r = await get(server, token, `${PROPERTY}?${q}`);
        return [r.status, (await r.json().then(asJson)).error?.code];
      };
      expect(await codes(`${osn}&$top=51`)).toEqual([400, 'TopTooLarge']);
      expect(await codes(`${osn}&$expand=Media($top=3)`)).toEqual([400, 'TopTooLarge']);
      expect(await codes("$filter=City eq 'Seattle'")).toEqual([400, 'OriginatingSystemNameRequired']);
      expect((await get(server, token, `${PROPERTY}?${osn}&$top=50&$expand=Media($top=2)`)).status).toBe(200);
    } finally {
      server.limits.set({});
    }
  });

  it('refuses an account over its request budget with 429, Retry-After and rate-limit headers, until the window passes', async () => {
    server.limits.set({ requestsPerSecond: 2 });
    try {
      const a = await get(server, token, `${PROPERTY}?$top=1`);
      expect(a.headers.get('x-ratelimit-remaining')).toBe('1');
      expect((await get(server, token, `${PROPERTY}?$top=1`)).status).toBe(200);
      const limited = await get(server, token, `${PROPERTY}?$top=1`);
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toBe('1');
      expect(limited.headers.get('x-ratelimit-limit')).toBe('2');
      expect((await limited.json().then(asJson)).error.code).toBe('RateLimited');
      // another account has its own budget
      const partner = await server.token('partner');
      expect((await get(server, partner, `${PROPERTY}?$top=1`)).status).toBe(200);
      server.clock.advance('PT1S');
      expect((await get(server, token, `${PROPERTY}?$top=1`)).status).toBe(200);
    } finally {
      server.limits.set({});
      server.clock.set(NOW);
    }
  });

  it('refuses an account past its bytes per hour', async () => {
    server.limits.set({ bytesPerHour: 2_000 });
    try {
      const big = await get(server, token, `${PROPERTY}?$top=20`);
      expect(big.status).toBe(200);
      expect((await big.arrayBuffer()).byteLength).toBeGreaterThan(2_000);
      expect((await get(server, token, `${PROPERTY}?$top=1`)).status).toBe(429);
      server.clock.advance('PT1H');
      // the token's hour is over too: a new one, for the same account
      token = await server.token();
      expect((await get(server, token, `${PROPERTY}?$top=1`)).status).toBe(200);
    } finally {
      server.limits.set({});
      server.clock.set(NOW);
      token = await server.token();
    }
  });

  it('drops connections, truncates and slows bodies, delays, and answers statuses in the service’s error format', async () => {
    const query = `${PROPERTY}?$top=3&$select=ListingKey`;
    const whole = await outcome(server, token, query);
    server.faults.set([{ name: 'drop', nth: 1, fault: { kind: 'drop' } }]);
    expect(await outcome(server, token, query)).toBe('connection cut');
    server.faults.set([{ name: 'cut', fault: { kind: 'truncate', bytes: 25 } }]);
    expect(await outcome(server, token, query)).toBe('200 body cut');
    server.faults.set([{ name: 'slow', fault: { kind: 'slow', chunkBytes: 16, delayMs: 1 } }]);
    expect(await outcome(server, token, query)).toBe(whole);
    server.faults.set([{ name: 'late', fault: { kind: 'latency', ms: [1, 5] } }]);
    expect(await outcome(server, token, query)).toBe(whole);
    server.faults.set([{ name: 'down', fault: { kind: 'status', status: 503, retryAfter: 7 } }]);
    const r = await get(server, token, query);
    expect([r.status, r.headers.get('retry-after'), r.headers.get('odata-version')]).toEqual([503, '7', '4.01']);
    expect(await r.json().then(asJson)).toEqual({ error: { code: 'ServiceUnavailable', message: expect.any(String) } });
    // every request is in the journal with its fault and account, never a token
    const journal = server.requests.list().slice(-6);
    expect(journal.map((e) => [e.status, e.fault, e.account])).toEqual([
      [200, null, 'demo'],
      [0, 'drop', 'demo'],
      [200, 'cut', 'demo'],
      [200, 'slow', 'demo'],
      [200, 'late', 'demo'],
      [503, 'down', 'demo'],
    ]);
    expect(JSON.stringify(server.requests.list())).not.toContain(token);
    server.faults.clear();
  });

  it('gives the same faults to the same requests for the same seed, byte for byte', async () => {
    const rules = [
      { probability: 0.3, fault: { kind: 'status', status: 429, retryAfter: 0 } },
      { probability: 0.2, fault: { kind: 'truncate', bytes: 40 } },
      { path: '/v1/listings/data/Media', probability: 0.5, fault: { kind: 'drop' } },
    ];
    const run = async (seed: string): Promise<string[]> => {
      const s = await startTestServer({ now: NOW, faults: rules, seed });
      try {
        const t = await s.token();
        const out: string[] = [];
        for (let i = 0; i < 24; i++)
          out.push(await outcome(s, t, i % 3 === 2 ? '/v1/listings/data/Media?$top=1' : `${PROPERTY}?$top=2&$skip=${i}&$select=ListingKey`));
        return out;
      } finally {
        await s.close();
      }
    };
    const a = await run('one');
    expect(await run('one')).toEqual(a);
    expect(await run('two')).not.toEqual(a);
    expect(a.some((x) => x.startsWith('429'))).toBe(true);
    expect(a.some((x) => x.startsWith('200 {'))).toBe(true);
  });

  it('generates a data set on request, with the demo accounts', async () => {
    const s = await startTestServer({ generate: { listings: 50, seed: 7 }, now: NOW });
    try {
      const r = await (await get(s, await s.token('partner'), `${PROPERTY}?$count=true&$top=0`)).json().then(asJson);
      expect(r['@odata.count']).toBeGreaterThan(0);
      expect(s.engine.store.Property.rowCount).toBe(50);
    } finally {
      await s.close();
    }
  });

  it('takes accounts of its own', async () => {
    const s = await startTestServer({ now: NOW, accounts: [{ username: 'alice', password: 'secret-1', sources: ['HAR'] }] });
    try {
      const r = await (await get(s, await s.token('alice'), '/v1/account/resources')).json().then(asJson);
      expect(r.resources.listings.map((l: { originating_system_name: string }) => l.originating_system_name)).toEqual(['HAR']);
      await expect(s.token('demo')).rejects.toThrow(/no password is known/);
    } finally {
      await s.close();
    }
    await expect(startTestServer({ accounts: [] })).rejects.toThrow(TypeError);
    await expect(startTestServer({ faults: [{ fault: { kind: 'nope' } }] })).rejects.toMatchObject({ code: 'InvalidFaultRule' });
    await expect(startTestServer({ limits: { maxTop: -1 } })).rejects.toMatchObject({ code: 'InvalidLimits' });
  });
});

describe('the admin routes', () => {
  let server: TestServer;
  let token: string;

  beforeAll(async () => ({ server, token } = await started()));
  afterAll(() => server?.close());

  it('need the admin token: 401 without it or with another', async () => {
    const none = await fetch(`${server.url}/admin/clock`);
    expect([none.status, (await none.json().then(asJson)).error.code]).toEqual([401, 'MissingToken']);
    const wrong = await fetch(`${server.url}/admin/clock`, { headers: { Authorization: `Bearer ${token}` } });
    expect([wrong.status, (await wrong.json().then(asJson)).error.code]).toEqual([401, 'InvalidToken']);
  });

  it('do not exist without an admin token', async () => {
    const s = await startTestServer({ now: NOW });
    try {
      const r = await fetch(`${s.url}/admin/clock`, { headers: { Authorization: `Bearer ${ADMIN}` } });
      expect(r.status).toBe(404);
    } finally {
      await s.close();
    }
  });

  it('read, set and advance the clock; bad instants and durations are 400s', async () => {
    expect(await (await admin(server, 'clock')).json().then(asJson)).toEqual({ now: '2025-06-01T00:00:00.000Z', epochMs: Date.parse(NOW), frozen: true });
    expect((await (await admin(server, 'clock', 'POST', { advance: 'PT1H30M' })).json().then(asJson)).now).toBe('2025-06-01T01:30:00.000Z');
    expect((await (await admin(server, 'clock', 'POST', { advance: 1000 })).json().then(asJson)).now).toBe('2025-06-01T01:30:01.000Z');
    expect((await (await admin(server, 'clock', 'POST', { set: '2026-01-01T00:00:00+01:00' })).json().then(asJson)).now).toBe('2025-12-31T23:00:00.000Z');
    const codes = async (body: unknown): Promise<[number, string]> => {
      const r = await admin(server, 'clock', 'POST', body);
      return [r.status, (await r.json().then(asJson)).error.code];
    };
    expect(await codes({ set: 'yesterday' })).toEqual([400, 'InvalidInstant']);
    expect(await codes({ advance: 'P1M' })).toEqual([400, 'InvalidDuration']);
    expect(await codes({ advance: 'PT1H', set: NOW })).toEqual([400, 'InvalidBody']);
    expect(await codes('{not json')).toEqual([400, 'InvalidJson']);
    const type = await admin(server, 'clock', 'POST', 'x', { 'Content-Type': 'text/plain' });
    expect([type.status, (await type.json().then(asJson)).error.code]).toEqual([400, 'InvalidContentType']);
    const method = await admin(server, 'clock', 'DELETE');
    expect([method.status, method.headers.get('allow')]).toEqual([405, 'GET, POST']);
    const unknown = await admin(server, 'time');
    expect([unknown.status, (await unknown.json().then(asJson)).error.code]).toEqual([404, 'NotFound']);
    expect(server.clock.now()).toBe(Date.parse('2025-12-31T23:00:00Z'));
    await admin(server, 'clock', 'POST', { set: NOW });
    token = await server.token();
  });

  it('replace, add, list and clear fault rules; a bad set is a 400 naming each problem and changes nothing', async () => {
    expect((await admin(server, 'faults', 'PUT', [{ name: 'a', path: '/v1/listings/data/Media*', fault: { kind: 'drop' } }])).status).toBe(200);
    const bad = await admin(server, 'faults', 'PUT', { rules: [{ path: '/v2/**', fault: { kind: 'status', status: 302 } }] });
    expect(bad.status).toBe(400);
    const error = (await bad.json().then(asJson)).error;
    expect(error.code).toBe('InvalidFaultRule');
    expect(error.details.map((d: { target: string }) => d.target)).toEqual(['rules[0].path', 'rules[0].fault.status']);
    await admin(server, 'faults', 'POST', { name: 'b', nth: 1, fault: { kind: 'status', status: 500 } });
    const listed = await (await admin(server, 'faults')).json().then(asJson);
    expect(listed.rules.map((r: { rule: { name: string } }) => r.rule.name)).toEqual(['a', 'b']);
    expect((await get(server, token, `${PROPERTY}?$top=1`)).status).toBe(500);
    expect((await get(server, token, `${PROPERTY}?$top=1`)).status).toBe(200);
    expect((await (await admin(server, 'faults', 'DELETE')).json().then(asJson)).rules).toEqual([]);
  });

  it('checkpoint and reset over HTTP; read and clear the journal; set the limits profile', async () => {
    const [key] = server.engine.keys('Property');
    expect((await admin(server, 'checkpoint', 'POST', { name: 'start' })).status).toBe(200);
    await server.engine.remove('Property', [key]);
    expect(await (await admin(server, 'reset', 'POST', { checkpoint: 'start' })).json().then(asJson)).toEqual({ reset: 'start' });
    expect(server.engine.has('Property', key)).toBe(true);
    expect((await admin(server, 'reset', 'POST')).status).toBe(200);
    const unknown = await admin(server, 'reset', 'POST', { checkpoint: 'nope' });
    expect([unknown.status, (await unknown.json().then(asJson)).error.code]).toEqual([400, 'UnknownCheckpoint']);
    const badName = await admin(server, 'checkpoint', 'POST', { name: '../etc' });
    expect([badName.status, (await badName.json().then(asJson)).error.code]).toEqual([400, 'InvalidCheckpoint']);

    await admin(server, 'requests', 'DELETE');
    await get(server, token, `${PROPERTY}?$top=1`);
    const journal = (await (await admin(server, 'requests')).json().then(asJson)).requests;
    expect(journal).toEqual([
      {
        seq: expect.any(Number),
        at: NOW.replace('Z', '.000Z'),
        method: 'GET',
        url: `${PROPERTY}?$top=1`,
        status: 200,
        durationMs: expect.any(Number),
        fault: null,
        account: 'demo',
      },
    ]);

    expect((await admin(server, 'limits', 'PUT', { maxTop: 3 })).status).toBe(200);
    expect((await get(server, token, `${PROPERTY}?$top=4`)).status).toBe(400);
    const badLimits = await admin(server, 'limits', 'PUT', { maxTop: 'many' });
    expect([badLimits.status, (await badLimits.json().then(asJson)).error.code]).toEqual([400, 'InvalidLimits']);
    expect(await (await admin(server, 'limits')).json().then(asJson)).toEqual({ maxTop: 3 });
    await admin(server, 'limits', 'PUT', {});
  });
});

describe('reso-engine serve --admin-token --faults --limits', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-harness-cli-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('loads the files at start and serves the admin routes', async () => {
    const faults = path.join(dir, 'faults.json');
    const limits = path.join(dir, 'limits.json');
    writeFileSync(faults, JSON.stringify({ seed: 's', rules: [{ name: 'first-token', path: '/v1/token', nth: 1, fault: { kind: 'status', status: 503 } }] }));
    writeFileSync(limits, JSON.stringify({ maxTop: 5 }));
    const serve = await startServe(['--port', '0', '--now', NOW, '--admin-token', ADMIN, '--faults', faults, '--limits', limits]);
    try {
      expect(serve.out()).toContain('/admin/');
      const login = (): Promise<Response> =>
        fetch(`${serve.url}/v1/token`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
          body: 'username=demo&password=demo-password',
        });
      expect((await login()).status).toBe(503);
      const { access_token: t } = await (await login()).json().then(asJson);
      const top = await fetch(`${serve.url}${PROPERTY}?$top=6`, { headers: { Authorization: `Bearer ${t}` } });
      expect((await top.json().then(asJson)).error.code).toBe('TopTooLarge');
      const clock = await fetch(`${serve.url}/admin/clock`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${ADMIN}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ advance: 'P1D' }),
      });
      expect((await clock.json().then(asJson)).now).toBe('2025-06-02T00:00:00.000Z');
      const requests = await (await fetch(`${serve.url}/admin/requests`, { headers: { Authorization: `Bearer ${ADMIN}` } })).json().then(asJson);
      expect(requests.requests.map((r: { status: number; fault: string | null }) => [r.status, r.fault])).toEqual([
        [503, 'first-token'],
        [200, null],
        [400, null],
      ]);
    } finally {
      serve.child.kill('SIGTERM');
      await serve.exited;
    }
  }, 60_000);

  it('refuses bad files and combinations with exit 2 and a message naming the problem', async () => {
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify([{ path: '/nowhere', fault: { kind: 'drop' } }]));
    const r = await collectCli(['serve', '--port', '0', '--faults', bad]);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`--faults ${bad}`);
    expect(r.err).toContain('rules[0].path');
    writeFileSync(bad, '{');
    expect((await collectCli(['serve', '--port', '0', '--limits', bad])).err).toContain('not valid JSON');
    expect((await collectCli(['serve', '--port', '0', '--admin-token', 'short'])).code).toBe(2);
    expect((await collectCli(['serve', '--postgres', 'postgres://x@127.0.0.1:1/x', '--admin-token', ADMIN])).err).toContain('not --postgres');
    expect(readFileSync(bad, 'utf8')).toBe('{');
  }, 60_000);
});
