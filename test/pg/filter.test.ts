/**
 * src/pg/filter.ts against the in-memory evaluator on a real PostgreSQL: the rows where the
 * compiled filter is TRUE (and where its negation is) are the in-memory engine's, on the default
 * data set's Property, Media, OpenHouse, Member and Office (the fixed filter table, filters made
 * for every field by its type, generated filters) and on a data set of edge values (Unicode,
 * extreme numbers, points at the antimeridian and the poles, distances to the last bit);
 * compiled values and orders equal the evaluator's; the statement text depends on the shape only.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { compile } from '../../src/exec/compile.js';
import { haversineMeters } from '../../src/geo/distance.js';
import { parseQuery } from '../../src/odata/parse-query.js';
import { compileFilter, compileValue, utf16Order, type FilterContext } from '../../src/pg/filter.js';
import { indexStatements } from '../../src/pg/layout.js';
import { Params } from '../../src/pg/sql.js';
import { bindFilter, bindOrderBy } from '../../src/plan/bind.js';
import type { Bound, Value } from '../../src/plan/bound.js';
import type { TableSchema } from '../../src/schema/table-schema.js';
import { RESOURCE_NAMES, type FieldDef, type ResourceName } from '../../src/schema/types.js';
import { fixedFilters, generatedFilter } from '../exec/filter-cases.js';
import { loadEngine, type LoadedDatabase } from './filter-data.js';
import { freshDatabase, pgSkip } from './helpers.js';

type Resource = 'Property' | 'Media' | 'OpenHouse' | 'Member' | 'Office';
const RESOURCES: readonly Resource[] = ['Property', 'Media', 'OpenHouse', 'Member', 'Office'];
const KEY: Record<Resource, string> = { Property: 'ListingKey', Media: 'MediaKey', OpenHouse: 'OpenHouseKey', Member: 'MemberKey', Office: 'OfficeKey' };
const NOW = Date.parse('2025-06-01T00:00:00Z');
const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const quote = (s: string): string => `'${s.replace(/'/g, "''")}'`;
/** A number as an OData literal that reads back as exactly that double. */
const num = (n: number): string => (Number.isInteger(n) && Math.abs(n) < 1e21 ? String(n) : String(n).includes('e') ? String(n) : String(n));
const day = (ms: number): string => new Date(ms).toISOString().slice(0, 10);
const stamp = (ms: number): string => new Date(ms).toISOString();

/** An engine and its copy in PostgreSQL, with the two ways of answering a filter. */
class Pair {
  constructor(
    readonly engine: Engine,
    readonly db: LoadedDatabase,
  ) {}

  context(resource: Resource, params: Params): FilterContext {
    return {
      schema: this.db.schema(resource),
      alias: 't',
      table: this.db.layout.table(resource),
      params,
      nowMs: NOW,
      search: () => {
        throw new Error('search.text is compiled by src/pg/search.ts');
      },
    };
  }

  bound(resource: Resource, filter: string): Bound {
    return bindFilter(parseQuery(`$filter=${filter}`).filter!, { schema: this.db.schema(resource), option: '$filter' }).expr;
  }

  /** Keys where the compiled filter (or its negation) is TRUE, in UTF-16 order. */
  async sqlKeys(resource: Resource, filter: string, negate = false): Promise<string[]> {
    const params = new Params();
    const sql = compileFilter(this.bound(resource, filter), this.context(resource, params));
    // WHERE keeps the rows where the condition is TRUE (not FALSE, not NULL)
    const where = negate ? `NOT (${sql})` : `(${sql})`;
    const res = await this.db.pool.query<{ k: string }>(
      `SELECT t."${KEY[resource]}" AS k FROM ${this.db.layout.table(resource)} t WHERE ${where}`,
      params.values,
    );
    return res.rows.map((r) => r.k).sort(byCodeUnit);
  }

  /** The in-memory engine's keys for the filter, in pages of its largest $top. */
  memoryKeys(resource: Resource, filter: string): string[] {
    const out: string[] = [];
    const top = resource === 'Media' ? 25000 : 50000;
    for (let skip = 0; ; skip += top) {
      const page = this.engine.query(resource, `$filter=${filter}&$select=${KEY[resource]}&$top=${top}&$skip=${skip}`).value;
      out.push(...page.map((r) => r[KEY[resource]] as string));
      if (page.length < top) break;
    }
    return out.sort(byCodeUnit);
  }

  /** Asserts the same rows for the filter and for its negation; returns how many match. */
  async expectSame(resource: Resource, filter: string): Promise<number> {
    const want = this.memoryKeys(resource, filter);
    expect(await this.sqlKeys(resource, filter), `${resource}: ${filter}`).toEqual(want);
    expect(await this.sqlKeys(resource, filter, true), `${resource}: not (${filter})`).toEqual(this.memoryKeys(resource, `not (${filter})`));
    return want.length;
  }

  /** Values of an expression per key: PostgreSQL's compileValue and the in-memory evaluator's. */
  async values(resource: Resource, expr: string): Promise<{ sql: Map<string, Value>; memory: Map<string, Value> }> {
    const schema = this.db.schema(resource);
    const [key] = bindOrderBy(parseQuery(`$orderby=${expr}`).orderby!, { schema, option: '$orderby' }, 0);
    if (key.kind !== 'expr') throw new Error('not an expression');
    const params = new Params();
    const v = compileValue(key.expr, this.context(resource, params));
    const type = key.expr.type;
    // read dates as days and timestamps as epoch ms, as the evaluator gives them
    const read = type === 'date' ? `((${v}) - DATE '1970-01-01')::float8` : type === 'dateTimeOffset' ? `(extract(epoch from ${v}) * 1000)::float8` : v;
    const res = await this.db.pool.query<{ k: string; v: unknown }>(
      `SELECT t."${KEY[resource]}" AS k, ${read} AS v FROM ${this.db.layout.table(resource)} t`,
      params.values,
    );
    const sql = new Map<string, Value>();
    for (const r of res.rows) sql.set(r.k, typeof r.v === 'string' && (type === 'integer' || type === 'decimal') ? Number(r.v) : (r.v as Value));
    const table = this.engine.store.table(resource);
    const evaluate = compile(key.expr, { table, nowMs: NOW, searchHit: () => false, geoTest: () => () => false });
    const memory = new Map<string, Value>();
    for (let row = 0; row < table.rowCount; row++) {
      const m = evaluate(row);
      memory.set(table.value(row, KEY[resource]) as string, typeof m === 'number' && Number.isNaN(m) ? null : m);
    }
    return { sql, memory };
  }

