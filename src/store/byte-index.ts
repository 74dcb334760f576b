/**
 * An open-addressing hash index over byte strings stored elsewhere: entry i's bytes are
 * store.bytes[store.offsets[i], store.offsets[i + 1]). The key index of a table (entries are
 * rows of its key column) and every dictionary (entries are dictionary codes) use it, so no
 * string-keyed Map is built per row and no limit of Map sizes applies (a Map holds at most 2^24
 * entries; the Media key index of a 1M-listing data set needs 18M).
 */
import { encodeUtf8Into, hashBytes } from './bytes.js';

export interface ByteStore {
  readonly bytes: Buffer;
  readonly offsets: Uint32Array;
}

export class ByteIndex {
  /** slot -> entry + 1; 0 marks an empty slot. */
  private slots: Int32Array;
  /**
   * slot -> hash of its entry: probes compare hashes in this array (next to each other in
   * memory) and touch an entry's bytes only on a full hash match; growing never rereads bytes.
   */
  private slotHashes: Uint32Array;
  private mask: number;
  size = 0;

  constructor(private store: ByteStore, expected = 16) {
    let cap = 16;
    while (cap < expected * 2) cap *= 2;
    this.slots = new Int32Array(cap);
    this.slotHashes = new Uint32Array(cap);
    this.mask = cap - 1;
  }

  /** The entry whose bytes equal src[s, e) (h = hashBytes(src, s, e)), or -1. */
  find(src: Uint8Array, s: number, e: number, h: number): number {
    const slots = this.slots;
    const slotHashes = this.slotHashes;
    const mask = this.mask;
    const bytes = this.store.bytes;
    const offsets = this.store.offsets;
    const len = e - s;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const entry = slots[i] - 1;
      if (entry < 0) return -1;
      if (slotHashes[i] !== h) continue;
      const os = offsets[entry];
      if (offsets[entry + 1] - os !== len) continue;
      let j = 0;
      while (j < len && bytes[os + j] === src[s + j]) j++;
      if (j === len) return entry;
    }
  }

  /** Adds `entry` (its bytes already in the store, absent from the index) with hash h. */
  add(entry: number, h: number): void {
    if ((this.size + 1) * 2 > this.slots.length) this.rehash(this.slots.length * 2);
    this.place(entry, h);
    this.size++;
  }

  /** Entry for a string (allocation-free for keys up to the scratch size). */
  findString(text: string): number {
    const end = encodeScratch(text);
    return this.find(scratch, 0, end, hashBytes(scratch, 0, end));
  }

  /** Bytes held outside the entries' own storage. */
  get byteLength(): number {
    return this.slots.byteLength + this.slotHashes.byteLength;
  }

  /** Points the index at another store holding the same entries (a builder's frozen column). */
  rebind(store: ByteStore): void {
    this.store = store;
  }

  private place(entry: number, h: number): void {
    const slots = this.slots;
    const mask = this.mask;
    let i = h & mask;
    while (slots[i] !== 0) i = (i + 1) & mask;
    slots[i] = entry + 1;
    this.slotHashes[i] = h;
  }

  private rehash(capacity: number): void {
    const old = this.slots;
    const oldHashes = this.slotHashes;
    this.slots = new Int32Array(capacity);
    this.slotHashes = new Uint32Array(capacity);
    this.mask = capacity - 1;
    for (let i = 0; i < old.length; i++) {
      const entry = old[i] - 1;
      if (entry >= 0) this.place(entry, oldHashes[i]);
    }
  }
}

let scratch = new Uint8Array(256);

/** Encodes `text` into a shared scratch buffer and returns its end. */
function encodeScratch(text: string): number {
  if (text.length * 3 > scratch.length) scratch = new Uint8Array(text.length * 3 + 64);
  return encodeUtf8Into(text, scratch, 0);
}
