/**
 * One inverted index per search field, built once over row ids and then frozen: a term
 * dictionary, postings in CSR form (per term a slice of ascending row ids with their term
 * frequencies) and the field's token count per row. FlexSearch cannot give BM25 scores, so the
 * postings are ours (see DESIGN.md, "Text search").
 */
import { isAscii } from 'node:buffer';
import { runNow, type Steps } from '../util/steps.js';
import { type TermDictionary, TermDictionaryBuilder, type TermRoom } from './terms.js';
import { ASCII_WORD, NON_ASCII, normalizeAddressToken, tokenize } from './tokenize.js';

export interface FieldIndex {
  /** Number of rows (listings) the index covers: BM25's N. */
  readonly rowCount: number;
  /** Whether address normalization, prefix and fuzzy matching apply (RawAddressSearchText). */
  readonly address: boolean;
  /** The field's terms, ids in first-seen order (as bytes, outside the JS heap: terms.ts). */
  readonly terms: TermDictionary;
  /** Postings of term t are rows[offsets[t]..offsets[t+1]) with frequencies tfs[...]. */
  readonly offsets: Uint32Array;
  readonly rows: Uint32Array;
  readonly tfs: Uint16Array;
  /** Token count of the field per row. */
  readonly lengths: Uint32Array;
  /** Mean field length over all rowCount rows. */
  readonly avgLength: number;
}

export interface FieldIndexOptions {
  readonly address: boolean;
  /** `textsOf` appends tokens already, not texts (callers that cache the tokens of repeated values). */
  readonly tokenized?: boolean;
}

/** Tokens buildFieldIndexOfSteps adds between two yields (at the end of a row). */
export const BUILD_STEP_TOKENS = 256;

/** (term, row) pairs the second pass scatters into the postings between two yields. */
const FINISH_STEP_PAIRS = 1 << 13;

const HASH_SEED = 0x811c9dc5 | 0;
const HASH_PRIME = 0x01000193;
const EMPTY_IDS = new Int32Array(0);
/** Int32 per token entry of FieldIndexBuilder's table: pool start, length, term id. */
const ENTRY = 3;

/** `a` grown (doubling) to at least `min` slots: its first `used` slots copied, the others `fill`. */
function grown<T extends Int32Array | Uint16Array>(a: T, min: number, used = a.length, fill = 0): T {
  let size = Math.max(1, a.length * 2);
  while (size < min) size *= 2;
  const next = new (a.constructor as new (size: number) => T)(size);
  if (fill !== 0) next.fill(fill, used);
  next.set(used === a.length ? a : a.subarray(0, used));
  return next;
}

/**
 * Tokens (as the tokenizer gives them) to term ids, by open addressing over the tokens'
 * characters: two Int32 per slot, the token's hash and (its entry + 1), 0 when empty. Entry k is
 * ENTRY Int32 at entries[k * ENTRY]: where its characters start in the pool, how many, its term.
 */
export class TokenTable {
  private slots: Int32Array;
  private mask: number;
  private count = 0;
  private entries: Int32Array;
  private pool: Uint16Array;
  private poolLength = 0;
  // The free slot where find stopped, for the insert that follows a miss.
  private free = 0;

  /** A table with room for `expected` tokens (of 8 characters on average) before it grows. */
  constructor(expected = 128) {
    let capacity = 1 << 8;
    while (capacity < expected * 2) capacity *= 2;
    this.slots = new Int32Array(capacity * 2);
    this.mask = capacity - 1;
    this.entries = new Int32Array(ENTRY * Math.max(128, expected));
    this.pool = new Uint16Array(Math.max(1 << 10, expected * 8));
  }

  /** The term of the token chars[0, len) with hash `h`, or -1 when the table does not have it. */
  find(chars: Uint16Array, len: number, h: number): number {
    const { slots, mask, pool, entries } = this;
    let s = h & mask;
    for (let e = slots[2 * s + 1]; e !== 0; e = slots[2 * s + 1]) {
      const k = (e - 1) * ENTRY;
      if (slots[2 * s] === h && entries[k + 1] === len) {
        const at = entries[k];
        let j = 0;
        while (j < len && pool[at + j] === chars[j]) j++;
        if (j === len) return entries[k + 2];
      }
      s = (s + 1) & mask;
    }
    this.free = s;
    return -1;
  }

  /** Enters the token find just missed, with its term. */
  insert(chars: Uint16Array, len: number, h: number, term: number): void {
    const k = this.count++;
    if ((k + 1) * ENTRY > this.entries.length) this.entries = grown(this.entries, (k + 1) * ENTRY);
    if (this.poolLength + len > this.pool.length) this.pool = grown(this.pool, this.poolLength + len, this.poolLength);
    this.pool.set(chars.subarray(0, len), this.poolLength);
    this.entries[k * ENTRY] = this.poolLength;
    this.entries[k * ENTRY + 1] = len;
    this.entries[k * ENTRY + 2] = term;
    this.poolLength += len;
    this.slots[2 * this.free] = h;
    this.slots[2 * this.free + 1] = k + 1;
    if ((k + 1) * 2 > this.mask + 1) this.rehash();
  }

