/**
 * $apply on PostgreSQL (src/pg/apply.ts) against the in-memory engine on the same data: every case
 * of test/exec/apply.test.ts on the default data set and on its small hand-made record sets, then
 * fast-check generated groupings (group fields, methods, $orderby, $top/$skip, $select,
 * $ignorenulls, filters, sources) over a generated data set on Property, Media, OpenHouse, Member
 * and Office. Records must be equal byte for byte (JSON text and -0 included), counts equal.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine, type QueryResult } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import { generateListings, generateRoster } from '../../src/generate/dataset.js';
import { compileApply } from '../../src/pg/apply.js';
import { compileFilter, type FilterContext } from '../../src/pg/filter.js';
import { Layout } from '../../src/pg/layout.js';
import { loadIntoPostgres } from '../../src/pg/load.js';
import { prepareSearchSql } from '../../src/pg/search.js';
import { Params } from '../../src/pg/sql.js';
import type { BoundGrouping } from '../../src/plan/bind-apply.js';
import type { QueryResource } from '../../src/plan/plan.js';
import { isSearchField } from '../../src/schema/search-fields.js';
import type { FieldDef } from '../../src/schema/types.js';
import type { JsonValue } from '../../src/store/columns.js';
import { loadDataDirectory, loadRecords, type RecordsInput } from '../../src/store/load.js';
import type { Store } from '../../src/store/store.js';
import { APPLY_CASES, PERCENTILE_QUERY, percentileRecords } from '../exec/apply-cases.js';
import { fixedFilters } from '../exec/filter-cases.js';
import { freshDatabase, pgSkip } from './helpers.js';

type Rec = Record<string, unknown>;
type Resource = Extract<QueryResource, 'Property' | 'Media' | 'OpenHouse' | 'Member' | 'Office'>;

const NOW = Date.parse('2025-06-01T00:00:00Z');

/** One data set in both backends: an in-memory engine and the same records loaded into a PostgreSQL schema. */
interface Pair {
  readonly engine: Engine;
  readonly layout: Layout;
}

let pool: pg.Pool;
let schemas = 0;

async function pairOf(store: Store, engine: Engine): Promise<Pair> {
  const layout = new Layout(`apply${++schemas}`);
  await loadIntoPostgres(pool, layout, store);
  return { engine, layout };
}

async function pairOfRecords(data: RecordsInput): Promise<Pair> {
  return pairOf(loadRecords(data), await Engine.open({ data, now: () => new Date(NOW) }));
}

/** Who sees a row, as the engine decides it (src/live/visibility.ts): own source, or the listing's for a child. */
function visibility(pair: Pair, resource: Resource, sources: readonly string[], params: Params): string {
  const allowed = params.add([...sources], 'text[]');
  if (resource === 'Media' || resource === 'OpenHouse') {
    const link = resource === 'Media' ? '"ResourceRecordKey"' : '"ListingKey"';
    return `EXISTS (SELECT 1 FROM ${pair.layout.table('Property')} p WHERE p."ListingKey" = t.${link} AND p."OriginatingSystemName" = ANY(${allowed}))`;
  }
  return `t."OriginatingSystemName" = ANY(${allowed})`;
}

interface PgAnswer {
  /** The page's records. */
  readonly value: Array<Record<string, JsonValue>>;
  /** Rows the statement returned (the page plus at most one). */
  readonly fetched: number;
  readonly count: number;
  readonly sql: string;
}

