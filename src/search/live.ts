/**
 * Search over live data: one search field in one generation of the Property table, with BM25
 * statistics of exactly the live rows (SERVICE.md §4), without rebuilding the CSR index per change.
 *
 * Model. Rows are append-only and never change; a generation is a row count plus a dead
 * (tombstone) bitmap. An upsert appends the new version and marks the old row dead; a removal
 * marks a row dead. A `SearchView` is one field in one generation and is immutable: `next(change)`
 * returns a new view and the old one keeps answering exactly as before (a query or a pinned page
 * may still hold it).
 *
 * Structure.
 * - The base `FieldIndex` (CSR, frozen, as built by `buildFieldIndex` and stored in snapshots)
 *   covers rows [0, base.rowCount). It is never copied or written.
 * - A `Tail`, shared by every view of one lineage (the views reached from one `SearchView.of` by
 *   `next`), holds what appended rows add: a dictionary of the terms the base lacks (ids
 *   base.terms.length, +1, ... in order of first appearance), per term a growable posting list
 *   (rows ascending, term frequencies) of appended rows (regions of a few large arrays:
 *   tail-postings.ts), the token count of each appended row,
 *   and, for the address field, a lexicon over the new terms extended on first use. It only grows.
 *   A view sees the rows below its `rowCount` and the term ids below its `termCount`, so what later
 *   views append is invisible to it: a tail list is bounded per view by binary search (in O(1) when
 *   its last row is below the bound, the usual case).
 * - Per view: rowCount, the dead bitmap (null when none is dead), liveCount (N), the total token
 *   count of live rows (so avgLength = total / liveCount), termCount, and its `Removals`: the rows
 *   the change that made it removed, linked to the view it came from. Live df(t) = base df + tail
 *   postings below rowCount − dead holders, and a term's dead holders are counted when a query
 *   first asks for them in a view, not by the change: from the count a view up the chain kept for
 *   the term, plus the holders among the rows removed since (a binary search of the term's
 *   postings per removed row), or, when that chain is longer than the term's postings, by testing
 *   each posting against the dead bitmap. The view then keeps the count for the next asker.
 *
 * Costs. `SearchView.of` is O(1). `next` is O(tokens of the appended rows) plus O(removed rows),
 * amortised O(1) per tail posting for list growth; never O(rows) or O(postings), and a removed
 * row's text is never read again. A term's first live df in a view costs O(rows removed since a
 * view that counted it × log postings), at most O(postings). Queries on a generation-0 view read
 * the base arrays as queries on the FieldIndex did.
 *
 * Contract of `next` (checked where cheap, else trusted): it extends the newest view of its lineage
 * when it appends rows (`from` = this view's rowCount = the highest row appended so far; a change
 * that only removes may start from any view); `removed` lists each newly dead row once, and every
 * row set in `dead` but alive before is in `removed`; `termsOf` (or `tokensOf`) gives an appended
 * row the tokens it is indexed with.
 */
import { lowerBound } from '../util/binary-search.js';
import { getBit } from '../util/bits.js';
import { TermLookup, TokenTable, type FieldIndex } from './postings.js';
import { Lexicon, lexiconOf, type Vocabulary } from './lexicon.js';
import { normalizeAddressToken } from './tokenize.js';
import { runNow, type Steps } from '../util/steps.js';
import { Uint32List } from '../util/uint32-list.js';
import { TailPostingArena, type TailPostings } from './tail-postings.js';

/** Removed rows checked between two check points of `next`. */
const REMOVED_STEP = 256;

/**
 * A row's postings appended to the tail between two check points: each is a map read at random
 * (0.3-1 µs between queries' work), and a listing's keyword text has a few hundred distinct terms.
 */
const TOKEN_STEP = 48;

/**
 * A binary search of a term's postings for a removed row costs about this many tests of a posting
 * against the dead bitmap: past that ratio a term's dead holders are counted from its postings.
 */
const SEARCH_COST = 8;

