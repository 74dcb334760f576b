/**
 * Content-coding: the choice of coding from Accept-Encoding (q-values, refusals, `*`), and
 * responses through the in-process handler and a real server whose decoded bodies equal the
 * uncompressed ones; small bodies, errors and codings a client did not accept stay identity;
 * HEAD has the headers of the GET. (The service sends no validators, so there are no 304s.)
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Server } from '../../src/adapters/http.js';
import { Engine } from '../../src/engine.js';
import { chooseCoding, COMPRESS_THRESHOLD, encodeResponse, INLINE_COMPRESS_LIMIT } from '../../src/service/encoding.js';
import { jsonResponse } from '../../src/service/respond.js';
import { createHandler, type Handler } from '../../src/service/handler.js';
import { BASE, login, makeHandler, NOW, q, quickAccounts } from './helpers.js';

const decoders: Record<string, (b: Buffer) => Buffer> = { gzip: gunzipSync, br: brotliDecompressSync, deflate: inflateSync };

function decode(coding: string | null, body: Buffer): Buffer {
  return coding === null ? body : decoders[coding](body);
}

async function fetchRaw(
  handler: Handler,
  path: string,
  headers: Record<string, string>,
  method = 'GET',
): Promise<{ status: number; headers: Headers; body: Buffer }> {
  const res = await handler(new Request(`${BASE}${path}`, { method, headers }));
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

describe('chooseCoding', () => {
  it('takes the best q-value the client gives, br before gzip before deflate on a tie', () => {
    expect(chooseCoding(null)).toBeNull();
    expect(chooseCoding('')).toBeNull();
    expect(chooseCoding('gzip')).toBe('gzip');
    expect(chooseCoding('GZIP')).toBe('gzip');
    expect(chooseCoding('x-gzip')).toBe('gzip');
    expect(chooseCoding('deflate')).toBe('deflate');
    expect(chooseCoding('gzip, deflate, br')).toBe('br');
    expect(chooseCoding('gzip;q=1.0, br;q=0.5')).toBe('gzip');
    expect(chooseCoding('gzip ; q=0.2 , deflate;q=0.8')).toBe('deflate');
    expect(chooseCoding('identity')).toBeNull();
    expect(chooseCoding('compress, zstd')).toBeNull();
  });

  it('never picks a coding refused with q=0, by name or through *', () => {
    expect(chooseCoding('gzip;q=0')).toBeNull();
    expect(chooseCoding('gzip;q=0.000')).toBeNull();
    expect(chooseCoding('br;q=0, gzip;q=0, deflate;q=0')).toBeNull();
    expect(chooseCoding('br;q=0, gzip')).toBe('gzip');
    expect(chooseCoding('*;q=0')).toBeNull();
    expect(chooseCoding('*;q=0, identity')).toBeNull();
    expect(chooseCoding('*')).toBe('br');
    expect(chooseCoding('*, br;q=0')).toBe('gzip');
    expect(chooseCoding('gzip, gzip;q=0')).toBeNull();
    // an unreadable weight leaves the default of 1 (the coding was named)
    expect(chooseCoding('gzip;q=high')).toBe('gzip');
    expect(chooseCoding('gzip;q=2')).toBe('gzip');
  });
});

describe('encodeResponse', () => {
  it('compresses bodies at and around the inline limit (in place below it, on the thread pool above) to bytes that decode to the body', async () => {
    for (const size of [COMPRESS_THRESHOLD, INLINE_COMPRESS_LIMIT - 1, INLINE_COMPRESS_LIMIT, INLINE_COMPRESS_LIMIT + 1, 4 * INLINE_COMPRESS_LIMIT]) {
      // seeded, half repetitive text: compressible, and not trivially
      let seed = size;
      const text = Array.from({ length: size }, (_, i) => (i % 3 === 0 ? 'abcdefgh'[(seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % 8] : 'x')).join('');
      const body = Buffer.from(text);
      for (const coding of ['gzip', 'br', 'deflate'] as const) {
        const out = await encodeResponse({ status: 200, headers: { 'Content-Length': String(size) }, body }, coding, 'GET');
        expect(out.headers['Content-Encoding'], `${coding} ${size}`).toBe(coding);
        const sent = out.body as Buffer;
        expect(out.headers['Content-Length']).toBe(String(sent.byteLength));
        expect(sent.byteLength).toBeLessThan(size);
        expect(decode(coding, sent).equals(body), `${coding} ${size}`).toBe(true);
      }
    }
  });
});

describe('compressed responses, in-process', () => {
  let handler: Handler;
  let token: string;
  const page = `/v1/listings/data/Property?${q({ $filter: "City eq 'Seattle'", $top: 25 })}`;

  beforeAll(async () => {
    handler = (await makeHandler()).handler;
    token = await login(handler);
  });

  it('decodes to the uncompressed bytes in every coding, with Vary, Content-Encoding and the compressed length', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const plain = await fetchRaw(handler, page, auth);
    expect(plain.status).toBe(200);
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(plain.headers.get('vary')).toBe('Accept-Encoding');
    expect(plain.body.byteLength).toBeGreaterThan(COMPRESS_THRESHOLD * 10);
    for (const [accept, coding] of [
      ['gzip', 'gzip'],
      ['br', 'br'],
      ['deflate', 'deflate'],
      ['gzip, deflate, br', 'br'],
      ['br;q=0, gzip;q=0.5, deflate;q=0.4', 'gzip'],
      ['br;q=0, gzip;q=0, deflate', 'deflate'],
    ] as const) {
      const res = await fetchRaw(handler, page, { ...auth, 'accept-encoding': accept });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-encoding'), accept).toBe(coding);
      expect(res.headers.get('vary')).toBe('Accept-Encoding');
      expect(res.headers.get('odata-version')).toBe('4.01');
      expect(Number(res.headers.get('content-length'))).toBe(res.body.byteLength);
      expect(res.body.byteLength).toBeLessThan(plain.body.byteLength / 3);
      expect(decode(coding, res.body).equals(plain.body)).toBe(true);
    }
  });

  it('sends identity when every coding is refused, or only identity is accepted', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const plain = await fetchRaw(handler, page, auth);
    for (const accept of ['gzip;q=0', 'br;q=0, gzip;q=0, deflate;q=0', '*;q=0', 'identity', 'compress']) {
      const res = await fetchRaw(handler, page, { ...auth, 'accept-encoding': accept });
      expect(res.headers.get('content-encoding'), accept).toBeNull();
      expect(res.body.equals(plain.body)).toBe(true);
    }
  });

  it('leaves bodies under the threshold, errors and bodiless answers uncompressed', async () => {
    const gz = { authorization: `Bearer ${token}`, 'accept-encoding': 'gzip, br' };
    const small = await fetchRaw(handler, `/v1/listings/data/Property?${q({ $filter: "StandardStatus eq 'Active'", $count: 'true', $top: 0 })}`, gz);
    expect(small.status).toBe(200);
    expect(small.body.byteLength).toBeLessThan(COMPRESS_THRESHOLD);
    expect(small.headers.get('content-encoding')).toBeNull();
    expect(small.headers.get('vary')).toBe('Accept-Encoding');
    expect(JSON.parse(small.body.toString())['@odata.count']).toBeGreaterThan(0);
    // a 400, a 401 and a 404: readable by any client
    const bad = await fetchRaw(handler, '/v1/listings/data/Property?$filter=City+eq', gz);
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-encoding')).toBeNull();
    expect(JSON.parse(bad.body.toString()).error.code).toBe('InvalidSyntax');
    const anonymous = await fetchRaw(handler, '/v1/listings/data/Property', { 'accept-encoding': 'gzip' });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('content-encoding')).toBeNull();
    expect(JSON.parse(anonymous.body.toString()).error.code).toBe('MissingToken');
    const missing = await fetchRaw(handler, "/v1/listings/data/Property('NOPE')", gz);
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-encoding')).toBeNull();
  });

  it('never compresses an error, however large', async () => {
    const message = 'x'.repeat(COMPRESS_THRESHOLD * 4);
    const error = jsonResponse(400, { error: { code: 'InvalidSyntax', message } });
    const out = await encodeResponse(error, 'gzip, br', 'GET');
    expect(out.headers['Content-Encoding']).toBeUndefined();
    expect(JSON.parse(Buffer.from(out.body as Uint8Array).toString()).error.message).toBe(message);
    const head = await encodeResponse(jsonResponse(404, { error: { code: 'NotFound', message } }), 'gzip', 'HEAD');
    expect(head.body).toBeNull();
    expect(head.headers['Content-Encoding']).toBeUndefined();
  });

  it('answers HEAD with the headers of the GET in the same coding, and no body', async () => {
    for (const accept of [undefined, 'gzip', 'br']) {
      const headers: Record<string, string> = { authorization: `Bearer ${token}` };
      if (accept !== undefined) headers['accept-encoding'] = accept;
      const get = await fetchRaw(handler, page, headers);
      const head = await fetchRaw(handler, page, headers, 'HEAD');
      expect(head.status).toBe(200);
      expect(head.body.byteLength).toBe(0);
      for (const name of ['content-encoding', 'content-length', 'content-type', 'vary', 'odata-version']) {
        expect(head.headers.get(name), `${accept} ${name}`).toBe(get.headers.get(name));
      }
    }
  });

  it('compresses a streamed page as it streams, decoding to the same bytes', async () => {
    const Property = Array.from({ length: 3000 }, (_, i) => ({ ListingKey: `L${String(i).padStart(5, '0')}`, OriginatingSystemName: 'HAR', ListPrice: i }));
    const big = await Engine.open({ data: { Property }, now: () => new Date(NOW) });
    const h = createHandler({ engine: big, accounts: quickAccounts() });
    const t = await login(h, 'partner');
    const path = '/v1/listings/data/Property?$top=3000';
    const plain = await fetchRaw(h, path, { authorization: `Bearer ${t}` });
    expect(plain.headers.get('content-length')).toBeNull();
    expect(JSON.parse(plain.body.toString()).value).toHaveLength(3000);
    for (const coding of ['gzip', 'br', 'deflate']) {
      const res = await fetchRaw(h, path, { authorization: `Bearer ${t}`, 'accept-encoding': coding });
      expect(res.headers.get('content-encoding')).toBe(coding);
      expect(res.headers.get('content-length')).toBeNull();
      expect(decode(coding, res.body).equals(plain.body)).toBe(true);
    }
  });
});

interface Raw {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** One request on a fresh connection, the target sent exactly as given, the body as received (not decoded). */
function raw(server: Server, method: string, target: string, headers: Record<string, string> = {}, body?: string | Buffer[]): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: server.host, port: server.port, method, path: target, headers, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (Array.isArray(body)) {
      for (const b of body) req.write(b);
      req.end();
    } else req.end(body);
  });
}

