/**
 * Binary search over positions: the first position in [lo, hi) at which `before(i)` is false,
 * for a `before` that is true for a prefix of the range and false after it (hi when it never is).
 * Every sorted-array search of the engine (key order, sorted permutations, postings, lexicons)
 * is this one loop with its own test; the test runs O(log n) times.
 */
export function partitionPoint(lo: number, hi: number, before: (i: number) => boolean): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The first position of an ascending numeric array whose value is not below `value` (its length when none). */
export function lowerBound(sorted: ArrayLike<number>, value: number, lo = 0, hi = sorted.length): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
