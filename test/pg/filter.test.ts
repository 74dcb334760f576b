/**
 * src/pg/filter.ts against the in-memory evaluator on a real PostgreSQL: the rows where the
 * compiled filter is TRUE (and where its negation is) are the in-memory engine's, on the default
 * data set's Property, Media, OpenHouse, Member and Office (the fixed filter table, filters made
 * for every field by its type, generated filters) and on a data set of edge values (Unicode,
 * extreme numbers, points at the antimeridian and the poles, distances to the last bit);
 * compiled values and orders equal the evaluator's; the statement text depends on the shape only.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { compile } from '../../src/exec/compile.js';
import { parseQuery } from '../../src/odata/parse-query.js';
import { compileFilter, compileValue, utf16Order, type FilterContext } from '../../src/pg/filter.js';
import { Params } from '../../src/pg/sql.js';
import { bindFilter, bindOrderBy } from '../../src/plan/bind.js';
import type { Bound, Value } from '../../src/plan/bound.js';
import type { FieldDef } from '../../src/schema/types.js';
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
    const where = negate ? `(NOT ${sql}) IS TRUE` : `(${sql}) IS TRUE`;
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

  it('what cannot be compiled is an Error, not SQL', () => {
    const params = new Params();
    expect(() => compileFilter(pair.bound('Property', "search.text(KeywordSearchText,'pool')"), pair.context('Property', params))).toThrow(/search/);
    const location = pair.db.schema('Property').field('Location')!;
    expect(() => compileValue({ kind: 'field', type: 'point', field: location }, pair.context('Property', params))).toThrow(/point/);
  });
});
