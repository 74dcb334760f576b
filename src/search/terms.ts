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
import { ByteIndex } from '../store/byte-index.js';
import { decodeUtf8, hashBytes, writeUtf8 } from '../store/bytes.js';
import { runNow, type Steps } from '../util/steps.js';

export class TermDictionary {
  private strings: string[] | null = null;

  private constructor(
    readonly bytes: Buffer,
    readonly offsets: Uint32Array,
    private readonly index: ByteIndex,
  ) {}

  /** Terms in the dictionary. */
  get size(): number {
    return this.offsets.length - 1;
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
    if (this.strings === null) {
      const out = new Array<string>(this.size);
      for (let t = 0; t < out.length; t++) out[t] = this.term(t);
      this.strings = out;
    }
    return this.strings;
  }

  get byteLength(): number {
    return this.bytes.byteLength + this.offsets.byteLength + this.index.byteLength;
  }

  /** The dictionary of distinct terms, ids in list order. */
  static of(terms: readonly string[]): TermDictionary {
    return runNow(TermDictionary.ofSteps(terms, Infinity));
  }

  /**
   * `of` in steps (a compaction builds its search fields between queries): a check point every
   * `step` terms measured, written and indexed. The terms must be distinct (a builder's are).
   */
  static *ofSteps(terms: readonly string[], step: number): Steps<TermDictionary> {
    const n = terms.length;
    const offsets = new Uint32Array(n + 1);
    for (let t = 0; t < n; t++) {
      offsets[t + 1] = offsets[t] + Buffer.byteLength(terms[t], 'utf8');
      if ((t + 1) % step === 0) yield;
    }
    const bytes = Buffer.allocUnsafeSlow(offsets[n]);
    for (let t = 0; t < n; t++) {
      writeUtf8(terms[t], bytes, offsets[t]);
      if ((t + 1) % step === 0) yield;
    }
    const index = new ByteIndex({ bytes, offsets }, n);
    for (let t = 0; t < n; t++) {
      index.add(t, hashBytes(bytes, offsets[t], offsets[t + 1]));
      if ((t + 1) % step === 0) yield;
    }
    return new TermDictionary(bytes, offsets, index);
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
