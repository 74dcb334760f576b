/**
 * Interoperability over HTTP (DESIGN.md "Interoperability"): OData-Version negotiation, fetch by
 * key on every entity set in both key forms, the `$count` path segment, navigation links of
 * selected navigation properties, the context URL of projections and expansions, boolean
 * comparisons and null comparisons, collections as `[]`; every bad input a coded 4xx.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../src/engine.js';
import type { Handler } from '../../src/service/handler.js';
import { BASE, call, defaultEngine, DEMO_SOURCES, expectErrorShape, login, makeHandler, q, type Call } from './helpers.js';

const DATA = '/v1/listings/data';
const ROOT = `${BASE}${DATA}/`;
let engine: Engine;
let handler: Handler;
let demo: string;
let partner: string;

beforeAll(async () => {
  engine = await defaultEngine();
  ({ handler } = await makeHandler());
  demo = await login(handler, 'demo');
  partner = await login(handler, 'partner');
});

const get = (path: string, token = demo, headers: Record<string, string> = {}): Promise<Call> => call(handler, `${DATA}/${path}`, { token, headers });

/** A coded 400/404 whose error object is well formed, under a 4.0 response version. */
function expectError40(c: Call, status: number, code: string): void {
  expect(c.status, c.text).toBe(status);
  expect(c.headers.get('odata-version')).toBe('4.0');
  expect(c.json.error.code).toBe(code);
  expect(typeof c.json.error.message).toBe('string');
}

/** A key of the resource whose listing is only in the demo account's sources. */
function demoOnlyKey(resource: 'Property' | 'Media' | 'OpenHouse'): string {
  const keyName = { Property: 'ListingKey', Media: 'MediaKey', OpenHouse: 'OpenHouseKey' }[resource];
  const listing = engine.query(
    'Property',
    "$filter=OriginatingSystemName eq 'NWMLS'&$select=ListingKey&$expand=Media($top=1),OpenHouse($top=1)&$top=200",
  ).value;
  for (const r of listing) {
    if (resource === 'Property') return r.ListingKey as string;
    const children = r[resource] as Array<Record<string, unknown>>;
    if (children.length > 0) return children[0][keyName] as string;
  }
  throw new Error(`no ${resource} of NWMLS`);
}

describe('OData-Version negotiation', () => {
  it('answers 4.01 by default and to MaxVersion 4.01 or above; 4.0 to MaxVersion 4.0, errors and $metadata included', async () => {
    const path = `Property?${q({ $select: 'ListingKey', $top: 1 })}`;
    expect((await get(path)).headers.get('odata-version')).toBe('4.01');
    for (const max of ['4.01', '4.02', '5.0']) expect((await get(path, demo, { 'OData-MaxVersion': max })).headers.get('odata-version'), max).toBe('4.01');
    const c = await get(path, demo, { 'OData-MaxVersion': '4.0' });
    expect(c.status).toBe(200);
    expect(c.headers.get('odata-version')).toBe('4.0');
    expectError40(await get("Property('nope')", demo, { 'OData-MaxVersion': '4.0' }), 404, 'EntityNotFound');
    expectError40(await get('Property?$filter=Nope eq 1', demo, { 'OData-MaxVersion': '4.0' }), 400, 'UnknownField');
    expectError40(await call(handler, `${DATA}/Property`, { headers: { 'OData-MaxVersion': '4.0' } }), 401, 'MissingToken');
    const meta = await get('$metadata', demo, { 'OData-MaxVersion': '4.0' });
    expect(meta.headers.get('odata-version')).toBe('4.0');
    expect(meta.text).toContain('Version="4.0"');
    expect((await get('$metadata')).text).toContain('Version="4.01"');
    const count = await get('Property/$count', demo, { 'OData-MaxVersion': '4.0', 'OData-Version': '4.0' });
    expect(count.headers.get('odata-version')).toBe('4.0');
  });

  it('a 4.0 response lists only expansions with a nested $select in the context URL; 4.01 lists every one', async () => {
    const path = `Property?${q({ $select: 'ListingKey', $expand: 'Media($select=MediaKey;$top=1),OpenHouse', $top: 1 })}`;
    expect((await get(path)).json['@odata.context']).toBe(`${ROOT}$metadata#Property(ListingKey,Media(MediaKey),OpenHouse())`);
    expect((await get(path, demo, { 'OData-MaxVersion': '4.0' })).json['@odata.context']).toBe(`${ROOT}$metadata#Property(ListingKey,Media(MediaKey))`);
    const key = demoOnlyKey('Property');
    const one = `Property('${key}')?${q({ $expand: 'OpenHouse' })}`;
    expect((await get(one)).json['@odata.context']).toBe(`${ROOT}$metadata#Property(OpenHouse())/$entity`);
    expect((await get(one, demo, { 'OData-MaxVersion': '4.0' })).json['@odata.context']).toBe(`${ROOT}$metadata#Property/$entity`);
  });

  it('refuses a MaxVersion below 4.0, a request version above 4.01, and values that are not versions: 400 UnsupportedODataVersion', async () => {
    const cases: Array<Record<string, string>> = [
      { 'OData-MaxVersion': '3.0' },
      { 'OData-MaxVersion': '2.0' },
      { 'OData-MaxVersion': 'four' },
      { 'OData-Version': '4.02' },
      { 'OData-Version': '5.0' },
      { 'OData-Version': '3.0' },
      { 'OData-Version': '4' },
      { 'OData-MaxVersion': '4.0', 'OData-Version': '4.1' },
    ];
    for (const headers of cases) {
      const c = await get('Property?$top=1', demo, headers);
      expect(c.status, JSON.stringify(headers)).toBe(400);
      expect(c.json.error.code).toBe('UnsupportedODataVersion');
      expect(c.json.error.message).toMatch(/OData-(Max)?Version/);
    }
    const low = await get('Property?$top=1', demo, { 'OData-MaxVersion': '3.0' });
    expect(low.headers.get('odata-version')).toBe('4.0');
    expect(low.json.error.message).toContain('below 4.0');
    // a request written in 4.0 or 4.01 is fine
    for (const v of ['4.0', '4.01']) expect((await get('Property?$top=1', demo, { 'OData-Version': v })).status).toBe(200);
  });
});