/** The query through the engine's binder and planner (explain), then compileFilter + compileApply on PostgreSQL. */
async function viaPostgres(pair: Pair, resource: Resource, query: string, sources?: readonly string[]): Promise<PgAnswer> {
  const plan = pair.engine.explain(resource, query, { format: 'json', sources });
  const params = new Params();
  const searches = await Promise.all(plan.searches.map((node) => prepareSearchSql(pool, pair.layout, node, 't', params, node.ordinal)));
  const ctx: FilterContext = {
    schema: pair.engine.schemaOf(resource),
    alias: 't',
    table: pair.layout.table(resource),
    params,
    nowMs: NOW,
    search: (node) => searches[node.ordinal].test,
  };
  const where: string[] = [];
  if (plan.filter) where.push(compileFilter(plan.filter, ctx));
  if (sources !== undefined) where.push(visibility(pair, resource, sources, params));
  const joins = searches.map((s) => s.join).filter((j) => j !== '');
  const from = `FROM ${[pair.layout.table(resource) + ' t', ...joins].join(' ')}${where.length ? ` WHERE ${where.map((w) => `(${w})`).join(' AND ')}` : ''}`;
  const apply = compileApply(plan.grouping!, from, ctx, { offset: plan.page.skip, limit: plan.page.rows + 1 }, plan.ignoreNulls);
  const rows = await pool.query<unknown[]>({ text: apply.rowsSql, values: params.values, rowMode: 'array' });
  const count = await pool.query<unknown[]>({ text: apply.countSql, values: params.values, rowMode: 'array' });
  return {
    value: rows.rows.slice(0, plan.page.rows).map((r) => apply.decode(r)),
    fetched: rows.rows.length,
    count: Number(count.rows[0][0]),
    sql: apply.rowsSql,
  };
}

const withCount = (query: string): string => (/(^|&)\$count=/.test(query) ? query : `${query}&$count=true`);

/** Asserts that PostgreSQL answers `query` exactly as the in-memory engine does; returns the engine's answer. */
async function expectSame(pair: Pair, resource: Resource, query: string, sources?: readonly string[]): Promise<QueryResult> {
  const want = pair.engine.query(resource, withCount(query), { sources });
  const got = await viaPostgres(pair, resource, query, sources);
  const label = `${resource} ${query} (sources ${JSON.stringify(sources)})`;
  expect(JSON.stringify(got.value), label).toBe(JSON.stringify(want.value));
  expect(got.value, label).toEqual(want.value); // also tells -0 from 0
  expect(got.count, label).toBe(want['@odata.count']);
  const plan = pair.engine.explain(resource, query, { format: 'json', sources });
  expect(got.fetched, label).toBe(Math.max(0, Math.min(plan.page.rows + 1, got.count - plan.page.skip)));
  return want;
}

/** The paging, $count, $skip/$top and $select cases over one base grouping. */
const BASE = '$apply=groupby((City),aggregate($count as N,ListPrice with max as Top))';
const PAGING_CASES: string[] = [
  BASE,
  `${BASE}&$skip=10`,
  `${BASE}&$skip=20`,
  `${BASE}&$top=15&$orderby=N desc`,
  `${BASE}&$count=true&$skip=20&$top=10`,
  `${BASE}&$count=true&$top=0`,
  '$apply=aggregate($count as N)&$count=true',
  '$apply=aggregate($count as N)&$skip=1',
  '$filter=ListPrice lt 0&$apply=groupby((City))&$count=true',
  `${BASE}&$orderby=Top desc&$skip=3&$top=4`,
  `${BASE}&$skip=30`,
  `${BASE}&$select=Top,City&$top=50`,
  `${BASE}&$select=N&$top=3`,
  `${BASE}&$select=*&$top=3`,
  `${BASE}&$select=City&$orderby=Top desc,N`,
  `${BASE}&$orderby=City desc&$ignorenulls=true`,
  '$apply=aggregate(ListPrice with avg,ListPrice with average,ListPrice with p50,ListPrice with median,City with countdistinct)',
  // an alias that is an Object.prototype accessor's name is still an own property of the record
  '$apply=groupby((City),aggregate($count as __proto__))&$orderby=__proto__ desc',
];