  /** Doubles the slot table (load factor at most 1/2). */
  private rehash(): void {
    const old = this.slots;
    const slots = new Int32Array(old.length * 2);
    const mask = slots.length / 2 - 1;
    for (let o = 0; o < old.length; o += 2) {
      if (old[o + 1] === 0) continue;
      let s = old[o] & mask;
      while (slots[2 * s + 1] !== 0) s = (s + 1) & mask;
      slots[2 * s] = old[o];
      slots[2 * s + 1] = old[o + 1];
    }
    this.slots = slots;
    this.mask = mask;
  }
}

/**
 * A row's tokens looked up as term ids without a string per token: the tokenizer's ASCII rule runs
 * inline over the text's char codes (or a UTF-8 column's bytes), lower-casing into a scratch
 * buffer, and a token table (open addressing over the token's characters) gives its term id; a
 * string is made only for a token the table lacks. Text outside ASCII goes through `tokenize` (NFKD
 * and the rest) and is looked up by its tokens. The table is keyed by the token as the tokenizer
 * gives it; for an address field its entry holds the id of the token's normalized form
 * (normalizeAddressToken), which is what the index stores.
 *
 * What a term id is for (`add`) and what a token the table lacks is (`newTerm`) are the
 * subclass's: FieldIndexBuilder (a build) and a live view's appended rows (search/live.ts).
 */
export abstract class TermLookup {
  // The token being looked up: its characters and its hash (FNV-1a over the UTF-16 code units).
  private chars: Uint16Array = new Uint16Array(256);
  // The token table of tokens not given a source's own (tokenTable).
  protected abstract readonly shared: TokenTable;

  /** A token table for one source of text (see FieldIndexBuilder.tokenTable). */
  abstract tokenTable(): TokenTable;

  /** Counts one occurrence of term `id` in the current row. */
  protected abstract add(id: number): void;

  /** The term id of a token the table lacks (as the tokenizer gives it, not yet address-normalized). */
  protected abstract newTerm(token: string): number;

  /** Whether a token table may keep the token's term `id` (a term not yet committed may not). */
  protected keeps(id: number): boolean {
    return id >= 0;
  }

  /** Adds the tokens of `text` (tokenized as SERVICE.md §4 says) to the current row. */
  addText(text: string, table: TokenTable = this.shared): void {
    if (NON_ASCII.test(text)) {
      for (const token of tokenize(text)) this.add(this.termOfToken(token, table));
      return;
    }
    // An ASCII string's Latin-1 bytes are its characters (a copy: this path is not the load's).
    const bytes = Buffer.from(text, 'latin1');
    this.addAscii(bytes, 0, bytes.length, table);
  }

  /** addText of the UTF-8 text bytes[start, end), read without decoding it when it is ASCII. */
  addUtf8(bytes: Uint8Array, start: number, end: number, table: TokenTable = this.shared): void {
    const text = bytes.subarray(start, end);
    if (isAscii(text)) this.addAscii(bytes, start, end, table);
    else this.addText(Buffer.from(text.buffer, text.byteOffset, text.length).toString('utf8'), table);
  }

  /** addText of the ASCII text bytes[start, end) (the caller knows it is ASCII). */
  addAscii(bytes: Uint8Array, start: number, end: number, table: TokenTable = this.shared): void {
    let chars = this.chars;
    let len = 0;
    let h = HASH_SEED;
    for (let i = start; i < end; i++) {
      const c = ASCII_WORD[bytes[i]];
      if (c !== 0) {
        if (len === chars.length) chars = this.growChars();
        chars[len++] = c;
        h = Math.imul(h ^ c, HASH_PRIME);
      } else if (len > 0) {
        this.add(this.termOf(table, len, h, null));
        len = 0;
        h = HASH_SEED;
      }
    }
    if (len > 0) this.add(this.termOf(table, len, h, null));
  }

  /** Adds one token (as the tokenizer gives it, not yet address-normalized) to the current row. */
  addToken(token: string): void {
    this.add(this.termOfToken(token, this.shared));
  }

  /** The term ids of `text`'s tokens in order (kept by callers for a value that repeats across rows). */
  termsOfText(text: string | null): Int32Array {
    if (text === null) return EMPTY_IDS;
    const tokens = tokenize(text);
    const out = new Int32Array(tokens.length);
    for (let k = 0; k < tokens.length; k++) out[k] = this.termOfToken(tokens[k], this.shared);
    return out;
  }