export interface SearchChange {
  /** Rows appended by this change: [from, to) of the new generation (from = previous view's rowCount). */
  readonly from: number;
  readonly to: number;
  /**
   * The new generation's dead bitmap (bit set = dead), covering at least rows [0, to). Rows that
   * become dead in this change are exactly those set here but alive in the previous view, and they
   * are listed in `removed`. Appended rows may be dead already (an upsert superseded within the
   * same batch). The bitmap is owned by the generation and never written after the view is made.
   */
  readonly dead: Uint32Array;
  /** Rows that became dead in this change (base rows or earlier appended rows, or rows appended by this very change), each once. */
  readonly removed: ArrayLike<number>;
  /**
   * The row source of this field's appended rows: made for the view's term lookup, it adds an
   * appended row's tokens to it in field order, exactly as the index builder tokenizes them
   * (`searchTermSource` with `fewRows`, what a live change gives). One of termsOf and tokensOf.
   */
  readonly termsOf?: (lookup: TermLookup) => (row: number) => void;
  /**
   * Appends the tokens of an appended row of this field as strings, in field order (address
   * normalization is the view's): the same as termsOf, slower, for callers with strings at hand.
   */
  readonly tokensOf?: (row: number, out: string[]) => void;
}

/**
 * The term ids of a change's appended rows, pushed to `ids` in order: tokens the lineage's token
 * table has cost no string; a token it lacks is resolved as a string once (address-normalized for
 * the address field): a base term, a tail term, or a term new to the lineage, which gets the id it
 * will have once the change adds it (`fresh`, in first-appearance order) and is not entered in the
 * table, since the change may yet fail.
 */
class AppendedTerms extends TermLookup {
  protected readonly shared: TokenTable;
  /** Terms new to the lineage, in first appearance; the first's id is `committed`. */
  readonly fresh: string[] = [];
  private readonly freshIds = new Map<string, number>();
  /** The lineage's term count before this change: ids below it are the table's to keep. */
  private readonly committed: number;

  constructor(
    private readonly base: FieldIndex,
    private readonly tail: Tail,
    private readonly address: boolean,
    private readonly ids: Uint32List,
  ) {
    super();
    this.shared = tail.tokens;
    this.committed = tail.firstId + tail.terms.length;
  }

  tokenTable(): TokenTable {
    return this.shared;
  }

  protected add(id: number): void {
    this.ids.push(id);
  }

  protected newTerm(token: string): number {
    const term = this.address ? normalizeAddressToken(token) : token;
    const baseId = this.base.terms.id(term);
    if (baseId >= 0) return baseId;
    const id = this.tail.termIds.get(term) ?? this.freshIds.get(term);
    if (id !== undefined) return id;
    const fresh = this.committed + this.fresh.length;
    this.freshIds.set(term, fresh);
    this.fresh.push(term);
    return fresh;
  }

  protected override keeps(id: number): boolean {
    return id < this.committed;
  }
}

/** A change's row source from its token strings (SearchChange.tokensOf). */
function stringSource(tokensOf: SearchChange['tokensOf'], terms: AppendedTerms): (row: number) => void {
  if (tokensOf === undefined) throw new TypeError('SearchView.next: the change gives neither termsOf nor tokensOf');
  const tokens: string[] = [];
  return (row) => {
    tokens.length = 0;
    tokensOf(row, tokens);
    for (let i = 0; i < tokens.length; i++) terms.addToken(tokens[i]);
  };
}

/** What appended rows add to one field, shared by every view of a lineage. Only grows. */
class Tail implements Vocabulary {
  /** Terms the base lacks; the id of terms[i] is firstId + i. */
  readonly terms: string[] = [];
  readonly termIds = new Map<string, number>();
  /** Per term (base or tail id), its postings among appended rows. */
  readonly postings = new TailPostingArena();
  /**
   * Tokens of appended rows (as the tokenizer gives them) to their term ids: base terms and the
   * tail's own, never a term a change has not added yet (see AppendedTerms).
   */
  readonly tokens = new TokenTable();
  /** Token count of appended row r at lengths[r - base.rowCount]. */
  lengths = new Uint32Array(64);
  /** Rows appended so far end here: only a view with this row count may append. */
  rowCount: number;
  private lexicon: Lexicon | null = null;

  constructor(
    readonly firstId: number,
    baseRows: number,
  ) {
    this.rowCount = baseRows;
  }

  setLength(at: number, length: number): void {
    if (at >= this.lengths.length) {
      const grown = new Uint32Array(Math.max(at + 1, this.lengths.length * 2));
      grown.set(this.lengths);
      this.lengths = grown;
    }
    this.lengths[at] = length;
  }

