/**
 * Navigation paths through the library (`engine.navigate`, SERVICE.md §2): for every navigation
 * property of Property, on many listings of the default data set (without children, with many,
 * paged over many pages), the records of all pages of `Property('K')/<Nav>?<options>` equal
 * `$expand=<Nav>(<options>)` on `Property('K')` (which test/exec/expand.test.ts checks against a
 * naive reference), `$count` is the number of matching children, the envelope (context URL,
 * nextLink) follows the JSON format, visibility holds (another source's listing is EntityNotFound,
 * exactly like an unknown key), pages stay on the generation they started on, the plan is data,
 * and bad input gives coded errors.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { Engine, type QueryOptions, type QueryResult } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import { dataSetOf, generated, nextQuery, NOW, openEngine } from '../live/helpers.js';

type Rec = Record<string, unknown>;
type Nav = 'Media' | 'OpenHouse' | 'PropertyChange' | 'PreferredMedia';
const NAVS: readonly Nav[] = ['Media', 'OpenHouse', 'PropertyChange', 'PreferredMedia'];

/** Nested options (`;`-separated, as inside $expand) per navigation property. */
const OPTIONS: Record<Nav, readonly string[]> = {
  Media: [
    '',
    "$filter=MediaCategory eq 'Photo' and Order le 10;$orderby=ImageWidth desc,Order;$skip=1;$top=4;$select=MediaKey,Order,ImageWidth",
    '$orderby=MediaCategory,ImageHeight desc;$select=MediaCategory,ImageHeight',
    '$skip=3;$top=12',
    '$filter=ImageWidth ge 1024;$select=MediaURL',
  ],
  PreferredMedia: ['', '$filter=ImageWidth ge 2000;$select=Order,PreferredPhotoYN', '$orderby=Order desc;$top=1', '$skip=1'],
  OpenHouse: ['', '$orderby=OpenHouseType desc;$select=OpenHouseType,OpenHouseStartTime', '$filter=OpenHouseStartTime gt now();$top=1', '$skip=1'],
  PropertyChange: [
    '',
    "$filter=FieldName eq 'ListPrice' or ChangeType eq 'Pending';$orderby=ModificationTimestamp;$top=3",
    '$skip=1;$select=FieldName',
    '$orderby=FieldName,NewValue desc',
  ],
};

/** The $filter part of nested options ('' without one): what $count counts. */
const filterPart = (options: string): string => options.split(';').find((o) => o.startsWith('$filter=')) ?? '';

function errorOf(run: () => unknown): QueryError {
  try {
    run();
  } catch (e) {
    expect(e).toBeInstanceOf(QueryError);
    return e as QueryError;
  }
  throw new Error('expected a QueryError');
}

/** Every page of a navigation path, following the nextLinks (each checked to repeat the path). */
function allPages(engine: Engine, key: string, nav: Nav, query: string, options: QueryOptions = {}): QueryResult[] {
  const pages = [engine.navigate('Property', key, nav, query, options)];
  for (;;) {
    const link = pages[pages.length - 1]['@odata.nextLink'];
    if (link === undefined) return pages;
    expect(link.startsWith(`${options.base ?? ''}Property('${encodeURIComponent(key)}')/${nav}?`), link).toBe(true);
    expect(pages.length).toBeLessThan(100);
    pages.push(engine.navigate('Property', key, nav, nextQuery(link), options));
  }
}

/** What `$expand=<nav>(<nested>)` gives on the listing. */
function expanded(engine: Engine, key: string, nav: Nav, nested: string, ignoreNulls = false, sources?: readonly string[]): Rec[] {
  const expand = nested === '' ? nav : `${nav}(${nested})`;
  const record = engine.entity('Property', key, `$select=ListingKey&$expand=${expand}${ignoreNulls ? '&$ignorenulls=true' : ''}`, { sources });
  expect(record, key).not.toBeNull();
  return record![nav] as Rec[];
}

