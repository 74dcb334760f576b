/**
 * Metrics (/metrics access and content), the access log (fields, request ids, no secrets) and the
 * OpenAPI document (valid 3.1; every route the service answers is in it).
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { serve } from '../../src/adapters/http.js';
import { openApiDocument } from '../../src/service/openapi.js';
import { Engine } from '../../src/engine.js';
import { BASE, call, expectErrorShape, login, makeHandler, NOW } from './helpers.js';

/** A destination that keeps pino's lines. */
function captured(): { lines: Array<Record<string, unknown>>; raw: string[]; destination: { write(line: string): void } } {
  const raw: string[] = [];
  const lines: Array<Record<string, unknown>> = [];
  return {
    raw,
    lines,
    destination: {
      write(line: string) {
        raw.push(line);
        try {
          lines.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          // pretty lines
        }
      },
    },
  };
}

describe('GET /metrics', () => {
  it('with a token: the Prometheus text of requests, plans, rows, engine, memory, logins and throttles', async () => {
    const { handler } = await makeHandler({ metrics: { token: 'metrics-secret' }, loginThrottle: { maxFailures: 2, windowSeconds: 60, lockSeconds: 60 } });
    const token = await login(handler);
    await call(handler, "/v1/listings/data/Property?$top=3&$filter=City ne 'Tampa'", { token });
    await call(handler, '/v1/listings/data/Property?$filter=bad syntax', { token });
    for (let i = 0; i < 3; i++)
      await call(handler, '/v1/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'username=x&password=y' });
    // with a token configured, the token is the only way in (loopback or not)
    expectErrorShape(await call(handler, '/metrics'), 401, 'InvalidToken');
    expectErrorShape(await call(handler, '/metrics', { headers: { authorization: 'Bearer wrong-token' } }), 401, 'InvalidToken');
    const m = await call(handler, '/metrics', { headers: { authorization: 'Bearer metrics-secret' } });
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(m.headers.get('cache-control')).toBe('no-store');
    const text = m.text;
    expect(text).toMatch(/reso_http_requests_total\{route="collection",resource="Property",method="GET",status="200"\} 1/);
    expect(text).toMatch(/reso_http_requests_total\{route="collection",resource="Property",method="GET",status="400"\} 1/);
    expect(text).toMatch(/reso_http_request_duration_seconds_bucket\{le="\+Inf",route="collection",resource="Property",status="200"\} 1/);
    expect(text).toMatch(/reso_query_plans_total\{resource="Property",access="[a-z]+"\} 1/);
    expect(text).toMatch(/reso_query_rows_returned_total\{resource="Property"\} [1-3]/);
    // the scan in key order tested rows until the page was full (4 rows: 3 and one more)
    expect(Number(/reso_query_rows_scanned_total\{resource="Property"\} (\d+)/.exec(text)?.[1])).toBeGreaterThanOrEqual(4);
    expect(text).toMatch(/reso_engine_compactions\{of="count"\} 0/);
    expect(text).toMatch(/reso_engine_generation 0/);
    expect(text).toMatch(/reso_engine_rows\{table="Property"\} \d+/);
    expect(text).toMatch(/reso_process_memory_bytes\{kind="heap_used"\} \d+/);
    expect(text).toMatch(/reso_process_memory_bytes\{kind="array_buffers"\} \d+/);
    expect(text).toMatch(/reso_login_failures_total 2/);
    expect(text).toMatch(/reso_throttled_total\{kind="login"\} 1/);
    expect(text).not.toContain('Tampa');
    expect(text).not.toContain('metrics-secret');
  });

  it('counts every request between reads and across them, durations included (past what is held between reads)', async () => {
    const { handler } = await makeHandler({ metrics: { token: 'metrics-secret' } });
    const token = await login(handler);
    const read = async (): Promise<string> => (await call(handler, '/metrics', { headers: { authorization: 'Bearer metrics-secret' } })).text;
    const value = (text: string, series: string): number =>
      Number(new RegExp(`^${series.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    const requests = 'reso_http_requests_total{route="count",resource="Property",method="GET",status="200"}';
    const heads = 'reso_http_requests_total{route="count",resource="Property",method="HEAD",status="200"}';
    const times = 'reso_http_request_duration_seconds_count{route="count",resource="Property",status="200"}';
    const bytes = 'reso_http_response_bytes_total{route="count"}';
    const size = Buffer.byteLength((await call(handler, '/v1/listings/data/Property/$count', { token })).text);
    const first = await read();
    expect([value(first, requests), value(first, times), value(first, bytes)]).toEqual([1, 1, size]);
    for (let i = 0; i < 1100; i++) await call(handler, '/v1/listings/data/Property/$count', { token, method: i % 10 === 0 ? 'HEAD' : 'GET' });
    const second = await read();
    expect([value(second, requests), value(second, heads), value(second, times)]).toEqual([991, 110, 1101]);
    expect(value(second, bytes)).toBe(991 * size); // a HEAD sends no body
    expect(value(second, 'reso_http_request_duration_seconds_bucket{le="+Inf",route="count",resource="Property",status="200"}')).toBe(1101);
    expect(value(second, 'reso_http_request_duration_seconds_sum{route="count",resource="Property",status="200"}')).toBeGreaterThan(0);
    expect(value(await read(), requests)).toBe(991); // a read counts nothing twice
  });

  it('counts compactions and the seconds they took', async () => {
    const engine = await Engine.open({ now: () => new Date(NOW) });
    const { handler } = await makeHandler({ engine, metrics: { token: 'metrics-secret' } });
    const [key] = engine.keys('Property');
    await engine.remove('Property', [key]);
    await engine.compact();
    expect(engine.compactions.count).toBe(1);
    expect(engine.compactions.seconds).toBeGreaterThan(0);
    const text = (await call(handler, '/metrics', { headers: { authorization: 'Bearer metrics-secret' } })).text;
    expect(text).toMatch(/reso_engine_compactions\{of="count"\} 1/);
    expect(Number(/reso_engine_compactions\{of="seconds"\} ([0-9.e-]+)/.exec(text)?.[1])).toBeGreaterThan(0);
  });

  it('loopback clients by default over a real server; off is a 404; each handler has its own registry', async () => {
    const { handler } = await makeHandler({ status: { loadSeconds: 1.5 } });
    const server = await serve(handler, { port: 0, host: '127.0.0.1' });
    try {
      const res = await fetch(`${server.url}/metrics`);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('reso_engine_load_seconds 1.5');
      const head = await fetch(`${server.url}/metrics`, { method: 'HEAD' });
      expect(head.status).toBe(200);
    } finally {
      await server.close();
    }
    // in-process there is no client address: not loopback
    expectErrorShape(await call(handler, '/metrics'), 403, 'Forbidden');
    const { handler: off } = await makeHandler({ metrics: false });
    expectErrorShape(await call(off, '/metrics'), 404, 'NotFound');
  });
});

describe('access log', () => {
  it('one JSON line per request with its fields; option names but no values, tokens or passwords', async () => {
    const out = captured();
    const { handler } = await makeHandler({ log: { destination: out.destination } });
    const token = await login(handler);
    await call(handler, "/v1/listings/data/Property?$top=2&$filter=City ne 'SecretCity'&api_key=hunter2", {
      token,
      headers: { 'x-request-id': 'client-id-1' },
    });
    await call(handler, '/v1/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'username=demo&password=wrong-password',
    });
    expect(out.lines).toHaveLength(3);
    const [loginLine, query, failed] = out.lines;
    expect(loginLine).toMatchObject({ msg: 'request', method: 'POST', path: '/v1/token', route: 'token', status: 200, level: 30 });
    expect(query).toMatchObject({
      reqId: 'client-id-1',
      method: 'GET',
      path: '/v1/listings/data/Property',
      options: ['$top', '$filter', 'api_key'],
      route: 'collection',
      resource: 'Property',
      account: 'demo',
      status: 200,
      rows: 2,
    });
    expect(typeof query.time).toBe('string');
    expect(query.durationMs).toBeGreaterThan(0);
    expect(query.bytes).toBeGreaterThan(100);
    expect(typeof query.plan).toBe('string');
    expect(failed).toMatchObject({ status: 400, account: null });
    const all = out.raw.join('');
    for (const secret of [token, 'demo-password', 'wrong-password', 'SecretCity', 'hunter2']) expect(all).not.toContain(secret);
  });

  it('request ids: a sane X-Request-Id is echoed, an over-long or odd one is replaced by a UUID; a 500 names it', async () => {
    const out = captured();
    const { handler } = await makeHandler({ log: { destination: out.destination } });
    const echoed = await call(handler, '/health', { headers: { 'x-request-id': 'abc-123_x.y:z' } });
    expect(echoed.headers.get('x-request-id')).toBe('abc-123_x.y:z');
    for (const odd of ['x'.repeat(129), 'has space', 'semi;colon', '<script>', 'é']) {
      const c = await call(handler, '/health', { headers: { 'x-request-id': odd } });
      expect(c.status).toBe(200);
      expect(c.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    }
    // health lines are debug: not written at the default level
    expect(out.lines).toHaveLength(0);
    const failing = (await import('./helpers.js')).defaultEngine;
    const engine = await failing();
    const broken = Object.create(engine) as typeof engine;
    broken.query = () => {
      throw new Error('boom');
    };
    const { handler: h } = await makeHandler({ engine: broken, log: { destination: out.destination }, onError: undefined });
    const token = await login(h);
    const c = await call(h, '/v1/listings/data/Property', { token, headers: { 'x-request-id': 'defect-1' } });
    expectErrorShape(c, 500, 'InternalError');
    expect(c.headers.get('x-request-id')).toBe('defect-1');
    expect(c.json.error.message).toContain('defect-1');
    expect(out.lines.find((l) => l.msg === 'internal error')).toMatchObject({ reqId: 'defect-1', level: 50 });
  });

  it('pretty format writes one human line; a bad level is refused', async () => {
    const out = captured();
    const { handler } = await makeHandler({ log: { destination: out.destination, format: 'pretty', level: 'debug' } });
    await call(handler, '/ready');
    expect(out.raw).toHaveLength(1);
    expect(out.raw[0]).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z DEBUG 200 GET \/ready [\d.]+ ms [\d,]+ B - \[[0-9a-f-]{36}\]\n$/);
    await expect(makeHandler({ log: { level: 'loud' as 'info' } })).rejects.toThrow(/log.level/);
  });

  it('a streamed page is logged once its last byte is out, with the bytes sent', async () => {
    const out = captured();
    const { handler } = await makeHandler({ log: { destination: out.destination } });
    const token = await login(handler);
    const res = await handler(new Request(`${BASE}/v1/listings/data/Media?$top=2000&$select=MediaKey`, { headers: { authorization: `Bearer ${token}` } }));
    const text = await res.text();
    await new Promise((r) => setImmediate(r));
    const line = out.lines.find((l) => l.route === 'collection')!;
    expect(line.bytes).toBe(Buffer.byteLength(text));
    expect(line.rows).toBe(2000);
  });
});

describe('OpenAPI', () => {
  it('GET /v1/openapi.json is public, a valid OpenAPI 3.1 document', async () => {
    const { handler } = await makeHandler();
    const c = await call(handler, '/v1/openapi.json');
    expect(c.status).toBe(200);
    expect(c.headers.get('odata-version')).toBe('4.01');
    expect(c.headers.get('etag')).toMatch(/^"/);
    const validator = new Validator();
    const result = await validator.validate(c.json as Parameters<Validator['validate']>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('every route the service answers is in it, with its method', async () => {
    const doc = openApiDocument() as { paths: Record<string, Record<string, unknown>> };
    // the most specific template first: fixed paths, then a key or a navigation, then a bare {resource}
    const specific = (p: string): number => (!p.includes('{') ? 0 : p.includes('(') ? 1 : 2);
    const templates = Object.keys(doc.paths)
      .sort((a, b) => specific(a) - specific(b))
      .map((p) => ({
        path: p,
        re: new RegExp(
          `^${p
            .replace(/[.*+?^$()|[\]\\]/g, '\\$&')
            .replace(/\\\(\{key\}\\\)/g, '\\((.+)\\)')
            .replace(/\{[a-z]+\}/g, '[^/]+')}$`,
        ),
      }));
    // demo as an admin account, so the write routes exist for it
    const { quickAccounts } = await import('./helpers.js');
    const { handler } = await makeHandler({ accounts: { accounts: quickAccounts().accounts.map((a) => ({ ...a, admin: a.username === 'demo' })) } });
    const token = await login(handler);
    // one request per branch of the service's routing (and the harness's admin routes, by path)
    const answered: Array<[string, string]> = [
      ['GET', '/health'],
      ['GET', '/ready'],
      ['GET', '/metrics'],
      ['GET', '/v1/openapi.json'],
      ['POST', '/v1/token'],
      ['GET', '/v1/account/resources'],
      ['GET', '/v1/listings/mls_profiles'],
      ['GET', '/v1/listings/data/'],
      ['GET', '/v1/listings/data/$metadata'],
      ['GET', '/v1/listings/data/Property'],
      ['POST', '/v1/listings/data/Property'],
      ['GET', '/v1/listings/data/Media/$count'],
      ['GET', "/v1/listings/data/Property('X')"],
      ['DELETE', "/v1/listings/data/Media('X')"],
      ['GET', "/v1/listings/data/Property('X')/Media"],
      ['GET', "/v1/listings/data/Property('X')/ListAgent"],
      ['POST', '/v1/listings/data/$changes'],
      ['GET', '/v1/listings/explain/Property'],
      ['GET', '/'],
      ['GET', '/explorer'],
      ['GET', '/explorer/app.js'],
    ];
    for (const [method, path] of answered) {
      const c = await call(handler, path, {
        token,
        method,
        headers: method === 'POST' ? { 'content-type': 'application/json' } : {},
        body: method === 'POST' ? '[]' : undefined,
      });
      // the route exists: not the service's 404 for an unknown path
      expect(c.json?.error?.code, `${method} ${path}`).not.toBe('NotFound');
      const t = templates.find((x) => x.re.test(path));
      expect(t, `${path} is not in the OpenAPI document`).toBeDefined();
      expect(Object.keys(doc.paths[t!.path]), `${method} ${path}`).toContain(method.toLowerCase());
    }
    for (const admin of ['/admin/clock', '/admin/reset', '/admin/checkpoint', '/admin/faults', '/admin/limits', '/admin/requests'])
      expect(doc.paths[admin]).toBeDefined();
    // and nothing in it that the service does not answer
    expect(templates.length).toBe(new Set(answered.map(([, p]) => templates.find((x) => x.re.test(p))!.path)).size + 6);
  });
});
