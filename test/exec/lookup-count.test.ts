/**
 * Counts over several dictionary lookups (`$count=true&$top=0`, `/Property/$count`): the AND of
 * value bitsets, rarest first, and the composite counts each generation keeps and carries to the
 * next. Every count must equal the naive count over the records the engine should hold, as
 * loaded, after upserts (a replaced listing's old row dies, its new version is appended),
 * removals, re-adds, compaction, and for callers limited to some sources.
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { Rng } from '../../src/generate/prng.js';

type Rec = Record<string, unknown>;

const STATUSES = ['Active', 'Pending', 'Closed', 'Expired'];
const TYPES = ['Residential', 'Land', 'Commercial Sale'];
const CITIES = ['Seattle', 'Tacoma', 'Bellevue', 'Everett', 'Renton'];
const SOURCES = ['NWMLS', 'CRMLS', 'HAR'];

function listing(rng: Rng, key: string): Rec {
  const r: Rec = { ListingKey: key, OriginatingSystemName: rng.pick(SOURCES), ListPrice: rng.int(1, 100) * 1000 };
  // a few nulls in every field
  if (!rng.chance(0.05)) r.StandardStatus = rng.pick(STATUSES);
  if (!rng.chance(0.05)) r.PropertyType = rng.pick(TYPES);
  if (!rng.chance(0.05)) r.City = rng.pick(CITIES);
  return r;
}

/** The filters counted: one, two and three lookups, `in` lists, a value no record holds. */
const FILTERS: Array<{ filter: string; test: (r: Rec) => boolean }> = [];
for (const s of STATUSES.slice(0, 2)) {
  FILTERS.push({ filter: `StandardStatus eq '${s}'`, test: (r) => r.StandardStatus === s });
  for (const t of TYPES.slice(0, 2)) {
    FILTERS.push({ filter: `StandardStatus eq '${s}' and PropertyType eq '${t}'`, test: (r) => r.StandardStatus === s && r.PropertyType === t });
    for (const c of CITIES.slice(0, 3)) {
      FILTERS.push({
        filter: `StandardStatus eq '${s}' and PropertyType eq '${t}' and City eq '${c}'`,
        test: (r) => r.StandardStatus === s && r.PropertyType === t && r.City === c,
      });
    }
  }
}
FILTERS.push({
  filter: "City in ('Seattle','Tacoma') and StandardStatus eq 'Active' and PropertyType in ('Land','Residential','Land')",
  test: (r) => ['Seattle', 'Tacoma'].includes(r.City as string) && r.StandardStatus === 'Active' && ['Land', 'Residential'].includes(r.PropertyType as string),
});
FILTERS.push({ filter: "City eq 'Seattle' and StandardStatus eq 'Nowhere'", test: () => false });
FILTERS.push({ filter: "City eq 'Seattle' and City eq 'Tacoma'", test: () => false });

function expectCounts(engine: Engine, records: ReadonlyMap<string, Rec>, label: string): void {
  for (const { filter, test } of FILTERS) {
    const all = [...records.values()];
    expect(engine.query('Property', `$filter=${filter}&$count=true&$top=0`)['@odata.count'], `${label}: ${filter}`).toBe(all.filter(test).length);
    expect(engine.count('Property', `$filter=${filter}`), `${label}: ${filter}`).toBe(all.filter(test).length);
    const sources = ['NWMLS', 'HAR'];
    const visible = all.filter((r) => sources.includes(r.OriginatingSystemName as string) && test(r)).length;
    expect(engine.count('Property', `$filter=${filter}`, { sources }), `${label} (sources): ${filter}`).toBe(visible);
  }
}

describe('counts over several lookups', () => {
  it('equal the naive count as loaded, asked twice (the second from the kept count)', async () => {
    const rng = new Rng('lookup-count');
    const records = new Map<string, Rec>();
    for (let i = 0; i < 600; i++) records.set(`K${String(i).padStart(4, '0')}`, listing(rng, `K${String(i).padStart(4, '0')}`));
    const engine = await Engine.open({ data: { Property: [...records.values()] }, compactFraction: false });
    expectCounts(engine, records, 'loaded');
    expectCounts(engine, records, 'loaded, again');
    expect(engine.explain('Property', "$filter=StandardStatus eq 'Active' and City eq 'Seattle'&$count=true&$top=0")).toMatch(
      /actual: access path \d+ rows, \d+ matches/,
    );
  });

  it('stay exact through upserts, removals, re-adds and compaction', async () => {
    const rng = new Rng('lookup-count-changes');
    const records = new Map<string, Rec>();
    const key = (i: number): string => `K${String(i).padStart(4, '0')}`;
    for (let i = 0; i < 500; i++) records.set(key(i), listing(rng, key(i)));
    const engine = await Engine.open({ data: { Property: [...records.values()] }, compactFraction: false });
    expectCounts(engine, records, 'loaded');
    let next = 500;
    for (let step = 0; step < 6; step++) {
      // replace some listings (values change), add new ones, remove others
      const upserts: Rec[] = [];
      for (let j = 0; j < 25; j++) {
        const k = rng.chance(0.7) && records.size > 0 ? rng.pick([...records.keys()]) : key(next++);
        const r = listing(rng, k);
        upserts.push(r);
        records.set(k, r);
      }
      await engine.upsert('Property', upserts);
      expectCounts(engine, records, `step ${step} upserts`);
      const removed = [...records.keys()].filter(() => rng.chance(0.03));
      await engine.remove('Property', removed);
      for (const k of removed) records.delete(k);
      expectCounts(engine, records, `step ${step} removals`);
      if (step === 3) {
        await engine.compact();
        expectCounts(engine, records, 'compacted');
      }
    }
    // a removed listing comes back
    const back = listing(rng, key(0));
    await engine.upsert('Property', [back]);
    records.set(key(0), back);
    expectCounts(engine, records, 're-added');
  });
});
