/**
 * The rows of a text column by value (`ListingId eq '...'`, and any other text field but the key,
 * which has the table's own key index), made on first use and shared by the generations of a
 * table's lineage: a newer generation adds its appended rows (rows only ever grow, and a row's
 * value never changes), so an older one skips the rows at or past its row count.
 *
 * A UTF-8 text column's index lives outside the JS heap (`TextRowChains`): a `ByteIndex` over the
 * column's own bytes finds the newest row holding a value, and a chain of row numbers links each
 * row to the one before it holding the same value. A JS `Map` of every value as a string, which
 * this replaced, was the largest thing on the JS heap once made (61 MB for ListingId at 1M
 * listings). Other text columns (a child's link to its listing, which stores the listing's row,
 * not the text) keep the `Map` (`TextRowMap`).
 */
import { ByteIndex } from '../store/byte-index.js';
import { hashBytes } from '../store/bytes.js';
import { Utf8TextColumn, type TextColumn } from '../store/columns.js';
import { Backing, withRoom } from '../store/append/growable.js';
import { getBit } from '../util/bits.js';
import type { Steps } from '../util/steps.js';

/**
 * Rows added between two check points: each hashes a value and probes the index at random (or
 * decodes a string and sets a map entry), about 1 µs a row in a change (code run a few hundred
 * times per change is not optimized, and the probes miss the cache); at 256 a change's rows were
 * one step of 0.07-0.15 ms at 100k.
 */
const ADD_STEP_ROWS = 32;

export interface TextRows {
  /** Rows [0, covered) are in the index. */
  readonly covered: number;
  /** The rows below `n` holding `value`, ascending. */
  rows(value: string, n: number): readonly number[];
  /** Adds rows [covered, to) of `column` (the same column as before or a later generation's of the lineage). */
  add(column: TextColumn, to: number): void;
  /** Makes room for rows up to `to` in steps (the copy of a grown array in slices), so that `add` copies nothing. */
  reserveSteps(to: number): Steps<void>;
}

/** An empty index of a text column, with room for the values of `rows` rows. */
export function textRowsOf(column: TextColumn, rows: number): TextRows {
  return column instanceof Utf8TextColumn ? new TextRowChains(column, rows) : new TextRowMap();
}

/** Adds rows [index.covered, to) of `column` in steps. */
export function* addTextRowsSteps(index: TextRows, column: TextColumn, to: number): Steps<void> {
  yield* index.reserveSteps(to);
  while (index.covered < to) {
    index.add(column, Math.min(to, index.covered + ADD_STEP_ROWS));
    yield;
  }
}

/**
 * A UTF-8 column's rows by value: `heads`, whose entries are rows of the column (their bytes read
 * from it), holds the newest row of each value; `previous[row]` is the row before it holding the
 * same value, or -1. A row's link is written once, when it is added, and never again: an older
 * generation walks from the newest row down past the rows it does not have. The index reads the
 * bytes of the newest column added (each generation's column holds the same bytes for the rows
 * before it).
 */
class TextRowChains implements TextRows {
  private readonly heads: ByteIndex;
  private readonly previous: Backing<Int32Array>;
  covered = 0;

  constructor(column: Utf8TextColumn, rows: number) {
    this.heads = new ByteIndex(column, rows);
    this.previous = new Backing(withRoom(Int32Array, rows));
  }

  rows(value: string, n: number): number[] {
    const out: number[] = [];
    const previous = this.previous.array;
    for (let row = this.heads.findString(value); row >= 0; row = previous[row]) if (row < n) out.push(row);
    return out.reverse();
  }

  reserveSteps(to: number): Steps<void> {
    return this.previous.roomSteps(this.covered, to);
  }

  add(column: TextColumn, to: number): void {
    const c = column as Utf8TextColumn;
    const { bytes, offsets, validity } = c;
    this.heads.rebind(c);
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

/** Any other text column's rows by value: a map of each value to its row or rows. */
class TextRowMap implements TextRows {
  private readonly map = new Map<string, number | number[]>();
  covered = 0;

  rows(value: string, n: number): readonly number[] {
    const hit = this.map.get(value);
    const rows = hit === undefined ? [] : typeof hit === 'number' ? [hit] : hit;
    return this.covered > n ? rows.filter((r) => r < n) : rows;
  }

  *reserveSteps(): Steps<void> {}

  add(column: TextColumn, to: number): void {
    const map = this.map;
    for (let r = this.covered; r < to; r++) {
      const v = column.get(r);
      if (v === null) continue;
      const had = map.get(v);
      if (had === undefined) map.set(v, r);
      else if (typeof had === 'number') map.set(v, [had, r]);
      else had.push(r);
    }
    this.covered = Math.max(this.covered, to);
  }
}
