/**
 * Compaction: the live rows of a changed engine rewritten into fresh tables and indexes answer
 * every query exactly as the changed engine did; a snapshot of a changed engine is its compacted
 * image; the engine compacts by itself past compactFraction, and a pinned older generation still
 * pages after a compaction.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { Engine, type QueryResult } from '../../src/engine.js';
import { TableAccess } from '../../src/access/access.js';
import { dataset } from '../replicate/helpers.js';
import { answers, change } from './compaction-cases.js';

const NOW = Date.parse('2025-06-01T00:00:00Z');
const now = (): Date => new Date(NOW);

describe('compaction', () => {
  const base = dataset(300, 'compact');
  let changed: Engine;
  let before: QueryResult[];

  beforeAll(async () => {
    changed = await Engine.open({ data: base, now, compactFraction: false });
    await change(changed, base);
    before = answers(changed);
  });

  it('answers every query exactly as the changed generation did, with no dead or appended rows left', async () => {
    const generation = changed.generation;
    const keys = changed.keys('Property');
    await changed.compact();
    expect(changed.generation).toBe(generation + 1);
    expect(answers(changed)).toEqual(before);
    expect(changed.store.Property.rowCount).toBe(keys.length);
    expect(changed.keys('Property')).toEqual(keys);
    expect(changed.store.Media.rowCount).toBe(changed.keys('Media').length);
    // a compacted engine compacts to nothing more
    await changed.compact();
    expect(changed.generation).toBe(generation + 1);
  });

  it('keeps changing after a compaction, and the next compaction agrees again', async () => {
    await changed.upsert('Property', [{ ...base.Property[5], ListPrice: 1 }]);
    await changed.remove('Property', [base.Property[6].ListingKey as string]);
    const mid = answers(changed);
    await changed.compact();
    expect(answers(changed)).toEqual(mid);
  });

  it("writes a changed engine's snapshot as its compacted image, which opens to the same answers", async () => {
    const e = await Engine.open({ data: base, now, compactFraction: false });
    await change(e, base);
    const generation = e.generation;
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'reso-compact-')), 'changed.snap');
    e.save(file);
    expect(e.generation).toBe(generation); // saving publishes nothing
    const opened = await Engine.open({ snapshot: file, now });
    expect(answers(opened)).toEqual(before);
    expect(answers(e)).toEqual(before);
  });

  it('starts by itself once dead and appended rows pass compactFraction, and pinned pages keep working across it', async () => {
    const e = await Engine.open({ data: base, now, compactFraction: 0.1 });
    const first = e.query('Property', '$select=ListingKey&$orderby=ListPrice');
    const link = first['@odata.nextLink']!;
    const page2 = e.query('Property', decodeURIComponent(link.slice(link.indexOf('?') + 1)));
    await e.upsert(
      'Property',
      base.Property.slice(0, 20).map((p) => ({ ...p, ListPrice: 5 })),
    );
    expect(e.store.Property.rowCount).toBe(base.Property.length + 20); // below the fraction: not compacted
    const generation = e.generation;
    await change(e, base);
    await e.apply([]); // runs after any compaction a change started
    // change() is four changes; a compaction after its first one left only the last change's
    // replaced row (below the 1,024-row minimum) uncompacted
    expect(e.generation).toBe(generation + 5);
    expect(e.store.Property.rowCount).toBe(e.keys('Property').length + 1);
    // the nextLink of the first generation still reads that generation
    expect(e.query('Property', decodeURIComponent(link.slice(link.indexOf('?') + 1)))).toEqual(page2);
  });
});

describe('options of live data', () => {
  it('rejects a compactFraction or pageSnapshotTtlMs that is not one', async () => {
    const records = dataset(3, 'compact-options');
    for (const compactFraction of [0, -0.5, Number.NaN, '0.2', true]) {
      await expect(Engine.open({ data: records, compactFraction: compactFraction as number })).rejects.toThrow(/compactFraction must be a fraction above 0/);
    }
    await expect(Engine.open({ data: records, pageSnapshotTtlMs: -1 })).rejects.toThrow(/pageSnapshotTtlMs must be a number/);
    const e = await Engine.open({ data: records, compactFraction: false, pageSnapshotTtlMs: 0 });
    expect(e.generation).toBe(0);
  });
});

describe('structures carried over to a new generation', () => {
  it('equal the same structures built afresh on that generation: key order and rank, sorted permutations both ways, bitsets, counts', async () => {
    const base = dataset(200, 'carry');
    const e = await Engine.open({ data: base, now, compactFraction: false });
    const access = (): TableAccess => (e as unknown as { gen: { access: { of(t: unknown): TableAccess } } }).gen.access.of(e.store.Property);
    const fields = ['ListPrice', 'BedroomsTotal', 'ModificationTimestamp'];
    // build the structures on generation 0, so that changes carry them over
    const a0 = access();
    void a0.keyOrder; // the getter builds the key order
    for (const f of fields) a0.sortedDescending(f);
    const status = e.store.Property.columnOf('StandardStatus', 'dictionary')!;
    a0.valueBits('StandardStatus', 1);
    a0.codeCounts('StandardStatus');
    await change(e, base);
    await e.upsert(
      'Property',
      base.Property.slice(10, 20).map((p) => ({ ...p, ListPrice: null, StandardStatus: 'Pending' })),
    );
    const carried = access();
    const fresh = new TableAccess(e.store.Property, carried.dead);
    expect([...carried.keyOrder]).toEqual([...fresh.keyOrder]);
    expect(byRank(carried.keyRank)).toEqual(byRank(fresh.keyRank));
    for (const f of fields) {
      expect([...carried.sortedBy(f)!], f).toEqual([...fresh.sortedBy(f)!]);
      expect([...carried.sortedDescending(f)!], `${f} desc`).toEqual([...fresh.sortedDescending(f)!]);
    }
    expect([...carried.valueBits('StandardStatus', 1)]).toEqual([...fresh.valueBits('StandardStatus', 1)]);
    expect([...carried.codeCounts('StandardStatus')!]).toEqual([...fresh.codeCounts('StandardStatus')!]);
    expect(status.dictionary.length).toBeGreaterThan(1);
  });
});

/** Rows ordered by their key rank (ranks are spaced: only their order means anything). */
function byRank(rank: Uint32Array): number[] {
  return Array.from(rank.keys()).sort((a, b) => rank[a] - rank[b]);
}

