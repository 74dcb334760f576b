/**
 * $apply (SERVICE.md §3): the engine against a naive reference written out below (group with a
 * Map over plain records, aggregate with Array.filter/reduce/sort, textbook nearest-rank
 * percentile), on the default data set and on small hand-made record sets for the edge cases.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine, type QueryResult } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import type { AggregateItem, Expr, MemberExpr, OrderByItem } from '../../src/odata/ast.js';
import { parseQuery } from '../../src/odata/parse-query.js';
import { APPLY_CASES, PERCENTILE_QUERY, percentileRecords } from './apply-cases.js';
import { NaiveEngine } from './oracle.js';

/** The $skiptoken an unchanged engine's nextLinks carry. */
const pin = (e: { pageToken: string }): string => e.pageToken;

type Rec = Record<string, unknown>;
type Scalar = string | number | boolean | null;
type Row = Record<string, Scalar>;

const NOW = Date.parse('2025-06-01T00:00:00Z');
const DAY = 86_400_000;
const isDate = (f: string): boolean => /Date$/.test(f);
const isTimestamp = (f: string): boolean => /Timestamp|Time$/.test(f);

// ---------------------------------------------------------------------------------------------
// The naive reference
// ---------------------------------------------------------------------------------------------

/** A field's value for aggregation: dates and timestamps as epoch ms. */
function value(naive: NaiveEngine, r: Rec, field: string): Scalar {
  const v = naive.field(r, field) as Scalar;
  return v !== null && isDate(field) ? (v as number) * DAY : v;
}

/** A field's value as a group value in the result: dates as YYYY-MM-DD, timestamps canonical. */
function groupValue(naive: NaiveEngine, r: Rec, field: string): Scalar {
  const v = naive.field(r, field) as Scalar;
  if (v === null) return null;
  if (isDate(field)) return new Date((v as number) * DAY).toISOString().slice(0, 10);
  if (isTimestamp(field)) return new Date(v as number).toISOString();
  return v;
}

/** Nulls lowest, then `<` (ordinal for strings, false before true). */
function compare(a: Scalar, b: Scalar): number {
  if (a === b) return 0;
  if (a === null) return -1;
  if (b === null) return 1;
  return a < b ? -1 : 1;
}

/** The textbook nearest-rank percentile: the value at 1-based rank ceil(p/100 × n), ascending. */
function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil((p * values.length) / 100) - 1];
}

const PERCENT: Record<string, number> = { median: 50, p10: 10, p25: 25, p50: 50, p75: 75, p90: 90, p95: 95 };

function aggregateOf(method: string, values: Scalar[]): Scalar {
  const vs = values.filter((v) => v !== null);
  switch (method) {
    case 'sum':
      return vs.length ? (vs as number[]).reduce((a, b) => a + b, 0) : null;
    case 'average':
    case 'avg':
      return vs.length ? (vs as number[]).reduce((a, b) => a + b, 0) / vs.length : null;
    case 'min':
      return vs.length ? vs.reduce((a, b) => (b < a ? b : a)) : null;
    case 'max':
      return vs.length ? vs.reduce((a, b) => (b > a ? b : a)) : null;
    case 'countdistinct':
      return new Set(vs).size;
    default:
      return percentile(vs as number[], PERCENT[method]);
  }
}

interface NaiveQuery {
  readonly records: Rec[];
  readonly naive: NaiveEngine;
  readonly query: string;
  readonly sources?: readonly string[];
}

