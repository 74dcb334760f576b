/**
 * The result cache (src/exec/result-cache.ts) is exact: an engine with it on answers every query
 * as an engine with it off does, asked again and again, under a moving clock and across live
 * upserts and removals; callers of different sources asking the same text each see only their
 * own rows; what a caller does to an answer does not change the next one; small bounds evict and
 * stay exact; and with the cache off nothing is kept.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine, type EngineOpenOptions, type QueryOptions, type QueryResult } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import type { ResultCache } from '../../src/exec/execute.js';
import { Rng } from '../../src/generate/prng.js';
import { generatedFilter } from './filter-cases.js';

type Rec = Record<string, unknown>;
const DAY = 86_400_000;
const linesOf = (file: string): string[] => readFileSync(path.join(DEFAULT_DATA_DIR, file), 'utf8').trim().split('\n');
const records = linesOf('Property.jsonl').map((l) => JSON.parse(l) as Rec);
/** Listings with Media (navigation paths). */
const withMedia = [...new Set(linesOf('Media.jsonl').map((l) => /"ResourceRecordKey":"([^"]+)"/.exec(l)![1]))].slice(0, 40);

/** One clock for every engine of a test: moved between asks, so an answer that read it cannot be kept. */
let clockMs = Date.parse('2025-06-01T00:00:00Z');
const now = (): Date => new Date(clockMs);
const open = (resultCache?: EngineOpenOptions['resultCache']): Promise<Engine> =>
  Engine.open({ now, compactFraction: false, ...(resultCache === undefined ? {} : { resultCache }) });
const cacheOf = (engine: Engine): ResultCache | null => (engine as unknown as { results: ResultCache | null }).results;

/** An answer with the nextLink's $skiptoken (which names the engine instance) made comparable, or the QueryError's code. */
function answer(ask: () => QueryResult | number): unknown {
  try {
    return JSON.parse(JSON.stringify(ask()).replace(/\$skiptoken=[^&"]*/g, '$skiptoken=T'));
  } catch (err) {
    if (!(err instanceof QueryError)) throw err;
    return { code: err.code };
  }
}

/** A request of any kind the engine answers: a collection, a navigation path, a count. */
interface Ask {
  readonly kind: 'query' | 'navigate' | 'count';
  readonly text: string;
  readonly key?: string;
  readonly options: QueryOptions;
}

function run(engine: Engine, a: Ask): unknown {
  switch (a.kind) {
    case 'query':
      return answer(() => engine.query('Property', a.text, a.options));
    case 'navigate':
      return answer(() => engine.navigate('Property', a.key!, 'Media', a.text, a.options));
    case 'count':
      return answer(() => engine.count('Property', a.text, a.options));
  }
}

const SOURCES: Array<readonly string[] | undefined> = [undefined, ['HAR'], ['CRMLS', 'NWMLS'], ['NWMLS', 'CRMLS', 'NWMLS'], Object.freeze(['ARMLS']), []];

const collection: fc.Arbitrary<Ask> = fc
  .record({
    filter: fc.option(generatedFilter(records), { nil: undefined }),
    order: fc.constantFrom(undefined, 'ListPrice desc', 'ModificationTimestamp', 'DaysOnMarket desc', 'City,ListPrice desc', 'relevance desc'),
    top: fc.option(fc.integer({ min: 0, max: 30 }), { nil: undefined }),
    skip: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
    count: fc.boolean(),
    select: fc.constantFrom(undefined, 'ListingKey', 'ListingKey,ListPrice,DaysOnMarket', 'ListingKey&$expand=Media($select=MediaKey;$top=2)'),
    sources: fc.constantFrom(...SOURCES),
    maxPageSize: fc.option(fc.integer({ min: 1, max: 12 }), { nil: undefined }),
  })
  .map((q): Ask => {
    const parts = [q.filter && `$filter=${q.filter}`, q.order && `$orderby=${q.order}`, q.top !== undefined && `$top=${q.top}`, q.skip && `$skip=${q.skip}`];
    parts.push(q.count && '$count=true', q.select && `$select=${q.select}`);
    return { kind: 'query', text: parts.filter(Boolean).join('&'), options: { sources: q.sources, maxPageSize: q.maxPageSize } };
  });

const APPLY = [
  "$apply=filter(StandardStatus eq 'Active')/groupby((City),aggregate($count as N,ListPrice with average as AvgPrice))",
  '$apply=groupby((OriginatingSystemName,StandardStatus),aggregate(ListPrice with max as Top))&$orderby=Top desc&$top=5&$count=true',
  '$apply=groupby((StandardStatus),aggregate(DaysOnMarket with average as Days))',
  '$apply=filter(DaysOnMarket lt 60)/aggregate($count as N)',
  "$apply=filter(search.text(KeywordSearchText,'pool'))/groupby((City),aggregate($count as N))&$orderby=N desc,City&$top=4",
];

const other: fc.Arbitrary<Ask> = fc.oneof(
  fc
    .record({ text: fc.constantFrom(...APPLY), sources: fc.constantFrom(...SOURCES) })
    .map(({ text, sources }): Ask => ({ kind: 'query', text, options: { sources } })),
  fc
    .record({
      key: fc.constantFrom(...withMedia),
      text: fc.constantFrom('$top=3&$count=true', "$filter=MediaCategory eq 'Photo'&$orderby=Order desc&$top=2", '$select=MediaKey&$skip=1&$top=4'),
      sources: fc.constantFrom(...SOURCES),
    })
    .map(({ key, text, sources }): Ask => ({ kind: 'navigate', key, text, options: { sources } })),
  fc
    .record({ filter: generatedFilter(records), sources: fc.constantFrom(...SOURCES) })
    .map(({ filter, sources }): Ask => ({ kind: 'count', text: `$filter=${filter}`, options: { sources } })),
);

/** Some listings replaced (a new price, status, remarks), some added, some removed: the same change to each engine. */
async function change(engines: readonly Engine[], rng: Rng, step: number): Promise<void> {
  const upserts: Rec[] = [];
  for (let i = 0; i < 30; i++) {
    const r = { ...rng.pick(records) };
    r.ListPrice = rng.int(50, 3000) * 1000;
    r.StandardStatus = rng.pick(['Active', 'Pending', 'Closed']);
    r.PublicRemarks = `${String(r.PublicRemarks ?? '')} ${rng.pick(['pool', 'granite', 'spa view'])}`;
    upserts.push(r);
  }
  for (let i = 0; i < 10; i++) upserts.push({ ...rng.pick(records), ListingKey: `Z${step}-${i}`, ListingId: `Z${step}-${i}` });
  const removed = Array.from({ length: 15 }, () => rng.pick(records).ListingKey as string);
  for (const e of engines) {
    await e.upsert('Property', upserts);
    await e.remove('Property', removed);
  }
}

describe('result cache', () => {
  let cached: Engine;
  let plain: Engine;
  beforeAll(async () => {
    [cached, plain] = await Promise.all([open(), open(false)]);
    expect(cacheOf(cached)).not.toBeNull();
    expect(cacheOf(plain)).toBeNull();
  });

  it('answers generated queries as an engine without it, asked again under a moving clock and across upserts and removals', async () => {
    const rng = new Rng('result-cache');
    const hitsBefore = cacheOf(cached)!.hits;
    for (let step = 0; step < 4; step++) {
      fc.assert(
        fc.property(fc.oneof({ arbitrary: collection, weight: 3 }, { arbitrary: other, weight: 1 }), (a) => {
          const label = `${a.kind} ${a.key ?? ''} ${a.text} ${JSON.stringify(a.options)}`;
          const want = run(plain, a);
          expect(run(cached, a), label).toEqual(want);
          expect(run(cached, a), label).toEqual(want);
          // a day later: DaysOnMarket and now() give other answers, which must not come from the cache
          clockMs += DAY;
          expect(run(cached, a), label).toEqual(run(plain, a));
        }),
        { seed: 1800 + step, numRuns: 60 },
      );
      await change([cached, plain], rng, step);
      expect(cached.generation).toBe(plain.generation);
    }
    // the repeated asks were answered from the cache (the test is not vacuous)
    expect(cacheOf(cached)!.hits - hitsBefore).toBeGreaterThan(200);
  });

  it('never returns the rows of an older generation, and paging an older one stays exact', async () => {
    const q = '$orderby=ListPrice desc&$top=5&$select=ListingKey,ListPrice&$count=true';
    const before = cached.query('Property', q);
    cached.query('Property', q);
    const paged = '$orderby=ListingKey&$select=ListingKey';
    const page1 = { cached: cached.query('Property', paged, { maxPageSize: 7 }), plain: plain.query('Property', paged, { maxPageSize: 7 }) };
    const top = before.value[0].ListingKey as string;
    const raised: Rec = { ...records.find((r) => r.ListingKey !== top)!, ListPrice: 99_000_000 };
    for (const e of [cached, plain]) await e.upsert('Property', [raised]);
    const after = cached.query('Property', q);
    expect(after.value[0]).toEqual({ ListingKey: raised.ListingKey, ListPrice: 99_000_000 });
    expect(answer(() => after)).toEqual(answer(() => plain.query('Property', q)));
    for (const e of [cached, plain]) await e.remove('Property', [raised.ListingKey as string]);
    expect(cached.query('Property', q).value.map((r) => r.ListingKey)).not.toContain(raised.ListingKey);
    expect(answer(() => cached.query('Property', q))).toEqual(answer(() => plain.query('Property', q)));
    // the next pages of a listing read before the changes: each engine follows its own nextLink
    const next = (r: QueryResult): string => decodeURIComponent(r['@odata.nextLink']!.split('?')[1]);
    for (let i = 0; i < 2; i++) {
      const got = answer(() => cached.query('Property', next(page1.cached), { maxPageSize: 7 }));
      expect(got).toEqual(answer(() => plain.query('Property', next(page1.plain), { maxPageSize: 7 })));
      expect(got).not.toHaveProperty('code');
    }
    // entries of superseded generations are dropped once the newer one is read
    const results = cacheOf(cached)!;
    cached.query('Property', q);
    const entries = results.size;
    for (const e of [cached, plain]) await e.upsert('Property', [records[5]]);
    cached.query('Property', q);
    expect(results.size).toBe(1);
    expect(entries).toBeGreaterThanOrEqual(1);
  });

  it('keeps the rows of callers with different sources apart: each sees only its own, in either order', () => {
    const texts = [
      '$select=ListingKey,OriginatingSystemName&$top=40&$count=true',
      "$filter=search.text(KeywordSearchText,'pool granite')&$orderby=relevance desc&$select=ListingKey,OriginatingSystemName&$top=15",
      "$filter=geo.distance(Location, geography'POINT(-95.37 29.76)') le 50000 or geo.distance(Location, geography'POINT(-118.24 34.05)') le 50000&$select=ListingKey,OriginatingSystemName&$top=30",
      "$filter=StandardStatus eq 'Active'&$orderby=ListPrice desc&$select=ListingKey,OriginatingSystemName&$top=25",
    ];
    for (const text of texts) {
      for (const order of [
        ['HAR', 'CRMLS'],
        ['CRMLS', 'HAR'],
      ]) {
        for (const source of order) {
          const got = cached.query('Property', text, { sources: [source] });
          expect(got.value.length, `${source}: ${text}`).toBeGreaterThan(0);
          for (const r of got.value) expect(r.OriginatingSystemName, text).toBe(source);
          expect(answer(() => got)).toEqual(answer(() => plain.query('Property', text, { sources: [source] })));
        }
        expect(answer(() => cached.query('Property', text))).toEqual(answer(() => plain.query('Property', text)));
      }
    }
    const apply = '$apply=groupby((OriginatingSystemName),aggregate($count as N))';
    expect(cached.query('Property', apply, { sources: ['HAR'] }).value.map((r) => r.OriginatingSystemName)).toEqual(['HAR']);
    expect(cached.query('Property', apply, { sources: ['CRMLS'] }).value.map((r) => r.OriginatingSystemName)).toEqual(['CRMLS']);
    const count = "$filter=StandardStatus ne 'Nothing'";
    expect(cached.count('Property', count, { sources: ['HAR'] })).toBe(plain.count('Property', count, { sources: ['HAR'] }));
    expect(cached.count('Property', count, { sources: ['CRMLS'] })).toBe(plain.count('Property', count, { sources: ['CRMLS'] }));
    // a navigation path: the listing's children for a caller of its source, EntityNotFound for another
    const key = withMedia.find((k) => cached.has('Property', k))!;
    const source = cached.query('Property', `$filter=ListingKey eq '${key}'&$select=OriginatingSystemName`).value[0].OriginatingSystemName as string;
    const stranger = source === 'HAR' ? 'CRMLS' : 'HAR';
    expect(cached.navigate('Property', key, 'Media', '$top=3', { sources: [source] }).value.length).toBeGreaterThan(0);
    expect(answer(() => cached.navigate('Property', key, 'Media', '$top=3', { sources: [stranger] }))).toEqual({ code: 'EntityNotFound' });
  });

  it("reads a caller's list of sources afresh when it is not frozen: changed between queries, it gives the new sources' rows", () => {
    const text = "$filter=StandardStatus eq 'Active'&$select=ListingKey,OriginatingSystemName&$top=20";
    const sources = ['HAR'];
    expect(new Set(cached.query('Property', text, { sources }).value.map((r) => r.OriginatingSystemName))).toEqual(new Set(['HAR']));
    sources[0] = 'CRMLS';
    expect(new Set(cached.query('Property', text, { sources }).value.map((r) => r.OriginatingSystemName))).toEqual(new Set(['CRMLS']));
    // the same set in another order or with repeats is the same caller: answered from the cache
    const results = cacheOf(cached)!;
    cached.query('Property', text, { sources: ['HAR', 'CRMLS'] });
    const hits = results.hits;
    cached.query('Property', text, { sources: Object.freeze(['CRMLS', 'HAR', 'HAR']) });
    expect(results.hits).toBe(hits + 1);
  });

  it("answers queries that read the clock (filter, order, grouping) at each ask's clock, and builds records at it when the rows are kept", () => {
    // back to the data set's own time, where days on market still cross the bounds below
    clockMs = Date.parse('2025-06-01T00:00:00Z');
    const texts = [
      '$filter=DaysOnMarket gt 200&$select=ListingKey&$count=true&$top=5',
      '$orderby=DaysOnMarket desc,ListingKey&$select=ListingKey,DaysOnMarket&$top=5',
      `$filter=ModificationTimestamp gt 2025-05-01T00:00:00Z and now() lt ${new Date(clockMs + 3 * DAY).toISOString()}&$select=ListingKey&$top=3`,
      '$apply=groupby((StandardStatus),aggregate(DaysOnMarket with average as Days))',
    ];
    const first = texts.map((t) => answer(() => cached.query('Property', t)));
    clockMs += 10 * DAY;
    const later = texts.map((t) => answer(() => cached.query('Property', t)));
    expect(later).toEqual(texts.map((t) => answer(() => plain.query('Property', t))));
    for (let i = 0; i < texts.length; i++) expect(later[i], texts[i]).not.toEqual(first[i]);
    // DaysOnMarket only in $select: the rows are kept, the records are built at the new clock
    const selected = "$filter=StandardStatus eq 'Active'&$select=ListingKey,DaysOnMarket&$top=5";
    const results = cacheOf(cached)!;
    const a = cached.query('Property', selected);
    clockMs += 10 * DAY;
    const hits = results.hits;
    const b = cached.query('Property', selected);
    expect(results.hits).toBe(hits + 1);
    expect(b.value.map((r) => r.ListingKey)).toEqual(a.value.map((r) => r.ListingKey));
    expect(b.value.map((r) => r.DaysOnMarket)).not.toEqual(a.value.map((r) => r.DaysOnMarket));
    expect(answer(() => b)).toEqual(answer(() => plain.query('Property', selected)));
  });

  it('hands out answers a caller may change: $apply rows, records and the rows of onPage', () => {
    const apply = APPLY[0];
    const want = answer(() => plain.query('Property', apply));
    const got = cached.query('Property', apply);
    expect(answer(() => got)).toEqual(want);
    got.value[0].N = -1;
    delete got.value[1].City;
    got.value.pop();
    expect(answer(() => cached.query('Property', apply))).toEqual(want);
    const text = "$filter=City eq 'Houston'&$select=ListingKey,ListPrice&$top=8";
    const first = cached.query('Property', text);
    first.value[0].ListPrice = -5;
    const rows: number[][] = [];
    const onPage = (page: { rows: Uint32Array }): void => {
      rows.push([...page.rows]);
      page.rows.fill(0);
    };
    cached.query('Property', text, { onPage });
    cached.query('Property', text, { onPage });
    expect(rows[1]).toEqual(rows[0]);
    expect(answer(() => cached.query('Property', text))).toEqual(answer(() => plain.query('Property', text)));
  });

  it('stays within small bounds, evicting, and stays exact; a result above the row bound is not kept', async () => {
    const [small, fresh] = await Promise.all([open({ maxEntries: 3, maxRows: 40 }), open(false)]);
    const results = cacheOf(small)!;
    const texts = Array.from({ length: 8 }, (_, i) => `$filter=BedroomsTotal eq ${i % 5}&$orderby=ListPrice desc&$select=ListingKey&$top=${6 + i}&$skip=${i}`);
    for (let round = 0; round < 4; round++) {
      for (const t of texts) {
        expect(answer(() => small.query('Property', t))).toEqual(answer(() => fresh.query('Property', t)));
        expect(results.size).toBeLessThanOrEqual(3);
        expect(results.rows).toBeLessThanOrEqual(40);
      }
    }
    expect(results.size).toBe(3);
    const big = '$select=ListingKey&$top=100';
    const hits = results.hits;
    for (let i = 0; i < 2; i++) expect(answer(() => small.query('Property', big))).toEqual(answer(() => fresh.query('Property', big)));
    expect(results.hits).toBe(hits);
    expect(results.rows).toBeLessThanOrEqual(40);
  });

  it('is off with false or a bound of 0 (nothing kept, answers as before), and refuses bad bounds', async () => {
    const fresh = await open(false);
    for (const off of [false, { maxEntries: 0 }, { maxRows: 0 }] as const) {
      const e = await open(off);
      expect(cacheOf(e)).toBeNull();
      for (const t of APPLY.slice(0, 2))
        for (let i = 0; i < 2; i++) expect(answer(() => e.query('Property', t))).toEqual(answer(() => fresh.query('Property', t)));
    }
    for (const bad of [{ maxEntries: -1 }, { maxRows: 1.5 }, 'yes', null]) {
      await expect(Engine.open({ resultCache: bad as never })).rejects.toThrow(TypeError);
    }
  });
});