  /** Keys in the order of `$orderby=expr dir` (key last): by compileValue in SQL and by the engine. */
  async orders(resource: Resource, orderby: string): Promise<{ sql: string[]; memory: string[] }> {
    const schema = this.db.schema(resource);
    const params = new Params();
    const keys = bindOrderBy(parseQuery(`$orderby=${orderby}`).orderby!, { schema, option: '$orderby' }, 0).map((k) => {
      if (k.kind !== 'expr') throw new Error('relevance');
      const v = compileValue(k.expr, this.context(resource, params));
      return `${k.expr.type === 'string' ? utf16Order(v) : v} ${k.descending ? 'DESC NULLS LAST' : 'ASC NULLS FIRST'}`;
    });
    const res = await this.db.pool.query<{ k: string }>(
      `SELECT t."${KEY[resource]}" AS k FROM ${this.db.layout.table(resource)} t ORDER BY ${[...keys, `${utf16Order(`t."${KEY[resource]}"`)} ASC`].join(', ')}`,
      params.values,
    );
    const memory = this.engine.query(resource, `$orderby=${orderby}&$select=${KEY[resource]}&$top=20000`).value.map((r) => r[KEY[resource]] as string);
    return { sql: res.rows.map((r) => r.k), memory };
  }
}

const sameValues = (got: Map<string, Value>, want: Map<string, Value>, what: string): void => {
  const norm = (v: Value): Value => (typeof v === 'number' && v === 0 ? 0 : v);
  for (const [k, w] of want) expect(norm(got.get(k) ?? null), `${what} @ ${k}`).toEqual(norm(w));
  expect(got.size, what).toBe(want.size);
};

/** Filters for every filterable field of a resource by its type, with values taken from the data. */
function fieldFilters(engine: Engine, resource: Resource): string[] {
  const table = engine.store.table(resource);
  const rows = [0, 1, 7, 42, 99].map((i) => Math.min(i, table.rowCount - 1));
  const out: string[] = [];
  const sample = (f: FieldDef): Value[] => {
    const values: Value[] = [];
    for (const row of rows) {
      const v = table.value(row, f.name, NOW);
      if (v !== null && !Array.isArray(v) && typeof v !== 'object') values.push(v);
    }
    return [...new Set(values)];
  };
  for (const f of table.schema.fields) {
    if (!f.filterable || f.name.startsWith('#')) continue;
    const n = f.name;
    if (f.collection) {
      const elements = rows.flatMap((row) => (table.value(row, n) as string[] | null) ?? []);
      const v = elements[0] ?? 'x';
      out.push(
        `${n}/any(a: a eq ${quote(v)})`,
        `${n}/all(a: a ne ${quote(v)})`,
        `${n}/any()`,
        `${quote(v)} in ${n}`,
        `${n}/any(a: startswith(a,${quote(v.slice(0, 1))}))`,
        `${n}/all(a: a lt ${quote(v)})`,
        `${n}/any(a: length(a) gt 6 and a ne ${quote(v)})`,
        `${n}/all(a: contains(tolower(a),'e'))`,
      );
      continue;
    }
    switch (f.type) {
      case 'Edm.String': {
        const values = sample(f) as string[];
        const v = values[0] ?? 'x';
        const w = values[1] ?? v;
        out.push(
          `${n} eq ${quote(v)}`,
          `${n} ne ${quote(v)}`,
          `${n} lt ${quote(w)}`,
          `${n} ge ${quote(v)}`,
          `${n} eq null`,
          `${n} in (${quote(v)},${quote(w)},null)`,
          `contains(${n},${quote(v.slice(1, 3))})`,
          `startswith(${n},${quote(v.slice(0, 2))})`,
          `endswith(${n},${quote(v.slice(-2))})`,
          `length(${n}) gt ${v.length - 1}`,
          `indexof(${n},${quote(v.slice(2, 3))}) ge 2`,
          `tolower(${n}) eq ${quote(v.toLowerCase())}`,
          `toupper(${n}) lt 'M'`,
          `trim(${n}) eq ${n}`,
          `substring(${n},1,3) eq ${quote(v.slice(1, 4))}`,
          `substring(${n},2) ge ${quote(w.slice(2))}`,
          `concat(${n},'x') eq ${quote(`${v}x`)}`,
        );
        break;
      }
      case 'Edm.Int16':
      case 'Edm.Int32':
      case 'Edm.Int64':
      case 'Edm.Decimal':
      case 'Edm.Double': {
        const values = sample(f) as number[];
        const v = values[0] ?? 1;
        const w = values[1] ?? v + 1;
        for (const op of ['eq', 'ne', 'lt', 'le', 'gt', 'ge']) out.push(`${n} ${op} ${num(v)}`);
        out.push(
          `${n} gt ${num(v + 0.5)}`,
          `${n} le ${num(w - 0.25)}`,
          `${n} eq null`,
          `${n} ge null`,
          `${n} in (${num(v)},${num(w)},2.5,null)`,
          `${n} add 1 gt ${num(v)}`,
          `${n} sub ${num(w)} lt 0`,
          `${n} mul 3 le ${num(w * 3)}`,
          `${n} div 2 ge ${num(v / 2)}`,
          `${n} mod 3 eq 1`,
          `-${n} lt -${num(v)}`,
          `${n} div 0 eq null`,
        );
        break;
      }
      case 'Edm.Boolean':
        out.push(`${n} eq true`, `${n} eq false`, `${n} eq null`, `${n} ne true`, `${n}`, `not ${n}`);
        break;
      case 'Edm.Date': {
        const values = sample(f) as string[];
        const v = values[0] ?? '2024-01-01';
        out.push(
          `${n} eq ${v}`,
          `${n} lt ${v}`,
          `${n} ge ${v}`,
          `${n} ne null`,
          `${n} in (${v},2024-02-29,null)`,
          `year(${n}) eq ${v.slice(0, 4)}`,
          `month(${n}) ge 6`,
          `day(${n}) lt 10`,
        );
        break;
      }
      case 'Edm.DateTimeOffset': {
        const col = table.columnOf(n, 'timestamp');
        const ms = rows.map((row) => col?.get(row) ?? null).filter((x): x is number => x !== null);
        const v = ms[0] === undefined ? '2025-01-01T00:00:00Z' : stamp(ms[0]);
        out.push(
          `${n} eq ${v}`,
          `${n} lt ${v}`,
          `${n} ge ${v}`,
          `${n} gt 2025-05-20T12:00:00-07:00`,
          `${n} eq null`,
          `${n} in (${v},null)`,
          `year(${n}) eq 2025`,
          `month(${n}) lt 4`,
          `day(${n}) eq 1`,
          `hour(${n}) ge 12`,
          `minute(${n}) lt 30`,
          `second(${n}) eq 0`,
          `date(${n}) eq ${ms[0] === undefined ? '2025-01-01' : day(ms[0])}`,
          `${n} lt now()`,
        );
        break;
      }
      case 'Edm.GeographyPoint': {
        const p = rows.map((row) => table.value(row, n) as { coordinates: [number, number] } | null).find((x) => x !== null);
        const [lon, lat] = p?.coordinates ?? [-122.3, 47.6];
        out.push(`${n} eq null`, `${n} ne null`, `geo.distance(${n}, geography'POINT(${lon} ${lat})') le 5000`);
        break;
      }
    }
  }
  return out;
}