  /** Adds terms given by id (from termsOfText) to the current row. */
  addTerms(ids: Int32Array): void {
    for (let k = 0; k < ids.length; k++) this.add(ids[k]);
  }

  private growChars(): Uint16Array {
    return (this.chars = grown(this.chars, this.chars.length + 1));
  }

  private termOfToken(token: string, table: TokenTable): number {
    while (token.length > this.chars.length) this.growChars();
    let h = HASH_SEED;
    for (let i = 0; i < token.length; i++) {
      const c = token.charCodeAt(i);
      this.chars[i] = c;
      h = Math.imul(h ^ c, HASH_PRIME);
    }
    return this.termOf(table, token.length, h, token);
  }

  /** The term id of the token in chars[0, len) with hash `h`; `token` is its string when the caller has one. */
  private termOf(table: TokenTable, len: number, h: number, token: string | null): number {
    const found = table.find(this.chars, len, h);
    if (found >= 0) return found;
    let text = token;
    if (text === null) {
      const chars = this.chars;
      text = '';
      for (let i = 0; i < len; i += 4096) text += String.fromCharCode.apply(null, chars.subarray(i, Math.min(len, i + 4096)) as unknown as number[]);
    }
    const id = this.newTerm(text);
    if (this.keeps(id)) table.insert(this.chars, len, h, id);
    return id;
  }
}

/**
 * Builds one field's index in two passes: rows are added in order (each row's tokens, as term ids,
 * counted into (term, tf) pairs), then the pairs are scattered into the per-term postings.
 *
 * The first pass is where the time goes (about a hundred tokens per listing in the keyword field),
 * so a token is looked up without a string of its own (TermLookup). Term ids are given in
 * first-seen order of the normalized term, exactly as a Map lookup per token would give them.
 */
export class FieldIndexBuilder extends TermLookup {
  // The terms, as bytes (terms.ts): a term is made a string only when first seen.
  private readonly terms: TermDictionaryBuilder;
  protected readonly shared: TokenTable;
  // Per term: document frequency, and its index among the current row's distinct terms (or -1).
  private df: Int32Array;
  private seen: Int32Array;
  // The current row's distinct terms with their counts, and its token count.
  private rowTerms: Int32Array = new Int32Array(256);
  private rowCounts: Int32Array = new Int32Array(256);
  private distinct = 0;
  private tokens = 0;
  // The first pass's (term, tf) pairs of all rows, row after row; rowStart[r] is row r's first.
  private pairTerms = new Int32Array(1 << 12);
  private pairTfs = new Uint16Array(1 << 12);
  private pairCount = 0;
  private readonly rowStart: Uint32Array;
  private readonly lengths: Uint32Array;
  private total = 0;
  private rowsAdded = 0;

  constructor(
    readonly rowCount: number,
    readonly address: boolean,
    /** (term, row) pairs to make room for at once. */
    pairs = 0,
    /** Terms, and their UTF-8 bytes, to make room for at once. */
    room: TermRoom = { terms: 1 << 10, bytes: 1 << 13 },
  ) {
    super();
    this.terms = new TermDictionaryBuilder(room);
    this.shared = new TokenTable(room.terms);
    this.df = new Int32Array(Math.max(1 << 11, room.terms));
    this.seen = new Int32Array(this.df.length).fill(-1);
    this.rowStart = new Uint32Array(rowCount + 1);
    this.lengths = new Uint32Array(rowCount);
    if (pairs > this.pairTerms.length) {
      this.pairTerms = new Int32Array(pairs);
      this.pairTfs = new Uint16Array(pairs);
    }
  }

  /**
   * A token table of its own for one source of text: a source with many distinct tokens (an
   * identifier per row) then leaves the table of one with few (remarks) small, so its lookups stay
   * in cache. Any table gives a token the same term id.
   */
  tokenTable(): TokenTable {
    return new TokenTable();
  }

  protected newTerm(token: string): number {
    const id = this.terms.add(this.address ? normalizeAddressToken(token) : token);
    if (id >= this.df.length) {
      this.df = grown(this.df, id + 1);
      this.seen = grown(this.seen, id + 1, this.seen.length, -1);
    }
    return id;
  }

  /** Counts one occurrence of term `id` in the current row. */
  protected add(id: number): void {
    this.tokens++;
    const at = this.seen[id];
    if (at >= 0) {
      this.rowCounts[at]++;
      return;
    }
    const d = this.distinct++;
    if (d === this.rowTerms.length) {
      this.rowTerms = grown(this.rowTerms, d + 1);
      this.rowCounts = grown(this.rowCounts, d + 1);
    }
    this.seen[id] = d;
    this.rowTerms[d] = id;
    this.rowCounts[d] = 1;
  }