/** The rows a query with $apply must return (before $skip/$top/$select). */
function reference({ records, naive, query, sources }: NaiveQuery): Row[] {
  const parsed = parseQuery(query);
  const filters: Expr[] = [];
  if (parsed.filter) filters.push(parsed.filter);
  let groupBy: string[] = [];
  let items: readonly AggregateItem[] = [];
  for (const step of parsed.apply ?? []) {
    if (step.kind === 'filter') filters.push(step.predicate);
    else if (step.kind === 'groupby') {
      groupBy = step.properties.map((m) => m.path[0]);
      items = step.aggregate?.items ?? [];
    } else items = step.items;
  }
  const rows = records.filter(
    (r, i) => (!sources || sources.includes(r.OriginatingSystemName as string)) && filters.every((f) => naive.eval(f, r, i) === true),
  );

  const groups = new Map<string, Rec[]>();
  for (const r of rows) {
    const key = JSON.stringify(groupBy.map((f) => groupValue(naive, r, f)));
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key)!.push(r);
  }
  if (groupBy.length === 0 && groups.size === 0) groups.set('[]', []);
  const sorted = [...groups.entries()]
    .map(([k, rs]) => [JSON.parse(k) as Scalar[], rs] as const)
    .sort(([a], [b]) => {
      for (let i = 0; i < a.length; i++) {
        const d = compare(a[i], b[i]);
        if (d !== 0) return d;
      }
      return 0;
    });
  const out = sorted.map(([vals, rs]) => {
    const row: Row = {};
    groupBy.forEach((f, i) => (row[f] = vals[i]));
    for (const item of items) {
      if (item.kind === 'aggregateCount') row[item.alias] = rs.length;
      else {
        const field = (item.expr as MemberExpr).path[0];
        row[item.alias ?? `${field}_${item.method}`] = aggregateOf(
          item.method,
          rs.map((r) => value(naive, r, field)),
        );
      }
    }
    return row;
  });
  // $orderby over result properties; ties keep the group order (a stable sort)
  const order: readonly OrderByItem[] = parsed.orderby ?? [];
  return out.sort((a, b) => {
    for (const o of order) {
      const name = (o.expr as MemberExpr).path[0];
      const d = compare(a[name], b[name]);
      if (d !== 0) return o.direction === 'desc' ? -d : d;
    }
    return 0;
  });
}

// ---------------------------------------------------------------------------------------------

