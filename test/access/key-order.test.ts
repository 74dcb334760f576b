/**
 * A table's key order built from scratch (TableAccess.keyOrderSteps): the rows in key order from
 * the first as they are, the rest sorted in chunks and merged in, equal to one sort of every
 * key (ordinal as UTF-16 strings, ties by row) whether the rows came in order, in part, reversed,
 * with keys outside the Basic Multilingual Plane, or with a replaced row's key twice.
 */
import { describe, expect, it } from 'vitest';
import { TableAccess } from '../../src/access/access.js';
import { Engine } from '../../src/engine.js';
import { Rng } from '../../src/generate/prng.js';
import type { Table } from '../../src/store/table.js';
import { runNow } from '../../src/util/steps.js';
import { dataset } from '../replicate/helpers.js';

const now = (): Date => new Date('2025-06-01T00:00:00Z');
type Listing = Record<string, unknown>;

/** Every row of `table` by key (as strings), ties by row. */
function reference(table: Table): number[] {
  const keys = Array.from({ length: table.rowCount }, (_, r) => table.keyOf(r));
  return keys.map((_, r) => r).sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : a - b));
}

async function propertyOf(listings: readonly Listing[]): Promise<Engine> {
  return Engine.open({ data: { Property: listings.map((l) => ({ ...l })) }, now, compactFraction: false });
}

describe('a key order built from scratch', () => {
  const listings: Listing[] = dataset(2600, 'key-order').Property;
  const sorted = [...listings].sort((a, b) => (String(a.ListingKey) < String(b.ListingKey) ? -1 : 1));
  const shuffled = (seed: string): Listing[] => {
    const rng = new Rng(seed);
    const out = [...listings];
    for (let i = out.length - 1; i > 0; i--) {
      const j = rng.int(0, i);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  };
  const cases: Array<[string, Listing[]]> = [
    ['in key order', sorted],
    ['in key order for 900 rows, then shuffled (several chunks)', [...sorted.slice(0, 900), ...shuffled('tail').filter((l) => sorted.indexOf(l) >= 900)]],
    ['reversed', [...sorted].reverse()],
    ['shuffled', shuffled('all')],
    // U+1D538 sorts after U+FFFD as a code point but before it as UTF-16 (a surrogate pair)
    [
      'with keys outside the BMP',
      shuffled('astral').map((l, i) => (i % 7 === 0 ? { ...l, ListingKey: `${i % 2 ? '\u{1d538}' : '\ufffd'}${String(l.ListingKey)}` } : l)),
    ],
  ];
  for (const [name, rows] of cases) {
    it(name, async () => {
      const e = await propertyOf(rows);
      const table = e.store.Property;
      const access = new TableAccess(table, null);
      const steps = access.keyOrderSteps();
      let yields = 0;
      let next = steps.next();
      for (; !next.done; next = steps.next()) yields++;
      expect(next.value.toArray()).toEqual(Uint32Array.from(reference(table)));
      expect(yields).toBeGreaterThan(0);
      // the key ranks follow it
      const rank = access.keyRank;
      expect(Array.from(rank.keys()).sort((a, b) => rank[a] - rank[b])).toEqual(reference(table));
    });
  }

  it('with a replaced listing: its old row and its new row have the same key, the older first', async () => {
    const e = await propertyOf(shuffled('replaced'));
    await e.upsert('Property', [{ ...listings[5], ListPrice: 1 }]);
    const table = e.store.Property;
    const order = runNow(new TableAccess(table, null).keyOrderSteps()).toArray();
    expect(order).toEqual(Uint32Array.from(reference(table)));
    const twice = [...order].filter((r) => table.keyOf(r) === listings[5].ListingKey);
    expect(twice).toEqual([twice[0], table.rowCount - 1]);
  });
});
