/**
 * $orderby over a set of matching rows: sort keys are materialized once per query into typed
 * arrays (numbers; strings as ordinal ranks), nulls lowest, and every order ends with the key
 * ascending. Only the first `limit` rows in order are produced, with a bounded heap when that is
 * a small part of the matches.
 */
import type { Value } from '../plan/bound.js';
import type { Evaluator } from './compile.js';

export interface SortKey {
  /** Value of the key for a row (numbers or strings or null). */
  readonly read: Evaluator;
  readonly descending: boolean;
}

/** Rank of each row's key in ascending ordinal order: the final tie-break. */
export type KeyRank = ArrayLike<number>;

/** Key values for `rows`, as numbers (strings replaced by their ordinal rank); NaN is null. */
function materialize(rows: Uint32Array, read: Evaluator): Float64Array {
  const raw = new Array<Value>(rows.length);
  let strings = false;
  for (let i = 0; i < rows.length; i++) {
    const v = read(rows[i]);
    raw[i] = v;
    if (typeof v === 'string') strings = true;
  }
  const out = new Float64Array(rows.length);
  if (!strings) {
    for (let i = 0; i < raw.length; i++) {
      const v = raw[i];
      out[i] = v === null ? NaN : typeof v === 'boolean' ? Number(v) : (v as number);
    }
    return out;
  }
  const distinct = [...new Set(raw.filter((v): v is string => typeof v === 'string'))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const rank = new Map(distinct.map((s, i) => [s, i]));
  for (let i = 0; i < raw.length; i++) {
    const v = raw[i];
    out[i] = v === null ? NaN : rank.get(v as string)!;
  }
  return out;
}

/** Compares two materialized values: null (NaN) lowest. */
function cmp(a: number, b: number): number {
  const an = a !== a;
  const bn = b !== b;
  if (an || bn) return an && bn ? 0 : an ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The first `limit` of `rows` in the order of `keys`, then key rank. Returns row ids.
 * `scores` (relevance) may be given as a key through `read` like any other.
 */
export function orderRows(rows: Uint32Array, keys: readonly SortKey[], keyRank: KeyRank, limit: number): Uint32Array {
  const n = rows.length;
  const k = Math.min(limit, n);
  if (k === 0) return new Uint32Array(0);
  const cols = keys.map((key) => materialize(rows, key.read));
  const desc = keys.map((key) => key.descending);
  // compare positions i and j of rows
  const compare = (i: number, j: number): number => {
    for (let c = 0; c < cols.length; c++) {
      const d = cmp(cols[c][i], cols[c][j]);
      if (d !== 0) return desc[c] ? -d : d;
    }
    return keyRank[rows[i]] - keyRank[rows[j]];
  };
  let order: Uint32Array;
  if (k * 8 >= n) {
    order = new Uint32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    order.sort(compare);
    order = order.subarray(0, k);
  } else {
    order = boundedHeap(n, k, compare);
  }
  const out = new Uint32Array(k);
  for (let i = 0; i < k; i++) out[i] = rows[order[i]];
  return out;
}

/** Positions 0..n-1: the k smallest under `compare`, in order, by a bounded max-heap. */
function boundedHeap(n: number, k: number, compare: (a: number, b: number) => number): Uint32Array {
  const heap = new Uint32Array(k);
  let len = 0;
  const down = (i: number): void => {
    const item = heap[i];
    for (;;) {
      const l = 2 * i + 1;
      if (l >= len) break;
      const r = l + 1;
      const c = r < len && compare(heap[r], heap[l]) > 0 ? r : l;
      if (compare(heap[c], item) <= 0) break;
      heap[i] = heap[c];
      i = c;
    }
    heap[i] = item;
  };
  for (let x = 0; x < n; x++) {
    if (len < k) {
      let i = len++;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (compare(heap[p], x) >= 0) break;
        heap[i] = heap[p];
        i = p;
      }
      heap[i] = x;
    } else if (compare(x, heap[0]) < 0) {
      heap[0] = x;
      down(0);
    }
  }
  const out = new Uint32Array(len);
  for (let i = len - 1; i >= 0; i--) {
    out[i] = heap[0];
    heap[0] = heap[--len];
    down(0);
  }
  return out;
}
