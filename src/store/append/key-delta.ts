/**
 * The key index of a generation (`GenerationKeyIndex`) is the loaded segment's index, untouched,
 * plus one delta hash table over the appended rows shared by every generation: a slot holds the
 * NEWEST row of a key and `prev[row - first]` chains each appended row to the older row of the
 * same key (an appended row or a base row), so an upsert's new row wins in the newest generation
 * while an older generation walks the chain below its row count and finds its own version.
 * Lookups stay allocation-free; the delta is sized by the appended rows, so the base index (18M
 * entries for Media at 1M listings) is neither copied nor rehashed.
 */
import { ByteIndex, type ByteIndexState } from '../byte-index.js';
import { hashBytes } from '../bytes.js';
import type { Utf8TextColumn } from '../columns.js';
import { Backing } from './growable.js';
import type { Steps } from '../../util/steps.js';

/** Keys inserted between two check points of `insertSteps` (64 held the loop 0.05-0.1 ms between queries). */
const INSERT_CHECK_ROWS = 16;

/**
 * The keys of the appended rows, shared by every generation of one table: open addressing with
 * linear probing as in ByteIndex (slot i: table[2i] = row + 1, table[2i + 1] = hash), a slot per
 * key holding its newest row, and prev[row - first] = the older row of the same key (a base row,
 * an appended row, or -1).
 */
export class KeyDelta {
  table = new Int32Array(32);
  mask = 15;
  /** Keys in the delta. */
  size = 0;
  /** Of them, keys the base segment has too. */
  inBase = 0;
  readonly prev = new Backing(new Int32Array(0));

  constructor(
    /** The base segment's row count: appended rows start there. */
    readonly first: number,
  ) {}

  /**
   * Adds rows [from, to) of the key column (its bytes final; `base` is the segment's own
   * index), in steps: a check point every INSERT_CHECK_ROWS rows (each looks its key up in the
   * base index: about a microsecond, cache misses mostly). Every row is whole at a check point:
   * older generations, reading meanwhile, skip the rows past their row count as they always do.
   */
  *insertSteps(keys: Utf8TextColumn, from: number, to: number, base: ByteIndex): Steps<void> {
    const prev = this.prev.room(from - this.first, to - this.first);
    const { bytes, offsets } = keys;
    for (let row = from; row < to; row++) {
      if (row % INSERT_CHECK_ROWS === 0) yield;
      if ((this.size + 1) * 2 > this.table.length >>> 1) this.rehash(this.table.length);
      const s = offsets[row];
      const e = offsets[row + 1];
      const h = hashBytes(bytes, s, e);
      const hash = h | 0;
      const table = this.table;
      const mask = this.mask;
      for (let i = h & mask; ; i = (i + 1) & mask) {
        const entry = table[2 * i] - 1;
        if (entry < 0) {
          table[2 * i] = row + 1;
          table[2 * i + 1] = hash;
          this.size++;
          const older = base.find(bytes, s, e, h);
          if (older >= 0) this.inBase++;
          prev[row - this.first] = older;
          break;
        }
        if (table[2 * i + 1] === hash && bytes.compare(bytes, offsets[entry], offsets[entry + 1], s, e) === 0) {
          prev[row - this.first] = entry;
          table[2 * i] = row + 1;
          break;
        }
      }
    }
  }

  /**
   * Forgets the rows at or past `bound` (an append rolled back): each key's slot goes back to its
   * newest row below the bound, and keys whose every appended row is gone leave the table.
   */
  truncate(bound: number): void {
    const prev = this.prev.array;
    const old = this.table;
    this.table = new Int32Array(old.length);
    this.size = 0;
    this.inBase = 0;
    for (let j = 0; j < old.length; j += 2) {
      let row = old[j] - 1;
      if (row < 0) continue;
      while (row >= bound) row = prev[row - this.first];
      if (row < this.first) continue; // a base row or none: the base index answers
      let i = old[j + 1] & this.mask;
      while (this.table[2 * i] !== 0) i = (i + 1) & this.mask;
      this.table[2 * i] = row + 1;
      this.table[2 * i + 1] = old[j + 1];
      this.size++;
      let first = row;
      while (first >= this.first) first = prev[first - this.first];
      if (first >= 0) this.inBase++;
    }
  }

  private rehash(slots: number): void {
    const old = this.table;
    const table = new Int32Array(slots * 2);
    const mask = slots - 1;
    for (let j = 0; j < old.length; j += 2) {
      if (old[j] === 0) continue;
      let i = old[j + 1] & mask;
      while (table[2 * i] !== 0) i = (i + 1) & mask;
      table[2 * i] = old[j];
      table[2 * i + 1] = old[j + 1];
    }
    this.table = table;
    this.mask = mask;
  }
}

/**
 * The key index of one generation: the keys of its rows [0, bound), the newest row per key. The
 * shared delta first (walking a key's chain below the bound), then the base segment's index.
 * Read-only; lookups allocate nothing.
 */
export class GenerationKeyIndex extends ByteIndex {
  constructor(
    private readonly base: ByteIndex,
    private readonly delta: KeyDelta,
    /** This generation's key column (rows below the bound). */
    private readonly keys: Utf8TextColumn,
    private readonly bound: number,
  ) {
    super(keys);
    this.size = base.size + delta.size - delta.inBase;
  }

  override find(src: Uint8Array, s: number, e: number, h: number): number {
    const delta = this.delta;
    const table = delta.table;
    const mask = delta.mask;
    const prev = delta.prev.array;
    const first = delta.first;
    const bound = this.bound;
    const hash = h | 0;
    const len = e - s;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      let row = table[2 * i] - 1;
      if (row < 0) break;
      if (table[2 * i + 1] !== hash) continue;
      // Rows at or past the bound belong to newer generations (all appended: bound >= first).
      while (row >= bound) row = prev[row - first];
      if (row < 0) continue;
      const offsets = this.keys.offsets;
      const os = offsets[row];
      if (offsets[row + 1] - os !== len) continue;
      const bytes = this.keys.bytes;
      let j = 0;
      while (j < len && bytes[os + j] === src[s + j]) j++;
      if (j === len) return row;
    }
    return this.base.find(src, s, e, h);
  }

  override add(): void {
    throw new Error('a generation key index is read-only');
  }

  override reserve(): void {
    throw new Error('a generation key index is read-only');
  }

  override rebind(): void {
    throw new Error('a generation key index is read-only');
  }

  /** A plain index of this generation's keys (newest row per key), for snapshots. */
  override get state(): ByteIndexState {
    const plain = new ByteIndex(this.keys, this.size);
    const { bytes, offsets } = this.keys;
    for (let row = this.bound - 1; row >= 0; row--) {
      const s = offsets[row];
      const e = offsets[row + 1];
      const h = hashBytes(bytes, s, e);
      if (this.find(bytes, s, e, h) === row) plain.add(row, h);
    }
    return plain.state;
  }

  override get byteLength(): number {
    return this.base.byteLength + this.delta.table.byteLength + this.delta.prev.array.byteLength;
  }
}
