/**
 * The posting lists of a search field's appended rows (the live tail, `live.ts`): per term, the
 * appended rows that hold it (ascending) and their term frequencies, in a few large arrays rather
 * than a pair of small typed arrays per term.
 *
 * Layout. Postings live in chunks (a `Uint32Array` of rows beside a `Uint16Array` of frequencies,
 * CHUNK_ENTRIES entries each, or one list's whole capacity when that is larger). A term's list is
 * one region of a chunk: its chunk, start, length and capacity in `meta` (four Int32 per list),
 * the list found from the term id through `slots` (an Int32Array indexed by term id, -1 for none).
 * A full list moves to a region twice its capacity at the end of the newest chunk (its entries
 * copied; the old region is left unused), so appending is amortised O(1) and the unused regions
 * are at most as large as the used ones. Nothing is ever removed: the tail only grows until a
 * compaction replaces the lineage.
 *
 * Readers see a list through `read(id, rowCount)`: the chunk's arrays and the range [start, end)
 * of the list's entries below a row count (a view's bound), found in O(1) when the list's last
 * row is below it (the usual case), else by binary search. A list that moves keeps its entries in
 * order, so what any view reads below its row count is the same before and after.
 *
 * Why: at 100k listings after 18,000 listing changes the tail held 28,000 lists, each a JS object
 * with two typed arrays and their two ArrayBuffers, 12 MB of the JS heap that every mark-compact
 * marked, and a change made some hundreds of them (and larger arrays for the lists that grew) that
 * outlived the young generation (DESIGN.md, "Search").
 */
import { lowerBound } from '../util/binary-search.js';

/** Entries of a chunk (a list larger than this gets a chunk of its own). */
const CHUNK_ENTRIES = 1 << 16;

/** A new list's first capacity. */
const FIRST_CAPACITY = 2;

/** Fields of a list in `meta`. */
const CHUNK = 0;
const START = 1;
const LENGTH = 2;
const CAPACITY = 3;
const FIELDS = 4;

/** A term's appended postings below a view's row count: rows[start, end) ascending, tfs beside them. */
export interface TailPostings {
  readonly rows: Uint32Array;
  readonly tfs: Uint16Array;
  readonly start: number;
  readonly end: number;
}

export class TailPostingArena {
  private readonly rowChunks: Uint32Array[] = [];
  private readonly tfChunks: Uint16Array[] = [];
  /** Entries used in the newest chunk. */
  private used = 0;
  /** List of a term id (-1: none), grown on demand. */
  private slots = new Int32Array(0);
  /** Per list: chunk, start, length, capacity. */
  private meta = new Int32Array(FIELDS * 64);
  /** Lists made. */
  private lists = 0;

  /** Appends a posting to the term's list; rows must come in ascending order per term. */
  push(id: number, row: number, tf: number): void {
    let slot = this.slotOf(id);
    if (slot < 0) slot = this.newList(id);
    const at = slot * FIELDS;
    const meta = this.meta; // a move rewrites the list's fields, never the array
    const length = meta[at + LENGTH];
    if (length === meta[at + CAPACITY]) this.move(at, length * 2);
    const p = meta[at + START] + length;
    const chunk = meta[at + CHUNK];
    this.rowChunks[chunk][p] = row;
    this.tfChunks[chunk][p] = tf;
    meta[at + LENGTH] = length + 1;
  }

  /** The term's postings with a row below `rowCount`, or null when it has none. */
  read(id: number, rowCount: number): TailPostings | null {
    const slot = this.slotOf(id);
    if (slot < 0) return null;
    const at = slot * FIELDS;
    const chunk = this.meta[at + CHUNK];
    const start = this.meta[at + START];
    const rows = this.rowChunks[chunk];
    const end = endBelow(rows, start, start + this.meta[at + LENGTH], rowCount);
    return end === start ? null : { rows, tfs: this.tfChunks[chunk], start, end };
  }

  /** How many of the term's postings have a row below `rowCount`. */
  count(id: number, rowCount: number): number {
    const slot = this.slotOf(id);
    if (slot < 0) return 0;
    const at = slot * FIELDS;
    const start = this.meta[at + START];
    return endBelow(this.rowChunks[this.meta[at + CHUNK]], start, start + this.meta[at + LENGTH], rowCount) - start;
  }

  /** The term's list, or -1 when it has none. */
  private slotOf(id: number): number {
    return id < this.slots.length ? this.slots[id] : -1;
  }

  private newList(id: number): number {
    if (id >= this.slots.length) {
      const slots = new Int32Array(Math.max(id + 1, this.slots.length * 2, 64)).fill(-1);
      slots.set(this.slots);
      this.slots = slots;
    }
    const slot = this.lists++;
    if (this.lists * FIELDS > this.meta.length) {
      const meta = new Int32Array(this.meta.length * 2);
      meta.set(this.meta);
      this.meta = meta;
    }
    this.slots[id] = slot;
    const at = slot * FIELDS;
    this.meta[at + LENGTH] = 0;
    this.meta[at + CAPACITY] = 0;
    this.move(at, FIRST_CAPACITY);
    return slot;
  }

  /** Gives the list at `at` a region of `capacity` entries at the end of the newest chunk (or a new one), its entries copied. */
  private move(at: number, capacity: number): void {
    const meta = this.meta;
    if (this.rowChunks.length === 0 || this.used + capacity > this.rowChunks[this.rowChunks.length - 1].length) {
      const size = Math.max(CHUNK_ENTRIES, capacity);
      this.rowChunks.push(new Uint32Array(size));
      this.tfChunks.push(new Uint16Array(size));
      this.used = 0;
    }
    const chunk = this.rowChunks.length - 1;
    const length = meta[at + LENGTH];
    if (length > 0) {
      const fromRows = this.rowChunks[meta[at + CHUNK]];
      const fromTfs = this.tfChunks[meta[at + CHUNK]];
      const toRows = this.rowChunks[chunk];
      const toTfs = this.tfChunks[chunk];
      for (let i = 0, from = meta[at + START], to = this.used; i < length; i++) {
        toRows[to + i] = fromRows[from + i];
        toTfs[to + i] = fromTfs[from + i];
      }
    }
    meta[at + CHUNK] = chunk;
    meta[at + START] = this.used;
    meta[at + CAPACITY] = capacity;
    this.used += capacity;
  }
}

/** The end of the entries of rows[start, end) below `rowCount` (rows ascending). */
function endBelow(rows: Uint32Array, start: number, end: number, rowCount: number): number {
  if (end === start || rows[end - 1] < rowCount) return end;
  return lowerBound(rows, rowCount, start, end);
}
