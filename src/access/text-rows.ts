/**
 * The rows of a UTF-8 text column by value (`ListingId eq '...'`, and any other text field but the
 * key, which has the table's own key index; a child's link to its listing goes through the
 * listing's children, `StoreAccess.textRows`), made on first use and shared by the generations of
 * a table's lineage: a newer generation adds its appended rows (rows only ever grow, and a row's
 * value never changes), so an older one skips the rows at or past its row count.
 *
 * It lives outside the JS heap: a `ByteIndex` over the column's own bytes finds the newest row
 * holding a value, and a chain of row numbers links each row to the one before it holding the same
 * value. A JS `Map` of every value as a string, which this replaced, was the largest thing on the
 * JS heap once made (61 MB for ListingId at 1M listings).
 */
import { ByteIndex } from '../store/byte-index.js';
import { hashBytes } from '../store/bytes.js';
import type { Utf8TextColumn } from '../store/columns.js';
import { Backing, withRoom } from '../store/append/growable.js';
import { getBit } from '../util/bits.js';
import type { Steps } from '../util/steps.js';

/**
 * Rows added between two check points: each hashes a value and probes the index at random, about
 * 1 µs a row in a change (code run a few hundred times per change is not optimized, and the probes
 * miss the cache); at 256 a change's rows were one step of 0.07-0.15 ms at 100k.
 */
const ADD_STEP_ROWS = 32;

/** Adds rows [index.covered, to) of `column` in steps. */
export function* addTextRowsSteps(index: TextRows, column: Utf8TextColumn, to: number): Steps<void> {
  yield* index.reserveSteps(to);
  while (index.covered < to) {
    index.add(column, Math.min(to, index.covered + ADD_STEP_ROWS));
    yield;
  }
}

/**
 * A column's rows by value: `heads`, whose entries are rows of the column (their bytes read
 * from it), holds the newest row of each value; `previous[row]` is the row before it holding the
 * same value, or -1. A row's link is written once, when it is added, and never again: an older
 * generation walks from the newest row down past the rows it does not have. The index reads the
 * bytes of the newest column added (each generation's column holds the same bytes for the rows
 * before it).
 */
export class TextRows {
  private readonly heads: ByteIndex;
  private readonly previous: Backing<Int32Array>;
  /** Rows [0, covered) are in the index. */
  covered = 0;
  /** The value looked up last and its newest row (-1: none), until a row is added. */
  private lastValue: string | null = null;
  private lastNewest = -1;

  /** An empty index of `column`, with room for `rows` rows. */
  constructor(column: Utf8TextColumn, rows: number) {
    this.heads = new ByteIndex(column, rows);
    this.previous = new Backing(withRoom(Int32Array, rows));
  }

  /** The rows below `n` holding `value`, ascending. */
  rows(value: string, n: number): number[] {
    // a query looks its value up twice (the planner's estimate, then the rows): the last one is kept
    if (value !== this.lastValue) {
      this.lastValue = value;
      this.lastNewest = this.heads.findString(value);
    }
    const newest = this.lastNewest;
    const previous = this.previous.array;
    if (newest < 0 || previous[newest] < 0) return newest >= 0 && newest < n ? [newest] : [];
    const out: number[] = [];
    for (let row = newest; row >= 0; row = previous[row]) if (row < n) out.push(row);
    return out.reverse();
  }

  /** Makes room for rows up to `to` in steps (the copy of a grown array in slices), so that `add` copies nothing. */
  reserveSteps(to: number): Steps<void> {
    return this.previous.roomSteps(this.covered, to);
  }

  /** Adds rows [covered, to) of `column` (the same column as before or a later generation's of the lineage). */
  add(column: Utf8TextColumn, to: number): void {
    const { bytes, offsets, validity } = column;
    this.heads.rebind(column);
    this.lastValue = null;
    const previous = this.previous.room(this.covered, to);
    for (let row = this.covered; row < to; row++) {
      if (!getBit(validity, row)) continue;
      const s = offsets[row];
      const e = offsets[row + 1];
      const h = hashBytes(bytes, s, e);
      const newest = this.heads.find(bytes, s, e, h);
      previous[row] = newest;
      if (newest < 0) this.heads.add(row, h);
      else this.heads.replace(newest, row, h);
    }
    this.covered = Math.max(this.covered, to);
  }
}
