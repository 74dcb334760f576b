/**
 * Deep pages of an ordered walk over dictionary lookups ($skip into a sorted permutation): the
 * walk jumps over whole blocks of the order by kept block counts (src/exec/walk.ts). The page must
 * equal the naive one: directly against a filter of the order for random orders (some of their
 * rows in a tail, as after changes), bits, slices, skips and sizes (with and without counts), and
 * through the engine for lookups, ranges and both
 * directions, asked often enough that the counts get built, as loaded and after upserts and
 * removals (each generation keeps its own counts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SplitOrder } from '../../src/access/split-order.js';
import { Engine } from '../../src/engine.js';
import { blockCounts } from '../../src/access/split-order.js';
import { walkBitsPage } from '../../src/exec/walk.js';
import { Rng } from '../../src/generate/prng.js';
import { getBit, newBitmap, setBit } from '../../src/util/bits.js';

type Rec = Record<string, unknown>;

/** `order` as a SplitOrder with about `share` of its positions (chosen by `rng`) in the tail. */
function split(order: Uint32Array, rng: Rng, share: number): SplitOrder {
  const base: number[] = [];
  const tail: number[] = [];
  const tailPos: number[] = [];
  order.forEach((row, i) => {
    if (rng.chance(share)) {
      tail.push(row);
      tailPos.push(i);
    } else base.push(row);
  });
  return new SplitOrder(Uint32Array.from(base), Uint32Array.from(tail), Uint32Array.from(tailPos));
}

describe('walkBitsPage', () => {
  const walkCase = fc
    .record({
      n: fc.integer({ min: 0, max: 3000 }),
      seed: fc.integer(),
      density: fc.constantFrom(0, 0.01, 0.3, 0.9, 1),
      a: fc.integer({ min: 0, max: 1000 }),
      b: fc.integer({ min: 0, max: 1000 }),
      // skip as a fraction of the slice's matches (past them above 1), or a small absolute one
      skip: fc.oneof(
        fc.integer({ min: 0, max: 1100 }).map((permille) => ({ permille })),
        fc.integer({ min: 0, max: 300 }),
      ),
      take: fc.integer({ min: 1, max: 120 }),
      tailShare: fc.constantFrom(0, 0.02, 0.5),
    })
    .map((c) => {
      const rng = new Rng(`walk-${c.seed}`);
      const order = Uint32Array.from({ length: c.n }, (_, i) => i);
      for (let i = c.n - 1; i > 0; i--) {
        const j = rng.int(0, i);
        [order[i], order[j]] = [order[j], order[i]];
      }
      const bits = newBitmap(c.n);
      for (let r = 0; r < c.n; r++) if (rng.chance(c.density)) setBit(bits, r);
      const [start, end] = [Math.floor((Math.min(c.a, c.b) * c.n) / 1000), Math.floor((Math.max(c.a, c.b) * c.n) / 1000)];
      let matches = 0;
      for (let i = start; i < end; i++) if (getBit(bits, order[i])) matches++;
      const skip = typeof c.skip === 'number' ? c.skip : Math.floor((c.skip.permille * matches) / 1000);
      return { order, split: split(order, rng, c.tailShare), bits, start, end, skip, take: c.take };
    });

  it('gives the naive page at rows[skip..], with counts or without, and reads less with them', () => {
    fc.assert(
      fc.property(walkCase, ({ order, split, bits, start, end, skip, take }) => {
        expect([...split]).toEqual([...order]);
        const matches = [...order.subarray(start, end)].filter((row) => getBit(bits, row));
        const want = matches.slice(skip, skip + take);
        const counts = blockCounts(split, bits);
        expect(counts[counts.length - 1]).toBe([...order].filter((row) => getBit(bits, row)).length);
        for (const c of [null, counts]) {
          const { rows, visited } = walkBitsPage(split, bits, start, end, skip, take, c);
          if (want.length === 0) expect(rows.length).toBeLessThanOrEqual(skip);
          else {
            expect(rows.length).toBe(skip + want.length);
            expect([...rows.subarray(skip)]).toEqual(want);
          }
          expect(visited).toBeLessThanOrEqual(end - start + 256);
        }
      }),
      { seed: 20261126, numRuns: 600 },
    );
  });

  it('finds match skip in the last block, past the matches, and with no matches at all', () => {
    const n = 1000; // blocks of 256: the last one holds positions 768..999
    const order = new SplitOrder(Uint32Array.from({ length: n }, (_, i) => n - 1 - i));
    const bits = newBitmap(n);
    for (let r = 0; r < n; r += 2) setBit(bits, r);
    const counts = blockCounts(order, bits);
    const matches = [...order].filter((row) => getBit(bits, row));
    for (const skip of [383, 384, 450, 499, 500, 501, 5000]) {
      const { rows } = walkBitsPage(order, bits, 0, n, skip, 10, counts);
      expect([...rows.subarray(skip)], `skip ${skip}`).toEqual(matches.slice(skip, skip + 10));
    }
    expect(walkBitsPage(order, newBitmap(n), 0, n, 300, 10, blockCounts(order, newBitmap(n))).rows.length).toBe(0);
    const none = new SplitOrder(new Uint32Array(0));
    expect(walkBitsPage(none, newBitmap(0), 0, 0, 300, 10, blockCounts(none, newBitmap(0))).rows.length).toBe(0);
  });
});

