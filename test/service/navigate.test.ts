/**
 * Navigation paths over HTTP (SERVICE.md §2): `GET /v1/listings/data/Property('K')/<Nav>` (and
 * `Property(ListingKey='K')/<Nav>`) returns, over all its pages (absolute nextLinks followed as
 * given), what `$expand=<Nav>` returns on `Property('K')` with the same options; the context URL
 * follows the JSON format; Prefer: odata.maxpagesize applies; an account gets 404 EntityNotFound
 * for a listing of another source exactly as for an unknown key; unknown navigation properties,
 * bad keys, bad options and writes get coded errors; keys with quotes and slashes round-trip.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR } from '../../src/engine.js';
import { createHandler, type Handler } from '../../src/service/handler.js';
import { dataSetOf, generated, openEngine, renamed } from '../live/helpers.js';
import { BASE, call, type Call, DEMO_SOURCES, expectErrorShape, login, makeHandler, PARTNER_SOURCES, q, quickAccounts } from './helpers.js';

type Rec = Record<string, unknown>;
const DATA = `${BASE}/v1/listings/data`;
const NAVS = ['Media', 'OpenHouse', 'PropertyChange', 'PreferredMedia'] as const;

const listings = readFileSync(path.join(DEFAULT_DATA_DIR, 'Property.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l) as Rec);
const demoOnly = listings.filter(
  (r) => DEMO_SOURCES.includes(r.OriginatingSystemName as string) && !PARTNER_SOURCES.includes(r.OriginatingSystemName as string),
);
const lit = (key: string): string => encodeURIComponent(key.replace(/'/g, "''"));

let handler: Handler;
let demo: string;
let partner: string;

beforeAll(async () => {
  ({ handler } = await makeHandler());
  demo = await login(handler, 'demo');
  partner = await login(handler, 'partner');
});

const get = (p: string, token = demo, headers: Record<string, string> = {}): Promise<Call> => call(handler, p, { token, headers });

/** Every page of a path, following the absolute nextLinks as given. */
async function pages(first: string, token = demo, headers: Record<string, string> = {}): Promise<Call[]> {
  const out = [await get(first, token, headers)];
  for (;;) {
    const last = out[out.length - 1];
    expect(last.status, last.text).toBe(200);
    const link = last.json['@odata.nextLink'] as string | undefined;
    if (link === undefined) return out;
    expect(out.length).toBeLessThan(60);
    out.push(await get(link, token, headers));
  }
}

/** The select list a context URL carries for the query's `$select` (OData JSON format: `Media(MediaKey,Order)`). */
const selectListOf = (query: string): string => {
  const m = /\$select=([^&;]*)/.exec(query);
  return m ? `(${decodeURIComponent(m[1])})` : '';
};

