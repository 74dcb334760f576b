/**
 * Sorted orders in two runs (src/access/split-order.ts): extended change after change by merging
 * the new rows into the tail and folded once the tail passes its bound, an order must always read
 * as the rows sorted afresh, through the whole array, a cursor from any position and `at`, and
 * extending it must leave the order it extended as it was (older generations read it).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { extendSteps, SplitOrder } from '../../src/access/split-order.js';
import { Rng } from '../../src/generate/prng.js';
import { runNow } from '../../src/util/steps.js';

describe('SplitOrder', () => {
  it('reads as the rows sorted afresh after every extension and fold, and extending leaves the old order as it was', () => {
    fc.assert(
      fc.property(
        fc.record({
          seed: fc.integer(),
          first: fc.integer({ min: 0, max: 300 }),
          adds: fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 12 }),
          maxTail: fc.integer({ min: 0, max: 60 }),
          distinct: fc.constantFrom(3, 1000),
        }),
        ({ seed, first, adds, maxTail, distinct }) => {
          const rng = new Rng(`split-${seed}`);
          const total = first + adds.reduce((a, b) => a + b, 0);
          const values = Array.from({ length: total }, () => rng.int(0, distinct));
          // values with ties (few distinct), then row: the order never ties two rows
          const compare = (a: number, b: number): number => values[a] - values[b] || a - b;
          const sorted = (n: number): number[] => Array.from({ length: n }, (_, i) => i).sort(compare);
          let order = new SplitOrder(Uint32Array.from(sorted(first)));
          let rows = first;
          for (const m of adds) {
            const before = [...order];
            const added = Uint32Array.from({ length: m }, (_, i) => rows + i).sort(compare);
            const next = runNow(extendSteps(order, added, compare, maxTail));
            expect([...order]).toEqual(before);
            rows += m;
            order = next;
            const want = sorted(rows);
            expect([...order.toArray()]).toEqual(want);
            expect(order.length).toBe(rows);
            if (order.tail.length > 0) expect(order.tail.length).toBeLessThanOrEqual(maxTail);
            for (let k = 0; k < 8 && rows > 0; k++) {
              const at = rng.int(0, rows - 1);
              expect(order.at(at)).toBe(want[at]);
              const c = order.cursor(at);
              const read = Array.from({ length: Math.min(20, rows - at) }, () => c.next());
              expect(read).toEqual(want.slice(at, at + read.length));
            }
          }
        },
      ),
      { seed: 20261127, numRuns: 300 },
    );
  });

  it('folds into one base exactly when the merged tail passes the bound', () => {
    const compare = (a: number, b: number): number => b - a; // rows high to low
    const order = new SplitOrder(Uint32Array.from([4, 3, 2, 1, 0]));
    const kept = runNow(extendSteps(order, Uint32Array.from([6, 5]), compare, 2));
    expect([...kept.tail]).toEqual([6, 5]);
    expect([...kept.tailPos]).toEqual([0, 1]);
    expect(kept.base).toBe(order.base);
    const folded = runNow(extendSteps(kept, Uint32Array.from([7]), compare, 2));
    expect(folded.tail.length).toBe(0);
    expect([...folded.base]).toEqual([7, 6, 5, 4, 3, 2, 1, 0]);
  });
});
