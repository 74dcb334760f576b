/**
 * sortSteps: the same order as one stable native sort, for any length around the run and merge
 * sizes, with ties, and a check point between pieces of bounded work.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SORT_RUN_ROWS, sortSteps } from '../../src/util/sort-steps.js';
import { runNow } from '../../src/util/steps.js';

/** Rows ordered by a key with many ties, ties by row (as every order of the engine breaks them). */
const byKey =
  (keys: readonly number[]) =>
  (a: number, b: number): number =>
    keys[a] - keys[b] || a - b;

describe('sortSteps', () => {
  it('sorts as a native sort does, whatever the length', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 700 }), fc.boolean(), (keys, shuffled) => {
        const rows = Uint32Array.from(keys.keys());
        if (shuffled) rows.reverse();
        const compare = byKey(keys);
        const want = rows.slice().sort(compare);
        expect(runNow(sortSteps(rows, compare))).toEqual(want);
        expect(rows).toEqual(want); // in place
      }),
      { numRuns: 300 },
    );
  });

  it('is stable for a comparison that ties rows (the runs and the merges keep their order)', () => {
    const keys = Array.from({ length: 500 }, (_, i) => (i * 7919) % 5);
    const rows = Uint32Array.from(keys.keys());
    const sorted = runNow(sortSteps(rows, (a, b) => keys[a] - keys[b]));
    expect([...sorted]).toEqual([...keys.keys()].sort((a, b) => keys[a] - keys[b] || a - b));
  });

  it('yields between runs and between merged pieces: no step compares more than a few hundred rows', () => {
    const n = 4000;
    const keys = Array.from({ length: n }, (_, i) => (i * 2654435761) % 1000);
    let compared = 0;
    let most = 0;
    const steps = sortSteps(Uint32Array.from(keys.keys()), (a, b) => {
      compared++;
      return keys[a] - keys[b] || a - b;
    });
    let yields = 0;
    for (let next = steps.next(); !next.done; next = steps.next()) {
      yields++;
      most = Math.max(most, compared);
      compared = 0;
    }
    expect(yields).toBeGreaterThan(n / SORT_RUN_ROWS);
    expect(most).toBeLessThanOrEqual(SORT_RUN_ROWS * SORT_RUN_ROWS);
  });
});