describe('fetch by key on every entity set', () => {
  it('Property, Media and OpenHouse answer both key forms with the same record and an entity context', async () => {
    for (const [resource, keyName] of [
      ['Property', 'ListingKey'],
      ['Media', 'MediaKey'],
      ['OpenHouse', 'OpenHouseKey'],
    ] as const) {
      const key = demoOnlyKey(resource);
      const plain = await get(`${resource}('${key}')`);
      expect(plain.status, plain.text).toBe(200);
      expect(plain.json['@odata.context']).toBe(`${ROOT}$metadata#${resource}/$entity`);
      expect(plain.json[keyName]).toBe(key);
      const { '@odata.context': _context, ...record } = plain.json as Record<string, unknown>;
      expect(record).toEqual(engine.entity(resource, key, '', { sources: DEMO_SOURCES }));
      const named = await get(`${resource}(${keyName}='${key}')`);
      expect(named.text).toBe(plain.text);
      const projected = await get(`${resource}(${keyName}='${key}')?$select=${keyName}`);
      expect(projected.json).toEqual({ '@odata.context': `${ROOT}$metadata#${resource}(${keyName})/$entity`, [keyName]: key });
      // another account's record is exactly as absent as a missing one
      const hidden = await get(`${resource}('${key}')`, partner);
      const missing = await get(`${resource}('${key}-missing')`, partner);
      expectErrorShape(hidden, 404, 'EntityNotFound');
      expectErrorShape(missing, 404, 'EntityNotFound');
      expect(hidden.json.error.message).toBe(missing.json.error.message.replace(`${key}-missing`, key));
    }
  });

  it('a wrong key name is UnknownKeyProperty, bad key syntax InvalidKey, options that do not apply are 400s', async () => {
    const key = demoOnlyKey('Media');
    for (const bad of [`Media(ListingKey='${key}')`, `Property(MediaKey='x')`, `OpenHouse(Key='x')`]) {
      const c = await get(bad);
      expectErrorShape(c, 400, 'UnknownKeyProperty');
      expect(c.json.error.message).toMatch(/key is \w+Key/);
    }
    for (const bad of [`Media(${key})`, "Media('a'b')", 'OpenHouse()', "Media(MediaKey='x'", 'OpenHouse(OpenHouseKey=x)']) {
      const c = await get(bad);
      expect(c.status, bad).toBeGreaterThanOrEqual(400);
      expect(c.status, bad).toBeLessThan(500);
      expect(['InvalidKey', 'NotFound'], bad).toContain(c.json.error.code);
    }
    expectErrorShape(await get(`Media('${key}')?$top=1`), 400, 'QueryOptionNotAllowed');
    expectErrorShape(await get(`Media('${key}')?$expand=Media`), 400, 'UnknownExpand');
    expectErrorShape(await get(`Media('${key}')?$select=Nope`), 400, 'UnknownField');
    expectErrorShape(await call(handler, `${DATA}/Media('${key}')`, { token: demo, method: 'DELETE' }), 405, 'MethodNotAllowed');
  });
});

