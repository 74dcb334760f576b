/**
 * The Plan as data (src/plan/plan.ts): explain(..., { format: 'json' }) returns it, it survives a
 * JSON round trip with nothing lost (no closures, tables or generations inside), it names the
 * access path the planner chose, and the plan cache keeps plans, not generations: a change does
 * not re-plan a cached query (the same Plan object answers on the new generation, with the new
 * data), a change that adds a field does, and after many changes with many cached plans the old
 * generations are collected.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { Engine } from '../../src/engine.js';
import type { Generation } from '../../src/access/generation.js';
import type { Plan } from '../../src/plan/plan.js';
import { PLAN_CACHE_SIZE } from '../../src/plan/cache.js';
import { dataSetOf, generated, keysOf, NOW, openEngine } from '../live/helpers.js';

const listings = generated(300, 'plan-data', { mediaPerListing: 2 });

function open(options: { compactFraction?: number | false } = {}): Promise<Engine> {
  return openEngine(dataSetOf(listings), { now: () => NOW, compactFraction: options.compactFraction ?? false });
}

/** Every value reachable from `v` that is not plain JSON data (a function, a class instance other than Array/Object, a typed array). */
function nonData(v: unknown, path = '$', out: string[] = []): string[] {
  if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || v === undefined) return out;
  if (typeof v !== 'object') {
    out.push(`${path}: ${typeof v}`);
    return out;
  }
  const proto = Object.getPrototypeOf(v) as unknown;
  if (proto !== Object.prototype && proto !== Array.prototype) out.push(`${path}: ${v.constructor.name}`);
  for (const [k, child] of Object.entries(v)) nonData(child, `${path}.${k}`, out);
  return out;
}

const QUERIES: Array<{ query: string; access: Plan['access']['kind']; strategy: Plan['strategy']['kind'] }> = [
  { query: "$filter=StandardStatus eq 'Active' and ListPrice ge 300000&$orderby=ListPrice desc&$top=25", access: 'lookup', strategy: 'walk' },
  { query: "$filter=search.text(KeywordSearchText,'pool granite')&$orderby=relevance desc&$top=25", access: 'search', strategy: 'ranked' },
  {
    query: "$filter=geo.distance(Location, geography'POINT(-122.3 47.6)') le 5000 and ListPrice gt 100000&$select=ListingKey,ListPrice",
    access: 'geo',
    strategy: 'key',
  },
  { query: "$filter=ListingKey eq 'P000000005'&$expand=Media($select=MediaKey;$top=1)", access: 'text', strategy: 'key' },
  { query: '$filter=YearBuilt ge 2020 and YearBuilt lt 2022&$count=true&$orderby=ListPrice', access: 'range', strategy: 'heap' },
  { query: "$filter=contains(City,'a')&$count=true", access: 'scan', strategy: 'key' },
  { query: '$apply=groupby((StandardStatus),aggregate($count as N))&$orderby=N desc', access: 'scan', strategy: 'key' },
];

describe('the Plan is data', () => {
  it('explain json returns it: JSON round trip exact, nothing but data inside, the chosen access path and order', async () => {
    const engine = await open();
    for (const { query, access, strategy } of QUERIES) {
      const plan = engine.explain('Property', query, { format: 'json' });
      expect(nonData(plan), query).toEqual([]);
      expect(JSON.parse(JSON.stringify(plan)), query).toEqual(plan);
      expect(plan.access.kind, query).toBe(access);
      expect(plan.strategy.kind, query).toBe(strategy);
      expect(plan.resource).toBe('Property');
    }
    const grouped = engine.explain('Property', QUERIES[6].query, { format: 'json' });
    expect(grouped.grouping?.properties).toEqual(['StandardStatus', 'N']);
    const expanded = engine.explain('Property', QUERIES[3].query, { format: 'json' });
    expect(expanded.expand?.map((e) => [e.name, e.resource, e.select, e.top])).toEqual([['Media', 'Media', ['MediaKey'], 1]]);
    // the residual is the filter less what the access path answers
    const walk = engine.explain('Property', QUERIES[0].query, { format: 'json' });
    expect(walk.residual).toMatchObject({ kind: 'compare', op: 'ge', left: { kind: 'field', field: { name: 'ListPrice' } }, right: { value: 300000 } });
    expect(walk.page).toEqual({ skip: 0, rows: 25, top: 25 });
  });

  it('the text form still says the same', async () => {
    const engine = await open();
    expect(engine.explain('Property', QUERIES[0].query)).toContain('candidates: lookup StandardStatus');
    expect(engine.explain('Property', QUERIES[0].query, { format: 'text' })).toContain('ordered walk of ListPrice desc');
  });
});