describe.skipIf(pgSkip)('compiled filters on the default data set', () => {
  let pair: Pair;
  beforeAll(async () => {
    const engine = await Engine.open({ now: () => new Date(NOW) });
    pair = new Pair(engine, await loadEngine(await freshDatabase('filter'), engine, RESOURCES));
  }, 180_000);
  afterAll(async () => pair?.db.pool.end());

  it('the fixed filter table (search.text left out): the same rows, and the same rows for not (...)', async () => {
    const records = pair.engine.query('Property', '$top=100&$orderby=ListingKey').value;
    const cases = fixedFilters(records).filter((f) => !f.includes('search.text'));
    let nonEmpty = 0;
    for (const f of cases) if ((await pair.expectSame('Property', f)) > 0) nonEmpty++;
    expect(nonEmpty).toBeGreaterThan(cases.length - 5);
  });

  it.each(RESOURCES)(
    '%s: filters on every field by its type',
    async (resource) => {
      const filters = fieldFilters(pair.engine, resource);
      expect(filters.length).toBeGreaterThan(resource === 'Property' ? 400 : 50);
      let nonEmpty = 0;
      for (const f of filters) if ((await pair.expectSame(resource, f)) > 0) nonEmpty++;
      expect(nonEmpty).toBeGreaterThan(filters.length / 3);
    },
    300_000,
  );

  it('generated filters (fast-check: the engine suite’s, without search.text, and more comparisons): the same rows', async () => {
    const records = pair.engine.query('Property', '$top=2000').value;
    const rec = fc.nat(records.length - 1).map((i) => records[i]);
    const cmp = fc.constantFrom('lt', 'le', 'gt', 'ge', 'eq', 'ne');
    const filter = generatedFilter(records, {
      search: false,
      extra: [
        fc.tuple(cmp, rec).map(([op, r]) => `City ${op} ${quote(r.City as string)}`),
        fc.tuple(cmp, fc.constantFrom('2.5', '-1', '1e300')).map(([op, v]) => `BedroomsTotal ${op} ${v}`),
        fc.tuple(cmp, rec).map(([op, r]) => `ModificationTimestamp ${op} ${r.ModificationTimestamp as string}`),
        fc.tuple(cmp, fc.integer({ min: -2, max: 300 })).map(([op, d]) => `DaysOnMarket ${op} ${d}`),
        fc.tuple(cmp, rec).map(([op, r]) => `ListingContractDate ${op} ${r.ListingContractDate as string}`),
      ],
    });
    let nonEmpty = 0;
    await fc.assert(
      fc.asyncProperty(filter, async (f) => {
        if ((await pair.expectSame('Property', f)) > 0) nonEmpty++;
      }),
      { seed: 20251126, numRuns: 300 },
    );
    expect(nonEmpty).toBeGreaterThan(100);
  });

  it('values of arithmetic, string and date expressions equal the evaluator’s, row by row', async () => {
    for (const expr of [
      'ListPrice add 1000',
      'ListPrice sub OriginalListPrice',
      'ListPrice mul 1.1',
      'ListPrice div 7',
      'LivingArea div BedroomsTotal',
      'BedroomsTotal div 2',
      'BedroomsTotal mod 3',
      'ListPrice mod 7',
      'LivingArea mod 0.7',
      '-ListPrice',
      'length(City)',
      "indexof(PublicRemarks,'pool')",
      'tolower(City)',
      'toupper(UnparsedAddress)',
      'trim(PublicRemarks)',
      'substring(UnparsedAddress,3,5)',
      'concat(City,StateOrProvince)',
      'year(ModificationTimestamp)',
      'second(ModificationTimestamp)',
      'date(ModificationTimestamp)',
      'month(ListingContractDate)',
      'DaysOnMarket',
      'DaysOnMarket mul 2',
      'ListPrice',
      'ModificationTimestamp',
      'ListingContractDate',
    ]) {
      const { sql, memory } = await pair.values('Property', expr);
      sameValues(sql, memory, expr);
    }
    const media = await pair.values('Media', 'Order mul ImageWidth div 3');
    sameValues(media.sql, media.memory, 'Media: Order mul ImageWidth div 3');
  });

  it('orders by compiled values (nulls lowest, strings in UTF-16 order) are the engine’s', async () => {
    for (const o of [
      'ListPrice desc',
      'City,ListPrice desc',
      'tolower(City) desc,ListPrice',
      'DaysOnMarket',
      'LivingArea div BedroomsTotal desc',
      'ModificationTimestamp desc',
      'PoolPrivateYN',
    ]) {
      const { sql, memory } = await pair.orders('Property', o);
      expect(sql, o).toEqual(memory);
    }
  });

  it('two filters that differ only in their literals compile to the same statement', () => {
    const text = (f: string): { sql: string; values: unknown[] } => {
      const params = new Params();
      const sql = compileFilter(pair.bound('Property', f), pair.context('Property', params));
      return { sql, values: params.values };
    };
    for (const [a, b] of [
      ["City eq 'Seattle' and ListPrice gt 100000", "City eq 'Tampa' and ListPrice gt 2.5e6"],
      [
        'BedroomsTotal le 3 or DaysOnMarket gt 30 or ListingContractDate lt 2024-01-01',
        'BedroomsTotal le 2.5 or DaysOnMarket gt 1 or ListingContractDate lt 1999-12-31',
      ],
      ["geo.distance(Location, geography'POINT(-122.3 47.6)') le 3000", "geo.distance(Location, geography'POINT(180 -90)') le -1"],
      ["Appliances/any(a: a eq 'Oven') and 'Pond' in WaterfrontFeatures", "Appliances/any(a: a eq 'Dryer') and '' in WaterfrontFeatures"],
      [
        "ListPrice mul 2 add 3 gt LivingArea mod 7 and substring(City,1,2) lt 'x'",
        "ListPrice mul 1e300 add -3 gt LivingArea mod 0.25 and substring(City,100,0) lt '🏠'",
      ],
      [
        "StandardStatus in ('Active','Pending') and ModificationTimestamp ge 2025-01-01T00:00:00Z",
        "StandardStatus in ('Closed') and ModificationTimestamp ge 0001-01-01T00:00:00+01:00",
      ],
      ["tolower(City) eq concat('sea', 'ttle')", "tolower(City) eq concat('ta', 'mpa')"],
    ]) {
      const x = text(a);
      const y = text(b);
      expect(y.sql, `${a} / ${b}`).toBe(x.sql);
      expect(y.values).not.toEqual(x.values);
      // no literal reaches the statement's text
      for (const v of y.values) if (typeof v === 'string' && v.length > 3) expect(y.sql).not.toContain(v);
    }
  });

  it('comparisons of a column with constants are index conditions (B-tree, GiST, GIN)', async () => {
    const schemas = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, pair.engine.store.table(r).schema])) as Record<ResourceName, TableSchema>;
    for (const statement of indexStatements(pair.db.layout, schemas)) await pair.db.pool.query(statement);
    // as after autovacuum: the visibility map set, so some plans read the index alone
    await pair.db.pool.query(`VACUUM ANALYZE ${pair.db.layout.table('Property')}`);
    const client = await pair.db.pool.connect();
    try {
      // the planner may prefer a scan of 2,000 rows; what matters here is that the index can answer
      await client.query('SET enable_seqscan = off');
      for (const [filter, index] of [
        ['ListPrice ge 300000', 'Property#ListPrice'],
        ['ListPrice lt 2.5e5', 'Property#ListPrice'],
        ['BedroomsTotal eq 3', 'Property#BedroomsTotal'],
        ['BedroomsTotal gt 2.5', 'Property#BedroomsTotal'],
        ['BedroomsTotal in (2, 3)', 'Property#BedroomsTotal'],
        ["City eq 'Seattle'", 'Property#City'],
        ["City lt 'M'", 'Property#City'],
        ["StandardStatus in ('Active','Pending')", 'Property#StandardStatus'],
        ['ModificationTimestamp ge 2025-05-01T00:00:00Z', 'Property#ModificationTimestamp'],
        ['ListingContractDate lt 2024-06-01', 'Property#ListingContractDate'],
        ['DaysOnMarket le 7', 'Property#service_DaysOnMarketReferenceTimestamp'],
        ['DaysOnMarket gt 100', 'Property#service_DaysOnMarketReferenceTimestamp'],
        ["Appliances/any(a: a eq 'Dishwasher')", 'Property#Appliances'],
        ["'Pond' in WaterfrontFeatures", 'Property#WaterfrontFeatures'],
        ["geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 3000", 'Property#Location'],
      ]) {
        const params = new Params();
        const sql = compileFilter(pair.bound('Property', filter), pair.context('Property', params));
        const plan = (
          await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN SELECT 1 FROM ${pair.db.layout.table('Property')} t WHERE (${sql})`, params.values)
        ).rows
          .map((r) => r['QUERY PLAN'])
          .join('\n');
        expect(plan, `${filter}\n${plan}`).toMatch(new RegExp(`Index (Only )?Scan (on|using) "${index}"[^\\n]*\\n\\s*Index Cond`));
      }
    } finally {
      await client.query('RESET enable_seqscan');
      client.release();
    }
  });

  it('what cannot be compiled is an Error, not SQL', () => {
    const params = new Params();
    expect(() => compileFilter(pair.bound('Property', "search.text(KeywordSearchText,'pool')"), pair.context('Property', params))).toThrow(/search/);
    const location = pair.db.schema('Property').field('Location')!;
    expect(() => compileValue({ kind: 'field', type: 'point', field: location }, pair.context('Property', params))).toThrow(/point/);
  });
});

/** Strings at the edges: case mapping, trimming, UTF-16 versus code point order, quotes. */
const STRINGS = [
  '',
  'a',
  'A',
  'Seattle',
  'seattle',
  'SEATTLE',
  'ΟΔΟΣ',
  'Σ',
  'straße',
  'İstanbul',
  'ﬀ',
  '🏠 home',
  'home 🏠',
  '\uFFFD',
  '\uE000x',
  '\uFFFFz',
  '\u{10FFFF}',
  '\u{1F3E0}\uFFFD',
  ' \u00A0trim me\u3000\n',
  '\u180Ekeep',
  'tab\there',
  "quote'd",
  'back\\slash',
  '%_like',
  'ǅ',
  '\u{10D50}garay',
  'ÄÖÜ',
  '123',
  'x'.repeat(120),
];
const NUMBERS = [
  0,
  1,
  -1,
  2.5,
  0.1,
  0.3,
  7,
  1e300,
  -1e300,
  1.7976931348623157e308,
  5e-324,
  1e-310,
  2.2250738585072014e-308,
  123456789.123,
  2 ** 53 + 2,
  1e21,
  999999999999.99,
];
const INTEGERS = [0, 1, -3, 7, 2 ** 53, -(2 ** 53), 1e18, 42];
const TIMESTAMPS = [
  '2025-05-31T23:59:59.999Z',
  '1970-01-01T00:00:00Z',
  '1969-12-31T23:59:59.999Z',
  '2025-06-01T00:00:00Z',
  '2025-06-02T00:00:00Z',
  '2024-02-29T12:34:56.789+05:30',
  '2025-03-09T02:30:00-08:00',
  '1900-01-01T00:00:00Z',
  '2999-12-31T23:59:59.999Z',
];
const DATES = ['2024-02-29', '1970-01-01', '1969-12-31', '1900-03-01', '2999-12-31', '2025-06-01'];
const POINTS: Array<[number, number]> = [
  [0, 0],
  [180, 0],
  [-180, 0],
  [179.9999999, 0.5],
  [-179.9999999, 0.5],
  [0, 90],
  [0, -90],
  [5e-324, 1e-320],
  [-122.3321, 47.6062],
  [-0.0000001, 89.9999999],
  [12.5, -33.9],
  [100, 45],
];

/** A data set of edge values, then points spread over the sphere (seeded). */
function edgeRecords(): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  const pick = <T>(list: readonly T[], i: number, stride: number): T | null => (i % 11 === stride % 11 ? null : list[(i * stride) % list.length]);
  for (let i = 0; i < 150; i++) {
    const p = pick(POINTS, i, 5);
    out.push({
      ListingKey: `E${String(i).padStart(3, '0')}`,
      City: pick(STRINGS, i, 1),
      PublicRemarks: pick(STRINGS, i + 3, 7),
      UnparsedAddress: pick(STRINGS, i, 13),
      StandardStatus: pick(['Active', 'Pending', 'Closed', 'Active Under Contract'], i, 3),
      ListPrice: pick(NUMBERS, i, 1),
      OriginalListPrice: pick(NUMBERS, i, 3),
      LivingArea: pick(NUMBERS, i + 5, 7),
      BedroomsTotal: pick(INTEGERS, i, 1),
      YearBuilt: pick(INTEGERS, i, 3),
      ModificationTimestamp: pick(TIMESTAMPS, i, 1),
      OnMarketTimestamp: pick(TIMESTAMPS, i, 4),
      ListingContractDate: pick(DATES, i, 1),
      CloseDate: pick(DATES, i, 5),
      PoolPrivateYN: pick([true, false], i, 1),
      Appliances: i % 4 === 0 ? [] : [pick(STRINGS, i, 1), pick(STRINGS, i, 3), 'Dishwasher'].filter((s) => s !== null),
      View: i % 3 === 0 ? [] : [pick(STRINGS, i, 7) ?? 'City'],
      ...(p === null ? {} : { Longitude: p[0], Latitude: p[1] }),
    });
  }
  // points over the sphere, and crowded at the antimeridian and the poles
  let seed = 20251126;
  const random = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let i = 0; i < 250; i++) {
    const kind = i % 5;
    const lon = kind === 1 ? 180 - random() * 0.01 : kind === 2 ? -180 + random() * 0.01 : random() * 360 - 180;
    const lat = kind === 3 ? 90 - random() * 0.01 : kind === 4 ? -90 + random() * 0.5 : Math.asin(random() * 2 - 1) * (180 / Math.PI);
    out.push({ ListingKey: `G${String(i).padStart(3, '0')}`, Longitude: lon, Latitude: lat, ListPrice: random() * 1e6 });
  }
  return out;
}

/** The largest double below d (d > 0). */
function below(d: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, d);
  view.setBigUint64(0, view.getBigUint64(0) - 1n);
  return view.getFloat64(0);
}

/** Well-typed filters over the edge data set's fields, as OData text (fast-check). */
function typedFilter(): fc.Arbitrary<string> {
  const lit = (list: readonly string[]): fc.Arbitrary<string> => fc.constantFrom(...list);
  const numberLiterals = lit([
    '0',
    '1',
    '-1',
    '2.5',
    '0.1',
    '0.3',
    '1e300',
    '-1e300',
    '1.7976931348623157e308',
    '5e-324',
    '1e-310',
    '1e999',
    '-1e999',
    '1e-999',
    '7',
    '3',
    'null',
  ]);
  const intLiterals = lit(['0', '1', '2', '5', '-1', '-7', '100', '99999999999', '9007199254740993']);
  const stringLiterals = fc.constantFrom(...STRINGS.slice(0, 28), 'e', 'Σ', '🏠', 'SS').map(quote);
  return fc.letrec<{ num: string; int: string; str: string; date: string; ts: string; bool: string; pred: string }>((tie) => ({
    int: fc.oneof(
      { depthSize: 'small' },
      lit(['BedroomsTotal', 'YearBuilt', 'DaysOnMarket']),
      intLiterals,
      tie('str').map((s) => `length(${s})`),
      fc.tuple(tie('str'), tie('str')).map(([a, b]) => `indexof(${a},${b})`),
      fc.tuple(tie('int'), fc.constantFrom('add', 'sub', 'mul', 'div', 'mod'), tie('int')).map(([a, op, b]) => `(${a} ${op} ${b})`),
    ),
    num: fc.oneof(
      { depthSize: 'small' },
      lit(['ListPrice', 'OriginalListPrice', 'LivingArea', 'Latitude', 'Longitude']),
      numberLiterals,
      tie('int'),
      fc.tuple(tie('num'), fc.constantFrom('add', 'sub', 'mul', 'div', 'mod'), tie('num')).map(([a, op, b]) => `(${a} ${op} ${b})`),
      tie('num').map((a) => `-(${a})`),
      fc.tuple(fc.constantFrom('year', 'month', 'day'), tie('date')).map(([f, d]) => `${f}(${d})`),
      fc.tuple(fc.constantFrom('year', 'month', 'day', 'hour', 'minute', 'second'), tie('ts')).map(([f, t]) => `${f}(${t})`),
    ),
    str: fc.oneof(
      { depthSize: 'small' },
      lit(['City', 'PublicRemarks', 'UnparsedAddress', 'StandardStatus']),
      stringLiterals,
      fc.tuple(fc.constantFrom('tolower', 'toupper', 'trim'), tie('str')).map(([f, s]) => `${f}(${s})`),
      fc.tuple(tie('str'), tie('str')).map(([a, b]) => `concat(${a},${b})`),
      fc.tuple(tie('str'), tie('int')).map(([s, i]) => `substring(${s},${i})`),
      fc.tuple(tie('str'), tie('int'), tie('int')).map(([s, i, n]) => `substring(${s},${i},${n})`),
    ),
    date: fc.oneof(
      lit(['ListingContractDate', 'CloseDate', '0000-02-29', ...DATES]),
      tie('ts').map((t) => `date(${t})`),
    ),
    ts: fc.oneof(lit(['ModificationTimestamp', 'OnMarketTimestamp', 'now()', '0000-01-01T00:00:00+01:00', ...TIMESTAMPS])),
    pred: fc.oneof(
      fc.tuple(fc.constantFrom('eq', 'ne', 'lt', 'ge'), stringLiterals).map(([op, s]) => `x ${op} ${s}`),
      stringLiterals.map((s) => `startswith(x,${s})`),
      fc.tuple(fc.constantFrom('eq', 'lt'), tie('str')).map(([op, s]) => `x ${op} ${s}`),
      tie('int').map((i) => `length(x) gt ${i}`),
      fc.constant("contains(tolower(x),'e')"),
      fc.constant('x eq null'),
    ),
    bool: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.tuple(tie('num'), fc.constantFrom('eq', 'ne', 'gt', 'ge', 'lt', 'le'), tie('num')).map(([a, op, b]) => `${a} ${op} ${b}`),
      fc.tuple(tie('str'), fc.constantFrom('eq', 'ne', 'gt', 'ge', 'lt', 'le'), tie('str')).map(([a, op, b]) => `${a} ${op} ${b}`),
      fc.tuple(tie('date'), fc.constantFrom('eq', 'ne', 'gt', 'le'), tie('date')).map(([a, op, b]) => `${a} ${op} ${b}`),
      fc.tuple(tie('ts'), fc.constantFrom('eq', 'ne', 'lt', 'ge'), tie('ts')).map(([a, op, b]) => `${a} ${op} ${b}`),
      fc.tuple(fc.constantFrom('contains', 'startswith', 'endswith'), tie('str'), tie('str')).map(([f, a, b]) => `${f}(${a},${b})`),
      fc.tuple(tie('num'), fc.array(numberLiterals, { maxLength: 4 })).map(([a, l]) => `${a} in (${l.join(',')})`),
      fc.tuple(tie('str'), fc.array(stringLiterals, { maxLength: 4 })).map(([a, l]) => `${a} in (${l.join(',')})`),
      fc.tuple(fc.constantFrom('Appliances', 'View'), fc.constantFrom('any', 'all'), tie('pred')).map(([c, op, p]) => `${c}/${op}(x: ${p})`),
      fc.tuple(tie('str'), fc.constantFrom('Appliances', 'View')).map(([s, c]) => `${s} in ${c}`),
      lit(['PoolPrivateYN', 'PoolPrivateYN eq false', 'PoolPrivateYN ne null', 'Appliances/any()', 'RawLocation eq null', 'Location ne null']),
      fc
        .tuple(fc.constantFrom(...POINTS), fc.constantFrom('1', '1000', '5e6', '2e7', '-1', '1e-300'))
        .map(([[lon, lat], m]) => `geo.distance(RawLocation, geography'POINT(${lon} ${lat})') le ${m}`),
      fc.tuple(tie('bool'), fc.constantFrom('and', 'or'), tie('bool')).map(([a, op, b]) => `(${a}) ${op} (${b})`),
      tie('bool').map((a) => `not (${a})`),
      fc.tuple(tie('bool'), fc.constantFrom('eq true', 'eq false', 'ne true', 'eq null', 'ne null')).map(([a, t]) => `(${a}) ${t}`),
    ),
  })).bool;
}

describe.skipIf(pgSkip)('compiled filters on a data set of edge values', () => {
  let pair: Pair;
  beforeAll(async () => {
    const engine = await Engine.open({ data: { Property: edgeRecords() }, now: () => new Date(NOW) });
    pair = new Pair(engine, await loadEngine(await freshDatabase('edge'), engine, ['Property']));
  }, 120_000);
  afterAll(async () => pair?.db.pool.end());

  it.each([
    // doubles: overflow, underflow, NaN, the sign of zero, integer division, fmod
    'ListPrice mul 1e10 gt 1e300',
    'ListPrice mul ListPrice eq ListPrice mul ListPrice',
    'ListPrice add ListPrice gt ListPrice',
    'ListPrice mul 1e308 sub ListPrice mul 1e308 eq 0',
    'ListPrice mul 1e308 sub ListPrice mul 1e308 ne 0',
    'LivingArea mul LivingArea eq 0',
    'LivingArea mul 1e-30 gt 0',
    'LivingArea div 1e300 eq 0',
    'LivingArea div 1e-300 gt 1e300',
    'ListPrice div LivingArea gt 1e300',
    'ListPrice div LivingArea lt -1e300',
    'ListPrice mod 7 eq 3',
    'LivingArea mod 0.1 gt 0.05',
    'ListPrice mod LivingArea ge 0',
    'ListPrice mod LivingArea lt 0.5',
    'OriginalListPrice mod 1e-310 eq 0',
    'BedroomsTotal div 0 eq null',
    'BedroomsTotal mod 0 eq null',
    'BedroomsTotal div 2 eq -1',
    'BedroomsTotal mod -2 eq -1',
    'BedroomsTotal mul BedroomsTotal gt 1e35',
    '-ListPrice lt 0',
    'ListPrice add 1.7976931348623157e308 gt 1e308',
    'ListPrice sub 1.7976931348623157e308 lt -1e308',
    'ListPrice gt 1e999 sub 1e999',
    'ListPrice lt 1e999 sub 1e999',
    'BedroomsTotal le 1e999 sub 1e999',
    'BedroomsTotal in (7, 2.5, 9007199254740992, null)',
    'ListPrice in (0.3, 1e300, 5e-324)',
    'BedroomsTotal gt 2.5 and BedroomsTotal lt 1e300',
    'BedroomsTotal ge -1e999',
    // strings
    "tolower(City) eq 'οδος'",
    "toupper(City) eq 'STRASSE'",
    "tolower(City) eq 'i̇stanbul'",
    "toupper(PublicRemarks) eq 'FF'",
    'length(City) eq 7',
    'length(PublicRemarks) lt 2',
    "indexof(City,'home') eq 2",
    "indexof(PublicRemarks,'🏠') ge 0",
    "substring(City,1) eq ' home'",
    "substring(City,1,1) eq '\uFFFD'",
    "substring(City,-5,2) eq '🏠 '",
    "trim(PublicRemarks) eq 'trim me'",
    'trim(City) eq City',
    "City lt '\uFFFD'",
    "City gt '🏠'",
    "City ge '\uE000'",
    'City lt UnparsedAddress',
    "concat(City,'🏠') gt concat(UnparsedAddress,'\uFFFF')",
    "contains(City,'🏠')",
    "endswith(City,'🏠')",
    "startswith(City,'')",
    "City eq 'quote''d'",
    "contains(City,'%_')",
    "City in ('a','A','ΟΔΟΣ',null)",
    "Appliances/any(x: x lt '\uFFFD')",
    "Appliances/all(x: x ne 'Dishwasher')",
    'View/any(x: x eq null)',
    // a lambda inside a lambda's predicate (the outer chain reads the row again from its table): every nesting of any and all, inner over the outer element or not
    'Appliances/any(a: View/any(v: length(v) eq length(a)))',
    'Appliances/all(a: View/any(v: v gt a))',
    'Appliances/any(a: View/all(v: length(v) lt length(a)) eq true)',
    'Appliances/all(a: View/all(v: v ne a) or length(a) gt 9)',
    "View/any(v: Appliances/all(a: a ne v) and length(v) gt 3 and Appliances/any(w: w eq 'Dishwasher' or w lt v))",
    "Appliances/any(a: not (View/any(v: contains(v,substring(a,0,1)))) and a ne 'Oven')",
    "'🏠 home' in Appliances",
    // PostgreSQL text holds neither U+0000 nor lone surrogates: such literals are sent with U+FFFD
    "contains(City,'a\u0000b') or City eq '\uD800x'",
    "City ne '\u0000' and startswith(City,'\uDC00')",
    // dates, timestamps, DaysOnMarket
    'ModificationTimestamp eq 2025-05-31T23:59:59.999Z',
    'ModificationTimestamp lt 1970-01-01T00:00:00Z',
    'year(ModificationTimestamp) eq 1969',
    'hour(ModificationTimestamp) eq 7 or minute(ModificationTimestamp) eq 4',
    'second(ModificationTimestamp) eq 59',
    'date(ModificationTimestamp) eq 2024-02-29',
    'ListingContractDate le 1969-12-31',
    // before year 1 (PostgreSQL counts 1 BC where JavaScript has year 0)
    'ModificationTimestamp gt 0000-03-01T00:00:00+01:00',
    'ListingContractDate in (0000-02-29, 1969-12-31)',
    'date(ModificationTimestamp) gt 0000-02-29 and year(0000-01-01T00:30:00+01:00) eq -1',
    'year(CloseDate) ge 2999',
    'DaysOnMarket eq 0',
    'DaysOnMarket ge 1',
    'DaysOnMarket gt 20000',
    'DaysOnMarket lt 0',
    'DaysOnMarket le 2.5',
    'DaysOnMarket ne 0',
    'DaysOnMarket mul 2 gt 50000',
    // points
    'Location eq null',
    'RawLocation ne null',
    "geo.distance(RawLocation, geography'POINT(180 0)') le 30",
    "geo.distance(RawLocation, geography'POINT(-180 0.5)') le 100",
    "geo.distance(RawLocation, geography'POINT(0 90)') le 1200",
    "geo.distance(RawLocation, geography'POINT(0 0)') le 0",
    "geo.distance(RawLocation, geography'POINT(0 0)') le 1e-300",
    "geo.distance(RawLocation, geography'POINT(0 0)') le -1",
    "geo.distance(RawLocation, geography'POINT(0 0)') le 1e999",
    "geo.distance(RawLocation, geography'POINT(90 0)') le 20015086.796020572",
    "geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 1",
  ])('%s', async (f) => {
    await pair.expectSame('Property', f);
  });

  it('prepared once and reused with other literals (generic plans): the same rows every time', async () => {
    const client = await pair.db.pool.connect();
    try {
      await client.query('SET plan_cache_mode = force_generic_plan');
      const shapes: Array<(i: number) => string> = [
        (i) =>
          `ListPrice mul ${['1e10', '5e-324', '1.7976931348623157e308', '2', '-1e-300', '0', '1e999', '0.1'][i]} gt ${['1e300', '0', '1', '-1', '7', '1e-320', '0', '0.3'][i]}`,
        (i) => `City lt ${quote(STRINGS[(i * 5) % STRINGS.length])} or substring(City,${i - 2},${i}) eq ${quote(STRINGS[i])}`,
        (i) => `BedroomsTotal in (${i}, ${i + 0.5}, ${INTEGERS[i]}${i % 2 ? ', null' : ''}) or DaysOnMarket le ${i * 100 - 3}`,
        (i) =>
          `geo.distance(RawLocation, geography'POINT(${POINTS[i][0]} ${POINTS[i][1]})') le ${['1', '1000000', '2e7', '0', '1e-300', '5e5', '1e999', '3e6'][i]}`,
        (i) => `LivingArea mod ${['7', '0.1', '1e-310', '-3', '1e300', '2.5', '1e999', '0'][i]} lt ${i}`,
      ];
      for (const shape of shapes) {
        const first = new Params();
        const text = compileFilter(pair.bound('Property', shape(0)), pair.context('Property', first));
        for (let i = 0; i < 8; i++) {
          const params = new Params();
          const filter = shape(i);
          expect(compileFilter(pair.bound('Property', filter), pair.context('Property', params)), filter).toBe(text);
          const res = await client.query<{ k: string }>({
            name: `shape${shapes.indexOf(shape)}`,
            text: `SELECT t."ListingKey" AS k FROM ${pair.db.layout.table('Property')} t WHERE (${text})`,
            values: params.values,
          });
          expect(res.rows.map((r) => r.k).sort(byCodeUnit), filter).toEqual(pair.memoryKeys('Property', filter));
        }
      }
    } finally {
      await client.query('RESET plan_cache_mode');
      client.release();
    }
  });

  it('generated well-typed filters over every kind of value (fast-check): the same rows', async () => {
    await fc.assert(
      fc.asyncProperty(typedFilter(), async (f) => {
        await pair.expectSame('Property', f);
      }),
      { seed: Number(process.env.SEED ?? 20251127), numRuns: Number(process.env.RUNS ?? 500) },
    );
  }, 300_000);

  it('a point exactly at the radius is inside and one double nearer is outside, as in memory, to the last bit', async () => {
    const table = pair.engine.store.Property;
    const points: Array<[number, number]> = [];
    for (let row = 0; row < table.rowCount; row++) {
      const p = table.value(row, 'RawLocation') as { coordinates: [number, number] } | null;
      if (p !== null) points.push(p.coordinates);
    }
    let inside = 0;
    for (let i = 0; i < 60; i++) {
      const [clon, clat] = points[(i * 37) % points.length];
      const [x, y] = points[(i * 101 + 13) % points.length];
      const d = haversineMeters(clon, clat, x, y);
      if (!(d > 0)) continue;
      for (const r of [d, below(d)]) {
        const f = `geo.distance(RawLocation, geography'POINT(${clon} ${clat})') le ${r}`;
        const keys = await pair.sqlKeys('Property', f);
        expect(keys, f).toEqual(pair.memoryKeys('Property', f));
        if (r === d && keys.length > 0) inside++;
      }
    }
    expect(inside).toBeGreaterThan(40);
  });

  it('values of edge expressions equal the evaluator’s, and orders over them the engine’s', async () => {
    for (const expr of [
      'ListPrice mul LivingArea',
      'ListPrice div LivingArea',
      'ListPrice mod LivingArea',
      'OriginalListPrice add ListPrice',
      'BedroomsTotal div -2',
      'BedroomsTotal mod 5',
      'tolower(City)',
      'toupper(PublicRemarks)',
      'trim(PublicRemarks)',
      'length(City)',
      "indexof(City,'🏠')",
      'substring(City,1,2)',
      'year(ModificationTimestamp)',
      'date(ModificationTimestamp)',
      'DaysOnMarket',
    ]) {
      const { sql, memory } = await pair.values('Property', expr);
      sameValues(sql, memory, expr);
    }
    for (const o of ['City', 'tolower(PublicRemarks) desc', 'ListPrice mul LivingArea desc', 'ListPrice mod LivingArea', 'DaysOnMarket desc,City']) {
      const { sql, memory } = await pair.orders('Property', o);
      expect(sql, o).toEqual(memory);
    }
  });
});

describe.skipIf(pgSkip)('string functions over every code point', () => {
  let pool: pg.Pool;
  let schema: TableSchema;
  beforeAll(async () => {
    const engine = await Engine.open({ data: { Property: [{ ListingKey: 'K', City: 'x' }] } });
    schema = engine.store.Property.schema;
    pool = new pg.Pool({ connectionString: await freshDatabase('chars'), max: 1 });
  });
  afterAll(async () => pool?.end());

  /** The compiled value of `expr` over City for each string, by PostgreSQL. */
  async function apply(expr: string, strings: readonly string[]): Promise<string[]> {
    const [key] = bindOrderBy(parseQuery(`$orderby=${expr}`).orderby!, { schema, option: '$orderby' }, 0);
    if (key.kind !== 'expr') throw new Error('relevance');
    const params = new Params();
    const sql = compileValue(key.expr, { schema, alias: 't', table: 't', params, nowMs: NOW, search: () => 'false' });
    const list = params.add(strings, 'text[]');
    const res = await pool.query<{ v: string }>(`SELECT ${sql} AS v FROM unnest(${list}) WITH ORDINALITY AS t("City", o) ORDER BY o`, params.values);
    return res.rows.map((r) => r.v);
  }

  it('tolower, toupper and trim are JavaScript’s for every code point and for context-dependent words', async () => {
    const all: string[] = [];
    for (let cp = 1; cp <= 0x10ffff; cp++) if (cp < 0xd800 || cp > 0xdfff) all.push(String.fromCodePoint(cp));
    all.push('ΟΔΟΣ', 'ΣΑΣ Σ', 'AΣ.', 'Σ\u0301', 'AΣ\u0301b', 'İstanbul', 'i̇', 'straße', 'ǅungla', 'ﬃ');
    const bad: string[] = [];
    for (let i = 0; i < all.length; i += 100_000) {
      const part = all.slice(i, i + 100_000);
      const [lower, upper, trimmed] = await Promise.all(['tolower(City)', 'toupper(City)', "trim(concat(concat(City,'x'),City))"].map((e) => apply(e, part)));
      part.forEach((s, k) => {
        if (lower[k] !== s.toLowerCase()) bad.push(`tolower U+${s.codePointAt(0)!.toString(16)}`);
        if (upper[k] !== s.toUpperCase()) bad.push(`toupper U+${s.codePointAt(0)!.toString(16)}`);
        if (trimmed[k] !== `${s}x${s}`.trim()) bad.push(`trim U+${s.codePointAt(0)!.toString(16)}`);
      });
    }
    expect(bad.slice(0, 20)).toEqual([]);
  }, 120_000);

  it('utf16Order sorts as JavaScript compares strings (UTF-16 code units), where COLLATE "C" does not', async () => {
    const pieces = ['a', 'z', '\uD7FF', '\uE000', '\uFFFD', '\uFFFF', '\u{10000}', '\u{1F3E0}', '\u{10FFFF}', '\u0001', ''];
    const strings: string[] = [];
    for (const a of pieces) for (const b of pieces) strings.push(a + b, `${a}\u{10FFFF}${b}`);
    const unique = [...new Set(strings)];
    const params = new Params();
    const list = params.add(unique, 'text[]');
    const order = async (key: string): Promise<string[]> =>
      (await pool.query<{ s: string }>(`SELECT s FROM unnest(${list}) AS v(s) ORDER BY ${key}`, params.values)).rows.map((r) => r.s);
    const want = [...unique].sort(byCodeUnit);
    expect(await order(utf16Order('s COLLATE "C"'))).toEqual(want);
    expect(await order('s COLLATE "C"')).not.toEqual(want);
  });
});