/** The select list a context URL carries for the query's `$select` (OData JSON format: `Media(MediaKey,Order)`). */
const selectListOf = (query: string): string => {
  const m = /\$select=([^&;]*)/.exec(query);
  return m ? `(${decodeURIComponent(m[1])})` : '';
};

describe('navigation paths equal $expand on the default data set', () => {
  let engine: Engine;
  /** Listings to compare on: a spread of keys, and the ones with the most and with no children of each kind. */
  let keys: string[];

  beforeAll(async () => {
    engine = await Engine.open({ now: () => new Date(NOW) });
    const all = engine.query(
      'Property',
      '$top=2000&$select=ListingKey&$expand=Media($select=MediaKey),OpenHouse($select=OpenHouseKey),PropertyChange($select=PropertyChangeKey)',
    ).value;
    expect(all).toHaveLength(2000);
    const picked = new Set<string>();
    all.forEach((r, i) => {
      if (i % 40 === 0) picked.add(r.ListingKey as string);
    });
    for (const nav of ['Media', 'OpenHouse', 'PropertyChange'] as const) {
      const by = [...all].sort((a, b) => (b[nav] as Rec[]).length - (a[nav] as Rec[]).length);
      for (const r of by.slice(0, 3)) picked.add(r.ListingKey as string);
      for (const r of by.filter((x) => (x[nav] as Rec[]).length === 0).slice(0, 3)) picked.add(r.ListingKey as string);
    }
    keys = [...picked];
  });

  for (const nav of NAVS) {
    it(`${nav}: every option combination, all pages concatenated, default and small page sizes, with $count`, () => {
      let rows = 0;
      let paged = 0;
      let empty = 0;
      for (const key of keys) {
        for (const nested of OPTIONS[nav]) {
          const want = expanded(engine, key, nav, nested);
          const matching = expanded(engine, key, nav, filterPart(nested)).length;
          const query = nested.replace(/;/g, '&');
          const top = /\$top=(\d+)/.exec(nested);
          for (const maxPageSize of [undefined, 2]) {
            const pages = allPages(engine, key, nav, `${query}${query ? '&' : ''}$count=true`, { maxPageSize });
            const got = pages.flatMap((p) => p.value);
            expect(got, `${key} ${nav} ${nested} ${maxPageSize}`).toEqual(want);
            for (const p of pages) {
              expect(p['@odata.count'], `${key} ${nav} ${nested}`).toBe(matching);
              expect(p.value.length).toBeLessThanOrEqual(maxPageSize ?? (top ? Number(top[1]) : 10));
              expect(p['@odata.context']).toBe(
                (nav === 'PropertyChange' ? `$metadata#Property('${key}')/PropertyChange` : `$metadata#${nav === 'OpenHouse' ? 'OpenHouse' : 'Media'}`) +
                  selectListOf(nested),
              );
            }
            rows += got.length;
            if (pages.length > 1) paged++;
            if (got.length === 0) empty++;
          }
        }
      }
      // not vacuous: rows, paths paged over several pages, and empty collections all occur
      expect(rows).toBeGreaterThan(100);
      if (nav !== 'PreferredMedia') expect(paged).toBeGreaterThan(5);
      expect(empty).toBeGreaterThan(0);
    });
  }

  it('$ignorenulls=true drops null fields as it does inside expansions', () => {
    for (const key of keys.slice(0, 20)) {
      for (const nav of NAVS) {
        const got = allPages(engine, key, nav, '$ignorenulls=true').flatMap((p) => p.value);
        expect(got, `${key} ${nav}`).toEqual(expanded(engine, key, nav, '', true));
      }
    }
  });

  it('a $top within one page returns it whole, without a nextLink; $top=0 with $count gives only the count', () => {
    const key = keys.find((k) => expanded(engine, k, 'Media', '').length > 30)!;
    const all = expanded(engine, key, 'Media', '');
    const page = engine.navigate('Property', key, 'Media', '$top=25');
    expect(page.value).toEqual(all.slice(0, 25));
    expect(page['@odata.nextLink']).toBeUndefined();
    const first = engine.navigate('Property', key, 'Media', '');
    expect(first.value).toEqual(all.slice(0, 10));
    expect(first['@odata.nextLink']).toBe(`Property('${key}')/Media?$skip=10&$skiptoken=${engine.pageToken}`);
    expect(engine.navigate('Property', key, 'Media', '$top=0&$count=true')).toEqual({
      '@odata.context': '$metadata#Media',
      '@odata.count': all.length,
      value: [],
    });
    const based = engine.navigate('Property', key, 'OpenHouse', '$top=1', { base: 'http://x/v1/listings/data/' });
    expect(based['@odata.context']).toBe('http://x/v1/listings/data/$metadata#OpenHouse');
  });

  it('$apply groups the listing’s children (the same groups as over the top-level Media of that listing)', () => {
    const key = keys.find((k) => expanded(engine, k, 'Media', '').length > 20)!;
    const apply = '$apply=groupby((MediaCategory),aggregate($count as N,ImageWidth with max as W))';
    const got = engine.navigate('Property', key, 'Media', apply).value;
    const want = engine.query('Media', `$filter=ResourceRecordKey eq '${key}'&${apply}`).value;
    expect(got).toEqual(want);
    expect(got.length).toBeGreaterThan(0);
  });

  it('only listings the caller sees: another source’s listing is EntityNotFound, exactly like an unknown key', () => {
    const sourceOf = (key: string): string => engine.entity('Property', key, '$select=OriginatingSystemName')!.OriginatingSystemName as string;
    const key = keys.find((k) => expanded(engine, k, 'Media', '').length > 0)!;
    const own = [sourceOf(key)];
    const other = [
      'NoSuchMLS',
      ...new Set(engine.query('Property', '$top=2000&$select=OriginatingSystemName').value.map((r) => r.OriginatingSystemName as string)),
    ].filter((s) => s !== own[0]);
    for (const nav of NAVS) {
      expect(allPages(engine, key, nav, '', { sources: own }).flatMap((p) => p.value)).toEqual(expanded(engine, key, nav, ''));
      const hidden = errorOf(() => engine.navigate('Property', key, nav, '$count=true', { sources: other }));
      const unknown = errorOf(() => engine.navigate('Property', 'NO-SUCH-KEY', nav, '$count=true', { sources: other }));
      expect(hidden.code).toBe('EntityNotFound');
      expect(unknown.code).toBe('EntityNotFound');
      expect(hidden.message.replace(key, 'K')).toBe(unknown.message.replace('NO-SUCH-KEY', 'K'));
      expect(errorOf(() => engine.navigate('Property', key, nav, '', { sources: [] })).code).toBe('EntityNotFound');
    }
  });

  it('bad input: coded errors, never a crash', () => {
    const key = keys[0];
    const cases: Array<[nav: string, query: string, code: string, option?: string]> = [
      ['Photos', '', 'UnknownNavigationProperty'],
      ['media', '', 'UnknownNavigationProperty'],
      ['', '', 'UnknownNavigationProperty'],
      ['ListPrice', '', 'UnknownNavigationProperty'],
      ['Media', '$filter=ListPrice gt 5', 'UnknownField', '$filter'],
      ['PropertyChange', '$select=ListingKey,Nope', 'UnknownField', '$select'],
      ['Media', "$filter=Order eq 'one'", 'TypeMismatch', '$filter'],
      ['Media', '$orderby=relevance desc', 'RelevanceWithoutSearch', '$orderby'],
      ['Media', "$filter=search.text(KeywordSearchText,'pool')", 'InvalidSearch', '$filter'],
      ['Media', '$top=25001', 'TopTooLarge', '$top'],
      ['PreferredMedia', '$top=25001', 'TopTooLarge', '$top'],
      ['OpenHouse', '$top=50001', 'TopTooLarge', '$top'],
      ['Media', '$expand=Media', 'UnknownExpand', '$expand'],
      ['Media', '$format=xml', 'UnsupportedFormat', '$format'],
      ['Media', '$skiptoken=nope', 'InvalidSkipToken', '$skiptoken'],
      ['Media', '$top=-1', 'InvalidSyntax', '$top'],
    ];
    for (const [nav, query, code, option] of cases) {
      const e = errorOf(() => engine.navigate('Property', key, nav, query));
      expect([nav, query, e.code, e.option]).toEqual([nav, query, code, option]);
    }
    expect(errorOf(() => engine.navigate('Media', 'M1', 'Media', '')).code).toBe('UnknownNavigationProperty');
    // an unknown navigation property is reported before the key is looked at
    expect(errorOf(() => engine.navigate('Property', 'NO-SUCH-KEY', 'Photos', '')).code).toBe('UnknownNavigationProperty');
  });

  it('the plan is data: a children access path and sibling order, JSON round trip, cached, explained', () => {
    const key = keys[0];
    const navigation = { key, name: 'Media' };
    const query = "$filter=MediaCategory eq 'Photo'&$orderby=ImageWidth desc&$top=5";
    const plan = engine.explain('Property', query, { format: 'json', navigation });
    expect(JSON.parse(JSON.stringify(plan))).toEqual(plan);
    expect(plan.resource).toBe('Media');
    expect(plan.access).toEqual({ kind: 'children', parent: 'Property', key, navigation: 'Media' });
    expect(plan.strategy).toEqual({ kind: 'siblings' });
    expect(plan.page).toEqual({ skip: 0, rows: 5, top: 5 });
    expect(engine.explain('Property', query, { format: 'json', navigation })).toBe(plan);
    // a top-level query with the same text is another plan
    expect(engine.explain('Media', query, { format: 'json' }).access.kind).not.toBe('children');
    const text = engine.explain('Property', query, { navigation });
    expect(text).toContain(`candidates: children of Property('${key}') through Media (child index)`);
    expect(text).toContain('ImageWidth desc, key (among the siblings)');
    expect(engine.explain('Property', '', { navigation: { key, name: 'PropertyChange' } })).toContain("order: the navigation property's default order");
  });
});