  /** Ends the current row (rows are added in order 0, 1, ...): its terms become (term, tf) pairs. */
  endRow(): void {
    const row = this.rowsAdded++;
    const d = this.distinct;
    if (this.pairCount + d > this.pairTerms.length) {
      this.pairTerms = grown(this.pairTerms, this.pairCount + d, this.pairCount);
      this.pairTfs = grown(this.pairTfs, this.pairTerms.length, this.pairCount);
    }
    const { rowTerms, rowCounts, seen, df, pairTerms, pairTfs } = this;
    let p = this.pairCount;
    for (let k = 0; k < d; k++) {
      const id = rowTerms[k];
      seen[id] = -1;
      df[id]++;
      pairTerms[p] = id;
      pairTfs[p] = Math.min(rowCounts[k], 0xffff);
      p++;
    }
    this.pairCount = p;
    this.rowStart[row + 1] = p;
    this.lengths[row] = this.tokens;
    this.total += this.tokens;
    this.distinct = 0;
    this.tokens = 0;
  }

  /** Tokens added so far, in the rows ended. */
  get tokensAdded(): number {
    return this.total;
  }

  /** The second pass (after every row was added), in steps of about `stepPairs` pairs. */
  *finish(stepPairs: number): Steps<FieldIndex> {
    const { rowCount, df, rowStart, pairTerms, pairTfs } = this;
    if (this.rowsAdded !== rowCount) throw new Error(`FieldIndexBuilder: ${this.rowsAdded} rows added of ${rowCount}`);
    const terms = this.terms.finish();
    const offsets = new Uint32Array(terms.size + 1);
    for (let t = 0; t < terms.size; t++) {
      offsets[t + 1] = offsets[t] + df[t];
      if ((t + 1) % stepPairs === 0) yield;
    }
    const cursor = offsets.slice(0, terms.size);
    const rows = new Uint32Array(this.pairCount);
    const tfs = new Uint16Array(this.pairCount);
    let stepEnd = stepPairs;
    for (let row = 0; row < rowCount; row++) {
      const end = rowStart[row + 1];
      for (let k = rowStart[row]; k < end; k++) {
        const pos = cursor[pairTerms[k]]++;
        rows[pos] = row;
        tfs[pos] = pairTfs[k];
      }
      if (end >= stepEnd) {
        stepEnd = end + stepPairs;
        yield;
      }
    }
    return {
      rowCount,
      address: this.address,
      terms,
      offsets,
      rows,
      tfs,
      lengths: this.lengths,
      avgLength: rowCount === 0 ? 0 : this.total / rowCount,
    };
  }
}

/**
 * Builds the index of one field. `textsOf(row, out)` appends the row's source strings for the
 * field, in source order; tokens of all of them together form the field. With `tokenized`, the
 * callback appends tokens already (callers that cache the tokens of repeated values).
 */
export function buildFieldIndex(rowCount: number, textsOf: (row: number, out: string[]) => void, options: FieldIndexOptions): FieldIndex {
  const strings: string[] = [];
  const addRow = (builder: FieldIndexBuilder) => (row: number) => {
    strings.length = 0;
    textsOf(row, strings);
    if (options.tokenized) for (const token of strings) builder.addToken(token);
    else for (const text of strings) builder.addText(text);
  };
  return runNow(buildFieldIndexOfSteps(rowCount, addRow, { address: options.address }));
}

/**
 * Builds the index of one field from a row source that adds each row's tokens to the builder
 * itself (`sourceOf` makes it for the builder, so it can keep term ids of repeated values), with
 * room for `pairs` (term, row) pairs and for `terms` (a number of terms and their bytes) made at
 * the start when given (nothing is copied to grow while they fit), as steps: a yield after every
 * BUILD_STEP_TOKENS tokens of the first pass and every FINISH_STEP_PAIRS pairs of the second. The
 * load runs them at once; compaction between queries.
 */
export function* buildFieldIndexOfSteps(
  rowCount: number,
  sourceOf: (builder: FieldIndexBuilder) => (row: number) => void,
  options: { address: boolean; pairs?: number; terms?: TermRoom },
): Steps<FieldIndex> {
  const builder = new FieldIndexBuilder(rowCount, options.address, options.pairs, options.terms);
  const addRow = sourceOf(builder);
  let next = BUILD_STEP_TOKENS;
  for (let row = 0; row < rowCount; row++) {
    addRow(row);
    builder.endRow();
    if (builder.tokensAdded >= next) {
      next = builder.tokensAdded + BUILD_STEP_TOKENS;
      yield;
    }
  }
  return yield* builder.finish(FINISH_STEP_PAIRS);
}
