/**
 * search.text(FIELD, 'terms' [, min_matches]) over one field index: query preparation (tokens,
 * dedupe, min_matches rules, address expansions) and evaluation with BM25 (SERVICE.md §4).
 *
 * Evaluation is term-at-a-time into dense per-row scratch arrays owned by the index, so a query
 * allocates only its result. See DESIGN.md "Text search" for the measurements behind this choice.
 */
import { QueryError } from '../errors.js';
import { Lexicon } from './lexicon.js';
import type { FieldIndex } from './postings.js';
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

export interface PreparedTerm {
  /** The query term after tokenizing (and, for addresses, normalizing). */
  readonly term: string;
  /** Term id of the exact match, or -1 when the term is not in the index. */
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

const lexicons = new WeakMap<FieldIndex, Lexicon>();
function lexiconOf(index: FieldIndex): Lexicon {
  let lex = lexicons.get(index);
  if (!lex) {
    lex = new Lexicon(index);
    lexicons.set(index, lex);
  }
  return lex;
}

/**
 * Checks and prepares a search. `minMatches` undefined means the field's default. Throws a
 * QueryError (EmptySearchQuery, InvalidMinMatches, TooManySearchTerms) for bad input.
 */
export function prepareSearch(
  index: FieldIndex,
  text: string,
  minMatches?: number,
  maxTerms = DEFAULT_MAX_SEARCH_TERMS,
): PreparedSearch {
  if (minMatches !== undefined && (!Number.isInteger(minMatches) || minMatches < 1)) {
    throw new QueryError('InvalidMinMatches', `search.text min_matches must be a positive integer, got ${String(minMatches)}.`, { option: '$filter' });
  }
  const raw = tokenize(text);
  const seen = new Set<string>();
  const pairs: Array<{ raw: string; term: string }> = [];
  for (const r of raw) {
    const term = index.address ? normalizeAddressToken(r) : r;
    if (seen.has(term)) continue;
    seen.add(term);
    pairs.push({ raw: r, term });
  }
  if (pairs.length === 0) {
    throw new QueryError('EmptySearchQuery', `search.text needs at least one word or number to search for; '${text}' has none.`, { option: '$filter' });
  }
  if (pairs.length > maxTerms) {
    throw new QueryError('TooManySearchTerms', `search.text takes at most ${maxTerms} distinct terms; '${text.slice(0, 60)}' has ${pairs.length}.`, { option: '$filter' });
  }
  // The type-ahead term is the last word as typed (its last token), whatever it normalizes to.
  const lastRaw = raw[raw.length - 1];
  const terms = pairs.map(({ raw: r, term }, i): PreparedTerm => {
    const exact = index.termIds.get(term) ?? -1;
    if (!index.address) return { term, exact, inexact: [] };
    const lex = lexiconOf(index);
    const inexact = new Set<number>();
    const isLast = i === pairs.length - 1 || r === lastRaw;
    if (isLast && lastRaw.length >= 2) {
      for (const id of lex.withPrefix(lastRaw, [])) inexact.add(id);
      if (term !== lastRaw) for (const id of lex.withPrefix(term, [])) inexact.add(id);
    }
    for (const id of lex.withinOneEdit(term, [])) inexact.add(id);
    inexact.delete(exact);
    return { term, exact, inexact: [...inexact].sort((a, b) => a - b) };
  });
  const defaultMin = index.address ? Math.ceil(ADDRESS_THRESHOLD * terms.length) : terms.length;
  return { terms, minMatches: Math.min(minMatches ?? defaultMin, terms.length) };
}

/** Per-index scratch, sized to the row count once and reused by every evaluation. */
interface Scratch {
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
function scratchOf(index: FieldIndex): Scratch {
  let s = scratches.get(index);
  if (!s) {
    const n = index.rowCount;
    s = {
      total: new Float64Array(n),
      best: new Float64Array(n),
      matched: new Uint8Array(n),
      termStamp: new Int32Array(n),
      exactStamp: new Int32Array(n),
      termRows: new Uint32Array(n),
      touched: new Uint32Array(n),
      stamp: 0,
    };
    scratches.set(index, s);
  }
  if (s.stamp > 0x7ffffff0) {
    s.termStamp.fill(0);
    s.exactStamp.fill(0);
    s.stamp = 0;
  }
  return s;
}

/**
 * Adds one term's postings to the per-term best scores. Exact postings mark their rows so that
 * inexact postings of the same term skip them: an exact match always wins.
 */
function visitPostings(index: FieldIndex, s: Scratch, termId: number, weight: number, exact: boolean, stamp: number, termCount: number): number {
  const { offsets, rows, tfs, lengths } = index;
  const w = weight * idf(index.rowCount, offsets[termId + 1] - offsets[termId]);
  const norm = index.avgLength > 0 ? BM25_B / index.avgLength : 0;
  const base = 1 - BM25_B;
  const k1p1 = BM25_K1 + 1;
  const { termStamp, exactStamp, best, termRows } = s;
  for (let p = offsets[termId], end = offsets[termId + 1]; p < end; p++) {
    const row = rows[p];
    if (!exact && exactStamp[row] === stamp) continue;
    const tf = tfs[p];
    const score = (w * tf * k1p1) / (tf + BM25_K1 * (base + norm * lengths[row]));
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
  if (hi > end) hi = end;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (rows[mid] < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * A search every term of which must match exactly (no prefix or fuzzy terms): the rarest term's
 * postings drive, the others are galloped to each of its rows, and only rows holding every term are
 * scored — O(m log(M/m)) for postings of m and M rows instead of touching all m + M. Scores add
 * the per-term scores in query order with the same expression as visitPostings, so they are
 * bit-identical to the general path's.
 */
function evaluateConjunctive(index: FieldIndex, terms: readonly PreparedTerm[]): SearchMatch {
  if (terms.some((t) => t.exact < 0)) return { rows: new Uint32Array(0), scores: new Float64Array(0) };
  const { offsets, rows, tfs, lengths } = index;
  const ids = terms.map((t) => t.exact);
  const weights = ids.map((id) => idf(index.rowCount, offsets[id + 1] - offsets[id]));
  const norm = index.avgLength > 0 ? BM25_B / index.avgLength : 0;
  const base = 1 - BM25_B;
  const k1p1 = BM25_K1 + 1;
  let driver = 0;
  for (let i = 1; i < ids.length; i++) if (offsets[ids[i] + 1] - offsets[ids[i]] < offsets[ids[driver] + 1] - offsets[ids[driver]]) driver = i;
  const cursor = ids.map((id) => offsets[id]);
  const found = new Uint32Array(ids.length);
  const outRows: number[] = [];
  const outScores: number[] = [];
  const dEnd = offsets[ids[driver] + 1];
  next: for (let p = offsets[ids[driver]]; p < dEnd; p++) {
    const row = rows[p];
    for (let i = 0; i < ids.length; i++) {
      if (i === driver) {
        found[i] = p;
        continue;
      }
      const end = offsets[ids[i] + 1];
      const q = seek(rows, cursor[i], end, row);
      cursor[i] = q;
      if (q === end) break next;
      if (rows[q] !== row) continue next;
      found[i] = q;
    }
    let total = 0;
    for (let i = 0; i < ids.length; i++) {
      const tf = tfs[found[i]];
      total += (weights[i] * tf * k1p1) / (tf + BM25_K1 * (base + norm * lengths[row]));
    }
    outRows.push(row);
    outScores.push(total);
  }
  return { rows: Uint32Array.from(outRows), scores: Float64Array.from(outScores) };
}

/** Rows satisfying the search, ascending, with their BM25 scores. */
export function evaluateSearch(index: FieldIndex, search: PreparedSearch): SearchMatch {
  if (search.minMatches === search.terms.length && search.terms.every((t) => t.inexact.length === 0)) {
    return evaluateConjunctive(index, search.terms);
  }
  const { rowCount } = index;
  const s = scratchOf(index);
  const { total, best, matched, termRows, touched } = s;
  let touchedCount = 0;
  for (const t of search.terms) {
    const stamp = ++s.stamp;
    let termCount = 0;
    if (t.exact >= 0) termCount = visitPostings(index, s, t.exact, 1, true, stamp, termCount);
    for (const id of t.inexact) termCount = visitPostings(index, s, id, INEXACT_WEIGHT, false, stamp, termCount);
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
  const bits = new Uint32Array((rowCount + 31) >>> 5);
  let count = 0;
  const need = search.minMatches;
  for (let i = 0; i < touchedCount; i++) {
    const row = touched[i];
    if (matched[row] >= need) {
      bits[row >>> 5] |= 1 << (row & 31);
      count++;
    }
  }
  const outRows = new Uint32Array(count);
  const outScores = new Float64Array(count);
  let k = 0;
  for (let w = 0; w < bits.length && k < count; w++) {
    let word = bits[w];
    while (word !== 0) {
      const bit = 31 - Math.clz32(word & -word);
      const row = (w << 5) | bit;
      outRows[k] = row;
      outScores[k++] = total[row];
      word &= word - 1;
    }
  }
  for (let i = 0; i < touchedCount; i++) matched[touched[i]] = 0;
  return { rows: outRows, scores: outScores };
}
