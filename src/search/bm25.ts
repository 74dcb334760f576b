/**
 * search.text(FIELD, 'terms' [, min_matches]) over one field in one generation (a `SearchView`,
 * src/search/live.ts): query preparation (tokens, dedupe, min_matches rules, address expansions)
 * and evaluation with BM25 over the view's live rows and live statistics (SERVICE.md §4).
 *
 * A term's postings are the base CSR slice, then the view's tail postings (appended rows, all above
 * the base rows, so the two in sequence ascend); dead rows never match. Evaluation is
 * term-at-a-time into dense per-row scratch arrays shared by the views of one base index, so a
 * query allocates only its result. See DESIGN.md "Text search" for the measurements behind this.
 *
 * Every term score is `(w * tf * k1p1) / (tf + BM25_K1 * (base + norm * length))` with
 * w = weight × idf(liveCount, live df), norm = BM25_B / avgLength, base = 1 − BM25_B, summed per row
 * in query-term order: src/search/ranked.ts computes the very same expression, so its scores are
 * bit-identical to these.
 */
import { QueryError } from '../errors.js';
import { lowerBound } from '../util/binary-search.js';
import { getBit, newBitmap, setBit, setBitPositionsInto } from '../util/bits.js';
import type { FieldIndex } from './postings.js';
import { isFuzzyCandidate } from './lexicon.js';
import { asView, type SearchView } from './live.js';
import { normalizeAddressToken, tokenize } from './tokenize.js';

export const BM25_K1 = 1.2;
export const BM25_B = 0.75;
/** Weight of a prefix or fuzzy match relative to the exact term score. */
export const INEXACT_WEIGHT = 0.5;
export const ADDRESS_THRESHOLD = 0.4;
export const DEFAULT_MAX_SEARCH_TERMS = 32;

export function idf(rowCount: number, docFreq: number): number {
  return Math.log(1 + (rowCount - docFreq + 0.5) / (docFreq + 0.5));
}

/** A term's BM25 weight: `weight` × idf of a term held by `docFreq` of `rowCount` rows. */
export function weightOf(weight: number, rowCount: number, docFreq: number): number {
  return weight * idf(rowCount, docFreq);
}

/** A term's BM25 weight in a view: `weight` × idf over the live rows. */
export function termWeight(view: SearchView, termId: number, weight: number): number {
  return weightOf(weight, view.liveCount, view.liveDocFreq(termId));
}

/** The length normalisation factor b / avgLength (0 when no row has tokens). */
export function normOf(avgLength: number): number {
  return avgLength > 0 ? BM25_B / avgLength : 0;
}

/** The length normalisation factor of a view. */
export function lengthNorm(view: SearchView): number {
  return normOf(view.avgLength);
}

/** One term score (cold paths; hot loops inline the same expression). */
export function termScore(w: number, tf: number, length: number, norm: number): number {
  return (w * tf * (BM25_K1 + 1)) / (tf + BM25_K1 * (1 - BM25_B + norm * length));
}

export interface PreparedTerm {
  /** The query term after tokenizing (and, for addresses, normalizing). */
  readonly term: string;
  /** Term id of the exact match, or -1 when the term is not in the view's vocabulary. */
  readonly exact: number;
  /** Prefix and fuzzy matches (term ids), scored at INEXACT_WEIGHT. */
  readonly inexact: readonly number[];
}

export interface PreparedSearch {
  readonly terms: readonly PreparedTerm[];
  /** Matching terms a row needs (after defaults and capping). */
  readonly minMatches: number;
}

export interface SearchMatch {
  /** Matching rows, ascending. */
  readonly rows: Uint32Array;
  /** BM25 score of each matching row, parallel to rows. */
  readonly scores: Float64Array;
}

/** One distinct query term and the look-ups beyond exact match it takes (RawAddressSearchText only). */
export interface QueryTerm {
  /** The query term after tokenizing (and, for addresses, normalizing). */
  readonly term: string;
  /** Prefixes whose indexed words match the term inexactly (type-ahead on the last word). */
  readonly prefixes: readonly string[];
  /** Whether indexed words within one edit of the term match it inexactly. */
  readonly fuzzy: boolean;
}

/** The query side of a search: what every backend reads its index for. */
export interface SearchQuery {
  readonly terms: readonly QueryTerm[];
  /** Matching terms a row needs (after defaults and capping). */
  readonly minMatches: number;
}