const records = readFileSync(path.join(DEFAULT_DATA_DIR, 'Property.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l) as Rec);
const naive = new NaiveEngine(records, NOW);
let engine: Engine;

beforeAll(async () => {
  engine = await Engine.open({ now: () => new Date(NOW) });
});

function errorOf(e: Engine, q: string): QueryError {
  try {
    e.query('Property', q);
  } catch (err) {
    if (err instanceof QueryError) return err;
    throw err;
  }
  throw new Error(`no error for ${q}`);
}

describe('$apply agrees with the naive reference on the default data set', () => {
  it.each(APPLY_CASES)('%s (sources %j)', (query, sources) => {
    const got = engine.query('Property', `${query}&$top=50000`, { sources }).value;
    const want = reference({ records, naive, query, sources });
    expect(got).toEqual(want);
    // every property in result order: group fields, then aliases as written
    if (want.length) expect(got.map((r) => Object.keys(r))).toEqual(want.map((r) => Object.keys(r)));
  });

  it('names a result F_M with the method as written', () => {
    const [row] = engine.query(
      'Property',
      '$apply=aggregate(ListPrice with avg,ListPrice with average,ListPrice with p50,ListPrice with median,City with countdistinct)',
    ).value;
    expect(Object.keys(row)).toEqual(['ListPrice_avg', 'ListPrice_average', 'ListPrice_p50', 'ListPrice_median', 'City_countdistinct']);
    expect(row.ListPrice_avg).toBe(row.ListPrice_average);
    expect(row.ListPrice_p50).toBe(row.ListPrice_median);
  });

  it('sums of a restricted view add up to the whole', () => {
    const sources = ['ARMLS', 'BrightMLS', 'CRMLS', 'HAR', 'MRED', 'NWMLS', 'NorthstarMLS', 'Stellar'];
    const whole = engine.query('Property', '$apply=aggregate($count as N)').value[0].N as number;
    const parts = sources.map((s) => engine.query('Property', '$apply=aggregate($count as N)', { sources: [s] }).value[0].N as number);
    expect(parts.reduce((a, b) => a + b, 0)).toBe(whole);
    expect(whole).toBe(records.length);
  });

  it('applies visibility to child resources through their listing', () => {
    const media = readFileSync(path.join(DEFAULT_DATA_DIR, 'Media.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Rec);
    const osn = new Map(records.map((r) => [r.ListingKey, r.OriginatingSystemName]));
    const sources = ['CRMLS', 'HAR'];
    const visible = media.filter((m) => m.ResourceName === 'Property' && sources.includes(osn.get(m.ResourceRecordKey) as string));
    const got = engine.query('Media', '$apply=groupby((MediaCategory),aggregate($count as N,ImageWidth with max as W))&$top=1000', { sources }).value;
    const cats = [...new Set(visible.map((m) => (m.MediaCategory as string | undefined) ?? null))].sort(compare);
    expect(got).toEqual(
      cats.map((c) => {
        const ms = visible.filter((m) => ((m.MediaCategory as string | undefined) ?? null) === c);
        return {
          MediaCategory: c,
          N: ms.length,
          W: aggregateOf(
            'max',
            ms.map((m) => (m.ImageWidth as number | undefined) ?? null),
          ),
        };
      }),
    );
  });

  it('a filter-only $apply returns records, as $filter would', () => {
    const a = engine.query('Property', "$apply=filter(City eq 'Tampa')/filter(BedroomsTotal ge 3)&$select=ListPrice&$orderby=ListPrice desc&$count=true");
    const b = engine.query('Property', "$filter=City eq 'Tampa' and BedroomsTotal ge 3&$select=ListPrice&$orderby=ListPrice desc&$count=true");
    expect(a.value).toEqual(b.value);
    expect(a['@odata.count']).toBe(b['@odata.count']);
    expect(a['@odata.nextLink']).toBe(
      `Property?$select=ListPrice&$orderby=ListPrice%20desc&$skip=10&$skiptoken=${pin(engine)}&$count=true&$apply=filter(City%20eq%20'Tampa')%2Ffilter(BedroomsTotal%20ge%203)`,
    );
  });

  it('explains the grouping', () => {
    const text = engine.explain(
      'Property',
      "$apply=filter(City eq 'Tampa')/groupby((StandardStatus),aggregate($count as N,ListPrice with p90 as P))&$orderby=N desc",
    );
    expect(text).toMatch(/candidates: lookup City in \('Tampa'\)/);
    expect(text).toMatch(/apply: group by StandardStatus; N = \$count, P = p90\(ListPrice\); order N desc, then group values/);
  });
});

describe('$top, $skip, $count, paging and $select over groups', () => {
  const base = '$apply=groupby((City),aggregate($count as N,ListPrice with max as Top))';
  let all: Row[];
  beforeAll(() => {
    all = reference({ records, naive, query: base });
    expect(all.length).toBe(24);
  });

  it('pages of 10 without $top, with a nextLink repeating $apply that yields the rest', () => {
    let res: QueryResult = engine.query('Property', base);
    expect(res.value).toEqual(all.slice(0, 10));
    expect(res['@odata.nextLink']).toBe(
      `Property?$skip=10&$skiptoken=${pin(engine)}&$apply=groupby((City)%2Caggregate(%24count%20as%20N%2CListPrice%20with%20max%20as%20Top))`,
    );
    const seen = [...res.value];
    while (res['@odata.nextLink']) {
      res = engine.query('Property', decodeURIComponent(res['@odata.nextLink'].slice('Property?'.length)));
      seen.push(...res.value);
    }
    expect(seen).toEqual(all);
  });

  it('$top under maxpagesize pages to exactly $top groups', () => {
    let res = engine.query('Property', `${base}&$top=15&$orderby=N desc`, { maxPageSize: 10 });
    expect(res.value.length).toBe(10);
    expect(res['@odata.nextLink']).toMatch(/\$top=5&\$skip=10/);
    const seen = [...res.value];
    while (res['@odata.nextLink']) {
      res = engine.query('Property', decodeURIComponent(res['@odata.nextLink'].slice('Property?'.length)), { maxPageSize: 10 });
      seen.push(...res.value);
    }
    const ordered = reference({ records, naive, query: `${base}&$orderby=N desc` });
    expect(seen).toEqual(ordered.slice(0, 15));
  });

  it('$count counts groups before $skip/$top; $top=0 is valid', () => {
    const r = engine.query('Property', `${base}&$count=true&$skip=20&$top=10`);
    expect(r['@odata.count']).toBe(24);
    expect(r.value).toEqual(all.slice(20));
    expect(r['@odata.nextLink']).toBeUndefined();
    expect(Object.keys(r)).toEqual(['@odata.context', '@odata.count', 'value']);
    const z = engine.query('Property', `${base}&$count=true&$top=0`);
    expect(z).toEqual({ '@odata.context': '$metadata#Property', '@odata.count': 24, value: [] });
    const one = engine.query('Property', '$apply=aggregate($count as N)&$count=true');
    expect(one['@odata.count']).toBe(1);
    const none = engine.query('Property', '$filter=ListPrice lt 0&$apply=groupby((City))&$count=true');
    expect(none).toEqual({ '@odata.context': '$metadata#Property', '@odata.count': 0, value: [] });
  });

  it('$skip and $top cut the ordered groups', () => {
    const ordered = reference({ records, naive, query: `${base}&$orderby=Top desc` });
    expect(engine.query('Property', `${base}&$orderby=Top desc&$skip=3&$top=4`).value).toEqual(ordered.slice(3, 7));
    expect(engine.query('Property', `${base}&$skip=30`).value).toEqual([]);
  });

  it('$select keeps the named group fields and aliases, in result order', () => {
    const r = engine.query('Property', `${base}&$select=Top,City&$top=50`).value;
    expect(r).toEqual(all.map((x) => ({ City: x.City, Top: x.Top })));
    expect(r.every((x) => Object.keys(x).join() === 'City,Top')).toBe(true);
    expect(engine.query('Property', `${base}&$select=N&$top=3`).value).toEqual(all.slice(0, 3).map((x) => ({ N: x.N })));
    expect(engine.query('Property', `${base}&$select=*&$top=3`).value).toEqual(all.slice(0, 3));
  });
});

describe('$apply on small record sets', () => {
  const rec = (key: string, fields: Rec): Rec => ({ ListingKey: key, OriginatingSystemName: 'T', ...fields });

  it('nearest-rank percentiles on n = 1, 2, 10, 11 and the lower middle as median', async () => {
    const data = percentileRecords();
    const e = await Engine.open({ data: { Property: data }, now: () => new Date(NOW) });
    const q = PERCENTILE_QUERY;
    const rows = e
      .query('Property', q)
      .value.map((r) => [r.City, r.med, r.ListPrice_p10, r.ListPrice_p25, r.ListPrice_p50, r.ListPrice_p75, r.ListPrice_p90, r.ListPrice_p95]);
    // worked by hand: rank = ceil(p × n / 100)
    expect(rows).toEqual([
      ['even', 2, 1, 1, 2, 3, 4, 4],
      ['n1', 7, 7, 7, 7, 7, 7, 7],
      ['n10', 5, 1, 3, 5, 8, 9, 10],
      ['n11', 6, 2, 3, 6, 9, 10, 11],
      ['n2', 10, 10, 10, 10, 20, 20, 20],
    ]);
    expect(e.query('Property', q).value).toEqual(reference({ records: data, naive: new NaiveEngine(data, NOW), query: q }));
  });

  it('empty groups give null aggregates, $count 0 and countdistinct 0; a null group value is its own group, first', async () => {
    const data = [
      rec('a', { City: 'Zed', ListPrice: 5 }),
      rec('b', { City: 'Alpha' }),
      rec('c', { City: 'Alpha' }),
      rec('d', { ListPrice: 9 }),
      rec('e', { ListPrice: 1 }),
    ];
    const e = await Engine.open({ data: { Property: data }, now: () => new Date(NOW) });
    const aggs =
      'ListPrice with sum as S,ListPrice with average as A,ListPrice with min as Lo,ListPrice with max as Hi,ListPrice with median as M,ListPrice with p95 as P,ListPrice with countdistinct as D,$count as N';
    expect(e.query('Property', `$apply=groupby((City),aggregate(${aggs}))`).value).toEqual([
      { City: null, S: 10, A: 5, Lo: 1, Hi: 9, M: 1, P: 9, D: 2, N: 2 },
      { City: 'Alpha', S: null, A: null, Lo: null, Hi: null, M: null, P: null, D: 0, N: 2 },
      { City: 'Zed', S: 5, A: 5, Lo: 5, Hi: 5, M: 5, P: 5, D: 1, N: 1 },
    ]);
    // a bare aggregate over no rows is still one row
    expect(e.query('Property', `$filter=ListPrice gt 100&$apply=aggregate(${aggs})`).value).toEqual([
      { S: null, A: null, Lo: null, Hi: null, M: null, P: null, D: 0, N: 0 },
    ]);
    // $ignorenulls leaves the null aggregates out
    expect(e.query('Property', `$apply=groupby((City),aggregate(ListPrice with sum as S,$count as N))&$ignorenulls=true`).value).toEqual([
      { S: 10, N: 2 },
      { City: 'Alpha', N: 2 },
      { City: 'Zed', S: 5, N: 1 },
    ]);
  });

  it('dates and timestamps aggregate to epoch ms; as group values they read as dates and canonical timestamps', async () => {
    const data = [
      rec('a', { ListingContractDate: '2024-01-01', ModificationTimestamp: '2024-05-01T10:00:00+02:00', City: 'X' }),
      rec('b', { ListingContractDate: '2024-03-15', ModificationTimestamp: '2024-05-01T09:00:00Z', City: 'X' }),
      rec('c', { ModificationTimestamp: '2024-05-01T08:00:00.000Z', City: 'X' }),
      rec('d', { ListingContractDate: '2023-12-31', City: 'X' }),
    ];
    const e = await Engine.open({ data: { Property: data }, now: () => new Date(NOW) });
    const [row] = e.query(
      'Property',
      '$apply=aggregate(ListingContractDate with min as Dmin,ListingContractDate with max as Dmax,ListingContractDate with median as Dmed,ListingContractDate with p95 as D95,ListingContractDate with countdistinct as Dn,ModificationTimestamp with min as Tmin,ModificationTimestamp with max as Tmax,ModificationTimestamp with median as Tmed,ModificationTimestamp with countdistinct as Tn)',
    ).value;
    expect(row).toEqual({
      Dmin: Date.UTC(2023, 11, 31),
      Dmax: Date.UTC(2024, 2, 15),
      Dmed: Date.UTC(2024, 0, 1),
      D95: Date.UTC(2024, 2, 15),
      Dn: 3,
      Tmin: Date.parse('2024-05-01T08:00:00Z'),
      Tmax: Date.parse('2024-05-01T09:00:00Z'),
      Tmed: Date.parse('2024-05-01T08:00:00Z'),
      Tn: 2, // 10:00+02:00 and 08:00Z are one instant
    });
    expect(e.query('Property', '$apply=groupby((ModificationTimestamp),aggregate($count as N))').value).toEqual([
      { ModificationTimestamp: null, N: 1 },
      { ModificationTimestamp: '2024-05-01T08:00:00.000Z', N: 2 },
      { ModificationTimestamp: '2024-05-01T09:00:00.000Z', N: 1 },
    ]);
    expect(e.query('Property', '$apply=groupby((ListingContractDate))&$orderby=ListingContractDate desc').value).toEqual([
      { ListingContractDate: '2024-03-15' },
      { ListingContractDate: '2024-01-01' },
      { ListingContractDate: '2023-12-31' },
      { ListingContractDate: null },
    ]);
  });

  it('countdistinct ignores nulls, for strings, free text, numbers and booleans', async () => {
    const data = [
      rec('a', { City: 'a', PublicRemarks: 'nice', ListPrice: 1, PoolPrivateYN: true }),
      rec('b', { ListPrice: 1 }),
      rec('c', { City: 'a', PublicRemarks: 'nice', PoolPrivateYN: false }),
      rec('d', { City: 'b', PublicRemarks: 'Nice', ListPrice: 2.5, PoolPrivateYN: true }),
    ];
    const e = await Engine.open({ data: { Property: data }, now: () => new Date(NOW) });
    expect(
      e.query(
        'Property',
        '$apply=aggregate(City with countdistinct as C,PublicRemarks with countdistinct as R,ListPrice with countdistinct as P,PoolPrivateYN with countdistinct as B,$count as N)',
      ).value,
    ).toEqual([{ C: 2, R: 2, P: 2, B: 2, N: 4 }]);
    // min/max of strings are ordinal
    expect(e.query('Property', '$apply=aggregate(PublicRemarks with min as Lo,PublicRemarks with max as Hi,City with max as C)').value).toEqual([
      { Lo: 'Nice', Hi: 'nice', C: 'b' },
    ]);
    expect(e.query('Property', '$apply=groupby((PoolPrivateYN,City),aggregate($count as N))').value).toEqual([
      { PoolPrivateYN: null, City: null, N: 1 },
      { PoolPrivateYN: false, City: 'a', N: 1 },
      { PoolPrivateYN: true, City: 'a', N: 1 },
      { PoolPrivateYN: true, City: 'b', N: 1 },
    ]);
  });

  it('groups integers through a value table and other numbers through a sort, negatives and -0 included', async () => {
    const prices = [-3, -0, 0, 2.5, -3, 70_000_000, 2, null];
    const data = prices.map((p, i) => rec(`k${i}`, p === null ? {} : { ListPrice: p, BedroomsTotal: p === 2.5 || p > 1e6 ? -1 : p }));
    const e = await Engine.open({ data: { Property: data }, now: () => new Date(NOW) });
    expect(e.query('Property', '$apply=groupby((ListPrice),aggregate($count as N))').value).toEqual([
      { ListPrice: null, N: 1 },
      { ListPrice: -3, N: 2 },
      { ListPrice: 0, N: 2 },
      { ListPrice: 2, N: 1 },
      { ListPrice: 2.5, N: 1 },
      { ListPrice: 70_000_000, N: 1 },
    ]);
    expect(e.query('Property', '$apply=groupby((BedroomsTotal),aggregate($count as N,ListPrice with countdistinct as D))').value).toEqual([
      { BedroomsTotal: null, N: 1, D: 0 },
      { BedroomsTotal: -3, N: 2, D: 1 },
      { BedroomsTotal: -1, N: 2, D: 2 },
      { BedroomsTotal: 0, N: 2, D: 1 },
      { BedroomsTotal: 2, N: 1, D: 1 },
    ]);
  });

  it('$orderby on an alias, desc, with ties broken by the group values ascending; nulls lowest', async () => {
    const cities = ['c', 'a', 'd', 'c', 'b', 'a', 'c', 'a', 'd'];
    const data = cities.map((c, i) => rec(`k${i}`, { City: c, ListPrice: c === 'b' ? null : i }));
    const e = await Engine.open({ data: { Property: data }, now: () => new Date(NOW) });
    const base = '$apply=groupby((City),aggregate($count as N,ListPrice with sum as S))';
    const order = (q: string): unknown[] => e.query('Property', q).value.map((r) => r.City);
    expect(order(`${base}&$orderby=N desc`)).toEqual(['a', 'c', 'd', 'b']);
    expect(order(`${base}&$orderby=N desc,City desc`)).toEqual(['c', 'a', 'd', 'b']);
    expect(order(`${base}&$orderby=N`)).toEqual(['b', 'd', 'a', 'c']);
    // S: a 1+5+7 = 13, d 2+8 = 10, c 0+3+6 = 9, b null (lowest, so last when descending)
    expect(order(`${base}&$orderby=S desc`)).toEqual(['a', 'd', 'c', 'b']);
    expect(order(`${base}&$orderby=S`)).toEqual(['b', 'c', 'd', 'a']);
  });
});

describe('$apply errors are coded, with the option and a position', () => {
  const cases: Array<[string, string, string, number | undefined]> = [
    ['$apply=groupby((City),aggregate(City with sum as S))', 'InvalidAggregate', '$apply', 25],
    ['$apply=aggregate(ListingContractDate with average as A)', 'InvalidAggregate', '$apply', 10],
    ['$apply=aggregate(PoolPrivateYN with max as A)', 'InvalidAggregate', '$apply', 10],
    ['$apply=aggregate(City with median as A)', 'InvalidAggregate', '$apply', 10],
    ['$apply=aggregate(Appliances with countdistinct as A)', 'InvalidAggregate', '$apply', 10],
    ['$apply=aggregate(Location with countdistinct as A)', 'InvalidAggregate', '$apply', 10],
    ['$apply=aggregate(ListPrice mul 2 with sum as A)', 'InvalidAggregate', '$apply', 10],
    ['$apply=aggregate(Nope with max)', 'UnknownField', '$apply', 10],
    ['$apply=groupby((Nope))', 'UnknownField', '$apply', 9],
    ['$apply=groupby((Media/MediaKey))', 'UnknownField', '$apply', 9],
    ['$apply=groupby((KeywordSearchText))', 'SearchFieldNotAllowed', '$apply', 9],
    ['$apply=groupby((Appliances))', 'InvalidGroupBy', '$apply', 9],
    ['$apply=groupby((City,Location))', 'InvalidGroupBy', '$apply', 14],
    ['$apply=groupby((City,City))', 'InvalidGroupBy', '$apply', 14],
    ['$apply=groupby((City),aggregate($count as N,ListPrice with max as N))', 'DuplicateAlias', '$apply', 37],
    ['$apply=groupby((City),aggregate($count as City))', 'DuplicateAlias', '$apply', 25],
    ['$apply=aggregate(ListPrice with max,ListPrice with max)', 'DuplicateAlias', '$apply', 29],
    ["$apply=groupby((City))/filter(City eq 'Tampa')", 'UnsupportedApply', '$apply', 16],
    ['$apply=aggregate($count as N)/groupby((City))', 'UnsupportedApply', '$apply', 23],
    ["$apply=filter(ListPrice eq 'x')/aggregate($count as N)", 'TypeMismatch', '$apply', 7],
    ['$apply=groupby((City))&$orderby=ListPrice', 'NotInApplyResult', '$orderby', 0],
    ['$apply=groupby((City),aggregate($count as N))&$orderby=N,tolower(City)', 'NotInApplyResult', '$orderby', 2],
    ['$apply=groupby((City))&$orderby=relevance desc', 'NotInApplyResult', '$orderby', 0],
    ['$apply=groupby((City))&$select=City,ListPrice', 'NotInApplyResult', '$select', 5],
    ['$apply=groupby((City))&$expand=Media', 'UnsupportedApply', '$expand', undefined],
  ];
  it.each(cases)('%s → %s', (q, code, option, position) => {
    const err = errorOf(engine, q);
    expect([err.code, err.option, err.position]).toEqual([code, option, position]);
    expect(err.message.length).toBeGreaterThan(20);
  });

  it('messages name the field, the method or the property', () => {
    expect(errorOf(engine, '$apply=aggregate(City with sum as S)').message).toBe('sum needs numbers, but City is a string.');
    expect(errorOf(engine, '$apply=groupby((City))&$orderby=ListPrice').message).toBe(
      "$orderby names 'ListPrice': after $apply only the group fields and aliases exist (City).",
    );
    expect(errorOf(engine, '$apply=groupby((City),aggregate($count as City))').message).toMatch(/'City'.*group field/);
  });
});
