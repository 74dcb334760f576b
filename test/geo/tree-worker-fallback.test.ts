/**
 * When no worker thread can build a compaction's KD-trees (a thread that cannot start), they are
 * built on this thread and the compacted engine answers geo.distance as before.
 */
import type * as WorkerThreads from 'node:worker_threads';
import { describe, expect, it, vi } from 'vitest';

vi.mock('node:worker_threads', async (original) => {
  const real = await original<typeof WorkerThreads>();
  class Unstartable {
    constructor() {
      throw new Error('no thread for you');
    }
  }
  return { ...real, Worker: Unstartable };
});

const { TreeThread } = await import('../../src/geo/tree-worker.js');
const { TREE_THREAD_MIN_ROWS } = await import('../../src/live/compact.js');
const { Engine } = await import('../../src/engine.js');
const { generateListings } = await import('../../src/generate/dataset.js');

describe('KD-trees when no worker can start', () => {
  it('a TreeThread answers null', async () => {
    expect(await new TreeThread().build(Float64Array.of(1, 2, 3, 4))).toBeNull();
  });

  it('a compaction builds them on this thread, and geo.distance answers as before it', async () => {
    const listings = [...generateListings({ listings: TREE_THREAD_MIN_ROWS + 50, seed: 'tree-fallback' })].map((l) => l.property);
    const engine = await Engine.open({ data: { Property: listings }, now: () => new Date('2025-06-01T00:00:00Z'), compactFraction: false });
    await engine.apply([{ resource: 'Property', remove: listings.slice(0, 40).map((p) => p.ListingKey as string) }]);
    const query = "$filter=geo.distance(Location, geography'POINT(-118.25 34.05)') le 3000000&$count=true&$top=1000&$select=ListingKey";
    const before = engine.query('Property', query);
    await engine.compact();
    expect(engine.compactions.count).toBe(1);
    const after = engine.query('Property', query);
    expect(after['@odata.count']).toBeGreaterThan(0);
    expect(after).toEqual(before);
  });
});
