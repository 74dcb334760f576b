/**
 * A sort in steps: rows sorted by a comparison that reads column arrays at random (a sorted
 * order's value, validity and key rank, or a key's bytes), where one comparison can cost a few
 * cache misses, so that a native sort of a few thousand rows holds the event loop for
 * milliseconds. Runs of SORT_RUN_ROWS are sorted natively (a check point after each), then merged
 * pairwise, bottom up, between two buffers (a check point every SORT_MERGE_ROWS rows merged):
 * O(n log n) comparisons, as the native sort, in pieces of about a hundred comparisons.
 */
import type { Steps } from './steps.js';

/** Rows sorted natively at once. */
export const SORT_RUN_ROWS = 32;

/** Rows merged between two check points. */
const SORT_MERGE_ROWS = 128;

/**
 * Steps that sort `rows` in place by `compare` (which must order every two rows, ties included:
 * the merges are stable, the runs' native sort is too) and return it.
 */
export function* sortSteps(rows: Uint32Array, compare: (a: number, b: number) => number): Steps<Uint32Array> {
  const n = rows.length;
  for (let s = 0; s < n; s += SORT_RUN_ROWS) {
    rows.subarray(s, Math.min(n, s + SORT_RUN_ROWS)).sort(compare);
    if (n > SORT_RUN_ROWS) yield;
  }
  if (n <= SORT_RUN_ROWS) return rows;
  let from: Uint32Array = rows;
  let to: Uint32Array = new Uint32Array(n);
  let work = 0;
  for (let width = SORT_RUN_ROWS; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(n, lo + width);
      const hi = Math.min(n, lo + 2 * width);
      let i = lo;
      let j = mid;
      for (let k = lo; k < hi; k++) {
        to[k] = i < mid && (j >= hi || compare(from[i], from[j]) <= 0) ? from[i++] : from[j++];
        if (++work === SORT_MERGE_ROWS) {
          work = 0;
          yield;
        }
      }
    }
    [from, to] = [to, from];
  }
  if (from !== rows) rows.set(from);
  return rows;
}
