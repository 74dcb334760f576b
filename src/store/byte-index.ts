/**
 * An open-addressing hash index over byte strings stored elsewhere: entry i's bytes are
 * store.bytes[store.offsets[i], store.offsets[i + 1]). The key index of a table (entries are
 * rows of its key column) and every dictionary (entries are dictionary codes) use it, so no
 * string-keyed Map is built per row and no limit of Map sizes applies (a Map holds at most 2^24
 * entries; the Media key index of a 1M-listing data set needs 18M).
 */
import { sharedArray } from './append/growable.js';
import { bytesEqual, encodeUtf8Into, hashBytes } from './bytes.js';

/** Slot tables of at least this many bytes are views of a SharedArrayBuffer (a table's key index, which a compaction's worker thread reads: growable.ts). */
const SHARED_MIN_BYTES = 1 << 16;

function slotTable(length: number): Int32Array {
  return length * 4 >= SHARED_MIN_BYTES ? sharedArray(Int32Array, length) : new Int32Array(length);
}

export interface ByteStore {
  readonly bytes: Buffer;
  readonly offsets: Uint32Array;
}

export interface ByteIndexState {
  readonly table: Int32Array;
  readonly mask: number;
  readonly size: number;
}

export class ByteIndex {
  /**
   * Open addressing with linear probing; slot i is table[2i] = entry + 1 (0 when empty) and
   * table[2i + 1] = the entry's hash, side by side so that a probe costs one cache miss and an
   * entry's bytes are read only on a full hash match. Growing never rereads the bytes.
   */
  private table: Int32Array;
  private mask: number;
  size = 0;

  constructor(
    private store: ByteStore,
    expected = 16,
  ) {
    let cap = 16;
    while (cap < expected * 2) cap *= 2;
    this.table = slotTable(cap * 2);
    this.mask = cap - 1;
  }

  /** The entry whose bytes equal src[s, e) (h = hashBytes(src, s, e)), or -1. */
  find(src: Uint8Array, s: number, e: number, h: number): number {
    const table = this.table;
    const mask = this.mask;
    const hash = h | 0;
    const len = e - s;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const entry = table[2 * i] - 1;
      if (entry < 0) return -1;
      if (table[2 * i + 1] !== hash) continue;
      const offsets = this.store.offsets;
      const os = offsets[entry];
      if (offsets[entry + 1] - os !== len) continue;
      const bytes = this.store.bytes;
      let j = 0;
      while (j < len && bytes[os + j] === src[s + j]) j++;
      if (j === len) return entry;
    }
  }

  /** The same index over `store`, which holds the same entries (a copy of this one's store). */
  copyFor(store: ByteStore): ByteIndex {
    const copy = new ByteIndex(store);
    copy.table = this.table.slice();
    copy.mask = this.mask;
    copy.size = this.size;
    return copy;
  }

  /** Adds `entry` (its bytes already in the store, absent from the index) with hash h. */
  add(entry: number, h: number): void {
    if ((this.size + 1) * 2 > this.table.length >>> 1) this.rehash(this.table.length);
    this.place(entry, h | 0);
    this.size++;
  }

  /**
   * Makes the slot of `entry` (present, with hash h) hold `by` instead, an entry with the same
   * bytes (the newest row of a value, src/access/text-rows.ts).
   */
  replace(entry: number, by: number, h: number): void {
    const table = this.table;
    const mask = this.mask;
    for (let i = h & mask; table[2 * i] !== 0; i = (i + 1) & mask) {
      if (table[2 * i] === entry + 1) {
        table[2 * i] = by + 1;
        return;
      }
    }
    throw new Error(`entry ${entry} is not in the index`);
  }

  /** Makes room for `n` entries in all, so that loading a known number of rows never rehashes. */
  reserve(n: number): void {
    let cap = this.table.length >>> 1;
    if (n * 2 <= cap) return;
    while (cap < n * 2) cap *= 2;
    this.rehash(cap);
  }

  /**
   * An index of entries 0..n-1 of `store` built at once, or the first two entries found with equal
   * bytes. The entries are placed block of home slots by block (2^16 blocks), in entry order
   * within a block: the placements sweep the table front to back, so a probe is rarely a cache or
   * TLB miss (one per entry, at random, when entries are added as rows arrive; a third of the time
   * of writing a 19M-entry log), and the layout depends only on the entries, not on the order
   * they arrived in (the load's paths give the same bytes).
   */
  static build(store: ByteStore, n: number): ByteIndex | { readonly first: number; readonly second: number } {
    const index = new ByteIndex(store, n);
    const { bytes, offsets } = store;
    const hashes = new Int32Array(n);
    for (let i = 0; i < n; i++) hashes[i] = hashBytes(bytes, offsets[i], offsets[i + 1]);
    const mask = index.mask;
    const bits = 31 - Math.clz32(mask + 1);
    const shift = Math.max(0, bits - 16);
    const counts = new Int32Array((mask >>> shift) + 2);
    for (let i = 0; i < n; i++) counts[((hashes[i] & mask) >>> shift) + 1]++;
    for (let b = 1; b < counts.length; b++) counts[b] += counts[b - 1];
    const order = new Int32Array(n);
    for (let i = 0; i < n; i++) order[counts[(hashes[i] & mask) >>> shift]++] = i;
    const table = index.table;
    for (let k = 0; k < n; k++) {
      const entry = order[k];
      const hash = hashes[entry];
      let i = hash & mask;
      for (; table[2 * i] !== 0; i = (i + 1) & mask) {
        if (table[2 * i + 1] !== hash) continue;
        const other = table[2 * i] - 1;
        if (bytesEqual(bytes, offsets[other], offsets[other + 1], bytes, offsets[entry], offsets[entry + 1])) {
          return { first: Math.min(other, entry), second: Math.max(other, entry) };
        }
      }
      table[2 * i] = entry + 1;
      table[2 * i + 1] = hash;
    }
    index.size = n;
    return index;
  }

  /** Entry for a string (allocation-free for keys up to the scratch size). */
  findString(text: string): number {
    const end = encodeScratch(text);
    return this.find(scratch, 0, end, hashBytes(scratch, 0, end));
  }

  /** The index's arrays, to rebuild it in another thread over the same entries (transfer.ts). */
  get state(): ByteIndexState {
    return { table: this.table, mask: this.mask, size: this.size };
  }

  static fromState(store: ByteStore, state: ByteIndexState): ByteIndex {
    const index = new ByteIndex(store);
    index.table = state.table;
    index.mask = state.mask;
    index.size = state.size;
    return index;
  }

  /** Points the index at another store holding the same entries (a builder's frozen column). */
  rebind(store: ByteStore): void {
    this.store = store;
  }

  get byteLength(): number {
    return this.table.byteLength;
  }

  private place(entry: number, hash: number): void {
    const table = this.table;
    const mask = this.mask;
    let i = hash & mask;
    while (table[2 * i] !== 0) i = (i + 1) & mask;
    table[2 * i] = entry + 1;
    table[2 * i + 1] = hash;
  }

  private rehash(capacity: number): void {
    const old = this.table;
    this.table = slotTable(capacity * 2);
    this.mask = capacity - 1;
    for (let i = 0; i < old.length; i += 2) if (old[i] !== 0) this.place(old[i] - 1, old[i + 1]);
  }
}

let scratch = new Uint8Array(256);

/** Encodes `text` into a shared scratch buffer and returns its end. */
function encodeScratch(text: string): number {
  if (text.length * 3 > scratch.length) scratch = new Uint8Array(text.length * 3 + 64);
  return encodeUtf8Into(text, scratch, 0);
}