/**
 * Checks a search's text and min_matches and makes its distinct terms, without reading an index.
 * Throws a QueryError (InvalidMinMatches, EmptySearchQuery, TooManySearchTerms) for bad input.
 */
export function searchQuery(text: string, address: boolean, minMatches?: number, maxTerms = DEFAULT_MAX_SEARCH_TERMS): SearchQuery {
  if (minMatches !== undefined && (!Number.isInteger(minMatches) || minMatches < 1)) {
    throw new QueryError('InvalidMinMatches', `search.text min_matches must be a positive integer, got ${String(minMatches)}.`, { option: '$filter' });
  }
  const raw = tokenize(text);
  const seen = new Set<string>();
  const pairs: Array<{ raw: string; term: string }> = [];
  for (const r of raw) {
    const term = address ? normalizeAddressToken(r) : r;
    if (seen.has(term)) continue;
    seen.add(term);
    pairs.push({ raw: r, term });
  }
  if (pairs.length === 0) {
    throw new QueryError('EmptySearchQuery', `search.text needs at least one word or number to search for; '${text}' has none.`, { option: '$filter' });
  }
  if (pairs.length > maxTerms) {
    throw new QueryError('TooManySearchTerms', `search.text takes at most ${maxTerms} distinct terms; '${text.slice(0, 60)}' has ${pairs.length}.`, {
      option: '$filter',
    });
  }
  // The type-ahead term is the last word as typed (its last token), whatever it normalizes to.
  const lastRaw = raw[raw.length - 1];
  const terms = pairs.map(({ raw: r, term }, i): QueryTerm => {
    if (!address) return { term, prefixes: [], fuzzy: false };
    const isLast = i === pairs.length - 1 || r === lastRaw;
    const prefixes = isLast && lastRaw.length >= 2 ? (term !== lastRaw ? [lastRaw, term] : [lastRaw]) : [];
    return { term, prefixes, fuzzy: isFuzzyCandidate(term) };
  });
  const defaultMin = address ? Math.ceil(ADDRESS_THRESHOLD * terms.length) : terms.length;
  return { terms, minMatches: Math.min(minMatches ?? defaultMin, terms.length) };
}

/**
 * Checks and prepares a search. `minMatches` undefined means the field's default. Throws a
 * QueryError (EmptySearchQuery, InvalidMinMatches, TooManySearchTerms) for bad input. Term ids are
 * the view's: evaluate the prepared search on the same view (a FieldIndex stands for its
 * generation-0 view).
 */
export function prepareSearch(target: FieldIndex | SearchView, text: string, minMatches?: number, maxTerms = DEFAULT_MAX_SEARCH_TERMS): PreparedSearch {
  const view = asView(target);
  const query = searchQuery(text, view.address, minMatches, maxTerms);
  const terms = query.terms.map(({ term, prefixes, fuzzy }): PreparedTerm => {
    const exact = view.termId(term);
    if (!view.address) return { term, exact, inexact: [] };
    const inexact = new Set<number>();
    for (const prefix of prefixes) for (const id of view.withPrefix(prefix, [])) inexact.add(id);
    if (fuzzy) for (const id of view.withinOneEdit(term, [])) inexact.add(id);
    inexact.delete(exact);
    return { term, exact, inexact: [...inexact].sort((a, b) => a - b) };
  });
  return { terms, minMatches: query.minMatches };
}

/** Per-base scratch, sized to the largest row count asked for and reused by every evaluation. */
interface Scratch {
  size: number;
  total: Float64Array;
  best: Float64Array;
  matched: Uint8Array;
  termStamp: Int32Array;
  exactStamp: Int32Array;
  /** Rows touched by the current term, then rows touched by the whole query. */
  termRows: Uint32Array;
  touched: Uint32Array;
  stamp: number;
}
const scratches = new WeakMap<FieldIndex, Scratch>();
function scratchOf(view: SearchView): Scratch {
  let s = scratches.get(view.base);
  if (!s || s.size < view.rowCount) {
    // Views of one base grow past it: leave headroom so a run of small appends does not reallocate each time.
    const n = s ? Math.max(view.rowCount, Math.ceil(s.size * 1.25)) : view.rowCount;
    s = {
      size: n,
      total: new Float64Array(n),
      best: new Float64Array(n),
      matched: new Uint8Array(n),
      termStamp: new Int32Array(n),
      exactStamp: new Int32Array(n),
      termRows: new Uint32Array(n),
      touched: new Uint32Array(n),
      stamp: 0,
    };
    scratches.set(view.base, s);
  }
  if (s.stamp > 0x7ffffff0) {
    s.termStamp.fill(0);
    s.exactStamp.fill(0);
    s.stamp = 0;
  }
  return s;
}

