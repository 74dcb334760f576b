/**
 * End to end against a real node:http server on 127.0.0.1 (port 0): the 414 for a 17 KB query
 * string, the 431 beyond the header limit, a client that follows nextLinks through a whole result
 * set, a streamed page, graceful shutdown finishing a request in flight, and the CLI's serve
 * (SIGTERM) and query. Every server here is closed by the test that opened it.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Server } from '../../src/adapters/http.js';
import { createHandler } from '../../src/service/handler.js';
import { collectCli, defaultEngine, DEMO_SOURCES, quickAccounts, startServe } from './helpers.js';

interface Raw {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  chunks: number;
}

/** One request on a fresh connection (no keep-alive pool), the path sent exactly as given. */
function raw(server: Server, method: string, target: string, headers: Record<string, string> = {}, body?: string): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: server.host, port: server.port, method, path: target, headers, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString('utf8'), chunks: parts.length }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Bytes written straight to a socket, and everything the server says before it closes. */
function socketExchange(server: Server, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(server.port, server.host, () => s.write(bytes));
    const parts: Buffer[] = [];
    s.on('data', (b: Buffer) => parts.push(b));
    s.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    s.on('error', reject);
  });
}

describe('a listening server', () => {
  let server: Server;
  let token: string;

  beforeAll(async () => {
    const handler = createHandler({ engine: await defaultEngine(), accounts: quickAccounts() });
    server = await serve(handler, { port: 0, host: '127.0.0.1' });
    const t = await raw(
      server,
      'POST',
      '/v1/token',
      { 'content-type': 'application/x-www-form-urlencoded' },
      'username=demo&password=demo-password&grant_type=password',
    );
    expect(t.status).toBe(200);
    token = JSON.parse(t.body).access_token;
  });

  afterAll(async () => {
    await server?.close();
  });

  it('listens on the port it reports', () => {
    expect(server.url).toBe(`http://127.0.0.1:${server.port}`);
    expect(server.port).toBeGreaterThan(0);
  });

  it('answers a 17 KB query string with 414 itself, and counts the bytes as the client sent them', async () => {
    const filter = (n: number) => `$filter=City+eq+'${'x'.repeat(n)}'`;
    const seventeen = await raw(server, 'GET', `/v1/listings/data/Property?${filter(17 * 1024)}`, { authorization: `Bearer ${token}` });
    expect(seventeen.status).toBe(414);
    expect(seventeen.headers['odata-version']).toBe('4.01');
    expect(JSON.parse(seventeen.body)).toEqual({ error: { code: 'QueryStringTooLong', message: expect.stringContaining('16384') } });
    // 16,384 bytes exactly, with raw apostrophes (which Request.url would have grown to %27): served
    const q = filter(16_384 - filter(0).length);
    expect(q.length).toBe(16_384);
    const exact = await raw(server, 'GET', `/v1/listings/data/Property?${q}`, { authorization: `Bearer ${token}` });
    expect(exact.status).toBe(200);
    expect(JSON.parse(exact.body).value).toEqual([]);
    // beyond Node's raised header limit (64 KiB) the parser refuses, still with the error object
    const huge = await raw(server, 'GET', `/v1/listings/data/Property?${filter(70 * 1024)}`);
    expect(huge.status).toBe(431);
    expect(huge.headers['odata-version']).toBe('4.01');
    expect(JSON.parse(huge.body).error.code).toBe('HeadersTooLarge');
  });

  it('answers garbage with 400 and an error object, and a declared oversized body with 413', async () => {
    const text = await socketExchange(server, 'HELLO THERE\r\n\r\n');
    expect(text.startsWith('HTTP/1.1 400 Bad Request\r\n')).toBe(true);
    expect(text).toContain('OData-Version: 4.01');
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).error.code).toBe('InvalidHttp');
    const big = await raw(
      server,
      'POST',
      '/v1/token',
      { 'content-type': 'application/x-www-form-urlencoded' },
      `username=demo&password=x&pad=${'p'.repeat(20_000)}`,
    );
    expect(big.status).toBe(413);
    expect(big.headers.connection).toBe('close');
    expect(JSON.parse(big.body).error.code).toBe('PayloadTooLarge');
  });

  it('serves HEAD without a body', async () => {
    const head = await raw(server, 'HEAD', '/v1/listings/data/Property?$top=2', { authorization: `Bearer ${token}` });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(Number(head.headers['content-length'])).toBeGreaterThan(100);
  });

  it('lets a client follow nextLinks through a whole result set, every record exactly once', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const first = `${server.url}/v1/listings/data/Property?$select=ListingKey,OriginatingSystemName&$count=true`;
    const seen: string[] = [];
    let total = -1;
    let pages = 0;
    for (let url: string | undefined = first; url !== undefined; pages++) {
      const res = await fetch(url, { headers: auth });
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        '@odata.count': number;
        value: Array<{ ListingKey: string; OriginatingSystemName: string }>;
        '@odata.nextLink'?: string;
      };
      total = body['@odata.count'];
      for (const r of body.value) {
        expect(DEMO_SOURCES).toContain(r.OriginatingSystemName);
        seen.push(r.ListingKey);
      }
      url = body['@odata.nextLink'];
      if (url !== undefined) expect(url.startsWith(`${server.url}/v1/listings/data/Property?`)).toBe(true);
      if (pages > 1000) throw new Error('runaway paging');
    }
    expect(pages).toBe(Math.ceil(total / 10));
    expect(seen).toHaveLength(total);
    expect(new Set(seen).size).toBe(total);
    expect([...seen].sort()).toEqual(seen);
  });

  it('streams a large page in chunks with chunked transfer encoding', async () => {
    const res = await raw(server, 'GET', '/v1/listings/data/Media?$top=25000', { authorization: `Bearer ${token}` });
    expect(res.status).toBe(200);
    expect(res.headers['transfer-encoding']).toBe('chunked');
    expect(res.headers['content-length']).toBeUndefined();
    expect(res.chunks).toBeGreaterThan(10);
    const body = JSON.parse(res.body) as { value: unknown[] };
    expect(body.value.length).toBeGreaterThan(10_000);
  });
});

