/**
 * A sorted order of a table's rows in two runs: the base (the rows of the order as of its last
 * fold) and a short tail (the rows appended since, in order), with each tail row's position in
 * the whole order. A change extends the order by merging its rows into the tail, O(tail + m log n)
 * for m new rows, and folds the tail into a new base only once it has grown past a bound: the
 * generations in between share the base, so a change no longer copies every order of the table
 * (DESIGN.md "Change": sorted orders in two runs). Readers walk the whole order with a cursor,
 * which interleaves the two runs by position without comparing rows.
 */
import { partitionPoint } from '../util/binary-search.js';
import { runNow, type Steps } from '../util/steps.js';

const NONE = new Uint32Array(0);

/** Elements copied, or the equivalent in rows placed, between two check points of a fold. */
const STEP_ROWS = 1 << 13;

/**
 * What placing one row by binary search counts as, in elements copied: its comparisons read
 * column arrays at random (a cache miss or three each, about 4 µs a row over 100k rows), where a
 * copied element costs well under a nanosecond. Four rows a check point.
 */
const PLACE_ROW_COST = 2048;

/**
 * What merging one row of the old tail counts as: one comparison with the next added row (values,
 * validity and key ranks read at random, 30-100 ns between queries' work). 256 a check point; at
 * one each the whole tail (up to 4,096 rows at 100k) was one step of 0.1-0.2 ms.
 */
const TAIL_ROW_COST = 32;

/** A tail never has to fold below this many rows (it folds once it exceeds this or 1/64 of the base). */
export const MIN_FOLD_ROWS = 4096;

export class SplitOrder {
  readonly length: number;

  constructor(
    /** The rows in order as of the last fold. */
    readonly base: Uint32Array,
    /** The rows added since, in order. */
    readonly tail: Uint32Array = NONE,
    /** The position of each tail row in the whole order (strictly increasing). */
    readonly tailPos: Uint32Array = NONE,
  ) {
    this.length = base.length + tail.length;
  }

  /** How many tail rows come before position `i` of the whole order. */
  tailBefore(i: number): number {
    const { tail, tailPos } = this;
    return tail.length === 0 ? 0 : partitionPoint(0, tail.length, (j) => tailPos[j] < i);
  }

  /** The row at position `i` of the whole order (a binary search in the tail). */
  at(i: number): number {
    const t = this.tailBefore(i);
    return t < this.tail.length && this.tailPos[t] === i ? this.tail[t] : this.base[i - t];
  }

  /** A cursor at position `at`: `next()` gives the rows from there on, in order. */
  cursor(at = 0): OrderCursor {
    return new OrderCursor(this, at);
  }

  /** The whole order in one array (the base itself when there is no tail). */
  toArray(): Uint32Array {
    if (this.tail.length === 0) return this.base;
    const out = new Uint32Array(this.length);
    const c = this.cursor();
    for (let i = 0; i < out.length; i++) out[i] = c.next();
    return out;
  }

  *[Symbol.iterator](): IterableIterator<number> {
    const c = this.cursor();
    for (let i = 0; i < this.length; i++) yield c.next();
  }
}

/** Reads a SplitOrder forwards from a position: the tail row due at each position, else the next base row. */
export class OrderCursor {
  private readonly base: Uint32Array;
  private readonly tail: Uint32Array;
  private readonly tailPos: Uint32Array;
  /** Base rows and tail rows before the cursor's position. */
  private b: number;
  private t: number;

  constructor(order: SplitOrder, at: number) {
    this.base = order.base;
    this.tail = order.tail;
    this.tailPos = order.tailPos;
    this.t = order.tailBefore(at);
    this.b = at - this.t;
  }

  /** The row at the cursor's position; the cursor moves on by one. Past the end: undefined behaviour (callers count). */
  next(): number {
    const t = this.t;
    if (t < this.tail.length && this.tailPos[t] === this.b + t) {
      this.t = t + 1;
      return this.tail[t];
    }
    return this.base[this.b++];
  }
}

/** The tail a SplitOrder of `rows` rows may reach before it folds. */
export function foldBound(rows: number): number {
  return Math.max(MIN_FOLD_ROWS, rows >>> 6);
}

