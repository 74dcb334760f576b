import { describe, expect, it } from 'vitest';
import { selectFloat64 } from '../../src/util/select.js';

/** A deterministic stream of numbers (a linear congruential generator). */
function numbers(seed: number, n: number, distinct: number): Float64Array {
  const out = new Float64Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
    out[i] = (x % distinct) - distinct / 2 + (x % 7) / 8;
  }
  return out;
}

describe('selectFloat64', () => {
  it('puts at k the value a sort would, nothing greater before and nothing smaller after, over a sub-range', () => {
    for (const [n, distinct] of [
      [1, 1],
      [2, 2],
      [10, 3],
      [601, 50],
      [5_000, 10],
      [20_000, 1_000_000],
    ]) {
      for (const seed of [1, 2, 3]) {
        const values = numbers(seed, n + 20, distinct);
        const left = 10;
        const right = 10 + n - 1;
        const sorted = Float64Array.from(values.subarray(left, right + 1)).sort();
        for (const k of [left, right, left + (n >> 1), left + Math.floor(n * 0.9)]) {
          const a = values.slice();
          selectFloat64(a, k, left, right);
          expect(a[k]).toBe(sorted[k - left]);
          for (let i = left; i < k; i++) expect(a[i] <= a[k]).toBe(true);
          for (let i = k + 1; i <= right; i++) expect(a[i] >= a[k]).toBe(true);
          // outside the range nothing moved, and inside it the same values
          expect(Array.from(a.subarray(0, left))).toEqual(Array.from(values.subarray(0, left)));
          expect(Array.from(a.subarray(right + 1))).toEqual(Array.from(values.subarray(right + 1)));
          expect(Float64Array.from(a.subarray(left, right + 1)).sort()).toEqual(sorted);
        }
      }
    }
  });
});