describe('orders carried in two runs (a base and a tail of the rows appended since)', () => {
  it('stay equal to orders built afresh while the tail grows, when a gap between key ranks runs out, and when the tail folds', async () => {
    const base = dataset(200, 'carry-fold');
    const e = await Engine.open({ data: base, now, compactFraction: false });
    const access = (): TableAccess => (e as unknown as { gen: { access: { of(t: unknown): TableAccess } } }).gen.access.of(e.store.Property);
    const fields = ['ListPrice', 'BedroomsTotal', 'ModificationTimestamp'];
    const a0 = access();
    for (const f of fields) a0.sortedDescending(f);
    const firstRanks = a0.keyRank.slice();
    const same = (): void => {
      const carried = access();
      const fresh = new TableAccess(e.store.Property, carried.dead);
      expect(carried.keyOrder.toArray()).toEqual(fresh.keyOrder.toArray());
      expect(byRank(carried.keyRank)).toEqual(byRank(fresh.keyRank));
      expect(byRank(carried.keyRank)).toEqual([...carried.keyOrder]);
      for (const f of fields) {
        expect([...carried.sortedBy(f)!], f).toEqual([...fresh.sortedBy(f)!]);
        expect([...carried.sortedDescending(f)!], `${f} desc`).toEqual([...fresh.sortedDescending(f)!]);
      }
      // and the queries that walk them
      const q = '$filter=ListPrice ge 200000&$orderby=ListPrice desc&$top=30&$skip=5&$select=ListingKey';
      expect(e.query('Property', q)).toEqual(e.query('Property', `${q}&$count=false`));
    };
    // One listing replaced again and again: each version goes right after the one before in the
    // key order, halving the gap left before the next key, until the ranks are made afresh.
    for (let i = 0; i < 40; i++) {
      await e.upsert('Property', [{ ...base.Property[7], ListPrice: 300_000 + i }]);
      if (i % 8 === 7) same();
    }
    expect(access().keyOrder.tail.length).toBe(40);
    expect(access().sortedBy('ListPrice')!.tail.length).toBe(40);
    // ranks made afresh renumber the rows after the replaced listing's versions; placed ranks never move a row's
    const ranks = access().keyRank;
    expect(Array.from({ length: 200 }, (_, r) => r).filter((r) => ranks[r] !== firstRanks[r]).length).toBeGreaterThan(0);
    // more new rows than a tail holds: the orders fold into one base
    await e.upsert('Property', dataset(4200, 'carry-fold-new').Property);
    expect(access().keyOrder.tail.length).toBe(0);
    expect(access().sortedBy('ListPrice')!.tail.length).toBe(0);
    same();
    await e.upsert('Property', [{ ...base.Property[9], ListPrice: 1 }]);
    expect(access().keyOrder.tail.length).toBe(1);
    same();
  });
});

