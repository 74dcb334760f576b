/**
 * A frozen search field's terms (FieldIndex.terms): UTF-8 bytes with offsets, looked up through a
 * byte-keyed hash (store/byte-index.ts, as the key indexes and dictionaries are), not JS strings
 * in a Map. The keyword field has about a term per listing (100k at 100k listings, a million at 1M):
 * as strings and Map entries they were a large share of the JS heap every mark-compact marks,
 * and of what a compaction built and promoted while queries ran (DESIGN.md, "Search"). The
 * snapshot stores the same bytes and offsets, so reading one makes no string at all.
 *
 * Term id t is the t-th term: its bytes are bytes[offsets[t], offsets[t + 1]).
 */
import { ByteIndex, type ByteIndexState } from '../store/byte-index.js';
import { decodeUtf8, hashBytes, writeUtf8 } from '../store/bytes.js';
import { runNow, type Steps } from '../util/steps.js';

export class TermDictionary {
  private strings: string[] | null = null;

  /** Made by `TermDictionaryBuilder.finish` or `fromPacked`. */
  constructor(
    readonly bytes: Buffer,
    readonly offsets: Uint32Array,
    private readonly index: ByteIndex,
  ) {}

  /** Terms in the dictionary. */
  get size(): number {
    return this.offsets.length - 1;
  }

  /** The hash index's slots (`fromState` adopts them: a compaction's dictionary come from a worker thread). */
  get indexState(): ByteIndexState {
    return this.index.state;
  }

  /** The dictionary over `bytes` and `offsets` with the index of `indexState` (made over the same terms). */
  static fromState(bytes: Buffer, offsets: Uint32Array, state: ByteIndexState): TermDictionary {
    return new TermDictionary(bytes, offsets, ByteIndex.fromState({ bytes, offsets }, state));
  }

  /** The id of a term, or -1 when it is not one. */
  id(term: string): number {
    return this.index.findString(term);
  }

  /** The term of an id below `size`. */
  term(id: number): string {
    return decodeUtf8(this.bytes, this.offsets[id], this.offsets[id + 1]);
  }

  /**
   * Every term as a string, in id order, made on the first call and kept: for the address field's
   * lexicon (search/lexicon.ts), which sorts and searches the terms by text.
   */
  list(): readonly string[] {
    return this.strings ?? runNow(this.listSteps());
  }

  /** `list()` in steps (a check point every 256 terms decoded). */
  *listSteps(): Steps<readonly string[]> {
    if (this.strings === null) {
      const out = new Array<string>(this.size);
      for (let t = 0; t < out.length; t++) {
        if ((t & 255) === 255) yield;
        out[t] = this.term(t);
      }
      this.strings = out;
    }
    return this.strings;
  }

  /** The dictionary of distinct terms, ids in list order. */
  static of(terms: readonly string[]): TermDictionary {
    const builder = new TermDictionaryBuilder({ terms: terms.length, bytes: terms.length * 8 });
    for (const term of terms) builder.add(term);
    return builder.finish();
  }

  /**
   * The dictionary over terms already packed (a snapshot's), offsets checked by the caller; or the
   * first two ids whose bytes are equal, when a term repeats.
   */
  static fromPacked(bytes: Buffer, offsets: Uint32Array): TermDictionary | { readonly first: number; readonly second: number } {
    const index = ByteIndex.build({ bytes, offsets }, offsets.length - 1);
    return index instanceof ByteIndex ? new TermDictionary(bytes, offsets, index) : index;
  }
}

/** Room for a number of terms and their UTF-8 bytes, made at once. */
export interface TermRoom {
  readonly terms: number;
  readonly bytes: number;
}

/**
 * A dictionary gathered term by term (a field index's builder: search/postings.ts), each term's
 * bytes written once into a growing pool and entered into the hash as it comes, so no string is
 * kept per term and `finish` copies nothing. Room for a known number of terms and bytes is made at
 * the start when given (a compaction knows the previous generation's), so that growing the pool
 * and rehashing never hold the event loop in one of its steps.
 */
export class TermDictionaryBuilder {
  private bytes: Buffer;
  private offsets: Uint32Array;
  private readonly index: ByteIndex;
  size = 0;

  constructor(room: TermRoom = { terms: 16, bytes: 128 }) {
    this.bytes = Buffer.allocUnsafeSlow(Math.max(64, room.bytes));
    this.offsets = new Uint32Array(Math.max(16, room.terms) + 1);
    this.index = new ByteIndex({ bytes: this.bytes, offsets: this.offsets }, room.terms);
  }

  /** The id of `term`: the one it was given when added before, else the next. */
  add(term: string): number {
    const n = this.size;
    const start = this.offsets[n];
    if (start + term.length * 3 > this.bytes.length) this.growBytes(start + term.length * 3);
    const end = writeUtf8(term, this.bytes, start);
    const h = hashBytes(this.bytes, start, end);
    const found = this.index.find(this.bytes, start, end, h);
    if (found >= 0) return found;
    if (n + 2 > this.offsets.length) this.growOffsets();
    this.offsets[n + 1] = end;
    this.index.add(n, h);
    this.size = n + 1;
    return n;
  }

  /** The dictionary of the terms added, ids in the order they were first added. */
  finish(): TermDictionary {
    const n = this.size;
    const store = { bytes: this.bytes.subarray(0, this.offsets[n]), offsets: this.offsets.subarray(0, n + 1) };
    this.index.rebind(store);
    return new TermDictionary(store.bytes, store.offsets, this.index);
  }

  private growBytes(min: number): void {
    const bytes = Buffer.allocUnsafeSlow(Math.max(min, this.bytes.length * 2));
    this.bytes.copy(bytes, 0, 0, this.offsets[this.size]);
    this.bytes = bytes;
    this.index.rebind({ bytes, offsets: this.offsets });
  }

  private growOffsets(): void {
    const offsets = new Uint32Array(this.offsets.length * 2);
    offsets.set(this.offsets.subarray(0, this.size + 1));
    this.offsets = offsets;
    this.index.rebind({ bytes: this.bytes, offsets });
  }
}
