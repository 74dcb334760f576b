/**
 * KD-trees built on a worker thread (src/geo/tree-worker.ts): the tree that comes back is the one
 * this thread would build, byte for byte, and an index adopting it answers as one built here.
 */
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/generate/prng.js';
import { buildTree, PointIndex, pointInputSteps } from '../../src/geo/point-index.js';
import { buildTreeOffThread } from '../../src/geo/tree-worker.js';
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

describe('buildTreeOffThread', () => {
  it('returns the tree and cosines buildTree makes here, and takes the coordinates over', async () => {
    const { lon, lat, has } = points(30_000, 'tree-worker');
    const input = runNow(pointInputSteps(lon, lat, has));
    const here = buildTree(input.coords.slice());
    const coords = input.coords;
    const built = await buildTreeOffThread(coords);
    expect(built).not.toBeNull();
    expect(coords.byteLength).toBe(0); // handed over, not copied
    expect(Buffer.from(built!.tree).equals(Buffer.from(here.tree))).toBe(true);
    expect([...built!.cosAt]).toEqual([...here.cosAt]);

    const adopted = new PointIndex(lon, lat, PointIndex.stateOf(input, built!));
    const local = new PointIndex(lon, lat, has);
    const rng = new Rng('circles');
    for (let k = 0; k < 50; k++) {
      const qLon = -122.5 + rng.range(0, 1);
      const qLat = 47.2 + rng.range(0, 0.8);
      const meters = rng.range(100, 20_000);
      const rows = adopted.within(qLon, qLat, meters);
      expect([...rows]).toEqual([...local.within(qLon, qLat, meters)]);
      expect(rows.every((row) => has(row))).toBe(true);
    }
  });

  it('builds the one-item tree of no points', async () => {
    const built = await buildTreeOffThread(new Float64Array(0));
    expect(built).not.toBeNull();
    const index = new PointIndex(new Float64Array(3), new Float64Array(3), { tree: built!.tree, rowOf: new Uint32Array(0), cosAt: built!.cosAt });
    expect(index.size).toBe(0);
    expect([...index.within(0, 0, 1000)]).toEqual([]);
  });
});