/**
 * Adds one term's postings to the per-term best scores: the base slice, then the tail. Exact
 * postings mark their rows so that inexact postings of the same term skip them: an exact match
 * always wins.
 */
function visitPostings(view: SearchView, s: Scratch, termId: number, weight: number, exact: boolean, stamp: number, termCount: number): number {
  const w = termWeight(view, termId, weight);
  const norm = lengthNorm(view);
  const { base } = view;
  termCount = visitSlice(
    s,
    base.rows,
    base.tfs,
    view.baseStart(termId),
    view.baseEnd(termId),
    base.lengths,
    0,
    view.deadBits,
    w,
    norm,
    exact,
    stamp,
    termCount,
  );
  const tail = view.tailPostings(termId);
  if (tail)
    termCount = visitSlice(s, tail.rows, tail.tfs, tail.start, tail.end, view.tailLengths, base.rowCount, view.deadBits, w, norm, exact, stamp, termCount);
  return termCount;
}

/** Postings rows[start, end) with tfs; row r's length is lengths[r - lengthFrom]. */
function visitSlice(
  s: Scratch,
  rows: Uint32Array,
  tfs: Uint16Array,
  start: number,
  end: number,
  lengths: Uint32Array,
  lengthFrom: number,
  dead: Uint32Array | null,
  w: number,
  norm: number,
  exact: boolean,
  stamp: number,
  termCount: number,
): number {
  const base = 1 - BM25_B;
  const k1p1 = BM25_K1 + 1;
  const { termStamp, exactStamp, best, termRows } = s;
  for (let p = start; p < end; p++) {
    const row = rows[p];
    if (dead !== null && getBit(dead, row)) continue;
    if (!exact && exactStamp[row] === stamp) continue;
    const tf = tfs[p];
    const score = (w * tf * k1p1) / (tf + BM25_K1 * (base + norm * lengths[row - lengthFrom]));
    if (termStamp[row] !== stamp) {
      termStamp[row] = stamp;
      best[row] = score;
      termRows[termCount++] = row;
    } else if (score > best[row]) best[row] = score;
    if (exact) exactStamp[row] = stamp;
  }
  return termCount;
}

/** The first position in rows[from, end) holding a row >= target (galloping, then binary search). */
function seek(rows: Uint32Array, from: number, end: number, target: number): number {
  let step = 1;
  let lo = from;
  let hi = from;
  while (hi < end && rows[hi] < target) {
    lo = hi + 1;
    hi += step;
    step *= 2;
  }
  return lowerBound(rows, target, lo, Math.min(hi, end));
}

/** Each term's postings in one segment (base or tail) of a view: rows[start, end) per term. */
interface Segment {
  readonly rows: Uint32Array[];
  readonly tfs: Uint16Array[];
  readonly start: Uint32Array;
  readonly end: Uint32Array;
  readonly lengths: Uint32Array;
  /** Row r's length is lengths[r - lengthFrom]. */
  readonly lengthFrom: number;
}

/**
 * A search every term of which must match exactly (no prefix or fuzzy terms): the rarest term's
 * postings drive, the others are galloped to each of its rows, and only live rows holding every
 * term are scored — O(m log(M/m)) for postings of m and M rows instead of touching all m + M. The
 * base segment, then the tail segment (the rows of each are disjoint and ascending). Scores add the
 * per-term scores in query order with the same expression as visitSlice, so they are bit-identical
 * to the general path's.
 */
