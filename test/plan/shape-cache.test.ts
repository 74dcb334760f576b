/**
 * The shape-keyed plan cache (src/plan/cache.ts, template.ts) is exact: queries that share a
 * shape but not their literals, run in any order through one engine, each get the plan a cold
 * planner makes of their own text and the naive reference's answer, and a bad literal in a cached
 * shape gets the same QueryError (code, option, position, message) as it does without the cache.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Generation } from '../../src/access/generation.js';
import { DEFAULT_DATA_DIR, Engine } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import { statisticsOf } from '../../src/exec/statistics.js';
import { parseQuery } from '../../src/odata/parse-query.js';
import { PlanCache } from '../../src/plan/cache.js';
import type { Plan } from '../../src/plan/plan.js';
import { planQuery } from '../../src/plan/planner.js';
import { generatedFilter } from '../exec/filter-cases.js';
import { NaiveEngine } from '../exec/oracle.js';

type Rec = Record<string, unknown>;
const NOW = Date.parse('2025-06-01T00:00:00Z');
const lines = readFileSync(path.join(DEFAULT_DATA_DIR, 'Property.jsonl'), 'utf8').trim().split('\n');
const records = lines.map((l) => JSON.parse(l) as Rec);
const naive = new NaiveEngine(records, NOW);
let engine: Engine;
beforeAll(async () => void (engine = await Engine.open({ now: () => new Date(NOW) })));

const quote = (s: unknown): string => `'${String(s).replace(/'/g, "''")}'`;
const gen = (): Generation => (engine as unknown as { gen: Generation }).gen;
const cache = (): PlanCache => (engine as unknown as { plans: PlanCache }).plans;

type Outcome = { plan: Plan } | { code: string; option?: string; position?: number; message: string };
function outcome(make: () => Plan): Outcome {
  try {
    return { plan: make() };
  } catch (err) {
    if (!(err instanceof QueryError)) throw err;
    return { code: err.code, option: err.option, position: err.position, message: err.message };
  }
}

/** A query through the engine (its plan cache) agrees with a cold plan of its text and with the naive reference. */
function check(q: string): boolean {
  const cold = outcome(() => planQuery({ resource: 'Property', text: q }, statisticsOf(gen())));
  const cached = outcome(() => engine.explain('Property', q, { format: 'json' }));
  expect(cached, q).toEqual(cold);
  if (!('plan' in cold)) {
    expect(() => engine.query('Property', q), q).toThrow(QueryError);
    return false;
  }
  const parsed = parseQuery(q);
  const want = naive.query(parsed.filter, parsed.orderby);
  const got = engine.query('Property', q);
  const skip = parsed.skip ?? 0;
  expect(
    got.value.map((r) => r.ListingKey),
    q,
  ).toEqual(want.slice(skip, skip + (parsed.top ?? 10)));
  if (parsed.count) expect(got['@odata.count'], q).toBe(want.length);
  return true;
}

const rec = fc.nat(records.length - 1).map((i) => records[i]);
const price = fc.oneof(
  rec.map((r) => String(r.ListPrice)),
  fc.integer({ min: 0, max: 3_000_000 }).map(String),
  fc.double({ min: 0, max: 3e6, noNaN: true }).map((d) => d.toFixed(2)),
);
const day = fc.tuple(fc.constantFrom(2022, 2023, 2024, 2025), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 31 }));
const date = day.map(([y, m, d]) => `${y}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`);
const top = fc.integer({ min: 0, max: 40 });
const skip = fc.integer({ min: 0, max: 30 });