describe('GET Property(KEY)/<Nav>', () => {
  const cases: Array<{ nav: (typeof NAVS)[number]; nested: string }> = [
    { nav: 'Media', nested: '' },
    { nav: 'Media', nested: "$filter=MediaCategory eq 'Photo';$orderby=ImageWidth desc,Order;$skip=2;$top=13;$select=MediaKey,ImageWidth,Order" },
    { nav: 'OpenHouse', nested: '$select=OpenHouseStartTime' },
    { nav: 'PropertyChange', nested: "$orderby=FieldName;$filter=FieldName ne 'x'" },
    { nav: 'PreferredMedia', nested: '$select=MediaURL' },
  ];

  it('all pages equal $expand on the listing, in both key forms, with the JSON format’s context URL', async () => {
    let rows = 0;
    for (const listing of demoOnly.filter((_, i) => i % 50 === 0)) {
      const key = listing.ListingKey as string;
      for (const { nav, nested } of cases) {
        const options = nested.split(';').filter(Boolean);
        const query = options.length
          ? `?${options.map((o) => `${o.slice(0, o.indexOf('='))}=${encodeURIComponent(o.slice(o.indexOf('=') + 1))}`).join('&')}`
          : '';
        const entity = await get(`/v1/listings/data/Property('${lit(key)}')?${q({ $select: 'ListingKey', $expand: nested ? `${nav}(${nested})` : nav })}`);
        expect(entity.status, entity.text).toBe(200);
        const want = entity.json[nav] as Rec[];
        for (const form of [`Property('${lit(key)}')`, `Property(ListingKey='${lit(key)}')`]) {
          const got = await pages(`/v1/listings/data/${form}/${nav}${query}`, demo, { prefer: 'odata.maxpagesize=4' });
          expect(
            got.flatMap((c) => c.json.value as Rec[]),
            `${key} ${nav} ${nested}`,
          ).toEqual(want);
          for (const c of got) {
            expect(c.headers.get('preference-applied')).toBe('odata.maxpagesize=4');
            expect(c.headers.get('odata-version')).toBe('4.01');
            expect(c.json['@odata.context']).toBe(
              (nav === 'PropertyChange'
                ? `${DATA}/$metadata#Property('${lit(key)}')/PropertyChange`
                : `${DATA}/$metadata#${nav === 'OpenHouse' ? 'OpenHouse' : 'Media'}`) + selectListOf(nested),
            );
            const next = c.json['@odata.nextLink'] as string | undefined;
            if (next !== undefined) expect(next.startsWith(`${DATA}/Property('${lit(key)}')/${nav}?`), next).toBe(true);
          }
          rows += want.length;
        }
      }
    }
    expect(rows).toBeGreaterThan(100);
  });

  it('$count=true counts the matching children; default pages of 10', async () => {
    let key = '';
    let all: Rec[] = [];
    for (const l of demoOnly) {
      key = l.ListingKey as string;
      all = (await get(`/v1/listings/data/Property('${key}')?${q({ $select: 'ListingKey', $expand: 'Media($select=MediaKey)' })}`)).json.Media as Rec[];
      if (all.length > 10) break;
    }
    expect(all.length).toBeGreaterThan(10);
    const c = await get(`/v1/listings/data/Property('${key}')/Media?${q({ $count: 'true', $select: 'MediaKey' })}`);
    expect(c.json['@odata.count']).toBe(all.length);
    expect(c.json.value).toEqual(all.slice(0, 10));
    expect(c.json['@odata.nextLink']).toMatch(
      /^http:\/\/service\.test\/v1\/listings\/data\/Property\('P\d+'\)\/Media\?\$select=MediaKey&\$skip=10&\$skiptoken=/,
    );
    expect(Object.keys(c.json)).toEqual(['@odata.context', '@odata.count', 'value', '@odata.nextLink']);
  });

  it('404 EntityNotFound for another source’s listing, exactly as for an unknown key', async () => {
    const key = demoOnly[0].ListingKey as string;
    for (const nav of NAVS) {
      expect((await get(`/v1/listings/data/Property('${key}')/${nav}`)).status).toBe(200);
      const hidden = await get(`/v1/listings/data/Property('${key}')/${nav}?$count=true`, partner);
      const unknown = await get(`/v1/listings/data/Property('NO-SUCH')/${nav}?$count=true`, partner);
      expectErrorShape(hidden, 404, 'EntityNotFound');
      expectErrorShape(unknown, 404, 'EntityNotFound');
      expect(hidden.text.replace(key, 'K')).toBe(unknown.text.replace('NO-SUCH', 'K'));
    }
  });

  it('coded errors: unknown navigation property, bad key, bad options, writes, before auth 401', async () => {
    const key = demoOnly[0].ListingKey as string;
    const p = `/v1/listings/data/Property('${key}')`;
    expectErrorShape(await get(`${p}/Photos`), 404, 'UnknownNavigationProperty');
    expectErrorShape(await get(`${p}/ListPrice`), 404, 'UnknownNavigationProperty');
    expectErrorShape(await get(`${p}/`), 404, 'UnknownNavigationProperty');
    expectErrorShape(await get(`${p}/Media/Extra`), 404, 'NotFound');
    expectErrorShape(await get(`/v1/listings/data/Media('M')/Media`), 404, 'NotFound');
    expectErrorShape(await get(`/v1/listings/data/Property(${key})/Media`), 400, 'InvalidKey');
    expectErrorShape(await get(`/v1/listings/data/Property(MediaKey='${key}')/Media`), 400, 'UnknownKeyProperty');
    const bad: Array<[string, string, string]> = [
      [q({ $filter: 'ListPrice gt 5' }), 'UnknownField', '$filter'],
      [q({ $top: 25001 }), 'TopTooLarge', '$top'],
      [q({ $expand: 'Media' }), 'UnknownExpand', '$expand'],
      [q({ $orderby: 'relevance desc' }), 'RelevanceWithoutSearch', '$orderby'],
      [q({ $format: 'xml' }), 'UnsupportedFormat', '$format'],
      ['$top=1&$top=2', 'RepeatedQueryOption', '$top'],
      ['$nope=1', 'UnknownQueryOption', '$nope'],
    ];
    for (const [query, code, target] of bad) {
      const c = await get(`${p}/Media?${query}`);
      expectErrorShape(c, 400, code);
      expect(c.json.error.target).toBe(target);
    }
    const post = await call(handler, `${p}/Media`, { token: demo, method: 'POST', body: '[]' });
    expectErrorShape(post, 405, 'MethodNotAllowed');
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expectErrorShape(await call(handler, `${p}/Media`), 401, 'MissingToken');
    const head = await call(handler, `${p}/Media`, { token: demo, method: 'HEAD' });
    expect(head.status).toBe(200);
  });
});

describe('keys with quotes, slashes and spaces', () => {
  it('the path, the context URL and the nextLink round-trip', async () => {
    const base = generated(3, 'navigate-keys').find((l) => l.media.length > 3)!;
    const key = "Q'1)/x y";
    const l = renamed(base, key);
    l.property.OriginatingSystemName = 'CRMLS';
    const engine = await openEngine(dataSetOf([l]));
    const h = createHandler({ engine, accounts: quickAccounts(), onError: () => undefined });
    const token = await login(h, 'demo');
    const first = await call(h, `/v1/listings/data/Property('${lit(key)}')/Media?$select=MediaKey`, { token, headers: { prefer: 'odata.maxpagesize=2' } });
    expect(first.status, first.text).toBe(200);
    expect(first.json.value).toEqual([{ MediaKey: `${key}-M1` }, { MediaKey: `${key}-M2` }]);
    const next = first.json['@odata.nextLink'] as string;
    expect(next.startsWith(`${DATA}/Property('Q''1)%2Fx%20y')/Media?`)).toBe(true);
    const second = await call(h, next, { token, headers: { prefer: 'odata.maxpagesize=2' } });
    expect(second.json.value).toEqual([{ MediaKey: `${key}-M3` }, { MediaKey: `${key}-M4` }]);
    const changes = await call(h, `/v1/listings/data/Property(ListingKey='${lit(key)}')/PropertyChange`, { token });
    expect(changes.json['@odata.context']).toBe(`${DATA}/$metadata#Property('Q''1)%2Fx%20y')/PropertyChange`);
  });
});
