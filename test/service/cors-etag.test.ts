/**
 * CORS (preflight, allowed and unknown origins) and conditional requests (ETag, If-None-Match,
 * 304, Cache-Control per route), in-process.
 */
import { describe, expect, it } from 'vitest';
import { normalizeOrigin } from '../../src/service/cors.js';
import { parseIfNoneMatch } from '../../src/service/etag.js';
import { call, expectErrorShape, login, makeHandler } from './helpers.js';

const APP = 'https://app.example.com';

describe('CORS', () => {
  it('answers a preflight 204 before authentication, with methods, headers and max-age for an allowed origin', async () => {
    const { handler } = await makeHandler({ cors: { origins: [APP, 'http://localhost:3000'] } });
    const c = await call(handler, '/v1/listings/data/Property', {
      method: 'OPTIONS',
      headers: { origin: APP, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization, prefer' },
    });
    expect(c.status).toBe(204);
    expect(c.text).toBe('');
    expect(c.headers.get('access-control-allow-origin')).toBe(APP);
    expect(c.headers.get('access-control-allow-methods')).toContain('GET');
    const allowed = c.headers.get('access-control-allow-headers')!.toLowerCase();
    for (const h of ['authorization', 'content-type', 'prefer', 'odata-version', 'odata-maxversion', 'if-none-match', 'x-request-id'])
      expect(allowed).toContain(h);
    expect(c.headers.get('access-control-max-age')).toBe('600');
    expect(c.headers.get('vary')).toContain('Origin');
    expect(c.headers.get('odata-version')).toBe('4.01');
    expect(c.headers.get('access-control-allow-credentials')).toBeNull();
  });

  it('echoes an allowed origin on responses (errors included) and exposes the service headers', async () => {
    const { handler } = await makeHandler({ cors: { origins: ['http://localhost:3000'] } });
    const token = await login(handler);
    const c = await call(handler, '/v1/listings/data/Property?$top=1', { token, headers: { origin: 'http://localhost:3000', prefer: 'odata.maxpagesize=1' } });
    expect(c.status).toBe(200);
    expect(c.headers.get('access-control-allow-origin')).toBe('http://localhost:3000');
    const exposed = c.headers.get('access-control-expose-headers')!;
    for (const h of ['OData-Version', 'Preference-Applied', 'ETag', 'Retry-After', 'X-Request-Id']) expect(exposed).toContain(h);
    expect(c.headers.get('vary')).toBe('Accept-Encoding, Origin');
    const e = await call(handler, '/v1/listings/data/Property', { headers: { origin: 'http://localhost:3000' } });
    expectErrorShape(e, 401, 'MissingToken');
    expect(e.headers.get('access-control-allow-origin')).toBe('http://localhost:3000');
  });

  it('gives unknown and odd origins no CORS headers, and no error page', async () => {
    const { handler } = await makeHandler({ cors: { origins: [APP] } });
    const odd = [
      'https://evil.example.com',
      'null',
      'https://app.example.com.evil.test',
      `https://${'a'.repeat(400)}.com`,
      'https://app.example.com/path',
      '*',
      '',
      'javascript:alert(1)',
    ];
    for (const origin of odd) {
      const pre = await call(handler, '/v1/listings/data/Property', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET' } });
      expect(pre.status).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBeNull();
      const get = await call(handler, '/health', { headers: { origin } });
      expect(get.status).toBe(200);
      expect(get.headers.get('access-control-allow-origin')).toBeNull();
    }
    // the same origin in another spelling is the same origin
    const spelled = await call(handler, '/health', { headers: { origin: 'HTTPS://App.Example.com:443' } });
    expect(spelled.headers.get('access-control-allow-origin')).toBe('HTTPS://App.Example.com:443');
  });

  it('* allows any origin; a bad configured origin fails createHandler', async () => {
    const { handler } = await makeHandler({ cors: { origins: ['*'] } });
    const c = await call(handler, '/health', { headers: { origin: 'http://127.0.0.1:5173' } });
    expect(c.headers.get('access-control-allow-origin')).toBe('http://127.0.0.1:5173');
    await expect(makeHandler({ cors: { origins: ['https://x.test/path'] } })).rejects.toThrow(/not an origin/);
    expect(normalizeOrigin('http://Example.COM:80')).toBe('http://example.com');
    expect(normalizeOrigin('ftp://x')).toBeNull();
  });
});

describe('ETags and conditional requests', () => {
  it('a strong ETag on $metadata, the service document, collections and entity reads; If-None-Match answers 304', async () => {
    const { handler } = await makeHandler();
    const token = await login(handler);
    const key = (await call(handler, '/v1/listings/data/Property?$top=1&$select=ListingKey', { token })).json.value[0].ListingKey as string;
    for (const path of ['/v1/listings/data/$metadata', '/v1/listings/data/', '/v1/listings/data/Property?$top=3', `/v1/listings/data/Property('${key}')`]) {
      const first = await call(handler, path, { token });
      expect(first.status).toBe(200);
      const etag = first.headers.get('etag')!;
      expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
      expect(first.headers.get('cache-control')).toBe('private, no-cache');
      const again = await call(handler, path, { token });
      expect(again.headers.get('etag')).toBe(etag);
      const not = await call(handler, path, { token, headers: { 'if-none-match': etag } });
      expect(not.status).toBe(304);
      expect(not.text).toBe('');
      expect(not.headers.get('etag')).toBe(etag);
      expect(not.headers.get('odata-version')).toBe('4.01');
      expect(not.headers.get('vary')).toBe('Accept-Encoding');
      // lists, weak comparison, * and HEAD
      expect((await call(handler, path, { token, headers: { 'if-none-match': `"nope", W/${etag}` } })).status).toBe(304);
      expect((await call(handler, path, { token, headers: { 'if-none-match': '*' } })).status).toBe(304);
      expect((await call(handler, path, { token, method: 'HEAD', headers: { 'if-none-match': etag } })).status).toBe(304);
      expect((await call(handler, path, { token, headers: { 'if-none-match': '"other"' } })).status).toBe(200);
    }
  });

  it('the tag changes with the bytes: another query, another account, another OData version, another coding', async () => {
    const { handler } = await makeHandler();
    const demo = await login(handler);
    const partner = await login(handler, 'partner');
    const tag = async (path: string, token: string, headers: Record<string, string> = {}) =>
      (await call(handler, path, { token, headers })).headers.get('etag');
    const base = await tag('/v1/listings/data/Property?$top=5', demo);
    expect(await tag('/v1/listings/data/Property?$top=6', demo)).not.toBe(base);
    expect(await tag('/v1/listings/data/Property?$top=5', partner)).not.toBe(base);
    expect(await tag('/v1/listings/data/Property?$top=5', demo, { 'odata-maxversion': '4.0' })).not.toBe(base);
    const gz = await tag('/v1/listings/data/Property?$top=5', demo, { 'accept-encoding': 'gzip' });
    expect(gz).not.toBe(base);
    expect(gz).toMatch(/-gzip"$/);
  });

  it('a change to the data changes the tag of what it touched', async () => {
    const { Engine } = await import('../../src/engine.js');
    const { quickAccounts, NOW } = await import('./helpers.js');
    const engine = await Engine.open({ now: () => new Date(NOW) });
    const { handler } = await makeHandler({ engine, accounts: quickAccounts() });
    const token = await login(handler);
    const first = await call(handler, '/v1/listings/data/Property?$top=1', { token });
    const rec = first.json.value[0] as Record<string, unknown>;
    await engine.upsert('Property', [{ ...stripDerived(rec), ListPrice: 123_456_789 }]);
    const after = await call(handler, '/v1/listings/data/Property?$top=1', { token, headers: { 'if-none-match': first.headers.get('etag')! } });
    expect(after.status).toBe(200);
    expect(after.headers.get('etag')).not.toBe(first.headers.get('etag'));
  });

  it('malformed If-None-Match is ignored (200), never a 500; token and errors are no-store', async () => {
    const { handler } = await makeHandler();
    const token = await login(handler);
    for (const bad of ['garbage', '"unterminated', 'W/', '"a" "b"', ',,,', '"\u0001"', `"${'x'.repeat(20_000)}"`, 'W/"ok", nope']) {
      const c = await call(handler, '/v1/listings/data/', { token, headers: { 'if-none-match': bad } });
      expect(c.status).toBe(200);
    }
    expect(parseIfNoneMatch(' "a" , W/"b",*x')).toBeNull();
    expect(parseIfNoneMatch(' "a" , W/"b"')).toEqual(['"a"', '"b"']);
    const res = await handler(
      new Request('http://service.test/v1/token', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'username=demo&password=demo-password',
      }),
    );
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('etag')).toBeNull();
    const e = await call(handler, '/v1/listings/data/Nope', { token });
    expect(e.headers.get('cache-control')).toBe('no-store');
    expect(e.headers.get('etag')).toBeNull();
  });
});

/** A record as a client would send it back: the service's derived fields left out. */
function stripDerived(rec: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rec)) if (k !== 'DaysOnMarket' && !k.startsWith('service_') && !k.startsWith('@')) out[k] = v;
  return out;
}