const STATUSES = ['Active', 'Pending', 'Closed'];
const CITIES = ['Seattle', 'Tacoma', 'Bellevue'];

function listing(rng: Rng, key: string): Rec {
  const r: Rec = { ListingKey: key, StandardStatus: rng.pick(STATUSES) };
  if (!rng.chance(0.05)) r.City = rng.pick(CITIES);
  // coarse values: runs of ties (broken by key), and some nulls
  if (!rng.chance(0.05)) r.ModificationTimestamp = new Date(Date.UTC(2025, 0, 1) + rng.int(0, 400) * 3_600_000).toISOString();
  if (!rng.chance(0.05)) r.ListPrice = rng.int(1, 300) * 1000;
  return r;
}

const byKey = (a: Rec, b: Rec): number => ((a.ListingKey as string) < (b.ListingKey as string) ? -1 : 1);

/** The naive order of a numeric field: ascending with nulls first, or descending with nulls last; ties by key. */
function naiveOrder(records: Rec[], value: (r: Rec) => number | null, descending: boolean): Rec[] {
  return [...records].sort((a, b) => {
    const [va, vb] = [value(a), value(b)];
    if (va === null || vb === null) return va === vb ? byKey(a, b) : (va === null) === descending ? 1 : -1;
    if (va !== vb) return va < vb === descending ? 1 : -1;
    return byKey(a, b);
  });
}

interface Shape {
  readonly filter: string;
  readonly test: (r: Rec) => boolean;
}

const SHAPES: Shape[] = [
  { filter: "StandardStatus eq 'Active'", test: (r) => r.StandardStatus === 'Active' },
  { filter: "StandardStatus in ('Active','Pending')", test: (r) => r.StandardStatus === 'Active' || r.StandardStatus === 'Pending' },
  { filter: "StandardStatus eq 'Closed' and City eq 'Seattle'", test: (r) => r.StandardStatus === 'Closed' && r.City === 'Seattle' },
  // no listing holds it as loaded; later changes bring some
  { filter: "StandardStatus eq 'Nowhere'", test: (r) => r.StandardStatus === 'Nowhere' },
];