describe('structures carried through a compaction', () => {
  it('are on the compacted generation before its first query and equal the same structures built afresh on it', async () => {
    const base = dataset(200, 'carry-compact');
    const e = await Engine.open({ data: base, now, compactFraction: false });
    const accessOf = (table: unknown): TableAccess => (e as unknown as { gen: { access: { of(t: unknown): TableAccess } } }).gen.access.of(table);
    const fields = ['ListPrice', 'BedroomsTotal', 'ModificationTimestamp'];
    const a0 = accessOf(e.store.Property);
    void a0.keyOrder; // the getter builds the key order
    for (const f of fields) a0.sortedDescending(f);
    a0.valueBits('StandardStatus', 1);
    a0.codeCounts('StandardStatus');
    const listingId = base.Property[150].ListingId as string;
    expect(a0.textRows('ListingId', listingId)).toEqual([150]);
    await change(e, base);
    await e.compact();
    const compacted = accessOf(e.store.Property);
    const built = compacted as unknown as Record<'sorted' | 'sortedDesc' | 'valueBitsCache' | 'countsCache' | 'textIndexes', Map<string, unknown>> & {
      keyOrderCache: Uint32Array | null;
    };
    expect([...built.sorted.keys()].sort()).toEqual([...fields].sort());
    expect([...built.sortedDesc.keys()].sort()).toEqual([...fields].sort());
    expect([...built.valueBitsCache.keys()]).toHaveLength(1);
    expect([...built.countsCache.keys()]).toEqual(['StandardStatus']);
    expect([...built.textIndexes.keys()]).toEqual(['ListingId']);
    expect(built.keyOrderCache).not.toBeNull();
    // the compaction builds every table's key order for itself: one no query asked for is not carried
    expect((accessOf(e.store.Media) as unknown as { keyOrderCache: Uint32Array | null }).keyOrderCache).toBeNull();

    expect(compacted.dead).toBeNull();
    const fresh = new TableAccess(e.store.Property, null);
    expect([...compacted.keyOrder]).toEqual([...fresh.keyOrder]);
    for (const f of fields) {
      expect([...compacted.sortedBy(f)!], f).toEqual([...fresh.sortedBy(f)!]);
      expect([...compacted.sortedDescending(f)!], `${f} desc`).toEqual([...fresh.sortedDescending(f)!]);
    }
    expect([...compacted.valueBits('StandardStatus', 1)]).toEqual([...fresh.valueBits('StandardStatus', 1)]);
    expect([...compacted.codeCounts('StandardStatus')!]).toEqual([...fresh.codeCounts('StandardStatus')!]);
    const row = compacted.textRows('ListingId', listingId)!;
    expect(row).toEqual(fresh.textRows('ListingId', listingId));
    expect(row).toHaveLength(1);
    expect(e.store.Property.record(row[0]).ListingId).toBe(listingId);
  });
});
