import { describe, expect, it } from 'vitest';
import { TokenStore } from '../../src/service/auth.js';
import { createHandler } from '../../src/service/handler.js';
import { BASE, call, defaultEngine, expectErrorShape, login, makeHandler, TestClock, tokenRequest } from './helpers.js';

describe('POST /v1/token', () => {
  it('issues a 256-bit bearer token for the default data set demo account (real scrypt hashes)', async () => {
    const handler = createHandler({ engine: await defaultEngine() });
    const res = await handler(tokenRequest({ username: 'demo', password: 'demo-password', grant_type: 'password', scope: 'x' }));
    expect(res.status).toBe(200);
    expect(res.headers.get('odata-version')).toBe('4.01');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const text = await res.text();
    const body = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['access_token', 'expires_in', 'type']);
    expect(body.type).toBe('Bearer');
    expect(body.expires_in).toBe(3600);
    expect(Buffer.from(body.access_token as string, 'base64url')).toHaveLength(32);
    // partner's password works too, and a wrong one does not
    expect((await handler(tokenRequest({ username: 'partner', password: 'partner-password' }))).status).toBe(200);
    expect((await handler(tokenRequest({ username: 'partner', password: 'demo-password' }))).status).toBe(400);
  });

  it('takes a charset parameter on the content type and a configurable lifetime', async () => {
    const { handler } = await makeHandler({ tokenLifetimeSeconds: 90 });
    const res = await handler(
      tokenRequest({ username: 'demo', password: 'demo-password' }, { 'content-type': 'Application/X-WWW-Form-Urlencoded; charset=UTF-8' }),
    );
    expect(res.status).toBe(200);
    expect(((await res.json()) as { expires_in: number }).expires_in).toBe(90);
  });

  it('refuses missing, empty or repeated fields, other content types and wrong credentials with 400', async () => {
    const { handler } = await makeHandler();
    const cases: Array<[Request, string]> = [
      [tokenRequest({ username: 'demo' }), 'InvalidRequest'],
      [tokenRequest({ password: 'demo-password' }), 'InvalidRequest'],
      [tokenRequest({ username: '', password: 'demo-password' }), 'InvalidRequest'],
      [
        new Request(`${BASE}/v1/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: 'username=demo&username=partner&password=x',
        }),
        'InvalidRequest',
      ],
      [tokenRequest({ username: 'demo', password: 'demo-password' }, { 'content-type': 'application/json' }), 'InvalidContentType'],
      [
        new Request(`${BASE}/v1/token`, {
          method: 'POST',
          body: JSON.stringify({ username: 'demo', password: 'demo-password' }),
          headers: { 'content-type': 'application/json' },
        }),
        'InvalidContentType',
      ],
      [new Request(`${BASE}/v1/token`, { method: 'POST' }), 'InvalidContentType'],
      [tokenRequest({ username: 'demo', password: 'wrong' }), 'InvalidCredentials'],
      [tokenRequest({ username: 'nobody', password: 'demo-password' }), 'InvalidCredentials'],
      [tokenRequest({ username: 'Demo', password: 'demo-password' }), 'InvalidCredentials'],
    ];
    for (const [request, code] of cases) {
      const res = await handler(request);
      const text = await res.text();
      expectErrorShape({ status: res.status, headers: res.headers, text, json: JSON.parse(text) }, 400, code);
    }
    // the same message for an unknown user and a wrong password
    const a = await call(handler, '/v1/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'username=demo&password=no',
    });
    const b = await call(handler, '/v1/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'username=ghost&password=no',
    });
    expect(a.text).toBe(b.text);
  });

  it('answers GET and other methods with 405 and Allow: POST', async () => {
    const { handler } = await makeHandler();
    for (const method of ['GET', 'PUT', 'DELETE', 'HEAD']) {
      const c = await call(handler, '/v1/token', { method });
      expect(c.status, method).toBe(405);
      expect(c.headers.get('allow')).toBe('POST');
      expect(c.headers.get('odata-version')).toBe('4.01');
      if (method !== 'HEAD') expectErrorShape(c, 405, 'MethodNotAllowed');
    }
  });

  it('refuses a body over 16,384 bytes with 413, declared or not', async () => {
    const { handler } = await makeHandler();
    const big = `username=demo&password=demo-password&pad=${'x'.repeat(16_400)}`;
    // no Content-Length on an in-process Request: the reader stops at the limit
    const streamed = await call(handler, '/v1/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: big });
    expectErrorShape(streamed, 413, 'PayloadTooLarge');
    const declared = await call(handler, '/v1/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': String(big.length) },
      body: big,
    });
    expectErrorShape(declared, 413, 'PayloadTooLarge');
    // at the limit is fine
    const fits = `username=demo&password=demo-password&pad=${'x'.repeat(16_384 - 41)}`;
    expect(fits.length).toBe(16_384);
    expect((await call(handler, '/v1/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: fits })).status).toBe(
      200,
    );
    // a smaller configured limit
    const small = (await makeHandler({ limits: { maxBodyBytes: 10 } })).handler;
    expectErrorShape(
      await call(small, '/v1/token', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'username=demo&password=demo-password',
      }),
      413,
      'PayloadTooLarge',
    );
  });
});

describe('bearer authentication', () => {
  it('needs a token on every /v1 path but /v1/token, and says 401 before any 404', async () => {
    const { handler } = await makeHandler();
    const paths = [
      '/v1/account/resources',
      '/v1/listings/mls_profiles',
      '/v1/listings/data/',
      '/v1/listings/data/$metadata',
      '/v1/listings/data/Property',
      "/v1/listings/data/Property('P000000001')",
      '/v1/listings/data/Media',
      '/v1/listings/data/OpenHouse',
      '/v1/nothing-here',
      '/v1/listings/data/Nope',
      '/v1',
      '/v1/token/extra',
    ];
    for (const path of paths) {
      const c = await call(handler, path);
      expectErrorShape(c, 401, 'MissingToken');
      expect(c.headers.get('www-authenticate')).toBe('Bearer realm="reso-engine"');
      // a POST without a token is a 401 too, not a 405
      expect((await call(handler, path, { method: 'POST' })).status, path).toBe(401);
    }
    const token = await login(handler);
    expectErrorShape(await call(handler, '/v1/nothing-here', { token }), 404, 'NotFound');
    expectErrorShape(await call(handler, '/v1/listings/data/Nope', { token }), 404, 'NotFound');
    expectErrorShape(await call(handler, '/v1/listings/data/PropertyChange', { token }), 404, 'NotFound');
    // outside /v1 nothing needs a token and nothing is there (but the explorer page, test/explorer/)
    expectErrorShape(await call(handler, '/elsewhere'), 404, 'NotFound');
    expectErrorShape(await call(handler, '/v2/listings'), 404, 'NotFound');
  });

  it('refuses unknown, forged, malformed and expired tokens with 401', async () => {
    const { handler, clock } = await makeHandler({ tokenLifetimeSeconds: 600 });
    const token = await login(handler);
    expect((await call(handler, '/v1/account/resources', { token })).status).toBe(200);
    const forged = (token[0] === 'A' ? 'B' : 'A') + token.slice(1);
    const unknown = Buffer.alloc(32, 7).toString('base64url');
    for (const header of [
      `Bearer ${forged}`,
      `Bearer ${unknown}`,
      `Basic ${Buffer.from('demo:demo-password').toString('base64')}`,
      'Bearer',
      `Bearer ${token} extra`,
      token,
    ]) {
      const c = await call(handler, '/v1/account/resources', { headers: { authorization: header } });
      expectErrorShape(c, 401, 'InvalidToken');
      expect(c.headers.get('www-authenticate')).toBe('Bearer realm="reso-engine", error="invalid_token"');
    }
    // the scheme name is case-insensitive
    expect((await call(handler, '/v1/account/resources', { headers: { authorization: `bearer ${token}` } })).status).toBe(200);
    clock.advance(599);
    expect((await call(handler, '/v1/account/resources', { token })).status).toBe(200);
    clock.advance(1);
    expectErrorShape(await call(handler, '/v1/account/resources', { token }), 401, 'InvalidToken');
    // a new login gives a new, working token
    const again = await login(handler);
    expect(again).not.toBe(token);
    expect((await call(handler, '/v1/account/resources', { token: again })).status).toBe(200);
  });

  it('never issues a token that starts with a dash (a command line would read it as an option)', () => {
    const store = new TokenStore(60_000, new TestClock().now, 0);
    // one random token in 64 starts with '-': 3,000 of them without one is a chance of 1e-20
    const issued = Array.from({ length: 3000 }, () => store.issue('demo', ['HAR']).token);
    expect(issued.filter((t) => t.startsWith('-'))).toEqual([]);
    expect(issued.every((t) => /^[A-Za-z0-9_][A-Za-z0-9_-]{42}$/.test(t))).toBe(true);
  });

  it('keeps only SHA-256 hashes of tokens', () => {
    const clock = new TestClock();
    const store = new TokenStore(60_000, clock.now, 0);
    const issued = Array.from({ length: 5 }, () => store.issue('demo', ['HAR']).token);
    const held = JSON.stringify([...(store as unknown as { sessions: Map<string, unknown> }).sessions]);
    for (const t of issued) expect(held).not.toContain(t);
    expect(new Set(issued).size).toBe(5);
    expect(store.find(issued[0])?.username).toBe('demo');
    clock.advance(60);
    expect(store.find(issued[0])).toBeNull();
  });
});

describe('login throttle', () => {
  const wrong = (username: string): Request => tokenRequest({ username, password: 'wrong-password' });
  const right = (username: string): Request => tokenRequest({ username, password: `${username}-password` });

  it('locks a username for 60 s after 10 failures in 60 s; every attempt, even correct, gets 429 with Retry-After', async () => {
    const { handler, clock } = await makeHandler();
    for (let i = 0; i < 10; i++) {
      expect((await handler(wrong('demo'))).status, `attempt ${i + 1}`).toBe(400);
      clock.advance(5); // 10 failures over 45 s: all inside one window
    }
    clock.advance(-5);
    const locked = await handler(right('demo'));
    expect(locked.status).toBe(429);
    expect(locked.headers.get('retry-after')).toBe('60');
    const text = await locked.text();
    expectErrorShape({ status: 429, headers: locked.headers, text, json: JSON.parse(text) }, 429, 'TooManyLoginAttempts');
    clock.advance(30);
    const still = await handler(wrong('demo'));
    expect(still.status).toBe(429);
    expect(still.headers.get('retry-after')).toBe('30');
    clock.advance(29.5);
    expect((await handler(right('demo'))).headers.get('retry-after')).toBe('1');
    // other usernames are unaffected meanwhile
    expect((await handler(right('partner'))).status).toBe(200);
    clock.advance(0.5);
    expect((await handler(right('demo'))).status).toBe(200);
  });

  it('counts unknown usernames too, and only failures inside the window', async () => {
    const { handler, clock } = await makeHandler();
    for (let i = 0; i < 10; i++) expect((await handler(wrong('ghost'))).status).toBe(400);
    expect((await handler(wrong('ghost'))).status).toBe(429);
    // 9 failures, a minute passes, 9 more: never 10 within 60 s
    for (let i = 0; i < 9; i++) expect((await handler(wrong('demo'))).status).toBe(400);
    clock.advance(60);
    for (let i = 0; i < 9; i++) expect((await handler(wrong('demo'))).status).toBe(400);
    expect((await handler(right('demo'))).status).toBe(200);
    // a success clears the count
    for (let i = 0; i < 9; i++) expect((await handler(wrong('demo'))).status).toBe(400);
    expect((await handler(right('demo'))).status).toBe(200);
    expect((await handler(wrong('demo'))).status).toBe(400);
  });

  it('holds under a burst of concurrent attempts and is configurable', async () => {
    const { handler } = await makeHandler();
    const statuses = await Promise.all(Array.from({ length: 15 }, () => handler(wrong('demo')).then((r) => r.status)));
    expect(statuses.filter((s) => s === 400)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(5);

    const strict = (await makeHandler({ loginThrottle: { maxFailures: 2, windowSeconds: 10, lockSeconds: 300 } })).handler;
    expect((await strict(wrong('demo'))).status).toBe(400);
    expect((await strict(wrong('demo'))).status).toBe(400);
    const r = await strict(right('demo'));
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('300');

    const off = (await makeHandler({ loginThrottle: false })).handler;
    for (let i = 0; i < 12; i++) expect((await off(wrong('demo'))).status).toBe(400);
    expect((await off(right('demo'))).status).toBe(200);
  });
});

describe('per-token rate limit', () => {
  it('is off by default', async () => {
    const { handler } = await makeHandler();
    const token = await login(handler);
    for (let i = 0; i < 50; i++) expect((await call(handler, '/v1/account/resources', { token })).status).toBe(200);
  });

  it('is a token bucket per access token: burst, then 429 with Retry-After until it refills', async () => {
    const { handler, clock } = await makeHandler({ rateLimit: { requestsPerSecond: 2, burst: 3 } });
    const a = await login(handler);
    const b = await login(handler, 'partner');
    for (let i = 0; i < 3; i++) expect((await call(handler, '/v1/listings/data/Property?$top=1', { token: a })).status).toBe(200);
    const limited = await call(handler, '/v1/listings/data/Property?$top=1', { token: a });
    expectErrorShape(limited, 429, 'RateLimited');
    expect(limited.headers.get('retry-after')).toBe('1');
    // another token has its own bucket
    expect((await call(handler, '/v1/account/resources', { token: b })).status).toBe(200);
    clock.advance(0.5); // one request's worth
    expect((await call(handler, '/v1/account/resources', { token: a })).status).toBe(200);
    expect((await call(handler, '/v1/account/resources', { token: a })).status).toBe(429);
    clock.advance(10); // refills to the burst, not beyond
    for (let i = 0; i < 3; i++) expect((await call(handler, '/v1/account/resources', { token: a })).status).toBe(200);
    expect((await call(handler, '/v1/account/resources', { token: a })).status).toBe(429);
    // a slow rate asks for a longer wait
    const slow = (await makeHandler({ rateLimit: { requestsPerSecond: 0.1, burst: 1 } })).handler;
    const t = await login(slow);
    expect((await call(slow, '/v1/account/resources', { token: t })).status).toBe(200);
    expect((await call(slow, '/v1/account/resources', { token: t })).headers.get('retry-after')).toBe('10');
    // the token endpoint itself is not rate limited (only logins are throttled)
    for (let i = 0; i < 5; i++) expect((await slow(tokenRequest({ username: 'demo', password: 'demo-password' }))).status).toBe(200);
  });
});