  idOf(term: string): number {
    return this.termIds.get(term) ?? -1;
  }

  lexiconOfTerms(): Lexicon {
    if (this.lexicon === null) this.lexicon = new Lexicon(this, this.firstId);
    else this.lexicon.extend();
    return this.lexicon;
  }
}

// ---------------------------------------------------------------------------------------------
// Per-view dead holders, counted when asked.

/**
 * The rows one change removed, linked to the removals of the view the change started from: a
 * chain up to the lineage's generation-0 view (`ROOT`, nothing dead, shared by every lineage).
 * `counts` keeps the dead holders of the terms queries asked for in the view this belongs to
 * (never made on ROOT).
 */
class Removals {
  static readonly ROOT = new Removals(null, new Uint32Array(0));
  /** Rows removed from the generation-0 view to this one, these included. */
  readonly depth: number;
  /** Dead holders by term id, in the view this belongs to (made on the first ask). */
  counts: Map<number, number> | null = null;

  constructor(
    readonly parent: Removals | null,
    readonly rows: Uint32Array,
  ) {
    this.depth = (parent?.depth ?? 0) + rows.length;
  }
}

// ---------------------------------------------------------------------------------------------

export class SearchView {
  /** Whether address normalization, prefix and fuzzy matching apply (RawAddressSearchText). */
  readonly address: boolean;

  private constructor(
    /** The frozen CSR index of rows [0, base.rowCount). */
    readonly base: FieldIndex,
    /** The lineage's appended rows (shared with every view of the lineage). */
    private readonly tail: Tail,
    /** Row space size, dead rows included. */
    readonly rowCount: number,
    /** Dead bitmap (bit set = dead), null when no row is dead. Read-only. */
    readonly deadBits: Uint32Array | null,
    /** Live rows: BM25's N. */
    readonly liveCount: number,
    private readonly liveLength: number,
    /** Mean token count over live rows; 0 when none is live. */
    readonly avgLength: number,
    /** Term ids below this are this view's vocabulary. */
    readonly termCount: number,
    private readonly removals: Removals,
  ) {
    this.address = base.address;
  }

  /** The generation-0 view: rows [0, index.rowCount), none dead. */
  static of(index: FieldIndex): SearchView {
    // avgLength = total / rowCount rounded once, so the product rounds back to the integer total.
    const total = Math.round(index.avgLength * index.rowCount);
    const tail = new Tail(index.terms.size, index.rowCount);
    return new SearchView(index, tail, index.rowCount, null, index.rowCount, total, index.avgLength, index.terms.size, Removals.ROOT);
  }

  /** The next generation's view; this one is left as it is. See the file comment for the contract. */
  next(change: SearchChange): SearchView {
    return runNow(this.nextSteps(change));
  }