describe('navigation paths over live changes', () => {
  const listings = generated(40, 'navigate-live');

  it('follow upserts and removals like $expand; a nextLink keeps reading the generation it started on', async () => {
    const engine = await openEngine(dataSetOf(listings), { compactFraction: false });
    const l = listings.find((x) => x.media.length >= 8)!;
    const key = l.property.ListingKey as string;
    const first = engine.navigate('Property', key, 'Media', '$select=MediaKey', { maxPageSize: 3 });
    expect(first.value).toEqual(expanded(engine, key, 'Media', '$select=MediaKey').slice(0, 3));
    const before = expanded(engine, key, 'Media', '$select=MediaKey');

    // a new photo first in order, and the listing replaced: both paths see the change
    await engine.upsert('Media', [{ ...l.media[0], MediaKey: `${key}-NEW`, Order: -1 }]);
    await engine.upsert('Property', [{ ...l.property, ListPrice: 1 }]);
    const after = allPages(engine, key, 'Media', '$select=MediaKey').flatMap((p) => p.value);
    expect(after).toEqual(expanded(engine, key, 'Media', '$select=MediaKey'));
    expect(after[0]).toEqual({ MediaKey: `${key}-NEW` });
    expect(after).toHaveLength(before.length + 1);

    // the old nextLink pages the generation it started on
    let page = first;
    const old = [...first.value];
    while (page['@odata.nextLink'] !== undefined) {
      page = engine.navigate('Property', key, 'Media', nextQuery(page['@odata.nextLink']), { maxPageSize: 3 });
      old.push(...page.value);
    }
    expect(old).toEqual(before);

    // removed: EntityNotFound for new queries
    await engine.remove('Property', [key]);
    expect(errorOf(() => engine.navigate('Property', key, 'Media', '')).code).toBe('EntityNotFound');
  });
});