describe('the $count path segment', () => {
  it('answers the visible count as text/plain, with and without $filter, for every collection', async () => {
    for (const resource of ['Property', 'Media', 'OpenHouse'] as const) {
      for (const filter of [
        undefined,
        resource === 'Property' ? 'ListPrice gt 300000' : resource === 'Media' ? "MediaCategory eq 'Photo'" : 'OpenHouseDate ne null',
      ]) {
        const path = `${resource}/$count${filter ? `?${q({ $filter: filter })}` : ''}`;
        for (const [token, sources] of [
          [demo, DEMO_SOURCES],
          [partner, ['HAR', 'MRED', 'NorthstarMLS', 'Stellar', 'BrightMLS']],
        ] as const) {
          const c = await get(path, token);
          expect(c.status, c.text).toBe(200);
          expect(c.headers.get('content-type')).toBe('text/plain; charset=utf-8');
          const want = engine.query(resource, `${filter ? `$filter=${filter}&` : ''}$count=true&$top=0`, { sources: [...sources] })['@odata.count']!;
          expect(c.text, path).toBe(String(want));
          expect(want).toBeGreaterThan(0);
        }
      }
    }
    expect((await get('Property/%24count')).text).toBe(String(engine.count('Property', '', { sources: DEMO_SOURCES })));
    const head = await call(handler, `${DATA}/Property/$count`, { token: demo, method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
  });

  it('options other than $filter, bad filters and other methods are coded errors', async () => {
    for (const opt of ['$top=1', '$skip=1', '$count=true', '$orderby=ListPrice', '$select=City', '$expand=Media', '$format=json']) {
      const c = await get(`Property/$count?${opt}`);
      expectErrorShape(c, 400, 'QueryOptionNotAllowed');
      expect(c.json.error.target).toBe(opt.slice(0, opt.indexOf('=')));
    }
    expectErrorShape(await get(`Property/$count?${q({ $filter: 'Nope eq 1' })}`), 400, 'UnknownField');
    expectErrorShape(await get(`Property/$count?${q({ $filter: 'City eq' })}`), 400, 'InvalidSyntax');
    expectErrorShape(await call(handler, `${DATA}/Property/$count`, { token: demo, method: 'POST' }), 405, 'MethodNotAllowed');
    expectErrorShape(await get('PropertyChange/$count'), 404, 'NotFound');
    expectErrorShape(await call(handler, `${DATA}/Property/$count`), 401, 'MissingToken');
  });
});

describe('projections, navigation links and filters over HTTP', () => {
  it('$select of a navigation property gives absolute navigation links; the context lists the selection', async () => {
    const c = await get(`Property?${q({ $select: 'ListingKey,ListPrice,Media', $top: 2 })}`);
    expect(c.status).toBe(200);
    expect(c.json['@odata.context']).toBe(`${ROOT}$metadata#Property(ListingKey,ListPrice,Media)`);
    for (const r of c.json.value as Array<Record<string, unknown>>) {
      expect(Object.keys(r)).toEqual(['ListingKey', 'ListPrice', 'Media@odata.navigationLink']);
      expect(r['Media@odata.navigationLink']).toBe(`${ROOT}Property('${r.ListingKey as string}')/Media`);
    }
    expectErrorShape(await get(`Media?${q({ $select: 'MediaKey,Media' })}`), 400, 'UnknownField');
  });

  it('boolean and null comparisons answer 200 with the rows the library gives; a collection with null is a coded 400', async () => {
    for (const filter of [
      "search.text(KeywordSearchText,'pool') eq true",
      "true eq search.text(KeywordSearchText,'pool')",
      "search.text(KeywordSearchText,'pool') ne true",
      "search.text(KeywordSearchText,'pool') eq null",
      "contains(City,'Sea') eq false",
      "Appliances/any(a: a eq 'Dishwasher') eq true",
      'Location ne null',
      'Location eq null',
    ]) {
      const c = await get(`Property?${q({ $filter: filter, $select: 'ListingKey', $top: 50000, $count: 'true' })}`);
      expect(c.status, `${filter}: ${c.text.slice(0, 200)}`).toBe(200);
      const want = engine.query('Property', `$filter=${filter}&$select=ListingKey&$top=50000&$count=true`, { sources: DEMO_SOURCES });
      expect(c.json['@odata.count'], filter).toBe(want['@odata.count']);
      expect(c.json.value, filter).toEqual(want.value);
    }
    const bad = await get(`Property?${q({ $filter: 'Appliances eq null' })}`);
    expectErrorShape(bad, 400, 'TypeMismatch');
    expect(bad.json.error.message).toMatch(/never null/);
    expect(bad.json.error.target).toBe('$filter');
    expectErrorShape(await get(`Property?${q({ $filter: 'Location lt null' })}`), 400, 'TypeMismatch');
  });

  it('collections come back [] when absent, also under $ignorenulls=true and by key', async () => {
    const c = await get(`Property?${q({ $filter: 'not View/any()', $select: 'ListingKey,View,WaterfrontFeatures', $ignorenulls: 'true', $top: 5 })}`);
    expect(c.json.value.length).toBeGreaterThan(0);
    for (const r of c.json.value as Array<Record<string, unknown>>) expect(r.View).toEqual([]);
    const key = (c.json.value as Array<Record<string, unknown>>)[0].ListingKey as string;
    const partnerOrDemo = (await get(`Property('${key}')?$select=View&$ignorenulls=true`)).json;
    expect(partnerOrDemo.View).toEqual([]);
    expect(c.text).not.toMatch(/"View":null/);
  });
});
