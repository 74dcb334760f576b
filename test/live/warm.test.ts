/**
 * Pages warmed before a change publishes (src/live/warm.ts): a deep page newest first that a change
 * moves onto rows no query read has its records kept before the new generation is published, when
 * it was asked on the generation the change replaces, so that its first run there builds none; the
 * answers are those of an engine opened on the same data; a request not asked again is forgotten,
 * and so is one whose page stopped moving; one that built few records is never warmed; a compaction
 * warms its generation too.
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { WARM_MIN_BUILT } from '../../src/live/warm.js';
import { recordsBuilt } from '../../src/store/record-cache.js';
import { dataset } from '../replicate/helpers.js';

const now = (): Date => new Date('2025-06-01T00:00:00Z');
const DEEP = `$filter=StandardStatus eq 'Active'&$orderby=ModificationTimestamp desc,ListingKey&$skip=300&$top=60`;
const SHALLOW = `$filter=StandardStatus eq 'Active'&$orderby=ListPrice desc,ListingKey&$top=5`;

interface Warmed {
  readonly done: { readonly pages: number };
  readonly active: boolean;
}
const warmerOf = (e: Engine): Warmed => (e as unknown as { warmer: Warmed }).warmer;

describe('pages warmed before a change publishes', () => {
  const base = dataset(2_000, 'warm');
  const active = base.Property.filter((p) => p.StandardStatus === 'Active');
  /** The k-th change: 40 active listings edited, each newest now (the deep page moves by about as many rows). */
  const change = (k: number): Array<Record<string, unknown>> =>
    active
      .slice(k * 40, k * 40 + 40)
      .map((p, i) => ({ ...p, ModificationTimestamp: new Date(Date.UTC(2025, 5, 1, 0, k, i)).toISOString(), ListPrice: 100_000 + k * 1_000 + i }));
  const built = (run: () => unknown): number => {
    const before = recordsBuilt();
    run();
    return recordsBuilt() - before;
  };

  /** The data set after changes 0..k (each replaced listing in its place). */
  const after = (k: number): typeof base => {
    const changed = new Map<unknown, Record<string, unknown>>();
    for (let j = 0; j <= k; j++) for (const p of change(j)) changed.set(p.ListingKey, p);
    return { ...base, Property: base.Property.map((p) => changed.get(p.ListingKey) ?? p) };
  };

  it("keeps a moved deep page's records before publishing, and answers as an engine opened on the same data", async () => {
    const warmed = await Engine.open({ data: base, now, compactFraction: false, resultCache: false });
    expect(built(() => warmed.query('Property', DEEP))).toBe(60); // the first read builds every record
    for (let k = 0; k < 3; k++) {
      await warmed.upsert('Property', change(k));
      expect(warmerOf(warmed).done.pages).toBe(k + 1);
      // the page moved (onto rows no query read), and its first run on the new generation builds none
      const before = recordsBuilt();
      const first = warmed.query('Property', DEEP);
      expect(recordsBuilt()).toBe(before);
      expect(first.value.length).toBe(60);
      const fresh = await Engine.open({ data: after(k), now, compactFraction: false, resultCache: false });
      expect(first).toEqual(fresh.query('Property', DEEP));
    }
  });

  it('forgets a request not asked on the generation a change replaces, and never warms one that built few records', async () => {
    const engine = await Engine.open({ data: base, now, compactFraction: false, resultCache: false });
    engine.query('Property', DEEP);
    await engine.upsert('Property', change(0));
    expect(warmerOf(engine).done.pages).toBe(1);
    // not asked on this generation: the next change warms nothing, nor the one after
    await engine.upsert('Property', change(1));
    await engine.upsert('Property', change(2));
    expect(warmerOf(engine).done.pages).toBe(1);
    // a shallow page builds fewer records than warming needs: asked on every generation, never warmed
    expect(built(() => engine.query('Property', SHALLOW))).toBeLessThan(WARM_MIN_BUILT);
    for (let k = 3; k < 6; k++) {
      engine.query('Property', SHALLOW);
      await engine.upsert('Property', change(k));
    }
    expect(warmerOf(engine).done.pages).toBe(1);
    // the deep page, not warmed since: its first run on the newest generation builds the records of the rows it moved onto
    expect(built(() => engine.query('Property', DEEP))).toBeGreaterThanOrEqual(WARM_MIN_BUILT);
  });

  it('forgets a page that stopped moving, after the one warming that found its records kept', async () => {
    const engine = await Engine.open({ data: base, now, compactFraction: false, resultCache: false });
    const cheapest = `$orderby=ListPrice asc,ListingKey&$top=40`; // the changes raise prices of listings far above these
    expect(built(() => engine.query('Property', cheapest))).toBe(40);
    await engine.upsert('Property', change(0));
    expect(warmerOf(engine).done.pages).toBe(1); // its rows' records kept now (the first read only noted them)
    expect(built(() => engine.query('Property', cheapest))).toBe(0);
    await engine.upsert('Property', change(1));
    expect(warmerOf(engine).done.pages).toBe(2); // kept nothing new: forgotten
    engine.query('Property', cheapest);
    await engine.upsert('Property', change(2));
    expect(warmerOf(engine).done.pages).toBe(2);
  });

  it('forgets a page whose records are not plain (an expansion), after one try', async () => {
    const engine = await Engine.open({ data: base, now, compactFraction: false, resultCache: false });
    const expanded = `${DEEP}&$expand=Media($top=1)`;
    expect(built(() => engine.query('Property', expanded))).toBeGreaterThanOrEqual(WARM_MIN_BUILT);
    await engine.upsert('Property', change(0));
    expect(warmerOf(engine).done.pages).toBe(0); // its page comes back as records, not rows: nothing kept
    expect(warmerOf(engine).active).toBe(false);
  });

  it('warms the compacted generation before a compaction publishes it', async () => {
    const engine = await Engine.open({ data: base, now, compactFraction: false, resultCache: false });
    engine.query('Property', DEEP);
    await engine.upsert('Property', change(0));
    const first = engine.query('Property', DEEP);
    const generation = engine.generation;
    await engine.compact();
    expect(engine.generation).toBe(generation + 1);
    expect(warmerOf(engine).done.pages).toBe(2);
    // the compacted tables are a new lineage: without the warming every record of the page would be built again
    const before = recordsBuilt();
    expect(engine.query('Property', DEEP)).toEqual(first);
    expect(recordsBuilt()).toBe(before);
  });

  it('warms a page with the sources of the request that asked for it', async () => {
    const source = String(base.Property[0].OriginatingSystemName);
    const warmed = await Engine.open({ data: base, now, compactFraction: false, resultCache: false });
    const plain = await Engine.open({ data: base, now, compactFraction: false, resultCache: false });
    const deep = `$orderby=ModificationTimestamp desc,ListingKey&$skip=100&$top=40`;
    warmed.query('Property', deep, { sources: [source] });
    for (const e of [warmed, plain]) await e.upsert('Property', change(0));
    expect(warmerOf(warmed).done.pages).toBe(1);
    expect(warmed.query('Property', deep, { sources: [source] })).toEqual(plain.query('Property', deep, { sources: [source] }));
    expect(built(() => warmed.query('Property', deep, { sources: [source] }))).toBe(0);
  });
});
