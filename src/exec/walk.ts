/**
 * The walk operator: the first rows of an order (the key order, or a sorted permutation) that the
 * filter allows, stopping as soon as the page (plus one row, to know whether more remain) is full.
 */
import type { TableAccess, WalkCounts } from '../access/access.js';
import { blockCounts, WALK_BLOCK_SHIFT, type SplitOrder } from '../access/split-order.js';
import type { Bound } from '../plan/bound.js';
import type { LookupTerm } from '../plan/plan.js';
import type { Table } from '../store/table.js';
import { partitionPoint } from '../util/binary-search.js';
import { lookupBits } from './lookup.js';
import type { Slice } from './range.js';

/** The first `need` rows of `order` at positions [from, end) that `keep` allows. */
export function walkOrder(order: SplitOrder, from: number, end: number, keep: (row: number) => boolean, need: number): Uint32Array {
  const out: number[] = [];
  const c = order.cursor(from);
  for (let i = from; i < end && out.length < need; i++) {
    const row = c.next();
    if (keep(row)) out.push(row);
  }
  return Uint32Array.from(out);
}

const WALK_BLOCK = 1 << WALK_BLOCK_SHIFT;

/** One page of a bit walk: the rows at `rows[skip..]` (the positions before are unset), and the positions of the order read. */
export interface BitPage {
  readonly rows: Uint32Array;
  readonly visited: number;
}

/**
 * Matches `skip` to `skip + take - 1` of `order[start, end)` (rows whose bit is set), in order,
 * written at `rows[skip..]` of an array whose first `skip` entries are left zero: the shape
 * respond (src/exec/page.ts) reads, which takes the page from position `skip` and knows more
 * remain when the array reaches past the page. Fewer than `skip` matches give no rows.
 *
 * Without `counts` the walk tests every position up to the page. With them (blockCounts of the
 * whole order, for these bits) it jumps over the blocks before the one where match `skip` falls,
 * found by binary search on the prefix sums, and tests at most the part of `start`'s block before
 * `start` (a range's slice starts inside a block), one block, and the page's own positions.
 */
export function walkBitsPage(
  order: SplitOrder,
  bits: Uint32Array,
  start: number,
  end: number,
  skip: number,
  take: number,
  counts: Uint32Array | null,
): BitPage {
  let visited = 0;
  let at = start;
  // matches before `at` in the whole order (`seen`), and the index there of the first one wanted
  let seen = 0;
  let first = skip;
  if (counts !== null && skip >= WALK_BLOCK) {
    const startBlock = start >>> WALK_BLOCK_SHIFT;
    let before = counts[startBlock];
    const c = order.cursor(startBlock << WALK_BLOCK_SHIFT);
    for (let i = startBlock << WALK_BLOCK_SHIFT; i < start; i++) {
      const row = c.next();
      before += (bits[row >>> 5] >>> (row & 31)) & 1;
    }
    visited += start - (startBlock << WALK_BLOCK_SHIFT);
    first = before + skip;
    seen = before;
    // the last block that starts with at most `first` matches before it: match `first` is in it or after
    const endBlock = (end + WALK_BLOCK - 1) >>> WALK_BLOCK_SHIFT;
    const block = partitionPoint(startBlock + 1, endBlock, (b) => counts[b] <= first) - 1;
    if (block > startBlock) {
      at = block << WALK_BLOCK_SHIFT;
      seen = counts[block];
    }
  }
  if (at >= end || seen + (end - at) <= first) return { rows: NO_ROWS, visited };
  const page = new Uint32Array(take);
  let k = 0;
  let i = at;
  const c = order.cursor(at);
  for (; i < end; i++) {
    const row = c.next();
    if (((bits[row >>> 5] >>> (row & 31)) & 1) === 0) continue;
    if (seen++ < first) continue;
    page[k++] = row;
    if (k === take) {
      i++;
      break;
    }
  }
  visited += i - at;
  if (k === 0) return { rows: NO_ROWS, visited };
  const rows = new Uint32Array(skip + k);
  rows.set(k === take ? page : page.subarray(0, k), skip);
  return { rows, visited };
}