describe('the plan cache holds plans, not generations', () => {
  it('a change does not re-plan a cached query; the plan answers with the new data', async () => {
    const engine = await open();
    const query = "$filter=StandardStatus eq 'Active' and ListPrice ge 300000&$orderby=ListPrice desc&$top=3";
    const before = engine.explain('Property', query, { format: 'json' });
    const top = keysOf(engine.query('Property', query));
    // the cheapest listing climbs to the top of the order
    const cheapest = listings
      .map((l) => l.property)
      .filter((p) => p.StandardStatus === 'Active')
      .sort((a, b) => (a.ListPrice as number) - (b.ListPrice as number))[0];
    await engine.upsert('Property', [{ ...cheapest, ListPrice: 99_000_000 }]);
    expect(engine.generation).toBe(1);
    expect(engine.explain('Property', query, { format: 'json' })).toBe(before);
    const after = keysOf(engine.query('Property', query));
    expect(after).toEqual([cheapest.ListingKey, ...top.slice(0, 2)]);
  });

  it("a change that adds a field to a table re-plans that table's queries", async () => {
    const engine = await open();
    const query = "$filter=StandardStatus eq 'Active'&$top=2";
    const before = engine.explain('Property', query, { format: 'json' });
    const media = engine.explain('Media', '$top=2', { format: 'json' });
    await engine.upsert('Property', [{ ...listings[0].property, X_NewField: 'x' }]);
    expect(engine.explain('Property', query, { format: 'json' })).not.toBe(before);
    expect(engine.explain('Media', '$top=2', { format: 'json' })).toBe(media);
  });

  it('after many changes with many cached plans, the old generations are collectable', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const engine = await open();
    const generationOf = (): Generation => (engine as unknown as { gen: Generation }).gen;
    const refs: Array<WeakRef<Generation>> = [];
    const changes = 12;
    for (let c = 0; c < changes; c++) {
      refs.push(new WeakRef(generationOf()));
      // distinct texts fill the cache (each with $top, so no nextLink pins a generation for paging)
      for (let i = 0; i < 40; i++) {
        engine.query('Property', `$filter=ListPrice ge ${100_000 + i * 1_000 + c} and StandardStatus eq 'Active'&$orderby=ListPrice&$top=5&$expand=Media`);
        engine.query('Property', `$filter=search.text(KeywordSearchText,'pool') and BedroomsTotal ge ${i % 5}&$top=${c + 1}`);
      }
      const p = listings[c].property;
      await engine.upsert('Property', [{ ...p, ListPrice: (p.ListPrice as number) + 1 }]);
    }
    expect(engine.generation).toBe(changes);
    // the cache is full of plans made on the old generations
    expect((engine as unknown as { plans: { size: number } }).plans.size).toBe(Math.min(PLAN_CACHE_SIZE, changes * 80));
    // WeakRef targets are kept to the end of the current job; a few rounds let any reference the
    // last change's own machinery still holds (a settled promise's closure) go too
    for (let round = 0; round < 4; round++) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      gc();
    }
    // every generation but the newest of them is gone (with a cache that held generations, all 12 stay)
    const alive = refs.map((r) => r.deref() !== undefined);
    expect(alive.slice(0, -1)).toEqual(refs.slice(0, -1).map(() => false));
    // and the cached plans still answer on the newest generation
    expect(keysOf(engine.query('Property', `$filter=ListPrice ge 100000 and StandardStatus eq 'Active'&$orderby=ListPrice&$top=5&$expand=Media`))).toHaveLength(
      5,
    );
  });
});