describe('a listening server answers as the in-process handler does', () => {
  let server: Server;
  let handler: Handler;
  let token: string;

  beforeAll(async () => {
    handler = (await makeHandler()).handler;
    server = await serve(handler, { port: 0 });
    token = await login(handler);
  });

  afterAll(async () => {
    await server?.close();
  });

  const paths = [
    `/v1/listings/data/Property?${q({ $filter: "City eq 'Seattle' and ListPrice ge 300000", $orderby: 'ListPrice desc', $top: 25 })}`,
    `/v1/listings/data/Property?${q({ $filter: "StandardStatus eq 'Active'", $count: 'true', $top: 0 })}`,
    `/v1/listings/data/Property?$select=ListingKey,City&$top=3&$filter=City%20eq%20'Seattle'`,
    `/v1/listings/data/Property?$apply=groupby((City),aggregate($count%20as%20N))`,
    '/v1/listings/data/Property/$count',
    '/v1/listings/data/$metadata',
    '/v1/listings/data/',
    '/v1/listings/mls_profiles',
    '/v1/listings/data/./Property?$top=2',
    '/v1/x/../listings/data/%50roperty?$top=2',
    '/v1/listings/data/Property?$filter=City+eq',
    '/v1/nothing',
    "/v1/listings/data/Property('NOPE')",
  ];

  it('sends the same status, headers and bytes for each request, in each coding', async () => {
    for (const accept of [undefined, 'gzip', 'br;q=0.9, deflate']) {
      for (const path of paths) {
        const headers: Record<string, string> = { authorization: `Bearer ${token}`, host: 'service.test' };
        if (accept !== undefined) headers['accept-encoding'] = accept;
        const expected = await fetchRaw(handler, path, headers);
        const got = await raw(server, 'GET', path, headers);
        expect(got.status, path).toBe(expected.status);
        for (const name of ['content-type', 'content-encoding', 'content-length', 'vary', 'odata-version', 'www-authenticate']) {
          expect(got.headers[name] ?? null, `${path} ${name}`).toBe(expected.headers.get(name));
        }
        const coding = expected.headers.get('content-encoding');
        expect(decode(coding, got.body).toString(), path).toBe(decode(coding, expected.body).toString());
      }
    }
  });

  it('takes the base URL from the Host header, and falls back to its own for an unusable one', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const named = await raw(server, 'GET', '/v1/listings/data/Property?$top=1', { ...auth, host: 'Example.COM:80' });
    expect(JSON.parse(named.body.toString())['@odata.context']).toBe('http://example.com/v1/listings/data/$metadata#Property');
    const odd = await raw(server, 'GET', '/v1/listings/data/Property?$top=1', { ...auth, host: 'a b' });
    expect(JSON.parse(odd.body.toString())['@odata.context']).toBe(`${server.url}/v1/listings/data/$metadata#Property`);
  });

  it('reads a POST body sent in pieces, and refuses one past the limit without a declared length', async () => {
    const form = 'username=demo&password=demo-password';
    const ok = await raw(server, 'POST', '/v1/token', { 'content-type': 'application/x-www-form-urlencoded', 'transfer-encoding': 'chunked' }, [
      Buffer.from(form.slice(0, 10)),
      Buffer.from(form.slice(10)),
    ]);
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body.toString()).access_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const big = await raw(server, 'POST', '/v1/token', { 'content-type': 'application/x-www-form-urlencoded', 'transfer-encoding': 'chunked' }, [
      Buffer.from(form),
      Buffer.from(`&pad=${'p'.repeat(20_000)}`),
    ]);
    expect(big.status).toBe(413);
    expect(big.headers.connection).toBe('close');
    expect(JSON.parse(big.body.toString()).error.code).toBe('PayloadTooLarge');
  });

  it('answers a request target that is not a URL with 400 InvalidHttp, and routes an absolute-form one by its path', async () => {
    const exchange = (target: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const s = connect(server.port, server.host, () => s.write(`GET ${target} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`));
        let out = '';
        s.on('data', (b: Buffer) => (out += b.toString()));
        s.on('end', () => resolve(out));
        s.on('error', reject);
      });
    const bad = await exchange('http://[bad/x');
    expect(bad.startsWith('HTTP/1.1 400 ')).toBe(true);
    expect(bad).toContain('OData-Version: 4.01');
    expect(JSON.parse(bad.slice(bad.indexOf('\r\n\r\n') + 4)).error.code).toBe('InvalidHttp');
    const absolute = await exchange('http://other.example/v1/listings/data/');
    expect(absolute.startsWith('HTTP/1.1 401 ')).toBe(true);
    const outside = await exchange('http://other.example/elsewhere');
    expect(JSON.parse(outside.slice(outside.indexOf('\r\n\r\n') + 4)).error.code).toBe('NotFound');
  });

  it('answers HEAD with the GET headers and no body, compressed or not', async () => {
    const path = paths[0];
    for (const accept of [undefined, 'gzip']) {
      const headers: Record<string, string> = { authorization: `Bearer ${token}` };
      if (accept !== undefined) headers['accept-encoding'] = accept;
      const get = await raw(server, 'GET', path, headers);
      const head = await raw(server, 'HEAD', path, headers);
      expect(head.status).toBe(200);
      expect(head.body.byteLength).toBe(0);
      expect(head.headers['content-length']).toBe(get.headers['content-length']);
      expect(head.headers['content-encoding']).toBe(get.headers['content-encoding']);
    }
  });
});
