/**
 * Paging while changes land: a client following @odata.nextLink gets a coherent result set, the
 * one its first page's generation holds (its $skiptoken pins it), with that generation's counts,
 * however many changes land between pages. The pin lasts pageSnapshotTtlMs after the last page on
 * the engine's clock (each page refreshes it); past it, or once more than MAX_PINNED_GENERATIONS
 * older generations are pinned (least recently paged first), the link is SkipTokenExpired; a
 * token of the wrong shape is InvalidSkipToken. Through the engine and over HTTP.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { type Engine, MAX_PINNED_GENERATIONS, PAGE_SNAPSHOT_TTL_MS, type QueryOptions, type QueryResult } from '../../src/engine.js';
import { createHandler } from '../../src/service/handler.js';
import { queryErrorOf } from '../odata/helpers.js';
import { BASE, call, expectErrorShape, login, quickAccounts, TestClock } from '../service/helpers.js';
import { dataSetOf, generated, keysOf, NOW, nextQuery, openEngine, pageThrough, renamed, type DataSet, type Rec } from './helpers.js';

const LISTINGS = generated(300, 'paging', { mediaPerListing: 2 });
const DATA: DataSet = dataSetOf(LISTINGS);
const EXTRA = generated(40, 'paging', { from: 300, mediaPerListing: 2 });
const MINUTE = 60_000;

/** The engine's clock, moved by hand. */
let now = NOW;
const clock = (): number => now;

/**
 * The n-th change between pages: listings re-priced, moved to another city and re-sourced (some
 * already paged, some not yet), listings added between existing keys with their Media, listings
 * removed (with their children), a Media re-ordered and one removed.
 */
function churn(engine: Engine, n: number): Promise<unknown> {
  const live = engine.keys('Property');
  const at = (i: number): string => live[(n * 37 + i * 53) % live.length];
  const current = (key: string): Rec => ({ ...engine.query('Property', `$filter=ListingKey eq '${key}'&$select=${DATA_FIELDS}`).value[0] });
  const repriced = [0, 1, 2, 3, 4].map((i) => ({
    ...plain(current(at(i))),
    ListPrice: 1000 * (n + 1) + i,
    City: `Churnville ${n}`,
    OriginatingSystemName: i % 2 ? 'HAR' : 'NWMLS',
  }));
  const added = [0, 1].map((i) => renamed(EXTRA[(n * 2 + i) % EXTRA.length], `${at(10 + i)}N${n}`));
  const media = engine.keys('Media');
  return engine.apply([
    { resource: 'Property', upsert: [...repriced, ...added.map((l) => l.property)] },
    { resource: 'Media', upsert: added.flatMap((l) => l.media) },
    { resource: 'Property', remove: [at(20), at(21)] },
    { resource: 'Media', remove: [media[(n * 11) % media.length]] },
  ]);
}
/** The stored fields (a record read back and upserted again). */
const DATA_FIELDS = [...new Set(LISTINGS.flatMap((l) => Object.keys(l.property)))].join(',');
const plain = (r: Rec): Rec => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== null));

/**
 * Pages through `query` with a change landing before every following page; the pages together
 * equal the whole answer the first page's generation gave (taken just before it), every count
 * included. Returns the pages.
 */
async function expectCoherent(engine: Engine, query: string, options: QueryOptions = {}): Promise<QueryResult[]> {
  const hasTop = /(^|&)\$top=/.test(query);
  const whole = engine.query('Property', hasTop ? query : `${query}&$top=50000`, { sources: options.sources });
  expect(whole['@odata.nextLink'], query).toBeUndefined();
  const generation = engine.generation;
  let changes = 0;
  const { pages } = await pageThrough(engine, 'Property', query, options, (page) => churn(engine, generation * 100 + page).then(() => changes++));
  expect(pages.length, query).toBeGreaterThan(2);
  expect(changes, query).toBe(pages.length - 1);
  expect(
    pages.flatMap((p) => p.value),
    query,
  ).toEqual(whole.value);
  if (/\$count=true/.test(query)) for (const p of pages) expect(p['@odata.count'], query).toBe(whole['@odata.count']);
  // the changes did change the answer: a first page now reads the newest generation
  const fresh = engine.query('Property', hasTop ? query : `${query}&$top=50000`, { sources: options.sources });
  expect(JSON.stringify(fresh.value), query).not.toBe(JSON.stringify(whole.value));
  return pages;
}