/** Shapes the literals vary in: every literal kind (string, integer/decimal, date, timestamp, point, $top/$skip). */
const query: fc.Arbitrary<string> = fc.oneof(
  rec.map((r) => `$filter=ListingId eq ${quote(r.ListingId)}&$select=ListingKey`),
  fc
    .tuple(rec, price, price, fc.integer({ min: 0, max: 5 }), top, skip)
    .map(
      ([r, lo, hi, beds, t, s]) =>
        `$filter=StandardStatus eq ${quote(r.StandardStatus)} and ListPrice ge ${lo} and ListPrice le ${hi} and BedroomsTotal ge ${beds}&$orderby=ListPrice desc&$top=${t}&$skip=${s}&$select=ListingKey`,
    ),
  fc
    .tuple(rec, rec, rec)
    .map(
      ([a, b, c]) =>
        `$filter=StandardStatus eq ${quote(a.StandardStatus)} and PropertyType eq ${quote(b.PropertyType)} and City eq ${quote(c.City)}&$count=true&$top=0`,
    ),
  fc
    .tuple(rec, date, top)
    .map(
      ([r, d, t]) =>
        `$filter=ModificationTimestamp ge ${r.ModificationTimestamp as string} and ListingContractDate lt ${d}&$orderby=ModificationTimestamp desc&$top=${t}`,
    ),
  fc
    .tuple(rec, fc.integer({ min: 100, max: 50_000 }), rec, top)
    .map(
      ([r, m, s, t]) =>
        `$filter=geo.distance(Location, geography'POINT(${(r.Longitude as number) ?? -122.3} ${(r.Latitude as number) ?? 47.6})') le ${m} and StandardStatus eq ${quote(s.StandardStatus)}&$orderby=ListPrice desc&$top=${t}`,
    ),
  fc
    .tuple(rec, rec, price, top)
    .map(([a, b, p, t]) => `$filter=City in (${quote(a.City)},${quote(b.City)}) and ListPrice lt ${p}&$orderby=City,ListPrice desc&$top=${t}&$count=true`),
  fc
    .tuple(fc.constantFrom('pool', 'granite counters', 'spa', 'hardwood floors', 'quartz', 'views'), top)
    .map(([w, t]) => `$filter=search.text(KeywordSearchText,${quote(w)})&$orderby=relevance desc&$top=${t}`),
  fc
    .tuple(fc.integer({ min: 2, max: 9 }), fc.integer({ min: 3, max: 12 }), rec, top)
    .map(
      ([n, len, r, t]) =>
        `$filter=ListPrice mod ${n} eq 0 and length(City) gt ${len} and startswith(PostalCode,${quote(String(r.PostalCode ?? '9').slice(0, 2))})&$top=${t}`,
    ),
  fc.tuple(generatedFilter(records, { search: false }), top).map(([f, t]) => `$filter=${f}&$orderby=ListPrice,YearBuilt desc&$top=${t}`),
);