const ORDERS: Array<{ field: string; value: (r: Rec) => number | null; range: (lo: number, hi: number) => Shape }> = [
  {
    field: 'ModificationTimestamp',
    value: (r) => (typeof r.ModificationTimestamp === 'string' ? Date.parse(r.ModificationTimestamp) : null),
    range: (lo, hi) => {
      const [a, b] = [Date.UTC(2025, 0, 1) + lo * 3_600_000, Date.UTC(2025, 0, 1) + hi * 3_600_000];
      return {
        filter: `ModificationTimestamp ge ${new Date(a).toISOString()} and ModificationTimestamp lt ${new Date(b).toISOString()}`,
        test: (r) => typeof r.ModificationTimestamp === 'string' && Date.parse(r.ModificationTimestamp) >= a && Date.parse(r.ModificationTimestamp) < b,
      };
    },
  },
  {
    field: 'ListPrice',
    value: (r) => (typeof r.ListPrice === 'number' ? r.ListPrice : null),
    range: (lo, hi) => ({
      filter: `ListPrice gt ${lo * 1000} and ListPrice le ${hi * 1000}`,
      test: (r) => typeof r.ListPrice === 'number' && r.ListPrice > lo * 1000 && r.ListPrice <= hi * 1000,
    }),
  },
];

const query = fc.record({
  shape: fc.constantFrom(...SHAPES),
  order: fc.constantFrom(...ORDERS),
  descending: fc.boolean(),
  ranged: fc.boolean(),
  lo: fc.integer({ min: 0, max: 300 }),
  width: fc.integer({ min: 0, max: 300 }),
  skip: fc.oneof(fc.integer({ min: 0, max: 2000 }), fc.constantFrom(256, 511, 512, 1000, 5000)),
  top: fc.integer({ min: 1, max: 60 }),
  // a page smaller than $top (Prefer: odata.maxpagesize): the response says whether more remain
  paged: fc.boolean(),
});

/** Asks each generated query several times (plain walks pay for the counts, later ones use them) and compares every answer with the naive page. */
function expectPages(engine: Engine, records: ReadonlyMap<string, Rec>, label: string, seed: number): void {
  const all = [...records.values()];
  fc.assert(
    fc.property(query, ({ shape, order, descending, ranged, lo, width, skip, top, paged }) => {
      const range = order.range(lo, lo + width);
      const filter = ranged ? `${shape.filter} and ${range.filter}` : shape.filter;
      const q = `$filter=${filter}&$orderby=${order.field}${descending ? ' desc' : ''}&$skip=${skip}&$top=${paged ? top + 5 : top}&$select=ListingKey`;
      const matches = naiveOrder(
        all.filter((r) => shape.test(r) && (!ranged || range.test(r))),
        order.value,
        descending,
      ).map((r) => r.ListingKey);
      const want = matches.slice(skip, skip + top);
      for (let i = 0; i < 6; i++) {
        const got = engine.query('Property', q, paged ? { maxPageSize: top } : {});
        expect(
          got.value.map((r) => r.ListingKey),
          `${label}: ${q}`,
        ).toEqual(want);
        expect(got['@odata.nextLink'] !== undefined, `${label}: more after ${q}`).toBe(paged && matches.length > skip + top);
      }
    }),
    { seed, numRuns: 60 },
  );
}

/** The walk counts the newest generation keeps for Property, by key (white box: they are private). */
function walkCountsOf(engine: Engine): Map<string, { counts: Uint32Array | null }> {
  const gen = (engine as unknown as { gen: { access: { of(t: unknown): unknown } } }).gen;
  return (gen.access.of(engine.store.Property) as { walkCountsCache: Map<string, { counts: Uint32Array | null }> }).walkCountsCache;
}

/** Listing `i`'s key. */
const key = (i: number): string => `K${String(i).padStart(5, '0')}`;

/**
 * `n` generated listings (keys 0..n-1) and an engine over them, without the result cache: each
 * ask walks (plain walks pay for the block counts, later ones use them).
 */
