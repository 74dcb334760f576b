/**
 * Interoperability through the library (DESIGN.md "Interoperability"): boolean-valued functions
 * compared with true/false/null, null comparisons of every nullable property (geography
 * included), collections as `[]`, `engine.count`, fetch by key on every entity set, navigation
 * links of selected navigation properties, and the context URL forms. Rows are checked against
 * the naive reference (test/exec/oracle.ts) and the raw JSON records.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { contextFragment, DEFAULT_DATA_DIR, Engine, type QueryResource } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import { parseQuery } from '../../src/odata/parse-query.js';
import { NaiveEngine } from './oracle.js';

type Rec = Record<string, unknown>;
const NOW = Date.parse('2025-06-01T00:00:00Z');
const read = (file: string): Rec[] =>
  readFileSync(path.join(DEFAULT_DATA_DIR, file), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Rec);
const records = read('Property.jsonl');
const media = read('Media.jsonl');
const openHouses = read('OpenHouse.jsonl');
const naive = new NaiveEngine(records, NOW);
const osnOf = new Map(records.map((r) => [r.ListingKey as string, r.OriginatingSystemName as string]));
const SOURCES = ['NWMLS', 'HAR'];
let engine: Engine;

beforeAll(async () => {
  engine = await Engine.open({ now: () => new Date(NOW) });
});

const keys = (q: string, sources?: string[]): string[] =>
  engine.query('Property', `${q}&$select=ListingKey&$top=50000`, { sources }).value.map((r) => r.ListingKey as string);

function codeOf(run: () => unknown): QueryError {
  try {
    run();
  } catch (e) {
    if (e instanceof QueryError) return e;
    throw e;
  }
  throw new Error('expected a QueryError');
}

const SEARCH = "search.text(KeywordSearchText,'pool')";
const ADDRESS = "search.text(RawAddressSearchText,'oak street')";
const GEO = "geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 3000";
const TESTS = ['eq true', 'eq false', 'ne true', 'ne false', 'eq null', 'ne null'];

describe('boolean-valued functions compare with true, false and null', () => {
  const bases = [
    SEARCH,
    ADDRESS,
    `(${GEO})`,
    "contains(PublicRemarks,'granite')",
    "startswith(PostalCode,'98')",
    "endswith(City,'e')",
    "Appliances/any(a: a eq 'Dishwasher')",
    "View/all(v: startswith(v,'C'))",
    'Appliances/any()',
    `(${SEARCH} or ListPrice gt 700000)`,
    '(PoolPrivateYN eq true)',
    `Appliances/any(a: ${SEARCH})`,
  ];
  const filters = bases.flatMap((b) => [...TESTS.map((t) => `${b} ${t}`), `true eq ${b}`, `null ne ${b}`, `not (${b} eq true)`]);

  it.each(filters)('%s', (filter) => {
    const q = `$filter=${filter}`;
    const want = naive.query(parseQuery(q).filter);
    expect(keys(q), filter).toEqual(want);
    expect(engine.query('Property', `${q}&$count=true&$top=0`)['@odata.count']).toBe(want.length);
    const visible = naive.query(parseQuery(q).filter, [], (r) => SOURCES.includes(r.OriginatingSystemName as string));
    expect(keys(q, SOURCES), `${filter} (sources)`).toEqual(visible);
  });

  it('the cases are not vacuous: each base splits the rows, and eq true and eq false partition them when never null', () => {
    for (const b of bases.slice(0, 3)) {
      const yes = keys(`$filter=${b} eq true`).length;
      const no = keys(`$filter=${b} eq false`).length;
      expect(yes, b).toBeGreaterThan(0);
      expect(no, b).toBeGreaterThan(0);
      expect(yes + no, b).toBe(records.length);
      expect(keys(`$filter=${b} eq null`), b).toEqual([]);
    }
    // startswith() of a null field is null: neither true nor false
    const nulls = records.filter((r) => r.PostalCode === undefined || r.PostalCode === null).length;
    expect(nulls).toBeGreaterThan(0);
    expect(keys("$filter=startswith(PostalCode,'98') eq null")).toHaveLength(nulls);
    expect(keys("$filter=startswith(PostalCode,'98') eq true").length + keys("$filter=startswith(PostalCode,'98') eq false").length).toBe(
      records.length - nulls,
    );
  });

  it('`search.text(...) eq true` is planned as the search itself: postings, ranked top-k, the same relevance', () => {
    for (const form of [`${SEARCH} eq true`, `true eq ${SEARCH}`, `${SEARCH} ne false`]) {
      const plan = engine.explain('Property', `$filter=${form}&$orderby=relevance desc&$top=5`, { format: 'json' });
      expect(plan.access.kind, form).toBe('search');
      expect(plan.strategy.kind, form).toBe('ranked');
      expect(plan.residual, form).toBeNull();
    }
    const plain = keys(`$filter=${SEARCH}&$orderby=relevance desc`);
    expect(keys(`$filter=${SEARCH} eq true&$orderby=relevance desc`)).toEqual(plain);
    // a comparison that keeps the call inside (eq null, ne null) still ranks by it, as the reference does
    for (const form of [`${SEARCH} ne null and ${ADDRESS} eq true`, `(${SEARCH} or ${ADDRESS}) eq true`, `${SEARCH} eq false`]) {
      const q = `$filter=${form}&$orderby=relevance desc`;
      const parsed = parseQuery(q);
      expect(keys(q), form).toEqual(naive.query(parsed.filter, parsed.orderby));
    }
  });

  it('geo.distance compared with true is the geo predicate (KD-tree), with false its complement', () => {
    const plan = engine.explain('Property', `$filter=(${GEO}) eq true`, { format: 'json' });
    expect(plan.access.kind).toBe('geo');
    expect(keys(`$filter=(${GEO}) eq true`)).toEqual(keys(`$filter=${GEO}`));
    expect(keys(`$filter=(${GEO}) eq false`)).toEqual(keys(`$filter=not (${GEO})`));
  });

  it('bad search calls inside a comparison are still refused', () => {
    expect(codeOf(() => engine.query('Property', "$filter=search.text(KeywordSearchText,'!!') eq null")).code).toBe('EmptySearchQuery');
    expect(codeOf(() => engine.query('Property', "$filter=search.text(ListPrice,'x') ne true")).code).toBe('InvalidSearch');
    expect(codeOf(() => engine.query('Property', `$filter=${SEARCH} gt true`)).code).toBe('TypeMismatch');
    expect(codeOf(() => engine.query('Property', `$filter=${SEARCH} eq 1`)).code).toBe('TypeMismatch');
  });
});

describe('null comparisons for every nullable single-valued property', () => {
  it('geography: Location and RawLocation eq/ne null agree with the reference', () => {
    for (const f of [
      'Location eq null',
      'Location ne null',
      'RawLocation eq null',
      'null ne RawLocation',
      'not (Location eq null)',
      'Location eq null and RawLocation ne null',
    ]) {
      const want = naive.query(parseQuery(`$filter=${f}`).filter);
      expect(keys(`$filter=${f}`), f).toEqual(want);
      expect(want.length, f).toBeGreaterThan(0);
    }
    // 0,0 is a RawLocation but not a Location
    expect(keys('$filter=Location eq null and RawLocation ne null').length).toBeGreaterThan(0);
  });

  it('every other field of Property: eq null and ne null agree with the reference and split the rows', () => {
    const fields = engine.schemaOf('Property').fields.filter((f) => !f.collection && f.filterable);
    expect(fields.length).toBeGreaterThan(40);
    for (const f of fields) {
      const isNull = naive.query(parseQuery(`$filter=${f.name} eq null`).filter);
      expect(keys(`$filter=${f.name} eq null`), f.name).toEqual(isNull);
      const notNull = keys(`$filter=${f.name} ne null`);
      expect(notNull.length + isNull.length, f.name).toBe(records.length);
    }
  });

  it('an ordered walk of a numeric field keeps the nulls a `ne` lets through (found by the generated filters)', () => {
    for (const q of ['$filter=YearBuilt ne 2000&$orderby=YearBuilt', '$filter=YearBuilt ne 2000 and YearBuilt ne 1990&$orderby=YearBuilt desc']) {
      const parsed = parseQuery(q);
      expect(engine.explain('Property', `${q}&$top=50000`, { format: 'json' }).strategy.kind).toBe('walk');
      expect(keys(q), q).toEqual(naive.query(parsed.filter, parsed.orderby));
    }
  });

  it('Media and OpenHouse: every field eq null counts the records where it is absent', () => {
    for (const [resource, rows] of [
      ['Media', media.filter((m) => m.ResourceName === 'Property')],
      ['OpenHouse', openHouses],
    ] as const) {
      for (const f of engine.schemaOf(resource).fields.filter((x) => !x.collection)) {
        const absent = rows.filter((r) => r[f.name] === undefined || r[f.name] === null).length;
        const count = (q: string): number => engine.count(resource, q);
        expect(count(`$filter=${f.name} eq null`), `${resource}.${f.name}`).toBe(absent);
        expect(count(`$filter=${f.name} ne null`), `${resource}.${f.name}`).toBe(rows.length - absent);
      }
    }
  });

  it('a collection is never null: comparing one with null is a TypeMismatch that says so; a point compares only with null', () => {
    for (const f of ['Appliances eq null', 'null ne View', 'Appliances ne null and ListPrice gt 0']) {
      const e = codeOf(() => engine.query('Property', `$filter=${f}`));
      expect(e.code, f).toBe('TypeMismatch');
      expect(e.option).toBe('$filter');
      expect(e.message).toMatch(/never null/);
      expect(e.position, f).toBeGreaterThanOrEqual(0);
    }
    for (const f of ['Location gt null', 'Location eq Location', 'Location eq 1', 'RawLocation le null']) {
      const e = codeOf(() => engine.query('Property', `$filter=${f}`));
      expect(e.code, f).toBe('TypeMismatch');
      expect(e.message, f).toMatch(/compares only with null/);
    }
  });
});

describe('collections are [], never null', () => {
  const collections = (): string[] =>
    engine
      .schemaOf('Property')
      .fields.filter((f) => f.collection)
      .map((f) => f.name);

  it('in records, with and without $ignorenulls, in $select and by key', () => {
    const names = collections();
    expect(names).toContain('Appliances');
    const absent = (r: Rec, f: string): boolean => !Array.isArray(r[f]) || (r[f] as unknown[]).length === 0;
    let empties = 0;
    for (const ignorenulls of [false, true]) {
      const got = engine.query('Property', `$top=50000&$ignorenulls=${ignorenulls}`).value;
      expect(got).toHaveLength(records.length);
      got.forEach((r, i) => {
        for (const f of names) {
          expect(Array.isArray(r[f]), `${r.ListingKey as string}.${f}`).toBe(true);
          if (absent(records[i], f)) {
            expect(r[f]).toEqual([]);
            empties++;
          } else expect(r[f]).toEqual(records[i][f]);
        }
      });
    }
    expect(empties).toBeGreaterThan(100);
    const bare = records.find((r) => r.View === undefined || r.View === null)!;
    const key = bare.ListingKey as string;
    expect(engine.entity('Property', key, '$select=View,Appliances&$ignorenulls=true')!.View).toEqual([]);
    expect(engine.query('Property', `$filter=ListingKey eq '${key}'&$select=View`).value[0].View).toEqual([]);
  });

  it('filters treat an absent collection as empty, as the reference does', () => {
    for (const f of ['Appliances/any()', 'not View/any()', "View/all(v: v eq 'City')", "'Pond' in WaterfrontFeatures", "not ('Pond' in WaterfrontFeatures)"]) {
      expect(keys(`$filter=${f}`), f).toEqual(naive.query(parseQuery(`$filter=${f}`).filter));
    }
  });
});

describe('engine.count', () => {
  it('equals the envelope count, per account, with and without a filter', () => {
    for (const filter of ['', "$filter=City eq 'Seattle'", `$filter=${SEARCH} eq true`, '$filter=Location eq null', '$filter=ListPrice gt 500000']) {
      for (const sources of [undefined, SOURCES, []]) {
        const want = engine.query('Property', `${filter}${filter ? '&' : ''}$count=true&$top=0`, { sources })['@odata.count'];
        expect(engine.count('Property', filter, { sources }), `${filter} ${String(sources)}`).toBe(want);
      }
    }
    expect(engine.count('Property', '')).toBe(records.length);
    expect(engine.count('Property', '', { sources: [] })).toBe(0);
    const visibleMedia = media.filter((m) => m.ResourceName === 'Property' && SOURCES.includes(osnOf.get(m.ResourceRecordKey as string)!)).length;
    expect(engine.count('Media', '', { sources: SOURCES })).toBe(visibleMedia);
    expect(engine.count('OpenHouse', { $filter: "OpenHouseType eq 'Public'" })).toBe(openHouses.filter((o) => o.OpenHouseType === 'Public').length);
  });

  it('takes $filter only: every other option is QueryOptionNotAllowed naming it; a bad filter keeps its own code', () => {
    for (const opt of [
      '$top=1',
      '$skip=2',
      '$orderby=ListPrice',
      '$select=City',
      '$count=true',
      '$expand=Media',
      '$ignorenulls=true',
      '$apply=aggregate($count as n)',
    ]) {
      const e = codeOf(() => engine.count('Property', opt));
      expect(e.code, opt).toBe('QueryOptionNotAllowed');
      expect(e.option, opt).toBe(opt.slice(0, opt.indexOf('=')));
    }
    expect(codeOf(() => engine.count('Property', '$filter=Nope eq 1')).code).toBe('UnknownField');
    expect(codeOf(() => engine.count('Property', '$filter=City eq')).code).toBe('InvalidSyntax');
  });
});

describe('fetch by key on every entity set', () => {
  it('Media and OpenHouse records by key equal the collection record, and only for accounts that see their listing', () => {
    const cases: Array<[QueryResource, string, string]> = [
      ['Media', 'MediaKey', media.find((m) => m.ResourceName === 'Property' && osnOf.get(m.ResourceRecordKey as string) === 'NWMLS')!.MediaKey as string],
      ['OpenHouse', 'OpenHouseKey', openHouses.find((o) => osnOf.get(o.ListingKey as string) === 'NWMLS')!.OpenHouseKey as string],
    ];
    for (const [resource, keyName, key] of cases) {
      const fromCollection = engine.query(resource, `$filter=${keyName} eq '${key}'`).value;
      expect(fromCollection).toHaveLength(1);
      expect(engine.entity(resource, key, '')).toEqual(fromCollection[0]);
      expect(engine.entity(resource, key, '', { sources: ['NWMLS'] })).toEqual(fromCollection[0]);
      expect(engine.entity(resource, key, '', { sources: ['CRMLS'] })).toBeNull();
      expect(engine.entity(resource, `${key}-nope`, '')).toBeNull();
      expect(engine.entity(resource, key, `$select=${keyName}`)).toEqual({ [keyName]: key });
      expect(codeOf(() => engine.entity(resource, key, '$expand=Media')).code).toBe('UnknownExpand');
    }
  });
});

describe('$select of navigation properties and the context URL', () => {
  it('a selected navigation property gives each record its navigation link (relative, or absolute with a base)', () => {
    const r = engine.query('Property', "$filter=City eq 'Seattle'&$select=ListingKey,Media,PropertyChange&$top=3");
    expect(r['@odata.context']).toBe('$metadata#Property(ListingKey,Media,PropertyChange)');
    for (const rec of r.value) {
      const key = rec.ListingKey as string;
      expect(rec).toEqual({
        ListingKey: key,
        'Media@odata.navigationLink': `Property('${key}')/Media`,
        'PropertyChange@odata.navigationLink': `Property('${key}')/PropertyChange`,
      });
    }
    const abs = engine.query('Property', '$select=Media&$expand=Media($select=MediaKey;$top=1)&$top=1', { base: 'http://h/v1/listings/data/' });
    const rec = abs.value[0];
    expect(Object.keys(rec)).toEqual(['ListingKey', 'Media@odata.navigationLink', 'Media']);
    expect(rec['Media@odata.navigationLink']).toBe(`http://h/v1/listings/data/Property('${rec.ListingKey as string}')/Media`);
    expect(abs['@odata.context']).toBe('http://h/v1/listings/data/$metadata#Property(Media,Media(MediaKey))');
    const one = engine.entity('Property', rec.ListingKey as string, '$select=City,OpenHouse', { base: 'http://h/' })!;
    expect(one).toEqual({
      ListingKey: rec.ListingKey,
      City: one.City,
      'OpenHouse@odata.navigationLink': `http://h/Property('${rec.ListingKey as string}')/OpenHouse`,
    });
  });

  it('a navigation property of a child or an unknown name is still an error', () => {
    expect(codeOf(() => engine.query('Media', '$select=MediaKey,Media')).code).toBe('UnknownField');
    expect(codeOf(() => engine.query('Property', '$select=ListingKey,Medias')).code).toBe('UnknownField');
  });

  it('context fragments follow the JSON format, 4.01 and 4.0', () => {
    const table: Array<[string, string, string]> = [
      ['', 'Property', 'Property'],
      ['$select=ListingKey,ListPrice', 'Property(ListingKey,ListPrice)', 'Property(ListingKey,ListPrice)'],
      ['$select=*', 'Property(*)', 'Property(*)'],
      ['$select=ListPrice,ListPrice', 'Property(ListPrice)', 'Property(ListPrice)'],
      ['$expand=Media', 'Property(Media())', 'Property'],
      [
        '$select=ListingKey&$expand=Media($select=MediaKey,MediaURL;$top=2),OpenHouse',
        'Property(ListingKey,Media(MediaKey,MediaURL),OpenHouse())',
        'Property(ListingKey,Media(MediaKey,MediaURL))',
      ],
      ['$select=Media&$expand=Media', 'Property(Media,Media())', 'Property(Media)'],
      ["$filter=City eq 'X'&$orderby=ListPrice&$count=true", 'Property', 'Property'],
      ['$apply=groupby((City))&$select=City', 'Property', 'Property'],
    ];
    for (const [q, v401, v40] of table) {
      const parsed = parseQuery(q);
      expect(contextFragment('Property', parsed), q).toBe(v401);
      expect(contextFragment('Property', parsed, '4.0'), q).toBe(v40);
      expect(contextFragment('Property', parsed, '4.01', true), q).toBe(`${v401}/$entity`);
      expect(engine.query('Property', `${q}${q ? '&' : ''}$top=1`, { odataVersion: '4.0' })['@odata.context']).toBe(`$metadata#${v40}`);
    }
  });
});