describe("a client following nextLinks while changes land gets the first page's generation, whole", () => {
  let engine: Engine;
  beforeAll(async () => {
    now = NOW;
    engine = await openEngine(DATA, { now: clock });
  });

  it.each([
    ['key order', '$select=ListingKey,ListPrice,City&$count=true', 40],
    ['price descending', '$orderby=ListPrice desc&$select=ListingKey,ListPrice,City,OriginatingSystemName&$count=true', 25],
    ['two keys', '$orderby=City,ListPrice desc&$select=ListingKey,City,ListPrice&$count=true', 30],
    [
      'a filter and a walk',
      "$filter=StandardStatus eq 'Active' or ListPrice lt 500000&$orderby=ModificationTimestamp desc&$select=ListingKey,ModificationTimestamp&$count=true",
      20,
    ],
    ['relevance', "$filter=search.text(KeywordSearchText,'pool granite',1)&$orderby=relevance desc&$select=ListingKey&$count=true", 15],
    [
      'geo and DaysOnMarket',
      "$filter=geo.distance(Location, geography'POINT(-95.3698 29.7604)') le 60000 or DaysOnMarket gt 100&$orderby=DaysOnMarket desc&$select=ListingKey,DaysOnMarket&$count=true",
      10,
    ],
    [
      'expanded children',
      '$orderby=ListPrice&$select=ListingKey,ListPrice&$expand=Media($select=MediaKey,Order),OpenHouse($select=OpenHouseKey)&$count=true',
      50,
    ],
    ['a $top over several pages', '$orderby=ListPrice desc&$select=ListingKey,ListPrice&$top=95&$count=true', 20],
  ])('%s', async (_, query, pageSize) => {
    await expectCoherent(engine, query, { maxPageSize: pageSize });
  });

  it('for a caller limited to some sources (while listings move between sources)', async () => {
    await expectCoherent(engine, '$orderby=ListPrice desc&$select=ListingKey,ListPrice,OriginatingSystemName&$count=true', {
      maxPageSize: 20,
      sources: ['HAR', 'NWMLS', 'CRMLS'],
    });
  });

  it('$apply groups, paged', async () => {
    const query = '$apply=groupby((City),aggregate($count as n,ListPrice with max as top))';
    const whole = engine.query('Property', `${query}&$top=1000`);
    const { pages } = await pageThrough(engine, 'Property', query, { maxPageSize: 5 }, (page) => churn(engine, 5000 + page));
    expect(pages.length).toBeGreaterThan(2);
    expect(pages.flatMap((p) => p.value)).toEqual(whole.value);
  });

  it('Media and OpenHouse pages too', async () => {
    for (const [resource, query] of [
      ['Media', '$orderby=Order desc,MediaKey&$count=true'],
      ['OpenHouse', '$orderby=OpenHouseStartTime&$count=true'],
    ] as const) {
      const whole = engine.query(resource, `${query}&$top=20000`);
      const { pages } = await pageThrough(engine, resource, query, { maxPageSize: resource === 'Media' ? 100 : 5 }, (page) => churn(engine, 6000 + page));
      expect(pages.length, resource).toBeGreaterThan(2);
      expect(
        pages.flatMap((p) => p.value),
        resource,
      ).toEqual(whole.value);
      for (const p of pages) expect(p['@odata.count'], resource).toBe(whole['@odata.count']);
    }
  });

  it('across a compaction between pages', async () => {
    await expectCoherent(engine, '$orderby=ListPrice desc&$select=ListingKey,ListPrice&$count=true', {
      maxPageSize: 60,
    });
    const query = '$orderby=City desc,ListingKey&$select=ListingKey,City&$count=true';
    const whole = engine.query('Property', `${query}&$top=50000`);
    const { pages } = await pageThrough(engine, 'Property', query, { maxPageSize: 70 }, async (page) => {
      await churn(engine, 7000 + page);
      await engine.compact();
    });
    expect(pages.flatMap((p) => p.value)).toEqual(whole.value);
  });
});

