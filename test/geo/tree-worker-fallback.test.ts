/**
 * When no worker thread can build a compaction's KD-tree (a thread that cannot start), the tree is
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

const { buildTreeOffThread } = await import('../../src/geo/tree-worker.js');
const { Engine } = await import('../../src/engine.js');
const { generateListings } = await import('../../src/generate/dataset.js');

describe('KD-trees when no worker can start', () => {
  it('buildTreeOffThread resolves null', async () => {
    expect(await buildTreeOffThread(Float64Array.of(1, 2, 3, 4))).toBeNull();
  });

  it('a compaction builds them on this thread, and geo.distance answers as before it', async () => {
    const listings = [...generateListings({ listings: 300, seed: 'tree-fallback' })];
    const engine = await Engine.open({
      data: { Property: listings.map((l) => l.property) },
      now: () => new Date('2025-06-01T00:00:00Z'),
      compactFraction: false,
    });
    await engine.apply([{ resource: 'Property', remove: listings.slice(0, 40).map((l) => l.property.ListingKey as string) }]);
    const query = "$filter=geo.distance(Location, geography'POINT(-118.25 34.05)') le 3000000&$count=true&$top=1000&$select=ListingKey";
    const before = engine.query('Property', query);
    await engine.compact();
    expect(engine.compactions.count).toBe(1);
    const after = engine.query('Property', query);
    expect(after['@odata.count']).toBeGreaterThan(0);
    expect(after['@odata.count']).toBe(before['@odata.count']);
    expect(new Set(after.value.map((r) => r.ListingKey))).toEqual(new Set(before.value.map((r) => r.ListingKey)));
  });
});