describe.skipIf(pgSkip)('$apply on PostgreSQL equals the in-memory engine', () => {
  let def: Pair;
  let gen: Pair;
  let genRecords: Record<Resource, Rec[]>;

  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: await freshDatabase('apply'), max: 2 });
    const engine = await Engine.open({ now: () => new Date(NOW) });
    def = await pairOf(await loadDataDirectory(DEFAULT_DATA_DIR), engine);

    // a generated data set with every resource (in key order, as the generator writes it)
    const listings = [...generateListings({ listings: 400, seed: 'pg-apply' })];
    const roster = generateRoster({ listings: 400, seed: 'pg-apply' });
    genRecords = {
      Property: listings.map((l) => l.property),
      Media: listings.flatMap((l) => l.media.slice(0, 6)),
      OpenHouse: listings.flatMap((l) => l.openHouses),
      Member: roster.members,
      Office: roster.offices,
    };
    gen = await pairOfRecords({ ...genRecords });
  }, 300_000);

  afterAll(async () => {
    await pool?.end();
  });

  it.each(APPLY_CASES)('%s (sources %j)', async (query, sources) => {
    await expectSame(def, 'Property', `${query}&$top=50000`, sources);
  });

  it.each(PAGING_CASES)('%s', async (query) => {
    await expectSame(def, 'Property', query);
  });

  it('the $top/maxpagesize page is the engine page', async () => {
    // the nextLink a page carries repeats the query with $skip advanced: each of those pages agrees too
    let res = def.engine.query('Property', `${BASE}&$top=15&$orderby=N desc`, { maxPageSize: 10 });
    let pages = 0;
    for (;;) {
      pages++;
      const link = res['@odata.nextLink'];
      if (!link) break;
      const next = decodeURIComponent(link.slice('Property?'.length)).replace(/&\$skiptoken=[^&]*/, '');
      res = await expectSame(def, 'Property', next);
    }
    expect(pages).toBe(2);
  });

  it('Media, grouped and aggregated, with visibility through the listing', async () => {
    const q = '$apply=groupby((MediaCategory),aggregate($count as N,ImageWidth with max as W,ImageWidth with average as A,Order with p90 as O))&$top=1000';
    await expectSame(def, 'Media', q);
    await expectSame(def, 'Media', q, ['CRMLS', 'HAR']);
    await expectSame(def, 'Media', '$apply=groupby((ResourceRecordKey),aggregate($count as N,ImageHeight with sum as H))&$orderby=N desc&$top=25');
    await expectSame(def, 'Media', '$apply=aggregate(ModificationTimestamp with median as M,PreferredPhotoYN with countdistinct as P,MediaKey with min as K)');
  });

  it('OpenHouse, Member and Office', async () => {
    await expectSame(def, 'OpenHouse', '$apply=groupby((OpenHouseDate),aggregate($count as N,OpenHouseStartTime with min as S))&$top=500');
    await expectSame(def, 'OpenHouse', '$apply=groupby((OpenHouseType,OpenHouseStatus),aggregate(OpenHouseEndTime with p75 as E))', ['NWMLS']);
    await expectSame(def, 'Member', '$apply=groupby((OfficeKey),aggregate($count as N,MemberLastName with max as L))&$orderby=N desc,L&$top=100');
    await expectSame(def, 'Member', '$apply=groupby((MemberStatus),aggregate(ModificationTimestamp with max as M))', ['HAR']);
    await expectSame(def, 'Office', '$apply=groupby((OfficeStateOrProvince,OfficeCity),aggregate($count as N))&$top=100');
    await expectSame(def, 'Office', '$apply=aggregate(ModificationTimestamp with p10 as P,OfficeName with countdistinct as C)', ['ARMLS']);
  });

  describe('small record sets', () => {
    const rec = (key: string, fields: Rec): Rec => ({ ListingKey: key, OriginatingSystemName: 'T', ...fields });

    it('nearest-rank percentiles on n = 1, 2, 10, 11 and the lower middle as median', async () => {
      const want = await expectSame(await pairOfRecords({ Property: percentileRecords() }), 'Property', PERCENTILE_QUERY);
      expect(want.value.map((r) => [r.City, r.med, r.ListPrice_p10, r.ListPrice_p95])).toEqual([
        ['even', 2, 1, 4],
        ['n1', 7, 7, 7],
        ['n10', 5, 1, 10],
        ['n11', 6, 2, 11],
        ['n2', 10, 10, 20],
      ]);
    });

    it('empty groups, a null group first, a bare aggregate over no rows, $ignorenulls', async () => {
      const pair = await pairOfRecords({
        Property: [
          rec('a', { City: 'Zed', ListPrice: 5 }),
          rec('b', { City: 'Alpha' }),
          rec('c', { City: 'Alpha' }),
          rec('d', { ListPrice: 9 }),
          rec('e', { ListPrice: 1 }),
        ],
      });
      const aggs =
        'ListPrice with sum as S,ListPrice with average as A,ListPrice with min as Lo,ListPrice with max as Hi,ListPrice with median as M,ListPrice with p95 as P,ListPrice with countdistinct as D,$count as N';
      const grouped = await expectSame(pair, 'Property', `$apply=groupby((City),aggregate(${aggs}))`);
      expect(grouped.value[1]).toEqual({ City: 'Alpha', S: null, A: null, Lo: null, Hi: null, M: null, P: null, D: 0, N: 2 });
      const bare = await expectSame(pair, 'Property', `$filter=ListPrice gt 100&$apply=aggregate(${aggs})`);
      expect(bare.value).toEqual([{ S: null, A: null, Lo: null, Hi: null, M: null, P: null, D: 0, N: 0 }]);
      await expectSame(pair, 'Property', '$apply=groupby((City),aggregate(ListPrice with sum as S,$count as N))&$ignorenulls=true');
      await expectSame(pair, 'Property', '$apply=groupby((City),aggregate(ListPrice with sum as S,$count as N))&$orderby=S desc&$ignorenulls=true');
    });

    it('dates and timestamps: epoch ms as aggregates, text as group values, one instant whatever its offset', async () => {
      const pair = await pairOfRecords({
        Property: [
          rec('a', { ListingContractDate: '2024-01-01', ModificationTimestamp: '2024-05-01T10:00:00+02:00', City: 'X' }),
          rec('b', { ListingContractDate: '2024-03-15', ModificationTimestamp: '2024-05-01T09:00:00Z', City: 'X' }),
          rec('c', { ModificationTimestamp: '2024-05-01T08:00:00.000Z', City: 'X' }),
          rec('d', { ListingContractDate: '2023-12-31', City: 'X' }),
          rec('e', { ListingContractDate: '1969-12-31', ModificationTimestamp: '1969-12-31T23:59:59.999Z', City: 'Y' }),
        ],
      });
      const [row] = (
        await expectSame(
          pair,
          'Property',
          '$apply=aggregate(ListingContractDate with min as Dmin,ListingContractDate with max as Dmax,ListingContractDate with median as Dmed,ListingContractDate with p95 as D95,ListingContractDate with countdistinct as Dn,ModificationTimestamp with min as Tmin,ModificationTimestamp with max as Tmax,ModificationTimestamp with median as Tmed,ModificationTimestamp with countdistinct as Tn)',
        )
      ).value;
      expect(row).toMatchObject({ Dmin: Date.UTC(1969, 11, 31), Tmin: Date.parse('1969-12-31T23:59:59.999Z'), Tn: 3 });
      await expectSame(pair, 'Property', '$apply=groupby((ModificationTimestamp),aggregate($count as N))');
      await expectSame(pair, 'Property', '$apply=groupby((ListingContractDate))&$orderby=ListingContractDate desc');
      await expectSame(pair, 'Property', '$apply=groupby((City),aggregate(ModificationTimestamp with max as M))&$orderby=M desc');
    });

    it('countdistinct ignores nulls; min/max of strings are ordinal; booleans group false before true', async () => {
      const pair = await pairOfRecords({
        Property: [
          rec('a', { City: 'a', PublicRemarks: 'nice', ListPrice: 1, PoolPrivateYN: true }),
          rec('b', { ListPrice: 1 }),
          rec('c', { City: 'a', PublicRemarks: 'nice', PoolPrivateYN: false }),
          rec('d', { City: 'b', PublicRemarks: 'Nice', ListPrice: 2.5, PoolPrivateYN: true }),
          rec('e', { City: 'É', PublicRemarks: 'élan\tand\ttabs', PoolPrivateYN: false }),
          rec('f', { City: 'Z', PublicRemarks: 'Zebra' }),
          // UTF-16 order is not code point order: U+E000..U+FFFF sort after supplementary characters
          rec('g', { City: 'a\uFFFD', PublicRemarks: 'x\u{1F600}', StateOrProvince: 'q\u{10FFFF}' }),
          rec('h', { City: 'a\u{1F600}', PublicRemarks: 'x\uE000', StateOrProvince: 'q\uFFFF' }),
          rec('i', { City: '\u{10000}', PublicRemarks: 'x\u{10FFFF}', StateOrProvince: 'q\u{10FFFF}\u0001' }),
          rec('j', { City: '\uE000', PublicRemarks: 'x', StateOrProvince: 'q' }),
        ],
      });
      await expectSame(
        pair,
        'Property',
        '$apply=aggregate(City with countdistinct as C,PublicRemarks with countdistinct as R,ListPrice with countdistinct as P,PoolPrivateYN with countdistinct as B,$count as N)',
      );
      await expectSame(pair, 'Property', '$apply=aggregate(PublicRemarks with min as Lo,PublicRemarks with max as Hi,City with max as C)');
      await expectSame(pair, 'Property', '$apply=groupby((PoolPrivateYN,City),aggregate($count as N))');
      await expectSame(pair, 'Property', '$apply=groupby((City),aggregate(PublicRemarks with max as R))&$orderby=R desc');
      await expectSame(pair, 'Property', '$apply=groupby((StateOrProvince),aggregate(City with min as Lo,City with max as Hi,PublicRemarks with min as R))');
      await expectSame(
        pair,
        'Property',
        '$apply=groupby((PoolPrivateYN),aggregate(StateOrProvince with min as Lo,StateOrProvince with max as Hi))&$orderby=Hi desc',
      );
      const high = await expectSame(
        pair,
        'Property',
        '$apply=aggregate(City with min as Lo,City with max as Hi,PublicRemarks with max as R,StateOrProvince with max as S)',
      );
      expect(high.value).toEqual([{ Lo: 'Z', Hi: '\uE000', R: 'élan\tand\ttabs', S: 'q\uFFFF' }]);
    });

    it('negative numbers, -0, integers and decimals as group values', async () => {
      const prices = [-3, -0, 0, 2.5, -3, 70_000_000, 2, null, 0.1, 0.30000000000000004];
      const data = prices.map((p, i) => rec(`k${i}`, p === null ? {} : { ListPrice: p, BedroomsTotal: Number.isInteger(p) && p < 1e6 ? p : -1 }));
      const pair = await pairOfRecords({ Property: data });
      await expectSame(pair, 'Property', '$apply=groupby((ListPrice),aggregate($count as N,ListPrice with sum as S))');
      await expectSame(
        pair,
        'Property',
        '$apply=groupby((BedroomsTotal),aggregate($count as N,ListPrice with countdistinct as D,ListPrice with average as A))',
      );
      await expectSame(
        pair,
        'Property',
        '$apply=aggregate(ListPrice with sum as S,ListPrice with min as Lo,BedroomsTotal with max as B,ListPrice with p25 as Q)',
      );
    });

    it('$orderby on an alias, desc, ties by the group values ascending; nulls lowest', async () => {
      const cities = ['c', 'a', 'd', 'c', 'b', 'a', 'c', 'a', 'd'];
      const pair = await pairOfRecords({ Property: cities.map((c, i) => rec(`k${i}`, { City: c, ListPrice: c === 'b' ? null : i })) });
      const base = '$apply=groupby((City),aggregate($count as N,ListPrice with sum as S))';
      for (const order of ['N desc', 'N desc,City desc', 'N', 'S desc', 'S', 'City desc,N']) await expectSame(pair, 'Property', `${base}&$orderby=${order}`);
    });

    it('sums of decimals add up in key order: exact once the engine holds its rows in key order', async () => {
      // the records come in reverse key order; the engine adds in row order until a compaction puts rows in key order
      const values = Array.from({ length: 200 }, (_, i) => 0.1 * ((i * 7919) % 97) + 1 / (i + 3));
      const data = values.map((v, i) => rec(`k${String(i).padStart(3, '0')}`, { Latitude: v, City: i % 3 === 0 ? 'a' : 'b' })).reverse();
      const pair = await pairOfRecords({ Property: data });
      const q = '$apply=groupby((City),aggregate(Latitude with sum as S,Latitude with average as A))';
      const pgAnswer = (await viaPostgres(pair, 'Property', q)).value;
      const before = pair.engine.query('Property', q).value;
      // in file (row) order the float sums may differ in the last bits, never by more than rounding
      pgAnswer.forEach((r, i) => {
        for (const p of ['S', 'A']) expect(Math.abs((r[p] as number) - (before[i][p] as number))).toBeLessThanOrEqual(1e-12 * Math.abs(before[i][p] as number));
      });
      // a change (the first record written again, as it was) and a compaction: the engine's rows are then in key order
      await pair.engine.upsert('Property', [data[0]]);
      await pair.engine.compact();
      await expectSame(pair, 'Property', q);
    });
  });

  describe('generated groupings (fast-check)', () => {
    /** The fields a grouping may use: those the data holds, the derived ones (DaysOnMarket, service_...), one that is always null. */
    function fieldsOf(pair: Pair, resource: Resource): FieldDef[] {
      const schema = pair.engine.schemaOf(resource);
      const held = new Set(genRecords[resource].flatMap((r) => Object.keys(r)));
      const usable = schema.fields.filter((f) => !f.collection && f.type !== 'Edm.GeographyPoint' && !isSearchField(f.name));
      const empty = usable.find((f) => !held.has(f.name) && f.origin !== 'derived');
      return usable.filter((f) => held.has(f.name) || f.origin === 'derived' || f === empty);
    }

    const FILTERS: Record<Resource, string[]> = {
      Property: [],
      Media: ['ImageWidth gt 1000', "MediaCategory eq 'Photo'", 'Order le 3 or PreferredPhotoYN eq true', 'ModificationTimestamp lt 2025-01-01T00:00:00Z'],
      OpenHouse: ['OpenHouseDate ge 2025-05-01', "OpenHouseType ne 'Public'"],
      Member: ["startswith(MemberLastName,'S')", "MemberStatus eq 'Active'"],
      Office: ["OfficeStateOrProvince in ('WA','TX')", 'ModificationTimestamp gt 2024-01-01T00:00:00Z'],
    };
    const SOURCES = ['ARMLS', 'BrightMLS', 'CRMLS', 'HAR', 'MRED', 'NWMLS', 'NorthstarMLS', 'Stellar'];

    const METHODS: Record<string, string[]> = {
      number: ['sum', 'average', 'avg', 'min', 'max', 'countdistinct', 'median', 'p10', 'p25', 'p50', 'p75', 'p90', 'p95'],
      ordered: ['min', 'max', 'countdistinct', 'median', 'p10', 'p90', 'p95'],
      string: ['min', 'max', 'countdistinct'],
      boolean: ['countdistinct'],
    };
    const methodsOf = (f: FieldDef): string[] => {
      if (f.type === 'Edm.String') return METHODS.string;
      if (f.type === 'Edm.Boolean') return METHODS.boolean;
      if (f.type === 'Edm.Date' || f.type === 'Edm.DateTimeOffset') return METHODS.ordered;
      return METHODS.number;
    };

    function queryOf(fields: readonly FieldDef[], filters: readonly string[]): fc.Arbitrary<{ query: string; sources?: string[] }> {
      // numbers, dates, timestamps and booleans as often as strings (most fields are strings)
      const typed = fields.filter((f) => f.type !== 'Edm.String');
      const field = fc.oneof(fc.constantFrom(...fields), fc.constantFrom(...typed));
      const aggregate = fc.oneof(
        { arbitrary: fc.constant(null), weight: 1 },
        { arbitrary: field.chain((f) => fc.constantFrom(...methodsOf(f)).map((m) => ({ f, m }))), weight: 4 },
      );
      return fc
        .record({
          groupBy: fc.uniqueArray(field, { maxLength: 3, selector: (f) => f.name }),
          aggregates: fc.array(aggregate, { maxLength: 4 }),
          orderBy: fc.array(fc.tuple(fc.nat(8), fc.boolean()), { maxLength: 3 }),
          select: fc.option(fc.array(fc.nat(8), { minLength: 1, maxLength: 3 }), { nil: undefined }),
          top: fc.option(fc.nat(60), { nil: undefined, freq: 2 }),
          skip: fc.option(fc.nat(12), { nil: undefined, freq: 2 }),
          filter: fc.option(fc.constantFrom(...filters), { nil: undefined }),
          ignoreNulls: fc.boolean(),
          sources: fc.option(fc.subarray(SOURCES), { nil: undefined, freq: 2 }),
        })
        .filter((g) => g.groupBy.length > 0 || g.aggregates.length > 0)
        .map((g) => {
          const items = g.aggregates.map((a, i) => (a === null ? `$count as N${i}` : `${a.f.name} with ${a.m} as A${i}`));
          const properties = [...g.groupBy.map((f) => f.name), ...items.map((it) => it.slice(it.lastIndexOf(' ') + 1))];
          const groupby = `groupby((${g.groupBy.map((f) => f.name).join(',')})${items.length ? `,aggregate(${items.join(',')})` : ''})`;
          const parts = [`$apply=${g.groupBy.length ? groupby : `aggregate(${items.join(',')})`}`];
          if (g.filter) parts.push(`$filter=${g.filter}`);
          const order = [...new Map(g.orderBy.map(([i, d]) => [properties[i % properties.length], d])).entries()];
          if (order.length) parts.push(`$orderby=${order.map(([p, d]) => `${p}${d ? ' desc' : ''}`).join(',')}`);
          if (g.select) parts.push(`$select=${[...new Set(g.select.map((i) => properties[i % properties.length]))].join(',')}`);
          if (g.top !== undefined) parts.push(`$top=${g.top}`);
          if (g.skip !== undefined) parts.push(`$skip=${g.skip}`);
          if (g.ignoreNulls) parts.push('$ignorenulls=true');
          return { query: parts.join('&'), sources: g.sources };
        });
    }

    const RESOURCES: Array<[Resource, number]> = [
      ['Property', 60],
      ['Media', 30],
      ['OpenHouse', 25],
      ['Member', 25],
      ['Office', 25],
    ];
    it.each(RESOURCES)('%s', async (resource, runs) => {
      const filters =
        resource === 'Property'
          ? fixedFilters(genRecords.Property).filter((f) => !f.includes('search.text') && !f.includes('ListingId eq'))
          : FILTERS[resource];
      await fc.assert(
        fc.asyncProperty(queryOf(fieldsOf(gen, resource), filters), async ({ query, sources }) => {
          await expectSame(gen, resource, query, sources);
        }),
        { numRuns: runs, seed: 16_000 + resource.length },
      );
    });
  });

  describe('statements', () => {
    it('depend only on the shape of the query: literals are parameters', async () => {
      const a = await viaPostgres(
        def,
        'Property',
        "$apply=filter(City eq 'Seattle')/groupby((PropertyType),aggregate(ListPrice with p90 as P))&$top=7&$skip=2",
      );
      const b = await viaPostgres(def, 'Property', "$apply=filter(City eq 'Tampa')/groupby((PropertyType),aggregate(ListPrice with p90 as P))&$top=3&$skip=1");
      expect(a.sql).toBe(b.sql);
      expect(a.sql).not.toMatch(/Seattle|Tampa/);
    });

    it('percentile_disc picks rank ceil(p × n / 100) for every p and n', async () => {
      // PostgreSQL itself, n = 1..400 (every residue of n modulo 20 many times)
      const { rows } = await pool.query<{ bad: string }>(
        `SELECT count(*) AS bad FROM generate_series(1, 400) n, unnest(ARRAY[10, 25, 50, 75, 90, 95]) p,
           LATERAL (SELECT percentile_disc(p::float8 / 100) WITHIN GROUP (ORDER BY x) AS v FROM generate_series(1, n) x) q
         WHERE q.v <> (p * n + 99) / 100`,
      );
      expect(Number(rows[0].bad)).toBe(0);
      // the same double arithmetic (fl(fl(p/100) × n), then ceil) far beyond any table
      for (const p of [10, 25, 50, 75, 90, 95]) {
        const f = p / 100;
        let bad = 0;
        for (let n = 1; n <= 2_000_000; n++) if (Math.ceil(f * n) !== Math.ceil((p * n) / 100)) bad++;
        expect(bad, `p${p}`).toBe(0);
      }
    });
  });
});