describe('the shape-keyed plan cache', () => {
  it('gives every query of a shared shape its own plan and answer, in any order (fast-check)', () => {
    let answered = 0;
    fc.assert(
      fc.property(fc.array(query, { minLength: 5, maxLength: 25 }), (queries) => {
        for (const q of queries) if (check(q)) answered++;
      }),
      { seed: 1818, numRuns: 60 },
    );
    // the cache was used: most plans came from a shape seen before, not from a parse
    expect(cache().shapeHits).toBeGreaterThan(300);
    expect(answered).toBeGreaterThan(500);
  });

  it('reports a bad literal in a cached shape as it does without the cache', () => {
    const pairs: Array<[string, string]> = [
      ['$filter=ListingContractDate lt 2024-01-01', '$filter=ListingContractDate lt 2023-02-29'],
      ['$filter=ListingContractDate lt 2024-01-01', '$filter=ListingContractDate lt 2024-13-01'],
      ['$filter=ModificationTimestamp lt 2024-01-01T10:00:00Z', '$filter=ModificationTimestamp lt 2024-01-01T25:00:00Z'],
      ['$filter=ListPrice ge 5', '$filter=ListPrice ge 5.'],
      ['$filter=ListPrice ge 5', '$filter=ListPrice ge 1e'],
      ["$filter=geo.distance(Location, geography'POINT(1 2)') le 5", "$filter=geo.distance(Location, geography'POINT(1 200)') le 5"],
      ["$filter=geo.distance(Location, geography'POINT(1 2)') le 5", "$filter=geo.distance(Location, geography'LINESTRING(1 2)') le 5"],
      ['$filter=ListPrice ge 5&$top=5', '$filter=ListPrice ge 5&$top=60000'],
      ['$filter=ListPrice ge 5&$top=5', '$filter=ListPrice ge 5&$top=99999999999999999999'],
      ["$filter=search.text(KeywordSearchText,'pool')", "$filter=search.text(KeywordSearchText,'')"],
      ['$filter=ListingContractDate lt 2024-01-01', '$filter=ListingContractDate lt 2024-01-01T00:00:00Z'],
      ['$filter=BedroomsTotal eq 3', '$filter=BedroomsTotal eq 3.5'],
    ];
    for (const [good, bad] of pairs) {
      check(good);
      const hits = cache().shapeHits;
      const cold = outcome(() => planQuery({ resource: 'Property', text: bad }, statisticsOf(gen())));
      expect(
        outcome(() => engine.explain('Property', bad, { format: 'json' })),
        bad,
      ).toEqual(cold);
      expect(
        outcome(() => engine.explain('Property', bad, { format: 'json' })),
        bad,
      ).toEqual(cold);
      if (!('plan' in cold)) expect(cache().shapeHits, bad).toBe(hits);
    }
  });

  it('shares the parse but not the plan: each ListingId finds its own listing', () => {
    const before = cache().shapeHits;
    for (const r of records.slice(0, 50)) {
      const got = engine.query('Property', `$filter=ListingId eq ${quote(r.ListingId)}&$select=ListingKey,ListingId`).value;
      expect(got).toEqual([{ ListingKey: r.ListingKey, ListingId: r.ListingId }]);
    }
    expect(cache().shapeHits - before).toBeGreaterThanOrEqual(49);
  });

  it('writes each query its own nextLink', () => {
    const q = (city: string, skip: number) => `$filter=City eq ${quote(city)}&$orderby=ListPrice desc&$skip=${skip}&$select=ListingKey`;
    const counts = new Map<string, number>();
    for (const r of records) counts.set(r.City as string, (counts.get(r.City as string) ?? 0) + 1);
    const [a, b] = [...counts].sort((x, y) => y[1] - x[1]).map(([c]) => c);
    engine.query('Property', q(a, 1));
    const page = engine.query('Property', q(b, 2));
    expect(page['@odata.nextLink']).toBe(
      `Property?$filter=${encodeURIComponent(`City eq ${quote(b)}`)}&$select=ListingKey&$orderby=${encodeURIComponent('ListPrice desc')}&$skip=12&$skiptoken=${engine.pageToken}`,
    );
  });
});

describe('PlanCache', () => {
  it('keeps at most its capacity of plans, dropping the least recently used', () => {
    const plans = new PlanCache(4);
    const stats = statisticsOf(gen());
    const text = (i: number) => `$filter=ListPrice ge ${i}`;
    const first = plans.plan({ resource: 'Property', text: text(0) }, stats);
    for (let i = 1; i < 4; i++) plans.plan({ resource: 'Property', text: text(i) }, stats);
    expect(plans.plan({ resource: 'Property', text: text(0) }, stats)).toBe(first); // used again: now the newest
    plans.plan({ resource: 'Property', text: text(4) }, stats); // drops text(1)
    expect(plans.size).toBe(4);
    const hits = plans.hits;
    expect(plans.plan({ resource: 'Property', text: text(0) }, stats)).toBe(first);
    expect(plans.hits).toBe(hits + 1);
    plans.plan({ resource: 'Property', text: text(1) }, stats);
    expect(plans.hits).toBe(hits + 1);
    expect(plans.misses).toBe(1); // one parse: every other text was its shape's instance
  });

  it('keeps no empty group behind: navigation paths of many listings hold no more than the capacity', () => {
    const plans = new PlanCache(2);
    const stats = statisticsOf(gen());
    for (const r of records.slice(0, 20))
      plans.plan({ resource: 'Property', text: '$top=1', navigation: { key: r.ListingKey as string, name: 'Media' } }, stats);
    expect(plans.size).toBe(2);
    expect((plans as unknown as { plans: { groups: Map<string, unknown> } }).plans.groups.size).toBe(2);
  });
});
