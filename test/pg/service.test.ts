/**
 * The HTTP service over the PostgreSQL backend answers as over the in-memory engine: the default
 * data set served both ways (`Engine.open({ postgres, data })` and `Engine.open({ data })`, each
 * behind `createHandler`), the same requests sent to both (collections with every query option,
 * records by key, navigation paths, $count paths, $metadata, the service document, accounts and
 * profiles, auth, errors, admin writes, the explorer page and its explain route), and the same status, headers and bytes back. A nextLink's
 * $skiptoken differs by design (a keyset here, a generation pin in memory), so links are compared
 * without it, and following them on the PostgreSQL service gives the in-memory result.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine, type PostgresEngine } from '../../src/engine.js';
import { hashPassword } from '../../src/generate/dataset.js';
import { createHandler, type Handler } from '../../src/service/handler.js';
import { call, login, NOW, q, quickAccounts, readDefaultFile, TestClock, type Call } from '../service/helpers.js';
import { freshDatabase, pgSkip } from './helpers.js';

type Rec = Record<string, unknown>;
/** The data path under /v1. */
const D = '/listings/data';
const now = (): Date => new Date(NOW);

/** demo and partner (not admins) and `admin`, an admin account of demo's sources. */
function accounts(): { accounts: Rec[] } {
  const quick = quickAccounts().accounts;
  const salt = Buffer.from('admin'.padEnd(16, '.'));
  return { accounts: [...quick, { ...quick[0], username: 'admin', password_hash: hashPassword('admin-password', salt, 1024, 8, 1), admin: true }] };
}