function evaluateConjunctive(view: SearchView, terms: readonly PreparedTerm[]): SearchMatch {
  if (terms.some((t) => t.exact < 0)) return { rows: new Uint32Array(0), scores: new Float64Array(0) };
  const ids = terms.map((t) => t.exact);
  const weights = ids.map((id) => termWeight(view, id, 1));
  const norm = lengthNorm(view);
  let driver = 0;
  for (let i = 1; i < ids.length; i++) if (view.postingCount(ids[i]) < view.postingCount(ids[driver])) driver = i;
  const outRows: number[] = [];
  const outScores: number[] = [];
  const { base } = view;
  conjoin(
    {
      rows: ids.map(() => base.rows),
      tfs: ids.map(() => base.tfs),
      start: Uint32Array.from(ids, (id) => view.baseStart(id)),
      end: Uint32Array.from(ids, (id) => view.baseEnd(id)),
      lengths: base.lengths,
      lengthFrom: 0,
    },
    driver,
    view.deadBits,
    weights,
    norm,
    outRows,
    outScores,
  );
  const tails = ids.map((id) => view.tailPostings(id));
  if (tails.every((t) => t !== null)) {
    conjoin(
      {
        rows: tails.map((t) => t.rows),
        tfs: tails.map((t) => t.tfs),
        start: Uint32Array.from(tails, (t) => t.start),
        end: Uint32Array.from(tails, (t) => t.end),
        lengths: view.tailLengths,
        lengthFrom: base.rowCount,
      },
      driver,
      view.deadBits,
      weights,
      norm,
      outRows,
      outScores,
    );
  }
  return { rows: Uint32Array.from(outRows), scores: Float64Array.from(outScores) };
}

function conjoin(seg: Segment, driver: number, dead: Uint32Array | null, weights: number[], norm: number, outRows: number[], outScores: number[]): void {
  const base = 1 - BM25_B;
  const k1p1 = BM25_K1 + 1;
  const n = weights.length;
  const cursor = seg.start.slice();
  const found = new Uint32Array(n);
  const dRows = seg.rows[driver];
  const dEnd = seg.end[driver];
  next: for (let p = seg.start[driver]; p < dEnd; p++) {
    const row = dRows[p];
    if (dead !== null && getBit(dead, row)) continue;
    for (let i = 0; i < n; i++) {
      if (i === driver) {
        found[i] = p;
        continue;
      }
      const rows = seg.rows[i];
      const end = seg.end[i];
      const q = seek(rows, cursor[i], end, row);
      cursor[i] = q;
      if (q === end) break next;
      if (rows[q] !== row) continue next;
      found[i] = q;
    }
    const length = seg.lengths[row - seg.lengthFrom];
    let total = 0;
    for (let i = 0; i < n; i++) {
      const tf = seg.tfs[i][found[i]];
      total += (weights[i] * tf * k1p1) / (tf + BM25_K1 * (base + norm * length));
    }
    outRows.push(row);
    outScores.push(total);
  }
}

/** Live rows satisfying the search, ascending, with their BM25 scores. */
export function evaluateSearch(target: FieldIndex | SearchView, search: PreparedSearch): SearchMatch {
  const view = asView(target);
  if (search.minMatches === search.terms.length && search.terms.every((t) => t.inexact.length === 0)) {
    return evaluateConjunctive(view, search.terms);
  }
  const { rowCount } = view;
  const s = scratchOf(view);
  const { total, best, matched, termRows, touched } = s;
  let touchedCount = 0;
  for (const t of search.terms) {
    const stamp = ++s.stamp;
    let termCount = 0;
    if (t.exact >= 0) termCount = visitPostings(view, s, t.exact, 1, true, stamp, termCount);
    for (const id of t.inexact) termCount = visitPostings(view, s, id, INEXACT_WEIGHT, false, stamp, termCount);
    for (let i = 0; i < termCount; i++) {
      const row = termRows[i];
      if (matched[row] === 0) {
        touched[touchedCount++] = row;
        total[row] = 0;
      }
      matched[row]++;
      total[row] += best[row];
    }
  }
  // Collect qualifying rows in ascending order through a bitset: O(rows/32 + matches), no sort.
  const bits = newBitmap(rowCount);
  let count = 0;
  const need = search.minMatches;
  for (let i = 0; i < touchedCount; i++) {
    const row = touched[i];
    if (matched[row] >= need) {
      setBit(bits, row);
      count++;
    }
  }
  const outRows = new Uint32Array(count);
  setBitPositionsInto(bits, outRows);
  const outScores = new Float64Array(count);
  for (let k = 0; k < count; k++) outScores[k] = total[outRows[k]];
  for (let i = 0; i < touchedCount; i++) matched[touched[i]] = 0;
  return { rows: outRows, scores: outScores };
}