describe('graceful shutdown', () => {
  it('finishes a request in flight, refuses new connections, then resolves close()', async () => {
    let started!: () => void;
    const isStarted = new Promise<void>((r) => (started = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const server = await serve(
      async (request) => {
        if (new URL(request.url).pathname === '/slow') {
          started();
          await released;
          return new Response('finished', { headers: { 'content-type': 'text/plain' } });
        }
        return new Response('quick');
      },
      { port: 0 },
    );
    try {
      // an idle keep-alive connection must not hold the shutdown up
      const agentFetch = await fetch(`${server.url}/quick`);
      expect(await agentFetch.text()).toBe('quick');

      const inFlight = raw(server, 'GET', '/slow');
      await isStarted;
      let closed = false;
      const closing = server.close().then(() => {
        closed = true;
      });
      const refused = await new Promise<string>((resolve) => {
        const s = connect(server.port, server.host);
        s.on('connect', () => {
          s.destroy();
          resolve('connected');
        });
        s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
      });
      expect(refused).toBe('ECONNREFUSED');
      expect(closed).toBe(false);
      release();
      const res = await inFlight;
      expect(res.status).toBe(200);
      expect(res.body).toBe('finished');
      expect(res.headers.connection).toBe('close');
      await closing;
      expect(closed).toBe(true);
      expect(server.server.listening).toBe(false);
    } finally {
      release(); // on a failure, let the handler return so close() can finish
      await server.close();
    }
  });
});

describe('the CLI', () => {
  it('serve prints the URL and the demo credentials, answers, and stops on SIGTERM after finishing', async () => {
    const served = await startServe(['--port', '0', '--now', '2025-06-01T00:00:00Z']);
    const { child, url, exited } = served;
    try {
      expect(served.out()).toContain('demo / demo-password');
      expect(served.out()).toContain('partner / partner-password');
      const t = await fetch(`${url}/v1/token`, { method: 'POST', body: new URLSearchParams({ username: 'demo', password: 'demo-password' }) });
      const { access_token } = (await t.json()) as { access_token: string };
      const profiles = await fetch(`${url}/v1/listings/mls_profiles`, { headers: { authorization: `Bearer ${access_token}` } });
      expect(((await profiles.json()) as { profiles: Record<string, { current_year: string }> }).profiles.CRMLS.current_year).toBe('2025');
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(served.err()).toContain('stopped');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL'); // never leave a server behind
    }
  });

  it('query prints the envelope, and a coded error on stderr with exit code 1', async () => {
    const ok = await collectCli(['query', '--sources', 'HAR', "$filter=City eq 'Houston'&$select=ListingKey,City&$count=true"]);
    expect(ok.code).toBe(0);
    const body = JSON.parse(ok.out) as { '@odata.count': number; value: Array<{ City: string }>; '@odata.nextLink': string };
    expect(body.value).toHaveLength(10);
    expect(body['@odata.count']).toBeGreaterThan(10);
    expect(body.value.every((r) => r.City === 'Houston')).toBe(true);
    expect(body['@odata.nextLink'].startsWith('Property?')).toBe(true);
    const bad = await collectCli(['query', '$filter=City eq']);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/^reso-engine: InvalidSyntax in \$filter at 7: /);
  });
});
