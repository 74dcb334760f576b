/**
 * Kept response bodies (src/service/kept-bodies.ts): a body built again byte for byte is the very
 * buffer sent before, so its ETag and compressed forms are reused; a changed body (a live upsert,
 * the clock moving DaysOnMarket) is a new one with a new tag; bodies are kept per account; the
 * keeper stays within its bounds. Calls the service core (as node:http's `serve` does) to see
 * which buffer goes out.
 */
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { createHandler, serviceHandlerOf, type ServiceHandler } from '../../src/service/handler.js';
import { KeptBodies } from '../../src/service/kept-bodies.js';
import type { ServiceRequest } from '../../src/service/request.js';
import type { ServiceResponse } from '../../src/service/respond.js';
import { BASE, DEMO_SOURCES, login, NOW, quickAccounts } from './helpers.js';

const DAY = 86_400_000;
let ms = NOW;
let engine: Engine;
let core: ServiceHandler;
let demo: string;
let partner: string;
/** Listings the demo account sees, with a DaysOnMarket. */
let keys: string[];

beforeAll(async () => {
  engine = await Engine.open({ now: () => new Date(ms) });
  const handler = createHandler({ engine, accounts: quickAccounts(), clock: () => NOW, onError: () => undefined });
  core = serviceHandlerOf(handler)!;
  demo = await login(handler);
  partner = await login(handler, 'partner');
  const listed = engine.query('Property', '$filter=DaysOnMarket ne null&$select=ListingKey&$orderby=ListingKey&$top=2', { sources: DEMO_SOURCES });
  keys = listed.value.map((r) => r.ListingKey as string);
});

/** A GET through the service core: its response, the body as one buffer. */
async function get(target: string, token: string, headers: Record<string, string> = {}): Promise<ServiceResponse & { body: Buffer }> {
  const all: Record<string, string> = { authorization: `Bearer ${token}`, ...headers };
  const q = target.indexOf('?');
  const request: ServiceRequest = {
    method: 'GET',
    path: q < 0 ? target : target.slice(0, q),
    rawQuery: q < 0 ? '' : target.slice(q + 1),
    origin: BASE,
    header: (name) => all[name] ?? null,
    text: () => Promise.resolve(''),
  };
  const res = await core(request);
  expect(res.status, target).toBe(200);
  expect(Buffer.isBuffer(res.body), target).toBe(true);
  return res as ServiceResponse & { body: Buffer };
}

const data = (path: string, query: Record<string, string> = {}): string => {
  const q = new URLSearchParams(query).toString();
  return `/v1/listings/data/${path}${q === '' ? '' : `?${q}`}`;
};

/** Answers whose bytes are not written from kept page bytes: counts, $apply, $expand, records by key, navigation, the account's resources. */
const REPEATED = [
  data('Property/$count', { $filter: "StandardStatus eq 'Active'" }),
  data('Property', { $filter: "StandardStatus eq 'Active'", $count: 'true', $top: '0' }),
  data('Property', { $apply: 'groupby((City),aggregate($count as N))' }),
  data('Property', { $select: 'ListingKey,DaysOnMarket', $expand: 'Media($select=MediaURL;$top=2)', $top: '5' }),
  data("Property('P000000001')"),
  data("Property('P000000001')/Media"),
  '/v1/account/resources',
];