/**
 * Steps that give `order` with `added` merged in (rows not in it, sorted by `compare`, the order's
 * own comparison, which never ties two rows): the old tail and the new rows merged into a new
 * tail, each new row placed in the base by binary search; when that tail is longer than
 * `maxTail`, base and tail are folded into one new base (a copy of the whole order, in slices of
 * STEP_ROWS with a check point after each). Nothing of `order` is changed.
 */
export function* extendSteps(order: SplitOrder, added: Uint32Array, compare: (a: number, b: number) => number, maxTail: number): Steps<SplitOrder> {
  const { base, tail, tailPos } = order;
  const m = tail.length + added.length;
  const merged = new Uint32Array(m);
  // positions in the whole new order; first the insertion points into the base (non-decreasing)
  const pos = new Uint32Array(m);
  let i = 0;
  let j = 0;
  let lo = 0;
  let work = 0;
  for (let k = 0; k < m; k++) {
    if (j >= added.length || (i < tail.length && compare(tail[i], added[j]) < 0)) {
      merged[k] = tail[i];
      lo = tailPos[i] - i;
      i++;
      work += j < added.length ? TAIL_ROW_COST : 1;
    } else {
      const row = added[j++];
      merged[k] = row;
      lo = partitionPoint(lo, base.length, (p) => compare(base[p], row) < 0);
      work += PLACE_ROW_COST;
    }
    pos[k] = lo + k;
    if (work >= STEP_ROWS) {
      work = 0;
      yield;
    }
  }
  if (m <= maxTail) return new SplitOrder(base, merged, pos);
  yield;
  // fold: the base's runs between tail rows copied in slices, the tail rows between them
  const out = new Uint32Array(base.length + m);
  let copied = 0;
  for (let k = 0; k <= m; k++) {
    const end = k < m ? pos[k] - k : base.length;
    while (copied < end) {
      const stop = Math.min(end, copied + STEP_ROWS);
      out.set(base.subarray(copied, stop), copied + k);
      work += stop - copied;
      copied = stop;
      if (work >= STEP_ROWS) {
        work = 0;
        yield;
      }
    }
    if (k < m) out[pos[k]] = merged[k];
  }
  return new SplitOrder(out);
}

/** Positions of an order per block of match counts (a power of two: a block is found by a shift). */
export const WALK_BLOCK_SHIFT = 8;
const WALK_BLOCK = 1 << WALK_BLOCK_SHIFT;

/**
 * Positions block counts are counted over between check points: each reads its row's bit at random
 * (a cache miss), so that STEP_ROWS of them (8k) held the event loop 0.25-0.5 ms among queries at
 * 100k listings.
 */
const COUNT_STEP_ROWS = 1 << 10;

/**
 * Block counts of a bitset over a whole order, as prefix sums: `counts[b]` is the number of rows
 * with their bit set at positions [0, b × WALK_BLOCK) of the order, and the last entry the total.
 * One pass over the order, a check point every COUNT_STEP_ROWS positions; n / 256 + 1 words (16 KB
 * per million rows). src/exec/walk.ts jumps deep pages by them.
 */
export function* blockCountsSteps(order: SplitOrder, bits: Uint32Array): Steps<Uint32Array> {
  const blocks = (order.length + WALK_BLOCK - 1) >>> WALK_BLOCK_SHIFT;
  const counts = new Uint32Array(blocks + 1);
  const c = order.cursor();
  let n = 0;
  for (let b = 0; b < blocks; b++) {
    counts[b] = n;
    const end = Math.min(order.length, (b + 1) << WALK_BLOCK_SHIFT);
    for (let i = b << WALK_BLOCK_SHIFT; i < end; i++) {
      const row = c.next();
      n += (bits[row >>> 5] >>> (row & 31)) & 1;
    }
    if ((end & (COUNT_STEP_ROWS - 1)) === 0) yield;
  }
  counts[blocks] = n;
  return counts;
}

/** blockCountsSteps at once. */
export function blockCounts(order: SplitOrder, bits: Uint32Array): Uint32Array {
  return runNow(blockCountsSteps(order, bits));
}
