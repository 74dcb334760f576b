/**
 * KD-trees built on a worker thread (src/geo/tree-worker.ts): the tree that comes back is the one
 * this thread would build, byte for byte, an index adopting it answers as one built here, and a
 * compaction of a table past TREE_THREAD_MIN_ROWS builds its trees there.
 */
import { describe, expect, it, vi } from 'vitest';
import { Engine } from '../../src/engine.js';
import { generateListings } from '../../src/generate/dataset.js';
import { Rng } from '../../src/generate/prng.js';
import { buildTree, PointIndex, pointInputSteps } from '../../src/geo/point-index.js';
import { TreeThread } from '../../src/geo/tree-worker.js';
import { TREE_THREAD_MIN_ROWS } from '../../src/live/compact.js';
import { runNow } from '../../src/util/steps.js';

function points(n: number, seed: string): { lon: Float64Array; lat: Float64Array; has: (row: number) => boolean } {
  const rng = new Rng(seed);
  const lon = new Float64Array(n);
  const lat = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    lon[i] = -122.5 + rng.range(0, 1);
    lat[i] = 47.2 + rng.range(0, 0.8);
  }
  return { lon, lat, has: (row) => row % 7 !== 3 };
}

describe('TreeThread', () => {
  it('returns the trees and cosines buildTree makes here, one job after another, and takes the coordinates over', async () => {
    const thread = new TreeThread();
    try {
      for (const [n, seed] of [
        [30_000, 'tree-a'],
        [5_000, 'tree-b'],
      ] as const) {
        const { lon, lat, has } = points(n, seed);
        const input = runNow(pointInputSteps(lon, lat, has));
        const here = buildTree(input.coords.slice());
        const coords = input.coords;
        const built = await thread.build(coords);
        expect(built).not.toBeNull();
        expect(coords.byteLength).toBe(0); // handed over, not copied
        expect(Buffer.from(built!.tree).equals(Buffer.from(here.tree))).toBe(true);
        expect([...built!.cosAt]).toEqual([...here.cosAt]);

        const adopted = new PointIndex(lon, lat, PointIndex.stateOf(input, built!));
        const local = new PointIndex(lon, lat, has);
        const rng = new Rng(`${seed} circles`);
        for (let k = 0; k < 40; k++) {
          const qLon = -122.5 + rng.range(0, 1);
          const qLat = 47.2 + rng.range(0, 0.8);
          const meters = rng.range(100, 20_000);
          const rows = adopted.within(qLon, qLat, meters);
          expect([...rows]).toEqual([...local.within(qLon, qLat, meters)]);
          expect(rows.every((row) => has(row))).toBe(true);
        }
      }
      // no points: kdbush's one-item tree, which no row reaches
      const empty = await thread.build(new Float64Array(0));
      const index = new PointIndex(new Float64Array(3), new Float64Array(3), { tree: empty!.tree, rowOf: new Uint32Array(0), cosAt: empty!.cosAt });
      expect(index.size).toBe(0);
      expect([...index.within(0, 0, 1000)]).toEqual([]);
    } finally {
      thread.close();
    }
  });

  it('once closed, answers null: the caller builds the tree itself', async () => {
    const thread = new TreeThread();
    const pending = thread.build(points(50_000, 'closed').lon.slice());
    thread.close();
    expect(await pending).toBeNull();
    expect(await thread.build(Float64Array.of(1, 2))).toBeNull();
  });
});

describe('a compaction past TREE_THREAD_MIN_ROWS', () => {
  it('builds its KD-trees on a thread, and geo.distance answers as before it', async () => {
    const listings = [...generateListings({ listings: TREE_THREAD_MIN_ROWS + 200, seed: 'tree-thread compaction' })].map((l) => l.property);
    const engine = await Engine.open({ data: { Property: listings }, now: () => new Date('2025-06-01T00:00:00Z'), compactFraction: false });
    await engine.apply([{ resource: 'Property', remove: listings.slice(0, 300).map((p) => p.ListingKey as string) }]);
    const queries = [
      "$filter=geo.distance(Location, geography'POINT(-118.25 34.05)') le 50000&$count=true&$top=0",
      "$filter=geo.distance(RawLocation, geography'POINT(-122.3321 47.6062)') le 20000&$orderby=ListingKey&$top=200&$select=ListingKey",
    ];
    const before = queries.map((q) => engine.query('Property', q));
    const build = vi.spyOn(TreeThread.prototype, 'build');
    await engine.compact();
    expect(build).toHaveBeenCalledTimes(2); // Location and RawLocation
    expect(await Promise.all(build.mock.results.map((r) => r.value))).not.toContain(null);
    build.mockRestore();
    const after = queries.map((q) => engine.query('Property', q));
    expect(before[0]['@odata.count']).toBeGreaterThan(0);
    expect(before[1].value.length).toBeGreaterThan(0);
    expect(after).toEqual(before);
  });
});