async function openListings(seed: string, n: number): Promise<{ rng: Rng; records: Map<string, Rec>; engine: Engine }> {
  const rng = new Rng(seed);
  const records = new Map<string, Rec>();
  for (let i = 0; i < n; i++) records.set(key(i), listing(rng, key(i)));
  const engine = await Engine.open({ data: { Property: [...records.values()] }, compactFraction: false, resultCache: false });
  return { rng, records, engine };
}

describe('deep pages through the engine', () => {
  it('use the block counts a change carried to the next generation (counted again for its rows in the change)', async () => {
    const { rng, records, engine } = await openListings('walk-carry', 3000);
    const filter = "StandardStatus eq 'Active'";
    const page = (skip: number): string => `$filter=${filter}&$orderby=ModificationTimestamp desc&$skip=${skip}&$top=40&$select=ListingKey`;
    const naive = (skip: number): unknown[] =>
      naiveOrder(
        [...records.values()].filter((r) => r.StandardStatus === 'Active'),
        ORDERS[0].value,
        true,
      )
        .slice(skip, skip + 40)
        .map((r) => r.ListingKey);
    expect(engine.explain('Property', page(700))).toMatch(/ordered walk/);
    for (let i = 0; i < 4; i++) expect(engine.query('Property', page(700)).value.map((r) => r.ListingKey)).toEqual(naive(700));
    const counted = (): boolean => [...walkCountsOf(engine)].some(([k, w]) => k.includes('Active') && w.counts !== null);
    expect(counted()).toBe(true);
    // replaced listings (some no longer Active, some newly), new ones, removed ones
    const upserts: Rec[] = [];
    for (let i = 0; i < 300; i++) upserts.push(listing(rng, key(rng.int(0, 2999))));
    for (let i = 0; i < 900; i++) upserts.push(listing(rng, key(3000 + i)));
    await engine.upsert('Property', upserts);
    for (const r of upserts) records.set(r.ListingKey as string, r);
    const removed = [...new Set(Array.from({ length: 150 }, () => key(rng.int(0, 3899))))];
    await engine.remove('Property', removed);
    for (const k of removed) records.delete(k);
    expect(counted()).toBe(true); // before any query on this generation
    for (const skip of [256, 700, 1500, 1900, 5000])
      expect(
        engine.query('Property', page(skip)).value.map((r) => r.ListingKey),
        `skip ${skip}`,
      ).toEqual(naive(skip));
  });

  it('equal the naive page as loaded and after upserts and removals, for lookups, ranges and both directions', async () => {
    const { rng, records, engine } = await openListings('walk-skip', 4000);
    expect(engine.explain('Property', "$filter=StandardStatus eq 'Active'&$orderby=ModificationTimestamp desc&$skip=1000&$top=50")).toMatch(/ordered walk/);
    expectPages(engine, records, 'loaded', 1);
    let next = 4000;
    for (let step = 0; step < 3; step++) {
      // replace some listings (new values, a new status), add new ones, remove others
      const upserts: Rec[] = [];
      for (let i = 0; i < 150; i++) upserts.push(listing(rng, key(rng.int(0, next - 1))));
      for (let i = 0; i < 100; i++) upserts.push(listing(rng, key(next++)));
      // from the second change on, a status no listing had (its walks were counted without it)
      if (step > 0) for (let i = 0; i < 500; i++) upserts.push({ ...listing(rng, key(next++)), StandardStatus: 'Nowhere' });
      await engine.upsert('Property', upserts);
      for (const r of upserts) records.set(r.ListingKey as string, r);
      const removed = [...new Set(Array.from({ length: 120 }, () => key(rng.int(0, next - 1))))];
      await engine.remove('Property', removed);
      for (const k of removed) records.delete(k);
      // the walks counted on the generation before are counted again on this one by the change
      expect(walkCountsOf(engine).size, `counts carried by change ${step + 1}`).toBeGreaterThan(0);
      expectPages(engine, records, `after change ${step + 1}`, 10 + step);
    }
  });
});