describe('how long a pinned generation stays readable', () => {
  const first = (engine: Engine, query = '$orderby=ListPrice&$select=ListingKey'): QueryResult => engine.query('Property', query, { maxPageSize: 10 });
  const follow = (engine: Engine, page: QueryResult): QueryResult => engine.query('Property', nextQuery(page['@odata.nextLink']!), { maxPageSize: 10 });
  const expired = (engine: Engine, page: QueryResult): void => {
    const err = queryErrorOf(() => follow(engine, page));
    expect(err.code).toBe('SkipTokenExpired');
    expect(err.option).toBe('$skiptoken');
  };

  it("the default is 10 minutes after the last page, on the engine's clock", async () => {
    now = NOW;
    const engine = await openEngine(DATA, { now: clock });
    expect(PAGE_SNAPSHOT_TTL_MS).toBe(10 * MINUTE);
    const page = first(engine);
    await churn(engine, 1);
    now += 10 * MINUTE; // exactly the TTL: still kept
    const second = follow(engine, page);
    expect(second.value).toHaveLength(10);
    now += 10 * MINUTE + 1; // past the TTL since the second page
    expired(engine, second);
    // a first page reads the newest generation, as always
    expect(first(engine).value).toHaveLength(10);
  });

  it('pageSnapshotTtlMs sets it; a link last paged longer ago than that when a change lands expires with it', async () => {
    now = NOW;
    const engine = await openEngine(DATA, { now: clock, pageSnapshotTtlMs: 1000 });
    const stale = first(engine);
    now += 1001;
    await churn(engine, 2);
    expired(engine, stale);
    const page = first(engine);
    await churn(engine, 3);
    now += 1000;
    const next = follow(engine, page);
    expect(next.value).toHaveLength(10);
    now += 1001;
    expired(engine, next);
  });

  it('a link on an unchanged engine keeps working, whatever the time', async () => {
    now = NOW;
    const engine = await openEngine(DATA, { now: clock });
    const page = first(engine);
    now += 24 * 60 * MINUTE;
    expect(keysOf(follow(engine, page))).toEqual(keysOf(engine.query('Property', '$orderby=ListPrice&$select=ListingKey&$skip=10&$top=10')));
  });

  it('following a link refreshes the pin: a slow client paging every TTL/2 keeps going while changes land', async () => {
    now = NOW;
    const engine = await openEngine(DATA, { now: clock });
    const query = '$orderby=ListPrice&$select=ListingKey,ListPrice&$count=true';
    const whole = engine.query('Property', `${query}&$top=50000`);
    const { pages } = await pageThrough(engine, 'Property', query, { maxPageSize: 30 }, async (page) => {
      await churn(engine, 8000 + page);
      now += 5 * MINUTE;
    });
    expect(pages.length).toBe(10);
    expect(now - NOW).toBe(45 * MINUTE); // far past one TTL since the first page
    expect(pages.flatMap((p) => p.value)).toEqual(whole.value);
  });

  it(`more than ${MAX_PINNED_GENERATIONS} pinned older generations: the least recently paged expires first`, async () => {
    now = NOW;
    const engine = await openEngine(DATA, { now: clock, compactFraction: false });
    const query = '$orderby=ListPrice&$select=ListingKey,ListPrice';
    // one client per generation, each starting on the newest one, then a change re-pricing a listing
    const clients: QueryResult[] = [];
    const secondPages: Rec[][] = [];
    for (let g = 0; g <= MAX_PINNED_GENERATIONS; g++) {
      now += 1000;
      clients.push(first(engine, query));
      secondPages.push(engine.query('Property', `${query}&$skip=10&$top=10`).value);
      if (g === MAX_PINNED_GENERATIONS) {
        // client 0 pages again just before the change that overflows: client 1 is now the least recently paged
        now += 1000;
        expect(follow(engine, clients[0]).value).toEqual(secondPages[0]);
      }
      await engine.upsert('Property', [{ ...DATA.Property[g], ListPrice: 1 + g }]);
    }
    expect(engine.generation).toBe(MAX_PINNED_GENERATIONS + 1);
    expired(engine, clients[1]);
    // the others read their own generation (the re-priced listings sort first, one more per generation)
    for (let g = 2; g <= MAX_PINNED_GENERATIONS; g++) expect(follow(engine, clients[g]).value, `client ${g}`).toEqual(secondPages[g]);
    expect(secondPages[12]).not.toEqual(secondPages[2]);
  });

  it('a token of the wrong shape is InvalidSkipToken; one this engine does not keep is SkipTokenExpired', async () => {
    now = NOW;
    const engine = await openEngine(DATA, { now: clock });
    const link = nextQuery(first(engine)['@odata.nextLink']!);
    const token = /\$skiptoken=([^&]*)/.exec(link)![1];
    expect(token).toBe(engine.pageToken);
    for (const bad of ['garbage', '', `${token}x`, `${token.split('-')[0]}-`, 'ABCDEF12-0', `${token.split('-')[0]}-1-2`]) {
      const err = queryErrorOf(() => engine.query('Property', link.replace(token, bad)));
      expect(err.code, bad).toBe('InvalidSkipToken');
      expect(err.option, bad).toBe('$skiptoken');
    }
    for (const unknown of [`${token.split('-')[0]}-7`, `00000000-0`]) {
      const err = queryErrorOf(() => engine.query('Property', link.replace(token, unknown)));
      expect(err.code, unknown).toBe('SkipTokenExpired');
      expect(err.option, unknown).toBe('$skiptoken');
    }
  });
});