  /**
   * `next` as steps: a check point after each row read or appended and every REMOVED_STEP removed
   * rows checked, so a change runs it between queries. Every appended row's tokens are read and
   * the removed rows checked before anything shared is written (a throw leaves the tail as it
   * was); the appended rows then go to the shared tail, which the older views read only below
   * their own row and term counts. One view is made, at the end. A removed row's tokens are not
   * read: its dead holders are counted when a query asks (`liveDocFreq`), its length is known.
   */
  *nextSteps(change: SearchChange): Steps<SearchView> {
    const { from, to, dead, removed } = change;
    const { base } = this;
    if (from !== this.rowCount || !(to >= from) || !Number.isInteger(to)) {
      throw new RangeError(`SearchView.next: appended rows [${from}, ${to}) do not start at the view's row count ${this.rowCount}`);
    }
    if (dead.length * 32 < to) throw new RangeError(`SearchView.next: the dead bitmap covers ${dead.length * 32} rows, fewer than ${to}`);
    const { tail } = this;
    if (to > from && tail.rowCount !== from)
      throw new Error(`SearchView.next: only the newest view of its lineage (row count ${tail.rowCount}) can append rows; this one has ${from}`);
    // 1. Read every appended row's terms first (termsOf is the only outside code), and check the
    //    removed rows, so that a throw leaves the shared tail as it was (its token table may have
    //    learnt the ids of terms it already had). A term new to the lineage gets the id it will
    //    have once added (ids follow first appearance). A row's terms are looked up without a
    //    string per token (AppendedTerms): a row is one piece between check points.
    const appendedIds = new Uint32List();
    const terms = new AppendedTerms(base, tail, this.address, appendedIds);
    const termsOf = change.termsOf?.(terms) ?? stringSource(change.tokensOf, terms);
    const appendedEnds = new Uint32Array(to - from + 1);
    for (let row = from; row < to; row++) {
      termsOf(row);
      appendedEnds[row - from + 1] = appendedIds.length;
      yield;
    }
    const { fresh } = terms;
    // the removed rows: each alive before and dead now, listed once; their token counts leave the total
    const once = new Set<number>();
    let removedLength = 0;
    for (let i = 0; i < removed.length; i++) {
      const row = removed[i];
      if (!(row >= 0 && row < to) || once.has(row) || !getBit(dead, row) || (row < from && this.isDead(row))) {
        throw new RangeError(`SearchView.next: removed row ${row} is not a row that was alive and is dead now (or is listed twice)`);
      }
      once.add(row);
      removedLength += row < from ? this.lengthOf(row) : appendedEnds[row - from + 1] - appendedEnds[row - from];
      if (i % REMOVED_STEP === REMOVED_STEP - 1) yield;
    }

    // 2. Append the new rows to the shared tail: ascending rows keep every tail list ascending.
    //    A row's term frequencies are the run lengths of its sorted term ids.
    let appendedLength = 0;
    if (to > from) {
      for (const t of fresh) {
        tail.termIds.set(t, tail.firstId + tail.terms.length);
        tail.terms.push(t);
      }
      for (let row = from; row < to; row++) {
        const start = appendedEnds[row - from];
        const end = appendedEnds[row - from + 1];
        tail.setLength(row - base.rowCount, end - start);
        appendedLength += end - start;
        const ids = appendedIds.array.subarray(start, end).sort();
        for (let k = 0, lists = 0; k < ids.length; lists++) {
          const id = ids[k];
          let tf = 0;
          for (; k < ids.length && ids[k] === id; k++) tf++;
          tail.postings.push(id, row, Math.min(tf, 0xffff));
          if (lists % TOKEN_STEP === TOKEN_STEP - 1) yield;
        }
        yield;
      }
      tail.rowCount = to;
    }

    const liveCount = this.liveCount + (to - from) - removed.length;
    const liveLength = this.liveLength + appendedLength - removedLength;
    return new SearchView(
      base,
      tail,
      to,
      dead,
      liveCount,
      liveLength,
      liveCount > 0 ? liveLength / liveCount : 0,
      to > from ? tail.firstId + tail.terms.length : this.termCount,
      removed.length === 0 ? this.removals : new Removals(this.removals, Uint32Array.from(removed)),
    );
  }

  /** Whether the row is not a live row of this view (dead, or beyond its row count). */
  isDead(row: number): boolean {
    if (row >= this.rowCount) return true;
    const dead = this.deadBits;
    return dead !== null && getBit(dead, row);
  }

  /** The view's id of a term (already tokenized and normalized), or -1. */
  termId(term: string): number {
    const id = this.base.terms.id(term);
    if (id >= 0) return id;
    const tailId = this.tail.idOf(term);
    return tailId < this.termCount ? tailId : -1;
  }

  /** The term of an id below termCount. */
  termOf(id: number): string {
    const { terms } = this.base;
    return id < terms.size ? terms.term(id) : this.tail.terms[id - terms.size];
  }

  /** Postings of the term in the base CSR: [start, end) of base.rows (empty for a term the base lacks). */
  baseStart(id: number): number {
    return id < this.base.terms.size ? this.base.offsets[id] : 0;
  }

  baseEnd(id: number): number {
    return id < this.base.terms.size ? this.base.offsets[id + 1] : 0;
  }

  /** The term's postings among appended rows of this view, or null when it has none. */
  tailPostings(id: number): TailPostings | null {
    return this.tail.postings.read(id, this.rowCount);
  }

  /** Token counts of appended rows: row r's at [r - base.rowCount] (read only below rowCount). */
  get tailLengths(): Uint32Array {
    return this.tail.lengths;
  }

