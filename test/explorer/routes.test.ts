/**
 * The explorer's routes without a browser: the static files (types, caching, the CSP, HEAD, 304,
 * 404s and 405s, the redirect of `/explorer/`), that the page names only files the service has and
 * no other host, and `GET /v1/listings/explain/{Resource}` (the account's visibility, the query's
 * errors as on the collection, the backend without explain).
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { serve } from '../../src/adapters/http.js';
import { explainText } from '../../src/plan/explain.js';
import { createExplorer, EXPLORER_CSP, EXPLORER_DIR } from '../../src/service/explorer.js';
import { createHandler, type ServiceEngine } from '../../src/service/handler.js';
import { call, DEMO_SOURCES, defaultEngine, expectErrorShape, login, makeHandler, q, quickAccounts } from '../service/helpers.js';

const FILES = readdirSync(EXPLORER_DIR).sort();

describe('explorer static files', () => {
  it('serves the page at / and /explorer with a self-only CSP, no-cache and an ETag', async () => {
    const { handler } = await makeHandler();
    const index = readFileSync(path.join(EXPLORER_DIR, 'index.html'), 'utf8');
    for (const p of ['/', '/explorer']) {
      const c = await call(handler, p);
      expect(c.status, p).toBe(200);
      expect(c.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(c.headers.get('content-security-policy')).toBe(EXPLORER_CSP);
      expect(c.headers.get('cache-control')).toBe('no-cache');
      expect(c.headers.get('x-content-type-options')).toBe('nosniff');
      expect(c.headers.get('etag')).toMatch(/^W\/"[A-Za-z0-9_-]{22}"$/);
      expect(c.text).toBe(index);
    }
    // every source the CSP allows is this origin, nothing is allowed inline or framed
    expect(EXPLORER_CSP).toContain("default-src 'self'");
    expect(EXPLORER_CSP).not.toMatch(/unsafe|https?:|\*|data:/);
  });

  it('serves each file of explorer/ with its content type, and no other name', async () => {
    const { handler } = await makeHandler();
    const types: Record<string, string> = {
      '.html': 'text/html; charset=utf-8',
      '.js': 'text/javascript; charset=utf-8',
      '.css': 'text/css; charset=utf-8',
      '.svg': 'image/svg+xml',
    };
    expect(FILES).toContain('app.js');
    for (const name of FILES.filter((f) => f !== 'index.html')) {
      const c = await call(handler, `/explorer/${name}`);
      expect(c.status, name).toBe(200);
      expect(c.headers.get('content-type'), name).toBe(types[path.extname(name)]);
      expect(c.text, name).toBe(readFileSync(path.join(EXPLORER_DIR, name), 'utf8'));
      expect(c.headers.get('odata-version')).toBe('4.01');
    }
    for (const p of ['/explorer/nope.js', '/explorer/APP.JS', '/explorer/sub/app.js', '/explorer/app.js/', '/explorer/%2e%2e/package.json', '/favicon.ico']) {
      expectErrorShape(await call(handler, p), 404, 'NotFound');
    }
    // a dot segment resolves before routing: /explorer/../v1/x is /v1/x, which needs a token
    expectErrorShape(await call(handler, '/explorer/../v1/account/resources'), 401, 'MissingToken');
  });

  it('answers HEAD like GET without the body, 304 for a matching If-None-Match, 405 for other methods', async () => {
    const { handler } = await makeHandler();
    const get = await call(handler, '/explorer/app.js');
    const head = await call(handler, '/explorer/app.js', { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    for (const h of ['content-type', 'content-length', 'etag', 'cache-control']) expect(head.headers.get(h), h).toBe(get.headers.get(h));
    const etag = get.headers.get('etag')!;
    for (const inm of [etag, etag.slice(2), `"other", ${etag}`, '*']) {
      const c = await call(handler, '/explorer/app.js', { headers: { 'if-none-match': inm } });
      expect(c.status, inm).toBe(304);
      expect(c.text).toBe('');
      expect(c.headers.get('etag')).toBe(etag);
    }
    for (const inm of ['"other"', 'W/"other"', 'garbage,,', '']) {
      expect((await call(handler, '/explorer/app.js', { headers: { 'if-none-match': inm } })).status, inm).toBe(200);
    }
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const c = await call(handler, '/', { method, body: method === 'DELETE' ? undefined : 'x' });
      expectErrorShape(c, 405, 'MethodNotAllowed');
      expect(c.headers.get('allow')).toBe('GET, HEAD');
    }
  });

  it('sends /explorer/ and /explorer/index.html to /explorer, where the relative links resolve', async () => {
    const { handler } = await makeHandler();
    for (const p of ['/explorer/', '/explorer/index.html']) {
      const c = await call(handler, p);
      expect(c.status, p).toBe(308);
      expect(new URL(c.headers.get('location')!, `http://h${p}`).pathname).toBe('/explorer');
    }
  });

  it('compresses the larger files for a client that accepts it, with the same ETag', async () => {
    const { handler } = await makeHandler();
    const plain = await call(handler, '/explorer/app.js');
    const res = await handler(new Request('http://service.test/explorer/app.js', { headers: { 'accept-encoding': 'gzip' } }));
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(res.headers.get('vary')).toBe('Accept-Encoding');
    expect(res.headers.get('etag')).toBe(plain.headers.get('etag'));
  });

  it('names only files it serves, and no other host', async () => {
    const { handler } = await makeHandler();
    const index = readFileSync(path.join(EXPLORER_DIR, 'index.html'), 'utf8');
    const linked = [...index.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => new URL(m[1], 'http://h/explorer').pathname);
    for (const file of FILES.filter((f) => f.endsWith('.js'))) {
      const text = readFileSync(path.join(EXPLORER_DIR, file), 'utf8');
      linked.push(...[...text.matchAll(/from '(\.\/[^']+)'/g)].map((m) => new URL(m[1], `http://h/explorer/${file}`).pathname));
      // fetches go to paths relative to the page (v1/...), never to a host
      for (const m of text.matchAll(/https?:\/\/[^'"\s)]+/g))
        expect(['http://www.w3.org/2000/svg', 'http://docs.oasis-open.org/odata/ns/edm'], file).toContain(m[0]);
    }
    expect(index).not.toMatch(/https?:\/\//);
    expect(index).not.toMatch(/<script>|<style|\sstyle=|\son[a-z]+=/i); // nothing inline: the CSP would refuse it
    expect(linked.length).toBeGreaterThan(5);
    for (const p of new Set(linked)) expect((await call(handler, p)).status, p).toBe(200);
    // every file is shipped in the package
    const pkg = JSON.parse(readFileSync(path.join(EXPLORER_DIR, '../package.json'), 'utf8')) as { files: string[] };
    expect(pkg.files).toContain('explorer');
  });

  it('answers 404 for the page when the folder is missing, and reads the files once when created', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'explorer-'));
    const engine = await defaultEngine();
    const empty = createExplorer(engine, path.join(dir, 'absent'));
    const request = { method: 'GET', path: '/', rawQuery: '', origin: 'http://h', header: () => null, text: () => Promise.resolve('') };
    expect(() => empty.page(request)).toThrow(/no explorer page/);
    expect(empty.page({ ...request, path: '/elsewhere' })).toBeNull();
    writeFileSync(path.join(dir, 'index.html'), '<p>one</p>');
    writeFileSync(path.join(dir, 'notes.unknown'), 'x');
    const explorer = createExplorer(engine, dir);
    writeFileSync(path.join(dir, 'index.html'), '<p>two</p>');
    expect(Buffer.from(explorer.page(request)!.body as Uint8Array).toString()).toBe('<p>one</p>');
    expect(() => explorer.page({ ...request, path: '/explorer/notes.unknown' })).toThrow(/no file/);
  });

  it('serves the same bytes and headers through node:http', async () => {
    const { handler } = await makeHandler();
    const server = await serve(handler, { port: 0 });
    try {
      for (const p of ['/', '/explorer/app.js']) {
        const res = await fetch(`${server.url}${p}`, { headers: { 'accept-encoding': 'identity' } });
        const local = await call(handler, p);
        expect(res.status).toBe(200);
        expect(await res.text()).toBe(local.text);
        for (const h of ['content-type', 'content-security-policy', 'cache-control', 'etag']) expect(res.headers.get(h), h).toBe(local.headers.get(h));
      }
      const missing = await fetch(`${server.url}/explorer/missing.css`);
      expect(missing.status).toBe(404);
      expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('NotFound');
    } finally {
      await server.close();
    }
  });
});

describe('GET /v1/listings/explain/{Resource}', () => {
  const FILTER = 'ListPrice gt 500000 and BedroomsTotal ge 3';

  it("answers the plan for the account's sources, without row counts", async () => {
    const { handler } = await makeHandler();
    const token = await login(handler);
    const c = await call(handler, `/v1/listings/explain/Property?${q({ $filter: FILTER, $orderby: 'City', $top: 5 })}`, { token });
    expect(c.status).toBe(200);
    expect(c.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(c.headers.get('cache-control')).toBe('no-store');
    expect(c.headers.get('odata-version')).toBe('4.01');
    const engine = await defaultEngine();
    const query = `$filter=${FILTER}&$orderby=City&$top=5`;
    const plan = engine.explain('Property', query, { format: 'json', sources: DEMO_SOURCES });
    expect(c.json).toEqual({ resource: 'Property', plan: explainText(plan, { sources: DEMO_SOURCES, accessRows: null }) });
    expect(c.json.plan).toContain('visibility: sources CRMLS, NWMLS, ARMLS, HAR');
    expect(c.json.plan).toContain('page: skip 0, up to 5 rows');
    // the engine's own text counts the rows of every source; the route must not
    expect(engine.explain('Property', query, { sources: DEMO_SOURCES })).toMatch(/\d+ rows\)/);
    expect(c.json.plan).not.toMatch(/\(\d+ rows\)|, \d+ rows\)/);
  });

  it('explains every collection and applies Prefer: odata.maxpagesize as a query would', async () => {
    const { handler } = await makeHandler();
    const token = await login(handler, 'partner');
    for (const resource of ['Property', 'Media', 'OpenHouse', 'Member', 'Office', 'Lookup', 'EntityEvent']) {
      const c = await call(handler, `/v1/listings/explain/${resource}`, { token });
      expect(c.status, resource).toBe(200);
      expect(c.json.resource).toBe(resource);
      expect(c.json.plan).toContain(`resource: ${resource}`);
      expect(c.json.plan).toContain('visibility: sources HAR, MRED, NorthstarMLS, Stellar, BrightMLS');
    }
    const prefer = await call(handler, '/v1/listings/explain/Property', { token, headers: { prefer: 'odata.maxpagesize=4' } });
    expect(prefer.json.plan).toContain('up to 4 rows');
    const head = await call(handler, '/v1/listings/explain/Property', { token, method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
  });

  it('answers a bad query with the error the collection gives, and 401, 404, 405 as the data paths do', async () => {
    const { handler } = await makeHandler();
    const token = await login(handler);
    for (const query of [q({ $filter: 'City eq' }), q({ $filter: 'Nope eq 1' }), q({ $top: -1 }), q({ $orderby: 'ListPrice sideways' }), '$filter=%E0%A4%A']) {
      const explained = await call(handler, `/v1/listings/explain/Property?${query}`, { token });
      const queried = await call(handler, `/v1/listings/data/Property?${query}`, { token });
      expect(queried.status, query).toBe(400);
      expectErrorShape(explained, 400, queried.json.error.code);
      expect(explained.json).toEqual(queried.json);
    }
    expectErrorShape(await call(handler, '/v1/listings/explain/Property'), 401, 'MissingToken');
    expectErrorShape(await call(handler, '/v1/listings/explain/Property', { token: 'x' + token }), 401, 'InvalidToken');
    for (const p of [
      '/v1/listings/explain/PropertyChange',
      '/v1/listings/explain/',
      "/v1/listings/explain/Property('P000000001')",
      '/v1/listings/explain/Property/x',
    ]) {
      expectErrorShape(await call(handler, p, { token }), 404, 'NotFound');
    }
    const post = await call(handler, '/v1/listings/explain/Property', { token, method: 'POST', body: '' });
    expectErrorShape(post, 405, 'MethodNotAllowed');
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });

  it('answers 501 ExplainUnavailable for an engine without explain', async () => {
    const engine = await defaultEngine();
    const bare: ServiceEngine = {
      accounts: engine.accounts,
      profiles: engine.profiles,
      schemaOf: (r) => engine.schemaOf(r),
      now: () => engine.now(),
      query: (...a) => engine.query(...a),
      navigate: (...a) => engine.navigate(...a),
      navigateOne: (...a) => engine.navigateOne(...a),
      count: (...a) => engine.count(...a),
      entity: (...a) => engine.entity(...a),
      has: (...a) => engine.has(...a),
      isVisible: (...a) => engine.isVisible(...a),
      apply: (ops) => engine.apply(ops),
    };
    const handler = createHandler({ engine: bare, accounts: quickAccounts(), onError: () => undefined });
    const token = await login(handler);
    expectErrorShape(await call(handler, '/v1/listings/explain/Property', { token }), 501, 'ExplainUnavailable');
    expect((await call(handler, '/v1/listings/data/Property?$top=1', { token })).status).toBe(200);
  });
});