const NO_ROWS = new Uint32Array(0);

/**
 * What a position a plain walk reads costs, in positions building block counts reads: building
 * is one sequential pass with a bit test (2.7 ns a position over a random order of 1M rows), a
 * walk also branches on every match and keeps count (about 5 ns).
 */
const WALK_POSITION_COST = 2;

/**
 * The walk counts of dictionary lookups over a sorted order of `field` (kept per generation in
 * the table's access), with the lookup's bitset (`lookupBits` of the terms) made on first use and
 * kept: a walk then tests bits without making them again (a copy of rowCount / 8 bytes).
 */
export function lookupWalk(access: TableAccess, terms: readonly LookupTerm[], field: string, descending: boolean): WalkCounts & { bits: Uint32Array } {
  const w = access.walkCounts(walkKey(terms, field, descending), () => ({ terms, field, descending }));
  if (w.bits === null) access.keepWalkCounts(w, lookupBits(access, terms), null);
  return w as WalkCounts & { bits: Uint32Array };
}

/**
 * A page of an ordered walk of a sorted order (`order`, the whole ascending or descending
 * permutation of `field`; `slice` the range's part of it) over the rows of dictionary lookups,
 * with nothing else to test: walkBitsPage over the lookup's kept bitset.
 *
 * Deep pages ($skip of a block or more) are where block counts pay. They are built for the
 * (lookup, field, direction) once plain deep walks of it have cost as much as building does
 * (a pass over the whole order), so a one-off deep page never pays for them and a repeated one
 * pays at most about twice what building at once would have cost (the rent-or-buy rule). Once built, every deep page of that lookup and order (any slice, any depth) jumps.
 */
export function walkLookupPage(
  access: TableAccess,
  terms: readonly LookupTerm[],
  field: string,
  descending: boolean,
  order: SplitOrder,
  slice: Slice,
  skip: number,
  take: number,
): Uint32Array {
  const w = lookupWalk(access, terms, field, descending);
  if (skip < WALK_BLOCK) return walkBitsPage(order, w.bits, slice.start, slice.end, skip, take, null).rows;
  if (w.counts === null && w.paid * WALK_POSITION_COST >= order.length) access.keepWalkCounts(w, w.bits, blockCounts(order, w.bits));
  const page = walkBitsPage(order, w.bits, slice.start, slice.end, skip, take, w.counts);
  if (w.counts === null) w.paid += page.visited;
  return page.rows;
}

/** The walk counts' key of a lookup and an order, spelled once per terms array (a cached plan's). */
const walkKeys = new WeakMap<readonly LookupTerm[], { asc: Map<string, string>; desc: Map<string, string> }>();

function walkKey(terms: readonly LookupTerm[], field: string, descending: boolean): string {
  let keys = walkKeys.get(terms);
  if (keys === undefined) walkKeys.set(terms, (keys = { asc: new Map(), desc: new Map() }));
  const byField = descending ? keys.desc : keys.asc;
  let key = byField.get(field);
  if (key === undefined) byField.set(field, (key = JSON.stringify([field, descending, terms.map((t) => [t.field, t.values])])));
  return key;
}

/**
 * The first position of the key order that top-level `Key gt 'k'` / `Key ge 'k'` conjuncts allow
 * (their largest bound; rows before it fail them), or 0: keyset paging starts there. The walk
 * still applies the whole filter.
 */
export function keyLowerBound(table: Table, order: SplitOrder, top: readonly Bound[]): number {
  let bound: string | null = null;
  for (const e of top) {
    if (e.kind !== 'compare' || (e.op !== 'gt' && e.op !== 'ge') || e.left.kind !== 'field' || e.left.field.name !== table.schema.key) continue;
    if (e.right.kind !== 'const' || typeof e.right.value !== 'string') continue;
    if (bound === null || e.right.value > bound) bound = e.right.value;
  }
  if (bound === null) return 0;
  const b = bound;
  return partitionPoint(0, order.length, (i) => table.keyOf(order.at(i)) < b);
}