describe('kept response bodies', () => {
  it('give a repeated request the same buffer, bytes and ETag, taking turns with other requests', async () => {
    const first = new Map<string, ServiceResponse & { body: Buffer }>();
    for (const path of REPEATED) first.set(path, await get(path, demo));
    for (let round = 0; round < 2; round++) {
      for (const path of REPEATED) {
        const again = await get(path, demo);
        const before = first.get(path)!;
        expect(again.body, path).toBe(before.body);
        expect(again.headers.ETag, path).toBe(before.headers.ETag);
      }
    }
  });

  it('decode gzip, br and deflate of a kept body to its identity bytes, compressed once per coding', async () => {
    const path = data('Property', { $select: 'ListingKey,ListPrice', $expand: 'Media($select=MediaURL;$top=3)', $top: '10' });
    const identity = (await get(path, demo)).body;
    expect(identity.byteLength).toBeGreaterThan(1024); // above the compression threshold
    const decode = { gzip: gunzipSync, br: brotliDecompressSync, deflate: inflateSync };
    for (const coding of ['gzip', 'br', 'deflate'] as const) {
      const a = await get(path, demo, { 'accept-encoding': coding });
      const b = await get(path, demo, { 'accept-encoding': coding });
      expect(a.headers['Content-Encoding']).toBe(coding);
      expect(b.body).toBe(a.body); // the compressed form of the kept body, not compressed again
      expect(b.headers.ETag).toBe(a.headers.ETag);
      expect(a.headers.ETag).toMatch(new RegExp(`-${coding}"$`));
      expect(decode[coding](a.body).equals(identity)).toBe(true);
    }
    expect((await get(path, demo)).body).toBe(identity);
  });

  it('answer If-None-Match on a kept body with a 304, and a stale tag with the body', async () => {
    const path = data('Property', { $apply: "filter(StandardStatus eq 'Active')/groupby((City),aggregate(ListPrice with average as Avg))" });
    const a = await get(path, demo);
    const b = await get(path, demo);
    expect(b.body).toBe(a.body);
    const tag = a.headers.ETag;
    const request = (inm: string): ServiceRequest => ({
      method: 'GET',
      path: path.slice(0, path.indexOf('?')),
      rawQuery: path.slice(path.indexOf('?') + 1),
      origin: BASE,
      header: (name) => ({ authorization: `Bearer ${demo}`, 'if-none-match': inm })[name] ?? null,
      text: () => Promise.resolve(''),
    });
    const notModified = await core(request(tag));
    expect(notModified.status).toBe(304);
    expect(notModified.body).toBeNull();
    expect(notModified.headers.ETag).toBe(tag);
    const stale = await core(request('"not-the-tag"'));
    expect(stale.status).toBe(200);
    expect(stale.body).toBe(a.body);
  });

  it('make a new body with a new ETag and new compressed bytes after a live upsert', async () => {
    const path = data(`Property('${keys[0]}')`);
    const before = await get(path, demo);
    const gzBefore = await get(path, demo, { 'accept-encoding': 'gzip' });
    expect((await get(path, demo)).body).toBe(before.body);
    const record = JSON.parse(before.body.toString()) as Record<string, unknown>;
    const fields = Object.fromEntries(
      Object.entries(record).filter(([k]) => !k.startsWith('@') && !k.startsWith('service_') && k !== 'DaysOnMarket' && k !== 'ListingId'),
    );
    await engine.upsert('Property', [{ ...fields, ListPrice: (record.ListPrice as number) + 1 }]);
    const after = await get(path, demo);
    expect(after.body).not.toBe(before.body);
    expect(after.headers.ETag).not.toBe(before.headers.ETag);
    expect((JSON.parse(after.body.toString()) as { ListPrice: number }).ListPrice).toBe((record.ListPrice as number) + 1);
    const gzAfter = await get(path, demo, { 'accept-encoding': 'gzip' });
    expect(gzAfter.body).not.toBe(gzBefore.body);
    expect(gzAfter.headers.ETag).not.toBe(gzBefore.headers.ETag);
    expect(gunzipSync(gzAfter.body).equals(after.body)).toBe(true);
    expect((await get(path, demo)).body).toBe(after.body); // kept again from here on
  });

  it('make a new body with a new ETag when the clock moves DaysOnMarket', async () => {
    const paths = [data(`Property('${keys[1]}')`), data('Property', { $select: 'ListingKey,DaysOnMarket', $expand: 'Media($top=1)', $top: '3' })];
    for (const path of paths) {
      const before = await get(path, demo);
      expect((await get(path, demo)).body).toBe(before.body);
      ms += DAY;
      const after = await get(path, demo);
      expect(after.body, path).not.toBe(before.body);
      expect(after.body.equals(before.body), path).toBe(false);
      expect(after.headers.ETag, path).not.toBe(before.headers.ETag);
    }
  });

  it('are kept per account: two accounts with different sources never get each other bytes, nor evict each other', async () => {
    const paths = ['/v1/account/resources', data('Property/$count'), data('Property', { $apply: 'groupby((OriginatingSystemName))' })];
    for (const path of paths) {
      const a = await get(path, demo);
      const b = await get(path, partner);
      expect(b.body.equals(a.body), path).toBe(false);
      const a2 = await get(path, demo);
      const b2 = await get(path, partner);
      // each account's body survived the other's request under the same path
      expect(a2.body, path).toBe(a.body);
      expect(b2.body, path).toBe(b.body);
      expect(a2.headers.ETag).not.toBe(b2.headers.ETag);
    }
  });
});

describe('KeptBodies', () => {
  const bytes = (text: string): Buffer => Buffer.from(text);

  it('hands back the kept buffer for equal bytes, and keeps a different body in its place', () => {
    const kept = new KeptBodies();
    const a = bytes('{"value":[1,2,3]}');
    expect(kept.same('k', a)).toBe(a);
    expect(kept.same('k', bytes('{"value":[1,2,3]}'))).toBe(a);
    const b = bytes('{"value":[1,2,4]}');
    expect(kept.same('k', b)).toBe(b);
    expect(kept.same('k', bytes('{"value":[1,2,4]}'))).toBe(b);
    expect(kept.same('other', bytes('{"value":[1,2,4]}'))).not.toBe(b); // keys do not share
    expect(kept.count).toBe(2);
  });

  it('stays within its entries and bytes, the least recently used body first, and leaves out a body over its size limit', () => {
    const kept = new KeptBodies(3, 100, 40);
    const body = (i: number): Buffer => bytes(String(i).padStart(30, '0'));
    const first = [0, 1, 2].map((i) => kept.same(`k${i}`, body(i)));
    expect(kept.same('k0', body(0))).toBe(first[0]); // k0 now the most recently used
    kept.same('k3', body(3)); // four entries: k1 goes
    expect(kept.count).toBe(3);
    expect(kept.same('k1', body(1))).not.toBe(first[1]);
    expect(kept.same('k0', body(0))).toBe(first[0]);
    expect(kept.heldBytes).toBeLessThanOrEqual(100);
    kept.same('big', bytes('x'.repeat(41)));
    expect(kept.count).toBe(3);
    expect(kept.heldBytes).toBe(90);
    const kept2 = new KeptBodies(10, 70, 40);
    for (let i = 0; i < 5; i++) kept2.same(`k${i}`, body(i));
    expect(kept2.count).toBe(2); // 30 bytes each: two fit under 70
    expect(kept2.heldBytes).toBe(60);
  });
});
