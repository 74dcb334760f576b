import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { Engine, DEFAULT_DATA_DIR } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import fc from 'fast-check';
import { parseQuery } from '../../src/odata/parse-query.js';
import { fixedFilters, generatedFilter } from './filter-cases.js';
import { NaiveEngine } from './oracle.js';

type Rec = Record<string, unknown>;
const NOW = Date.parse('2025-06-01T00:00:00Z');
const records = readFileSync(path.join(DEFAULT_DATA_DIR, 'Property.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l) as Rec);
let engine: Engine;
const naive = new NaiveEngine(records, NOW);

beforeAll(async () => {
  engine = await Engine.open({ now: () => new Date(NOW) });
});

const keys = (q: string, sources?: string[]): string[] =>
  engine.query('Property', `${q}&$select=ListingKey&$top=50000`, { sources }).value.map((r) => r.ListingKey as string);

function expectError(q: string, code: string, option: string, resource: 'Property' | 'Media' | 'OpenHouse' = 'Property'): QueryError {
  let err: unknown;
  try {
    engine.query(resource, q);
  } catch (e) {
    err = e;
  }
  expect(err, q).toBeInstanceOf(QueryError);
  expect((err as QueryError).code, q).toBe(code);
  expect((err as QueryError).option, q).toBe(option);
  expect((err as QueryError).message.length).toBeGreaterThan(10);
  return err as QueryError;
}

describe('filters agree with the naive reference on the default data set', () => {
  const cases = fixedFilters(records);
  // The fixed table: every filter alone, with a two-key order and a page, and as a count.
  const table: Array<[string, string]> = cases.flatMap((f) => [
    [f, ''],
    [f, '&$orderby=ListPrice desc,City&$skip=3&$top=40'],
    [f, '&$count=true&$orderby=ModificationTimestamp&$top=15'],
  ]);
  it('the fixed table has at least 150 queries', () => expect(table.length).toBeGreaterThanOrEqual(150));

  it.each(table)('%s %s', (filter, options) => {
    const q = `$filter=${filter}${options}`;
    const parsed = parseQuery(q);
    const want = naive.query(parsed.filter, parsed.orderby);
    if (options === '') {
      expect(keys(q), filter).toEqual(want);
      return;
    }
    const got = engine.query('Property', `${q}&$select=ListingKey`);
    const skip = parsed.skip ?? 0;
    expect(
      got.value.map((r) => r.ListingKey),
      q,
    ).toEqual(want.slice(skip, skip + parsed.top!));
    if (parsed.count) expect(got['@odata.count'], q).toBe(want.length);
  });

  it('the cases are not vacuous', () => {
    const sizes = cases.map((f) => naive.query(parseQuery(`$filter=${f}`).filter).length);
    expect(sizes.filter((s) => s > 0 && s < records.length).length).toBeGreaterThan(cases.length - 4);
  });
});

describe('generated filters and orders agree with the naive reference (fast-check)', () => {
  const filter = generatedFilter(records);
  const orderby = fc.constantFrom(
    '',
    'ListPrice desc',
    'City,ListPrice desc',
    'YearBuilt',
    'ModificationTimestamp desc',
    'BedroomsTotal desc,LivingArea',
    'DaysOnMarket',
    'tolower(City) desc,ListPrice',
  );

  it('for 1,000 generated queries: the same keys in the same order, and the same count', () => {
    let nonEmpty = 0;
    fc.assert(
      fc.property(filter, orderby, (f, o) => {
        const q = `$filter=${f}${o ? `&$orderby=${o}` : ''}`;
        const parsed = parseQuery(q);
        const want = naive.query(parsed.filter, parsed.orderby);
        expect(keys(q), q).toEqual(want);
        expect(engine.query('Property', `${q}&$count=true&$top=0`)['@odata.count'], q).toBe(want.length);
        if (want.length > 0) nonEmpty++;
      }),
      { seed: 20251122, numRuns: 1000 },
    );
    expect(nonEmpty).toBeGreaterThan(400);
  });

  it('relevance order equals the summed textbook BM25, ties by key', () => {
    for (const q of [
      "search.text(KeywordSearchText,'pool granite')",
      "search.text(KeywordSearchText,'spa') or search.text(KeywordSearchText,'quartz')",
      "search.text(RawAddressSearchText,'oak street') and BedroomsTotal ge 3",
    ]) {
      const parsed = parseQuery(`$filter=${q}&$orderby=relevance desc`);
      const want = naive.query(parsed.filter, parsed.orderby);
      expect(keys(`$filter=${q}&$orderby=relevance desc`), q).toEqual(want);
      const top = engine.query('Property', `$filter=${q}&$orderby=relevance desc&$top=7&$select=ListingKey`).value.map((r) => r.ListingKey);
      expect(top, q).toEqual(want.slice(0, 7));
    }
  });
});

describe('paging, count, select and the envelope', () => {
  it('pages of 10 without $top, with a relative nextLink that yields the rest', () => {
    const base = "$filter=City eq 'Seattle'&$orderby=ListPrice desc";
    const q = `${base}&$select=ListingKey,ListPrice`;
    const all = keys(base);
    expect(all.length).toBeGreaterThan(25);
    const seen: string[] = [];
    let res = engine.query('Property', q);
    expect(res['@odata.context']).toBe('$metadata#Property(ListingKey,ListPrice)');
    for (;;) {
      expect(res.value.length).toBeLessThanOrEqual(10);
      seen.push(...res.value.map((r) => r.ListingKey as string));
      const next = res['@odata.nextLink'];
      if (!next) break;
      expect(next.startsWith('Property?')).toBe(true);
      res = engine.query('Property', decodeURIComponent(next.slice('Property?'.length)));
    }
    expect(seen).toEqual(all);
  });

  it('$top=T gives T rows and no nextLink; maxpagesize under T pages and sums to T', () => {
    const r = engine.query('Property', '$top=25&$select=ListingKey');
    expect(r.value).toHaveLength(25);
    expect(r['@odata.nextLink']).toBeUndefined();
    const seen: string[] = [];
    let res = engine.query('Property', '$top=25&$select=ListingKey', { maxPageSize: 10 });
    for (;;) {
      seen.push(...res.value.map((x) => x.ListingKey as string));
      const next = res['@odata.nextLink'];
      if (!next) break;
      expect(next).toMatch(/\$top=1[05]|\$top=5/);
      res = engine.query('Property', decodeURIComponent(next.slice('Property?'.length)), { maxPageSize: 10 });
    }
    expect(seen).toEqual(r.value.map((x) => x.ListingKey));
  });

  it('$count counts matches before $skip/$top; $top=0 is valid', () => {
    const all = keys("$filter=StandardStatus eq 'Active'");
    const r = engine.query('Property', "$filter=StandardStatus eq 'Active'&$count=true&$top=0");
    expect(r['@odata.count']).toBe(all.length);
    expect(r.value).toEqual([]);
    expect(Object.keys(r)).toEqual(['@odata.context', '@odata.count', 'value']);
    const skipped = engine.query('Property', "$filter=StandardStatus eq 'Active'&$skip=5&$top=3&$select=ListingKey&$count=true");
    expect(skipped.value.map((x) => x.ListingKey)).toEqual(all.slice(5, 8));
    expect(skipped['@odata.count']).toBe(all.length);
  });

  it('without $orderby the order is key ascending; $skip past the end is empty', () => {
    const all = keys('');
    expect(all).toEqual([...all].sort());
    expect(engine.query('Property', '$skip=100000').value).toEqual([]);
  });

  it('$select keeps the key and schema order; without it every field, nulls included unless $ignorenulls', () => {
    const r = engine.query('Property', '$select=City,ListPrice&$top=1').value[0];
    expect(Object.keys(r)).toEqual(['ListingKey', 'City', 'ListPrice']);
    const full = engine.query('Property', '$top=1').value[0];
    expect(Object.keys(full)).toEqual(engine.store.Property.schema.fields.map((f) => f.name));
    expect(Object.values(full)).toContain(null);
    const lean = engine.query('Property', '$top=1&$ignorenulls=true').value[0];
    expect(Object.values(lean)).not.toContain(null);
    expect(Object.keys(lean).length).toBeLessThan(Object.keys(full).length);
  });

  it('DaysOnMarket moves with the engine clock', async () => {
    let now = NOW;
    const e = await Engine.open({ now: () => new Date(now) });
    const first = e.query('Property', "$filter=ListingKey eq 'P000000001'&$select=DaysOnMarket").value[0].DaysOnMarket as number;
    now += 3 * 86_400_000;
    const later = e.query('Property', "$filter=ListingKey eq 'P000000001'&$select=DaysOnMarket").value[0].DaysOnMarket as number;
    expect(later).toBe(first + 3);
  });

  it('is deterministic: the same query gives the same bytes', () => {
    const q = "$filter=search.text(KeywordSearchText,'pool')&$orderby=relevance desc&$count=true&$top=30";
    expect(JSON.stringify(engine.query('Property', q))).toBe(JSON.stringify(engine.query('Property', q)));
  });
});

describe('visibility', () => {
  it('restricts rows, counts and children to the sources, everywhere', () => {
    const har = records.filter((r) => r.OriginatingSystemName === 'HAR').map((r) => r.ListingKey as string);
    expect(keys('', ['HAR'])).toEqual(har);
    expect(engine.query('Property', '$count=true&$top=0', { sources: ['HAR'] })['@odata.count']).toBe(har.length);
    expect(keys("$filter=search.text(KeywordSearchText,'pool')&$orderby=relevance desc", ['HAR']).every((k) => har.includes(k))).toBe(true);
    expect(keys("$filter=OriginatingSystemName eq 'CRMLS'", ['HAR'])).toEqual([]);
    expect(keys("$filter=OriginatingSystemName eq 'CRMLS' or true", ['HAR'])).toEqual(har);
    const media = engine.query('Media', '$select=MediaKey,ResourceRecordKey&$top=25000', { sources: ['HAR'] }).value;
    expect(media.length).toBeGreaterThan(0);
    expect(media.every((m) => har.includes(m.ResourceRecordKey as string))).toBe(true);
    const oh = engine.query('OpenHouse', '$top=50000', { sources: ['HAR'] }).value;
    expect(oh.every((o) => har.includes(o.ListingKey as string))).toBe(true);
    expect(engine.query('Property', '$count=true', { sources: [] })['@odata.count']).toBe(0);
    expect(engine.query('Property', '$count=true', { sources: ['har'] })['@odata.count']).toBe(0); // case-sensitive
  });
});

describe('key order', () => {
  it('pages in key order whatever the load order, astral characters included', async () => {
    const keysIn = ['K9', 'K10', 'K1', 'Kz', 'K\u{1F3E0}', 'K\uFFFD', 'KA', 'K2'];
    const e = await Engine.open({ data: { Property: keysIn.map((k, i) => ({ ListingKey: k, ListPrice: i })) } });
    const want = [...keysIn].sort(); // UTF-16 code unit order
    const seen: string[] = [];
    let res = e.query('Property', '$select=ListingKey', { maxPageSize: 3 });
    for (;;) {
      seen.push(...res.value.map((r) => r.ListingKey as string));
      if (!res['@odata.nextLink']) break;
      res = e.query('Property', decodeURIComponent(res['@odata.nextLink'].slice('Property?'.length)), { maxPageSize: 3 });
    }
    expect(seen).toEqual(want);
    expect(e.query('Property', '$orderby=ListPrice desc&$select=ListingKey&$top=2').value.map((r) => r.ListingKey)).toEqual(['K2', 'KA']);
  });
});

describe('the plan cache', () => {
  it('reuses a plan without reusing the caller, the page size or the clock', async () => {
    let now = NOW;
    const e = await Engine.open({ now: () => new Date(now) });
    const q = "$filter=StandardStatus eq 'Active'&$select=ListingKey,DaysOnMarket&$count=true";
    const all = e.query('Property', q);
    const har = e.query('Property', q, { sources: ['HAR'] });
    expect(har['@odata.count']).toBeLessThan(all['@odata.count']!);
    expect(e.query('Property', q)['@odata.count']).toBe(all['@odata.count']);
    expect(e.query('Property', q, { maxPageSize: 3 }).value).toHaveLength(3);
    expect(e.query('Property', q).value).toHaveLength(10);
    now += 86_400_000;
    const later = e.query('Property', q).value[0].DaysOnMarket as number;
    expect(later).toBe((all.value[0].DaysOnMarket as number) + 1);
    // an error is never cached as a plan: it is thrown every time, with its position
    for (let i = 0; i < 2; i++) expect(() => e.query('Property', '$filter=Nope eq 1')).toThrow(/Nope/);
  });

  it('keeps the compiled filter of a plan per generation, but never one that reads the clock', async () => {
    let now = NOW;
    const e = await Engine.open({ now: () => new Date(now) });
    const want = (pred: (r: Rec) => boolean): string[] => naive.query(undefined, [], pred).sort();
    const got = (q: string, sources?: string[]): string[] =>
      e
        .query('Property', `${q}&$select=ListingKey&$top=50000`, { sources })
        .value.map((r) => r.ListingKey as string)
        .sort();
    // a filter of plain columns, walked in price order: compiled once, asked again with other callers
    const plain = "$filter=ListPrice ge 400000 and BedroomsTotal ge 3 and (City eq 'Seattle' or City eq 'Houston')&$orderby=ListPrice desc";
    const plainPred = (r: Rec) => (r.ListPrice as number) >= 400000 && (r.BedroomsTotal as number) >= 3 && (r.City === 'Seattle' || r.City === 'Houston');
    expect(got(plain)).toEqual(want(plainPred));
    expect(got(plain, ['HAR'])).toEqual(want((r) => plainPred(r) && r.OriginatingSystemName === 'HAR'));
    expect(got(plain)).toEqual(want(plainPred));
    // DaysOnMarket and now() read the clock: the same plan answers for the clock of each run
    const dom = '$filter=DaysOnMarket ge 30 and ListPrice ge 400000&$orderby=ListPrice desc';
    const before = got(dom);
    const modified = '$filter=ModificationTimestamp lt now() and ListPrice ge 400000&$orderby=ListPrice desc';
    const modifiedBefore = got(modified);
    const latest = Math.max(...records.map((r) => Date.parse(r.ModificationTimestamp as string)));
    now += 40 * 86_400_000;
    const after = got(dom);
    expect(after.length).toBeGreaterThan(before.length);
    expect(before.every((k) => after.includes(k))).toBe(true);
    now = latest + 1;
    expect(got(modified).length).toBeGreaterThan(modifiedBefore.length);
    // a new generation compiles against its own columns: an upserted listing's new price counts
    const first = got(plain)[0];
    const row = records.find((r) => r.ListingKey === first)!;
    await e.upsert('Property', [{ ...row, ListPrice: 1 }]);
    expect(got(plain)).not.toContain(first);
    expect(got(plain)).toHaveLength(want(plainPred).length - 1);
  });
});

describe('counting with value bitsets', () => {
  it.each([undefined, ['NWMLS'], ['HAR', 'NWMLS'], []])('counts Active Residential in one city with sources %j', (sources) => {
    const q = "$filter=StandardStatus eq 'Active' and PropertyType in ('Residential','Residential Lease') and City eq 'Seattle'";
    const want = naive.query(parseQuery(q).filter, [], (r) => sources === undefined || sources.includes(r.OriginatingSystemName as string));
    const got = engine.query('Property', `${q}&$count=true&$top=0`, { sources: sources ?? undefined });
    expect(got['@odata.count']).toBe(want.length);
    expect(got.value).toEqual([]);
    expect(engine.explain('Property', `${q}&$count=true&$top=0`)).toContain('lookup StandardStatus');
    if (sources?.length === 1) expect(want.length).toBeGreaterThan(3);
  });
});

describe('the plan', () => {
  it('uses the index that is the point', () => {
    expect(engine.explain('Property', "$filter=StandardStatus eq 'Active' and ListPrice ge 300000&$orderby=ListPrice desc&$top=25")).toContain(
      'candidates: lookup StandardStatus',
    );
    expect(engine.explain('Property', "$filter=StandardStatus eq 'Active' and ListPrice ge 300000&$orderby=ListPrice desc&$top=25")).toContain(
      'ordered walk of ListPrice desc',
    );
    expect(engine.explain('Property', "$filter=search.text(KeywordSearchText,'pool granite')&$orderby=relevance desc&$top=25")).toContain(
      'ranked top-k by relevance',
    );
    expect(engine.explain('Property', "$filter=geo.distance(Location, geography'POINT(-122.3 47.6)') le 5000 and ListPrice gt 100000")).toContain(
      'kd-tree Location',
    );
    // the smaller of the postings and the circle (counted on the KD-tree) feeds the rows
    expect(
      engine.explain('Property', "$filter=search.text(RawAddressSearchText,'1 main st') and geo.distance(Location, geography'POINT(-122.3 47.6)') le 500000"),
    ).toContain('candidates: search.text(RawAddressSearchText');
    expect(
      engine.explain('Property', "$filter=search.text(RawAddressSearchText,'1 main st') and geo.distance(Location, geography'POINT(-122.3 47.6)') le 5000"),
    ).toContain('candidates: kd-tree Location');
    expect(engine.explain('Property', '$filter=ListPrice gt 2000000 and BedroomsTotal ge 2&$count=true&$orderby=ListPrice')).toContain(
      'candidates: range of ListPrice',
    );
    expect(engine.explain('Property', "$filter=YearBuilt ge 2020 and YearBuilt lt 2022 and StandardStatus eq 'Active'")).toContain(
      'candidates: range of YearBuilt',
    );
    expect(engine.explain('Property', "$filter=contains(City,'a')&$count=true")).toContain('candidates: scan');
    expect(engine.explain('Property', '$filter=ListPrice gt 100000&$count=true&$orderby=ListPrice')).toContain('top-k heap');
    expect(engine.explain('Property', '', { sources: ['HAR'] })).toContain('visibility: sources HAR');
    expect(engine.explain('Property', `$filter=ListingId eq '${records[3].ListingId as string}'&$select=ListingKey`)).toContain('hash lookup ListingId');
    expect(engine.explain('Property', "$filter=ListingKey eq 'P000000005' and StandardStatus eq 'Active'")).toContain('hash lookup ListingKey');
  });
});

describe('bad queries are coded errors that name the field or operator', () => {
  it.each([
    ["$filter=ListPrice eq 'cheap'", 'TypeMismatch', '$filter', 'ListPrice'],
    ['$filter=ModificationTimestamp gt 2024-01-01', 'TypeMismatch', '$filter', 'timestamp'],
    ['$filter=Nope eq 1', 'UnknownField', '$filter', 'Nope'],
    ["$filter=KeywordSearchText eq 'pool'", 'SearchFieldNotAllowed', '$filter', 'KeywordSearchText'],
    ["$filter=Appliances eq 'Oven'", 'TypeMismatch', '$filter', 'Appliances'],
    ["$filter=contains(ListPrice,'1')", 'TypeMismatch', '$filter', 'contains'],
    ['$filter=year(City) eq 2020', 'TypeMismatch', '$filter', 'year'],
    ["$filter=geo.distance(Location, geography'POINT(1 2)') lt 5", 'InvalidGeoDistance', '$filter', 'le'],
    ["$filter=5 ge geo.distance(Location, geography'POINT(1 2)')", 'InvalidGeoDistance', '$filter', 'le'],
    ["$filter=geo.distance(City, geography'POINT(1 2)') le 5", 'InvalidGeoDistance', '$filter', 'Location'],
    ["$filter=search.text(City,'x')", 'InvalidSearch', '$filter', 'RawAddressSearchText'],
    ["$filter=search.text(KeywordSearchText,'pool',0)", 'InvalidMinMatches', '$filter', 'positive'],
    ["$filter=search.text(KeywordSearchText,'pool',1.5)", 'InvalidMinMatches', '$filter', 'positive'],
    ["$filter=search.text(KeywordSearchText,'  ')", 'EmptySearchQuery', '$filter', 'word'],
    ['$orderby=relevance desc', 'RelevanceWithoutSearch', '$orderby', 'search.text'],
    ["$filter=search.text(KeywordSearchText,'pool')&$orderby=relevance asc", 'InvalidRelevanceOrder', '$orderby', 'relevance desc'],
    ['$orderby=Appliances', 'NotSortable', '$orderby', 'Appliances'],
    ['$select=Nope', 'UnknownField', '$select', 'Nope'],
    ['$top=50001', 'TopTooLarge', '$top', '50000'],
    ['$format=xml', 'UnsupportedFormat', '$format', 'json'],
    ['$filter=ListPrice eq', 'InvalidSyntax', '$filter', 'position'],
    ['$bogus=1', 'UnknownQueryOption', '$bogus', 'bogus'],
  ])('%s → %s', (q, code, option, mention) => {
    const err = expectError(q, code, option);
    expect(err.message).toContain(mention);
  });

  it('binder errors carry the position of the offending node', () => {
    expect(expectError("$filter=City eq 'x' and Nope gt 1", 'UnknownField', '$filter').position).toBe(16);
    expect(expectError('$filter=ListPrice gt 1 and City eq 5', 'TypeMismatch', '$filter').position).toBe(19);
  });

  it('Media top maximum is 25,000', () => {
    expect(expectError('$top=25001', 'TopTooLarge', '$top', 'Media').message).toContain('25000');
  });
});
