/**
 * Cost-based access paths and orders (src/plan/planner.ts): the planner weighs an ordered walk of
 * a sorted permutation against collecting the access path's rows into a top-k heap, and a walk in
 * key order against collecting many lookup matches, by the statistics' row counts; the Plan and
 * explain carry the estimates, explain the actual counts. Whatever is chosen, the rows are the
 * naive answer's.
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { haversineMeters } from '../../src/geo/distance.js';
import { Rng } from '../../src/generate/prng.js';

type Rec = Record<string, unknown>;
const CENTRE = { lon: -122.33, lat: 47.6 };

function records(): Rec[] {
  const rng = new Rng('cost');
  const out: Rec[] = [];
  for (let i = 0; i < 4000; i++) {
    out.push({
      ListingKey: `K${String(i).padStart(5, '0')}`,
      ListPrice: rng.int(1, 2000) * 500,
      StandardStatus: rng.chance(0.003) ? 'Withdrawn' : rng.pick(['Active', 'Active', 'Pending', 'Closed']),
      // spread over about 45 km square around the centre
      Latitude: CENTRE.lat + rng.range(-0.2, 0.2),
      Longitude: CENTRE.lon + rng.range(-0.3, 0.3),
      City: rng.pick(['Seattle', 'Tacoma']),
    });
  }
  return out;
}

const data = records();
const geo = (meters: number): string => `geo.distance(Location, geography'POINT(${CENTRE.lon} ${CENTRE.lat})') le ${meters}`;

/** The naive answer: matching keys by ListPrice desc, then key; or by key alone. */
function naive(test: (r: Rec) => boolean, byPrice: boolean): string[] {
  const rows = data.filter(test);
  rows.sort((a, b) => (byPrice ? (b.ListPrice as number) - (a.ListPrice as number) : 0) || ((a.ListingKey as string) < (b.ListingKey as string) ? -1 : 1));
  return rows.map((r) => r.ListingKey as string);
}
const within = (meters: number) => (r: Rec) => haversineMeters(CENTRE.lon, CENTRE.lat, r.Longitude as number, r.Latitude as number) <= meters;

async function open(): Promise<Engine> {
  return Engine.open({ data: { Property: data } });
}

describe('the planner weighs orders by estimated rows visited', () => {
  it('collects a small circle and takes the top by a heap; walks the price order for a circle holding most rows', async () => {
    const engine = await open();
    for (const [meters, strategy] of [
      [5000, 'heap'],
      [500_000, 'walk'],
    ] as const) {
      const q = `$filter=${geo(meters)} and StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=20`;
      const plan = engine.explain('Property', q, { format: 'json' });
      // the small circle is the access path; a circle holding most rows is not (Active is smaller)
      expect(plan.access.kind).toBe(strategy === 'heap' ? 'geo' : 'lookup');
      expect(plan.strategy.kind, `${meters} m`).toBe(strategy);
      expect(plan.estimates?.order).toBeDefined();
      const want = naive((r) => within(meters)(r) && r.StandardStatus === 'Active', true);
      expect(want.length).toBeGreaterThan(meters === 5000 ? 5 : 1000);
      expect(engine.query('Property', `${q}&$select=ListingKey`).value.map((r) => r.ListingKey)).toEqual(want.slice(0, 20));
      const text = engine.explain('Property', q);
      expect(text).toMatch(new RegExp(`geo.distance\\(Location\\) le ${meters} ≤ \\d+`));
      // the KD-tree count is exact: the circle's estimate is what it holds
      const circle = data.filter(within(meters)).length;
      expect(plan.estimates!.conjuncts[0].rows).toBe(circle);
      const yielded = strategy === 'heap' ? circle : data.filter((r) => r.StandardStatus === 'Active').length;
      expect(text).toContain(`actual: access path ${yielded} rows, ${want.length} matches`);
    }
  });

  it('in key order, walks every row for a common value and collects a rare one', async () => {
    const engine = await open();
    const common = engine.explain('Property', "$filter=StandardStatus eq 'Active'&$top=5", { format: 'json' });
    expect(common.access.kind).toBe('scan');
    expect(common.estimates!.order!.walk).toBeLessThan(common.estimates!.order!.collect);
    const rare = engine.explain('Property', "$filter=StandardStatus eq 'Withdrawn'&$top=5", { format: 'json' });
    expect(rare.access.kind).toBe('lookup');
    for (const status of ['Active', 'Withdrawn']) {
      const got = engine.query('Property', `$filter=StandardStatus eq '${status}'&$top=5&$select=ListingKey`).value.map((r) => r.ListingKey);
      expect(got).toEqual(naive((r) => r.StandardStatus === status, false).slice(0, 5));
    }
    // a count or $apply reads every match: no walk in key order replaces the lookup
    expect(engine.explain('Property', "$filter=StandardStatus eq 'Active'&$top=5&$count=true", { format: 'json' }).access.kind).toBe('lookup');
    expect(engine.explain('Property', "$apply=filter(StandardStatus eq 'Active')/groupby((City))", { format: 'json' }).access.kind).toBe('lookup');
  });

  it('estimates matches with the conjuncts independent, and a plan keeps its estimates as plain data', async () => {
    const engine = await open();
    const plan = engine.explain('Property', `$filter=${geo(20_000)} and StandardStatus eq 'Active' and ListPrice ge 500000&$orderby=ListPrice desc&$top=10`, {
      format: 'json',
    });
    const e = plan.estimates!;
    expect(e.rows).toBe(4000);
    expect(e.conjuncts.map((c) => c.what)).toEqual(['geo.distance(Location) le 20000', "StandardStatus in ('Active')", 'range of ListPrice']);
    const product = e.conjuncts.reduce((m, c) => (m * Math.min(c.rows, e.rows)) / e.rows, e.rows);
    expect(e.matches).toBe(Math.round(Math.min(product, e.access)));
    expect(JSON.parse(JSON.stringify(plan.estimates))).toEqual(plan.estimates);
  });

  it('a navigation path has no estimates; explain keeps its fields', async () => {
    const engine = await open();
    const text = engine.explain('Property', "$filter=StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=3");
    for (const line of ['resource:', 'visibility:', 'candidates:', 'residual filter:', 'order:', 'page:', 'estimates:', 'actual:'])
      expect(text).toContain(line);
  });
});