describe('compileApply refuses what binding never gives it', () => {
  const field = (name: string, type: FieldDef['type'], collection = false): FieldDef => ({
    name,
    type,
    collection,
    lookup: null,
    origin: 'local',
    key: false,
    selectable: true,
    filterable: true,
    sortable: !collection,
    searchFields: [],
    freeText: false,
  });
  const ctx = (): FilterContext => ({
    schema: { key: 'ListingKey' } as FilterContext['schema'],
    alias: 't',
    table: 't',
    params: new Params(),
    nowMs: NOW,
    search: () => 'true',
  });
  const grouping = (g: Partial<BoundGrouping>): BoundGrouping => ({ groupBy: [], aggregates: [], properties: [], order: [], select: null, ...g });

  it('a point or a collection as a group field', () => {
    expect(() =>
      compileApply(
        grouping({ groupBy: [field('Location', 'Edm.GeographyPoint')], properties: ['Location'] }),
        'FROM x t',
        ctx(),
        { offset: 0, limit: 1 },
        false,
      ),
    ).toThrow(/cannot be grouped/);
    expect(() =>
      compileApply(
        grouping({ aggregates: [{ alias: 'A', op: 'countdistinct', field: field('Appliances', 'Edm.String', true), p: 0 }], properties: ['A'] }),
        'FROM x t',
        ctx(),
        { offset: 0, limit: 1 },
        false,
      ),
    ).toThrow(/cannot be grouped/);
  });

  it('a percentile outside (0, 100]', () => {
    for (const p of [0, 101, 12.5]) {
      expect(() =>
        compileApply(
          grouping({ aggregates: [{ alias: 'A', op: 'percentile', field: field('ListPrice', 'Edm.Decimal'), p }], properties: ['A'] }),
          'FROM x t',
          ctx(),
          { offset: 0, limit: 1 },
          false,
        ),
      ).toThrow(/percentile/);
    }
  });

  it('binding errors come before any SQL, from the shared binder', async () => {
    const engine = await Engine.open({ now: () => new Date(NOW) });
    for (const [q, code] of [
      ['$apply=groupby((City),aggregate(City with sum as S))', 'InvalidAggregate'],
      ['$apply=groupby((Appliances))', 'InvalidGroupBy'],
      ['$apply=groupby((City))&$orderby=ListPrice', 'NotInApplyResult'],
      ['$apply=aggregate($count as N,ListPrice with max as N)', 'DuplicateAlias'],
    ]) {
      let err: unknown;
      try {
        engine.explain('Property', q, { format: 'json' });
      } catch (e) {
        err = e;
      }
      expect(err, q).toBeInstanceOf(QueryError);
      expect((err as QueryError).code, q).toBe(code);
    }
  });
});