describe('over HTTP', () => {
  it('a nextLink followed after the pin expired is a 400 SkipTokenExpired; a bad token a 400 InvalidSkipToken', async () => {
    now = NOW;
    const engine = await openEngine(DATA, { now: clock });
    const handler = createHandler({ engine, accounts: quickAccounts(), clock: new TestClock().now, onError: () => undefined });
    const token = await login(handler, 'demo');
    const url = `${BASE}/v1/listings/data/Property?$orderby=ListPrice desc&$select=ListingKey,ListPrice&$count=true`;
    const pages = [await call(handler, url, { token, headers: { prefer: 'odata.maxpagesize=10' } })];
    expect(pages[0].status).toBe(200);
    await churn(engine, 9000);
    const next = await call(handler, pages[0].json['@odata.nextLink'] as string, { token, headers: { prefer: 'odata.maxpagesize=10' } });
    expect(next.status).toBe(200);
    expect(next.json['@odata.count']).toBe(pages[0].json['@odata.count']);
    const seen = [...pages[0].json.value, ...next.json.value].map((r: Rec) => r.ListingKey as string);
    expect(new Set(seen).size).toBe(20);
    now += PAGE_SNAPSHOT_TTL_MS + 1;
    expectErrorShape(await call(handler, next.json['@odata.nextLink'] as string, { token }), 400, 'SkipTokenExpired');
    const bad = (next.json['@odata.nextLink'] as string).replace(/\$skiptoken=[^&]*/, '$skiptoken=nope');
    expectErrorShape(await call(handler, bad, { token }), 400, 'InvalidSkipToken');
  });
});