/** Headers a client reads; Content-Length only where the body has no $skiptoken. */
const HEADERS = ['content-type', 'odata-version', 'preference-applied', 'allow', 'www-authenticate', 'retry-after', 'cache-control', 'vary'];
const withoutToken = (text: string): string => text.replace(/(?:\$|%24)skiptoken=[^&"]*/g, '$skiptoken=');
const hasToken = (text: string): boolean => /(?:\$|%24)skiptoken=/.test(text);

const listings = readDefaultFile('Property.jsonl');
const demoSources = new Set(quickAccounts().accounts[0].sources);
const mine = listings.filter((l) => demoSources.has(l.OriginatingSystemName as string));
const other = listings.find((l) => !demoSources.has(l.OriginatingSystemName as string))!;
const media = readDefaultFile('Media.jsonl');
const withMedia = mine.find((l) => media.filter((m) => m.ResourceRecordKey === l.ListingKey).length > 3)!;
const KEY = withMedia.ListingKey as string;
const OTHER = other.ListingKey as string;
const MEDIA_KEY = media.find((m) => m.ResourceRecordKey === KEY)!.MediaKey as string;
const withAgent = mine.find((l) => typeof l.ListAgentKey === 'string')!;
const members = readDefaultFile('Member.jsonl');
const offices = readDefaultFile('Office.jsonl');
const MEMBER = members.find((m) => demoSources.has(m.OriginatingSystemName as string))!.MemberKey as string;
const OFFICE = offices.find((o) => demoSources.has(o.OriginatingSystemName as string))!.OfficeKey as string;
const openHouses = readDefaultFile('OpenHouse.jsonl');
const OPEN_HOUSE = openHouses.find((o) => mine.some((l) => l.ListingKey === o.ListingKey))!.OpenHouseKey as string;

/** Collection queries of Property (query strings, percent-encoded by `q`). */
const PROPERTY_QUERIES: Array<Record<string, string | number>> = [
  {},
  { $top: 5 },
  { $top: 0, $count: 'true' },
  { $skip: 3, $top: 4, $orderby: 'ListPrice desc' },
  {
    $filter: "City eq 'Seattle' and StandardStatus eq 'Active' and PropertyType eq 'Residential' and ListPrice le 900000",
    $orderby: 'ListPrice asc',
    $select: 'ListingKey,UnparsedAddress,ListPrice,BedroomsTotal',
    $top: 5,
    $count: 'true',
  },
  { $filter: "geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 3000", $select: 'ListingKey,UnparsedAddress,Location', $top: 3 },
  {
    $filter: "geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 10000 and ListPrice gt 400000",
    $orderby: 'ListPrice desc',
    $top: 10,
    $select: 'ListingKey,Location',
    $count: 'true',
  },
  // an error: geo.distance does not order
  { $filter: "geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 10000", $orderby: "geo.distance(Location, geography'POINT(-122.3321 47.6062)')" },
  {
    $filter: "search.text(KeywordSearchText,'granite pool')",
    $orderby: 'relevance desc',
    $top: 2,
    $select: 'ListingKey,City,ListPrice',
    $expand: 'Media($select=MediaKey,MediaURL;$top=2),OpenHouse($select=OpenHouseStartTime),ListAgent($select=MemberFullName,MemberEmail)',
  },
  {
    $filter: "search.text(KeywordSearchText,'view') and ListPrice gt 300000",
    $orderby: 'relevance desc,ListingKey',
    $top: 20,
    $select: 'ListingKey',
    $count: 'true',
  },
  { $filter: "search.text(RawAddressSearchText,'123 main st')", $top: 5, $select: 'ListingKey,UnparsedAddress' },
  { $filter: "PropertyType eq 'Residential'", $apply: 'groupby((City),aggregate($count as Listings,ListPrice with median as MedianListPrice))' },
  { $apply: 'groupby((StandardStatus,PropertyType),aggregate($count as N,ListPrice with p90 as P,ListPrice with avg as A))', $orderby: 'N desc' },
  { $apply: 'aggregate($count as N,ListPrice with max as Top,ListPrice with min as Low,BedroomsTotal with sum as Beds)' },
  { $apply: "filter(City eq 'Seattle')/groupby((BedroomsTotal),aggregate($count as N))" },
  {
    $filter: "contains(tolower(PublicRemarks),'kitchen') or startswith(City,'S')",
    $orderby: 'City,ListPrice desc',
    $top: 25,
    $select: 'ListingKey,City,ListPrice',
  },
  { $filter: "Appliances/any(a: a eq 'Dishwasher')", $select: 'ListingKey,Appliances', $top: 10 },
  { $filter: "Appliances/all(a: a ne 'Refrigerator') and BedroomsTotal in (2,3)", $top: 10, $select: 'ListingKey,BedroomsTotal' },
  { $filter: 'ListPrice div 1000 gt 500 and (BathroomsTotalInteger add 1) mul 2 ge 6', $top: 10, $select: 'ListingKey,ListPrice' },
  {
    $filter: 'year(ListingContractDate) eq 2025 and month(ModificationTimestamp) le 5',
    $orderby: 'ModificationTimestamp desc',
    $top: 10,
    $select: 'ListingKey,ModificationTimestamp,ListingContractDate',
  },
  { $filter: 'ModificationTimestamp gt 2025-03-01T00:00:00Z and CloseDate eq null', $top: 10, $select: 'ListingKey' },
  { $filter: 'Location ne null and PoolPrivateYN eq true', $count: 'true', $top: 3 },
  { $filter: 'not (ListPrice gt 500000) or LivingArea eq null', $top: 7, $select: 'ListingKey,ListPrice,LivingArea', $ignorenulls: 'true' },
  { $filter: 'DaysOnMarket gt 30', $orderby: 'DaysOnMarket desc', $top: 5, $select: 'ListingKey,DaysOnMarket' },
  { $select: 'ListingKey,Media', $top: 2 },
  { $expand: 'Media($orderby=Order desc;$top=2;$select=MediaKey,Order),PropertyChange,PreferredMedia', $top: 3, $select: 'ListingKey' },
  { $expand: 'ListAgent,ListOffice,BuyerAgent', $top: 4, $select: 'ListingKey,ListAgentKey' },
  { $expand: 'OpenHouse($filter=OpenHouseStartTime gt 2025-01-01T00:00:00Z;$orderby=OpenHouseStartTime desc)', $filter: "City eq 'Phoenix'", $top: 3 },
  { $orderby: 'BedroomsTotal desc,ListPrice', $skip: 100, $top: 10, $select: 'ListingKey,BedroomsTotal,ListPrice' },
  { $format: 'json', $top: 1 },
];

/** Requests of other paths: [path and query under /v1, headers]. */
const OTHER_REQUESTS: Array<[string, Record<string, string>?]> = [
  ['/account/resources'],
  ['/listings/mls_profiles'],
  ['/listings/data'],
  ['/listings/data/$metadata'],
  ['/listings/data/$metadata', { 'OData-MaxVersion': '4.0' }],
  [`/listings/data/Property('${KEY}')`],
  [`/listings/data/Property(ListingKey='${KEY}')?$select=City,ListPrice,StandardStatus`],
  [`/listings/data/Property('${KEY}')?$expand=Media($top=2),OpenHouse,ListAgent`],
  [`/listings/data/Property('${KEY}')?$expand=Media`, { 'OData-MaxVersion': '4.0' }],
  [`/listings/data/Property('${OTHER}')`],
  [`/listings/data/Property('NoSuchKey')`],
  [`/listings/data/Property('${KEY}')?$top=1`],
  [`/listings/data/Property(Nope='${KEY}')`],
  [`/listings/data/Property(${KEY})`],
  [`/listings/data/Media('${MEDIA_KEY}')`],
  [`/listings/data/Media(MediaKey='${MEDIA_KEY}')?$select=MediaURL`],
  [`/listings/data/Member('${MEMBER}')`],
  [`/listings/data/Office('${OFFICE}')`],
  [`/listings/data/OpenHouse('${OPEN_HOUSE}')`],
  ['/listings/data/EntityEvent(1)'],
  ['/listings/data/EntityEvent(EntityEventSequence=2)'],
  ['/listings/data/EntityEvent(0)'],
  [`/listings/data/Property('${KEY}')/Media?${q({ $filter: "MediaCategory eq 'Photo'", $select: 'MediaKey,Order', $top: 3, $count: 'true' })}`],
  [`/listings/data/Property('${KEY}')/Media?$orderby=Order desc&$skip=1`],
  [`/listings/data/Property('${KEY}')/OpenHouse`],
  [`/listings/data/Property('${KEY}')/PropertyChange?$top=2`],
  [`/listings/data/Property('${KEY}')/PreferredMedia`],
  [`/listings/data/Property('${KEY}')/Media?$apply=groupby((MediaCategory),aggregate($count as N))`],
  [`/listings/data/Property('${withAgent.ListingKey as string}')/ListAgent?$select=MemberFullName`],
  [`/listings/data/Property('${withAgent.ListingKey as string}')/ListOffice`],
  [`/listings/data/Property('${withAgent.ListingKey as string}')/CoBuyerAgent`],
  [`/listings/data/Property('${OTHER}')/Media`],
  [`/listings/data/Property('${OTHER}')/ListAgent`],
  [`/listings/data/Property('${KEY}')/Nope`],
  [`/listings/data/Property('${KEY}')/ListAgent?$top=1`],
  ['/listings/data/Property/$count'],
  [`/listings/data/Property/$count?${q({ $filter: "City eq 'Seattle' and Location ne null" })}`],
  ['/listings/data/Property/$count?$top=1'],
  ['/listings/data/Media/$count'],
  ['/listings/data/OpenHouse/$count'],
  ['/listings/data/Member/$count'],
  ['/listings/data/Office/$count'],
  ['/listings/data/Lookup/$count'],
  ['/listings/data/EntityEvent/$count'],
  [`/listings/data/Media?${q({ $filter: 'ImageWidth ge 1024', $orderby: 'ImageWidth desc,MediaKey', $top: 5, $count: 'true' })}`],
  [`/listings/data/OpenHouse?${q({ $orderby: 'OpenHouseStartTime', $top: 5 })}`],
  [
    `/listings/data/Member?${q({ $filter: "OriginatingSystemName eq 'NWMLS' and MemberStatus eq 'Active'", $orderby: 'MemberLastName,MemberFirstName', $top: 3, $count: 'true', $select: 'MemberFullName,MemberMlsId,OfficeName' })}`,
  ],
  [`/listings/data/Office?${q({ $top: 3, $orderby: 'OfficeName desc' })}`],
  [
    `/listings/data/Lookup?${q({ $filter: "LookupName eq 'StandardStatus'", $orderby: 'LookupValue', $select: 'LookupValue,StandardLookupValue,LegacyODataValue', $top: 3 })}`,
  ],
  [`/listings/data/EntityEvent?${q({ $filter: 'EntityEventSequence gt 2000', $orderby: 'EntityEventSequence', $top: 3 })}`],
  // errors of the query: the same 4xx codes, targets and positions
  [`/listings/data/Property?${q({ $filter: 'City eq' })}`],
  [`/listings/data/Property?${q({ $filter: 'Nope eq 1' })}`],
  [`/listings/data/Property?${q({ $filter: "ListPrice eq 'x'" })}`],
  [`/listings/data/Property?${q({ $top: 1000000 })}`],
  [`/listings/data/Property?${q({ $orderby: 'relevance desc' })}`],
  [`/listings/data/Property?${q({ $filter: "search.text(Nope,'x')" })}`],
  [`/listings/data/Property?${q({ $expand: 'Photos' })}`],
  [`/listings/data/Property?${q({ $apply: 'groupby((Nope))' })}`],
  ['/listings/data/Property?$skiptoken=garbage'],
  ['/listings/data/Property?$format=xml'],
  ['/listings/data/PropertyChange'],
  ['/listings/data/Nope'],
  ['/nothing-here'],
  // paging by Prefer
  [`/listings/data/Property?${q({ $filter: "City eq 'Phoenix'", $select: 'ListingKey' })}`, { Prefer: 'odata.maxpagesize=4' }],
  [`/listings/data/Property?${q({ $orderby: 'ListPrice desc', $select: 'ListingKey,ListPrice', $count: 'true' })}`, { Prefer: 'odata.maxpagesize=50' }],
  [`/listings/data/Property('${KEY}')/Media?$select=MediaKey`, { Prefer: 'odata.maxpagesize=2' }],
  ['/listings/data/Property?$select=ListingKey&$top=10', { 'OData-Version': '5.0' }],
];

/** Collection queries whose nextLinks are followed to the end on both services. */
const PAGED: Array<[string, Record<string, string>]> = [
  [`/listings/data/Property?${q({ $orderby: 'ListPrice desc', $select: 'ListingKey,ListPrice' })}`, { Prefer: 'odata.maxpagesize=97' }],
  [
    `/listings/data/Property?${q({ $filter: "StandardStatus eq 'Active'", $orderby: 'ModificationTimestamp,City desc', $count: 'true' })}`,
    { Prefer: 'odata.maxpagesize=40' },
  ],
  [
    `/listings/data/Property?${q({ $filter: "search.text(KeywordSearchText,'pool')", $orderby: 'relevance desc', $select: 'ListingKey' })}`,
    { Prefer: 'odata.maxpagesize=150' },
  ],
  // prefix and one-edit scores (a join on the listing key), paged by keyset on them, inner and outer
  [
    `/listings/data/Property?${q({ $filter: "search.text(RawAddressSearchText,'main stre')", $orderby: 'relevance desc', $select: 'ListingKey' })}`,
    { Prefer: 'odata.maxpagesize=7' },
  ],
  [
    `/listings/data/Property?${q({ $filter: "search.text(RawAddressSearchText,'washingtn') or BedroomsTotal eq 2", $orderby: 'relevance desc,ListPrice', $select: 'ListingKey' })}`,
    { Prefer: 'odata.maxpagesize=30' },
  ],
  [`/listings/data/Property?${q({ $expand: 'Media($top=1)', $select: 'ListingKey', $top: 120 })}`, { Prefer: 'odata.maxpagesize=33' }],
  [`/listings/data/Media?${q({ $filter: 'Order le 2', $select: 'MediaKey,ResourceRecordKey' })}`, { Prefer: 'odata.maxpagesize=1000' }],
  [`/listings/data/Property('${KEY}')/Media?$select=MediaKey,Order&$orderby=Order`, { Prefer: 'odata.maxpagesize=2' }],
  [`/listings/data/EntityEvent?${q({ $orderby: 'EntityEventSequence desc' })}`, { Prefer: 'odata.maxpagesize=5000' }],
];

describe.skipIf(pgSkip)('the HTTP service over PostgreSQL answers as over memory', () => {
  let pg: PostgresEngine;
  let memory: Handler;
  let postgres: Handler;
  /** Each handler's tokens, by username. */
  const tokens = new Map<Handler, Record<string, string>>();

  beforeAll(async () => {
    pg = await Engine.open({ postgres: { url: await freshDatabase('service') }, data: DEFAULT_DATA_DIR, now });
    const clock = new TestClock();
    const options = { accounts: accounts(), clock: clock.now, onError: (e: unknown) => console.error(e) };
    memory = createHandler({ engine: await Engine.open({ data: DEFAULT_DATA_DIR, now }), ...options });
    postgres = createHandler({ engine: pg, ...options });
    for (const h of [memory, postgres]) tokens.set(h, { demo: await login(h), partner: await login(h, 'partner'), admin: await login(h, 'admin') });
  }, 300_000);
  afterAll(async () => {
    await pg?.close();
  });

  /** The same request to both services, as `user` (none: no token); the answers must be the same. */
  async function same(path: string, init: { user?: string; method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<[Call, Call]> {
    const send = (h: Handler): Promise<Call> =>
      call(h, path.startsWith('http') ? path : `/v1${path}`, { ...init, token: init.user === undefined ? undefined : tokens.get(h)![init.user] });
    const want = await send(memory);
    const got = await send(postgres);
    const what = `${init.method ?? 'GET'} ${path} as ${init.user ?? 'nobody'}`;
    expect(got.status, `${what}: ${got.text.slice(0, 300)}`).toBe(want.status);
    expect(want.status, `${what} is no defect`).not.toBe(500);
    for (const h of HEADERS) expect(got.headers.get(h), `${what}: ${h}`).toBe(want.headers.get(h));
    // every response names its request, each its own; an ETag where memory gives one (of bytes that differ only in a $skiptoken)
    expect(got.headers.get('x-request-id'), what).toMatch(/^[0-9a-f-]{36}$/);
    expect(got.headers.get('etag') === null, `${what}: etag`).toBe(want.headers.get('etag') === null);
    expect(withoutToken(got.text), what).toBe(withoutToken(want.text));
    // HEAD has no body to tell whether a $skiptoken (of another length) is in it
    if (init.method !== 'HEAD' && !hasToken(want.text))
      expect(got.headers.get('content-length'), `${what}: content-length`).toBe(want.headers.get('content-length'));
    return [want, got];
  }

  it('collections of Property with every query option, for each account', async () => {
    for (const query of PROPERTY_QUERIES) {
      for (const user of ['demo', 'partner']) await same(`${D}/Property?${q(query)}`, { user });
    }
  });

  it('records by key, navigation paths, $count paths, the other collections, $metadata, accounts and profiles', async () => {
    for (const [path, headers] of OTHER_REQUESTS) {
      await same(path, { user: 'demo', headers });
      await same(path, { user: 'partner', headers, method: 'HEAD' });
    }
  });

  it('auth and method errors', async () => {
    await same(`${D}/Property`);
    await same(`${D}/Property`, { headers: { authorization: 'Bearer nope' } });
    await same(`${D}/Property('${KEY}')`, { user: 'demo', method: 'DELETE' });
    await same(`${D}/Property/$count`, { user: 'demo', method: 'POST' });
    await same(`${D}/Property`, { user: 'demo', method: 'POST', body: '[]', headers: { 'content-type': 'application/json' } });
    await same(`${D}/Media('${MEDIA_KEY}')`, { user: 'admin', method: 'PUT' });
    await same('/token', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'username=demo&password=wrong' });
  });

  it('the explorer page and the explain route (the plan for the account, the query errors)', async () => {
    await same('/../', { method: 'GET' });
    await same('/../explorer/app.js', { method: 'HEAD' });
    // each backend plans for itself; both speak for the account, without row counts
    for (const user of ['demo', 'partner']) {
      const query = q({ $filter: "City eq 'Seattle'", $orderby: 'ListPrice desc', $top: 5 });
      const c = await call(postgres, `/v1/listings/explain/Property?${query}`, { token: tokens.get(postgres)![user] });
      const m = await call(memory, `/v1/listings/explain/Property?${query}`, { token: tokens.get(memory)![user] });
      expect(c.status).toBe(200);
      const lines = (c.json.plan as string).split('\n');
      expect(lines.slice(0, 2)).toEqual((m.json.plan as string).split('\n').slice(0, 2));
      expect(lines.at(-2)).toBe('page: skip 0, up to 5 rows');
      expect(lines.at(-1)).toMatch(/^backend: PostgreSQL/);
      expect(c.json.plan).not.toMatch(/\d+ rows\)/);
    }
    await same(`/listings/explain/Property?${q({ $filter: 'City eq' })}`, { user: 'demo' });
    await same('/listings/explain/Nope', { user: 'demo' });
    await same('/listings/explain/Property');
  });

  it('following nextLinks on PostgreSQL gives the pages the in-memory service gives, concatenated', async () => {
    for (const [path, headers] of PAGED) {
      const pages = async (h: Handler): Promise<{ rows: unknown[]; count: unknown; pages: number }> => {
        const rows: unknown[] = [];
        let url: string | undefined = `/v1${path}`;
        let count: unknown;
        let n = 0;
        while (url !== undefined) {
          const c = await call(h, url, { token: tokens.get(h)!.demo, headers });
          expect(c.status, `${url}: ${c.text.slice(0, 200)}`).toBe(200);
          if (n === 0) count = c.json['@odata.count'];
          rows.push(...(c.json.value as unknown[]));
          url = c.json['@odata.nextLink'] as string | undefined;
          if (++n > 5000) throw new Error(`${path}: paging does not end`);
        }
        return { rows, count, pages: n };
      };
      const want = await pages(memory);
      const got = await pages(postgres);
      expect(want.pages, path).toBeGreaterThan(1);
      expect(got.pages, path).toBe(want.pages);
      expect(got.count, path).toEqual(want.count);
      expect(JSON.stringify(got.rows), path).toBe(JSON.stringify(want.rows));
    }
  }, 300_000);

  it('admin writes: the same summaries and refusals, then the same reads', async () => {
    const copy = { ...withMedia, ListingKey: 'PG-NEW-1', ListingId: 'PG-NEW-1', ListPrice: 123456 };
    const json = { 'content-type': 'application/json' };
    const written = async (path: string, body: unknown): Promise<void> => {
      const [want, got] = await Promise.all([
        call(memory, `/v1${path}`, { token: tokens.get(memory)!.admin, method: 'POST', headers: json, body: JSON.stringify(body) }),
        call(postgres, `/v1${path}`, { token: tokens.get(postgres)!.admin, method: 'POST', headers: json, body: JSON.stringify(body) }),
      ]);
      expect(got.status, `${path}: ${got.text}`).toBe(want.status);
      if (want.status === 200) {
        // the summary's generation is each backend's own counter
        const { generation: _w, ...w } = want.json;
        const { generation: _g, ...g } = got.json;
        expect(g).toEqual(w);
      } else {
        expect(got.text).toBe(want.text);
      }
    };
    await written(`${D}/Property`, [copy]);
    await written(`${D}/Property`, [{ ...copy, ListingKey: OTHER }]);
    await written(`${D}/Property`, [{ ...copy, ListingKey: 'PG-NEW-2', OriginatingSystemName: 'MRED' }]);
    await written(`${D}/Media`, [{ ...media.find((m) => m.ResourceRecordKey === KEY)!, MediaKey: 'PG-M-1', ResourceRecordKey: 'PG-NEW-1' }]);
    await written(`${D}/$changes`, { operations: [{ resource: 'Property', remove: ['PG-NEW-1', OTHER, 'NoSuchKey'] }] });
    await written(`${D}/$changes`, { operations: [{ resource: 'Property', upsert: [{ ...copy, ListingKey: 'PG-NEW-3', ListPrice: 'cheap' }] }] });
    await written(`${D}/Property`, [{ ...copy, ListingKey: 'PG-NEW-4', City: 'Nowhere Special' }]);
    await same(`${D}/Property('PG-NEW-4')`, { user: 'demo' });
    await same(`${D}/Property('PG-NEW-1')`, { user: 'demo' });
    await same(`${D}/Media('PG-M-1')`, { user: 'demo' });
    await same(`${D}/Property?${q({ $filter: "City eq 'Nowhere Special'", $count: 'true' })}`, { user: 'demo' });
    await same(`${D}/Property?${q({ $filter: "search.text(KeywordSearchText,'nowhere special')", $orderby: 'relevance desc', $select: 'ListingKey' })}`, {
      user: 'demo',
    });
    await same(`${D}/Property/$count`, { user: 'demo' });
    await same(`${D}/$metadata`, { user: 'demo' });
    const del = await Promise.all([memory, postgres].map((h) => call(h, `/v1${D}/Property('PG-NEW-4')`, { token: tokens.get(h)!.admin, method: 'DELETE' })));
    expect(del.map((c) => c.status)).toEqual([204, 204]);
    await same(`${D}/Property('PG-NEW-4')`, { user: 'demo' });
  });
});