  /** Postings of the term in base and tail, dead rows included: the planner's cheap size estimate. */
  postingCount(id: number): number {
    if (id >= this.termCount) return 0;
    return this.baseEnd(id) - this.baseStart(id) + this.tail.postings.count(id, this.rowCount);
  }

  /** Live rows holding the term: BM25's n. */
  liveDocFreq(id: number): number {
    const postings = this.postingCount(id);
    return postings === 0 ? 0 : postings - this.deadHolders(id, postings);
  }

  /**
   * Dead rows holding the term (`postings` of them in all, dead or alive), counted on the first
   * ask and kept by the view: up the chain of removals to a view that kept the term's count (or
   * the generation-0 view, where none is dead), adding the holders among the rows removed on the
   * way; or, when that way passes more removed rows than the term has postings over SEARCH_COST,
   * each posting tested against the dead bitmap.
   */
  private deadHolders(id: number, postings: number): number {
    const mine = this.removals;
    if (mine.parent === null) return 0; // nothing removed since the generation-0 view (ROOT keeps no counts: it is every lineage's)
    const kept = mine.counts?.get(id);
    if (kept !== undefined) return kept;
    let count = 0;
    for (let node: Removals = mine; node.parent !== null; node = node.parent) {
      const known = node.counts?.get(id);
      if (known !== undefined) {
        count += known;
        break;
      }
      if (node.depth * SEARCH_COST > postings) {
        count = this.deadPostings(id);
        break;
      }
      for (const row of node.rows) if (this.tfOf(id, row) > 0) count++;
    }
    (mine.counts ??= new Map()).set(id, count);
    return count;
  }

  /** Postings of the term (base and tail, below rowCount) on dead rows. */
  private deadPostings(id: number): number {
    const dead = this.deadBits;
    if (dead === null) return 0;
    let count = 0;
    const rows = this.base.rows;
    for (let p = this.baseStart(id), end = this.baseEnd(id); p < end; p++) if (getBit(dead, rows[p])) count++;
    const tail = this.tailPostings(id);
    if (tail !== null) for (let p = tail.start; p < tail.end; p++) if (getBit(dead, tail.rows[p])) count++;
    return count;
  }

  /** The row's token count (dead rows included). */
  lengthOf(row: number): number {
    const baseRows = this.base.rowCount;
    return row < baseRows ? this.base.lengths[row] : this.tail.lengths[row - baseRows];
  }

  /** Term frequency of the term in the row, 0 when the row does not hold it (binary search). */
  tfOf(id: number, row: number): number {
    const baseRows = this.base.rowCount;
    if (row < baseRows) {
      const { rows, tfs } = this.base;
      const end = this.baseEnd(id);
      const p = lowerBound(rows, row, this.baseStart(id), end);
      return p < end && rows[p] === row ? tfs[p] : 0;
    }
    const tail = this.tailPostings(id);
    if (!tail) return 0;
    const p = lowerBound(tail.rows, row, tail.start, tail.end);
    return p < tail.end && tail.rows[p] === row ? tail.tfs[p] : 0;
  }

  /** Ids of the view's terms starting with `prefix`. */
  withPrefix(prefix: string, out: number[]): number[] {
    lexiconOf(this.base).withPrefix(prefix, out);
    if (this.termCount > this.base.terms.size) this.belowBound(this.tail.lexiconOfTerms().withPrefix(prefix, []), out);
    return out;
  }

  /** Ids of the view's fuzzy-eligible terms within one Damerau (OSA) edit of `word`, itself excluded. */
  withinOneEdit(word: string, out: number[]): number[] {
    lexiconOf(this.base).withinOneEdit(word, out);
    if (this.termCount > this.base.terms.size) this.belowBound(this.tail.lexiconOfTerms().withinOneEdit(word, []), out);
    return out;
  }

  private belowBound(ids: number[], out: number[]): void {
    for (const id of ids) if (id < this.termCount) out.push(id);
  }
}

const views = new WeakMap<FieldIndex, SearchView>();
/**
 * A view as given, or the cached generation-0 view of a FieldIndex (callers that still pass the
 * frozen index: the engine until it holds views per generation).
 */
export function asView(index: FieldIndex | SearchView): SearchView {
  if (index instanceof SearchView) return index;
  let view = views.get(index);
  if (!view) {
    view = SearchView.of(index);
    views.set(index, view);
  }
  return view;
}
