/**
 * Top-k by relevance without scoring every listing of a frequent term, exact over a view (one
 * field in one generation, src/search/live.ts).
 *
 * For a conjunctive search (every term required, exact terms only — the default outside
 * RawAddressSearchText) the driver term's base postings are walked in impact order (their BM25 term
 * score under the base index's own statistics, highest first, computed once per base index and
 * term); each candidate's other terms are looked up by binary search in their row-sorted postings.
 * The walk stops once the driver's next score bound plus the other terms' maximum scores cannot
 * reach the k-th best: the answer is exactly the top k of the full evaluation.
 *
 * In a later generation the statistics differ from the base's (N, df, average length), so a base
 * posting's score there is not its cached score, and the impact order may no longer be exactly
 * descending. It is still a bound: with idf w' against the base's w and average length A' against
 * A, the term score w·tf·(k1+1) / (tf + k1·(1 − b + b·len/A)) changes by the factor
 * (w'/w) · D(A)/D(A'), where D(A) = c + x/A with c = tf + k1(1 − b) > 0 and x = k1·b·len ≥ 0; for
 * A' ≥ A, (c + x/A)/(c + x/A') ≤ (x/A)/(x/A') = A'/A, and for A' < A it is at most 1. So a base
 * posting's view score is at most its base score × (w'/w) · max(1, A'/A) (a relative 1e-9 of slack
 * absorbs rounding), and the walk stops on the scaled bound; postings walked are scored with the
 * view's statistics. Tail postings (appended rows) are few: they are scored in full, first, and
 * their exact maximum enters the other terms' bounds. When a term's view weight and length
 * normalisation equal the base's (every term of a generation-0 view), the cached base scores are
 * the view's scores, bit for bit, and serve directly.
 *
 * Other searches (address thresholds, prefix and fuzzy expansions) use the MaxScore split below,
 * or evaluate every match and keep the top k with a heap. DESIGN.md "Text search" has the
 * measurements. Scores are bit-identical to evaluateSearch's on the same view.
 */
import { lowerBound } from '../util/binary-search.js';
import { getBit } from '../util/bits.js';
import { TopKHeap } from '../util/top-k.js';
import { BM25_B, INEXACT_WEIGHT, evaluateSearch, idf, lengthNorm, termScore, termWeight, type PreparedSearch } from './bm25.js';
import { asView, type SearchView } from './live.js';
import type { TailPostings } from './tail-postings.js';
import type { FieldIndex } from './postings.js';

/** Terms with fewer postings than this are cheaper to evaluate in full than to impact-sort. */
export const IMPACT_MIN_POSTINGS = 2048;

/** Relative slack on score bounds, so rounding can never make a bound too low. */
const BOUND_SLACK = 1e-9;

export interface RankedMatch {
  readonly rows: Uint32Array;
  readonly scores: Float64Array;
}

export interface RankOptions {
  /** Only rows it accepts are candidates (visibility and the rest of the filter). */
  readonly accept?: (row: number) => boolean;
  /** Tie rank per row (ascending wins on equal scores); defaults to the row id. */
  readonly tieRank?: ArrayLike<number>;
}

/** One cache per base index (or view) and term, filled on first use (base indexes and views are immutable, so never stale). */
function perTerm<K extends object, V>(cache: WeakMap<K, Map<number, V>>, index: K, termId: number, make: () => V): V {
  let perIndex = cache.get(index);
  if (!perIndex) {
    perIndex = new Map();
    cache.set(index, perIndex);
  }
  let value = perIndex.get(termId);
  if (value === undefined) {
    value = make();
    perIndex.set(termId, value);
  }
  return value;
}

/** Posting positions of each term sorted by base term score descending (ties by row), built on demand. */
const impactOrders = new WeakMap<FieldIndex, Map<number, Uint32Array>>();
/** Impact orders sorted in this thread so far (`impactOrdersSorted`). */
let sorted = 0;
function impactOrder(index: FieldIndex, termId: number, scores: Float64Array): Uint32Array {
  return perTerm(impactOrders, index, termId, () => {
    sorted++;
    const order = new Uint32Array(scores.length);
    for (let i = 0; i < order.length; i++) order[i] = i;
    return order.sort((a, b) => scores[b] - scores[a] || a - b);
  });
}

interface TermImpacts {
  /** Term score per base posting (the base index's statistics), in posting order. */
  readonly scores: Float64Array;
  readonly max: number;
}
const termImpactCache = new WeakMap<FieldIndex, Map<number, TermImpacts>>();
function termImpacts(index: FieldIndex, termId: number): TermImpacts {
  return perTerm(termImpactCache, index, termId, () => {
    const { offsets, rows, tfs, lengths } = index;
    const start = offsets[termId];
    const w = idf(index.rowCount, offsets[termId + 1] - start);
    const norm = index.avgLength > 0 ? BM25_B / index.avgLength : 0;
    const scores = new Float64Array(offsets[termId + 1] - start);
    let max = 0;
    for (let i = 0; i < scores.length; i++) {
      scores[i] = termScore(w, tfs[start + i], lengths[rows[start + i]], norm);
      if (scores[i] > max) max = scores[i];
    }
    return { scores, max };
  });
}

/** How many impact orders this thread has sorted (a compaction's thread sorts those of the terms searched before it, not the event loop). */
export function impactOrdersSorted(): number {
  return sorted;
}

/** Terms of `index` whose impact orders queries have made: a compaction makes them again for its new index. */
export function termsWithImpactOrders(index: FieldIndex): string[] {
  const ids = impactOrders.get(index);
  return ids === undefined ? [] : [...ids.keys()].map((id) => index.terms.term(id));
}

/** Impact scores and orders of some terms of one index, made where the index was (a compaction's thread), for `adoptImpacts`. */
export interface MadeImpacts {
  readonly ids: Uint32Array;
  readonly max: Float64Array;
  readonly scores: Float64Array[];
  readonly orders: Uint32Array[];
}

/** The impact scores and orders of those of `terms` that `index` has with IMPACT_MIN_POSTINGS postings or more. */
export function makeImpacts(index: FieldIndex, terms: readonly string[]): MadeImpacts {
  const ids: number[] = [];
  const max: number[] = [];
  const scores: Float64Array[] = [];
  const orders: Uint32Array[] = [];
  for (const term of terms) {
    const id = index.terms.id(term);
    if (id < 0 || index.offsets[id + 1] - index.offsets[id] < IMPACT_MIN_POSTINGS) continue;
    const impacts = termImpacts(index, id);
    ids.push(id);
    max.push(impacts.max);
    scores.push(impacts.scores);
    orders.push(impactOrder(index, id, impacts.scores));
  }
  return { ids: Uint32Array.from(ids), max: Float64Array.from(max), scores, orders };
}

/** Takes impact scores and orders `makeImpacts` made for `index` (elsewhere), as if queries had made them here. */
export function adoptImpacts(index: FieldIndex, made: MadeImpacts): void {
  for (let i = 0; i < made.ids.length; i++) {
    const id = made.ids[i];
    const impacts: TermImpacts = { scores: made.scores[i], max: made.max[i] };
    perTerm(termImpactCache, index, id, () => impacts);
    perTerm(impactOrders, index, id, () => made.orders[i]);
  }
}

/** How one view scores one term (at weight 1), and how high its scores can go. */
interface ViewTerm {
  readonly id: number;
  /** The view's weight: idf over its live rows. */
  readonly w: number;
  /** Base postings: base.rows[start, end). */
  readonly start: number;
  readonly end: number;
  /** Base scores under the base's statistics; null when the base lacks the term. */
  readonly impacts: TermImpacts | null;
  /** Whether the base scores are this view's scores (same weight and length normalisation). */
  readonly same: boolean;
  /** A base posting's view score is at most its base score times this. */
  readonly grow: number;
  readonly tail: TailPostings | null;
  /** Upper bound of the term's view score over all its postings. */
  readonly max: number;
}

function viewTerm(view: SearchView, id: number): ViewTerm {
  const { base } = view;
  const start = view.baseStart(id);
  const end = view.baseEnd(id);
  const w = termWeight(view, id, 1);
  const norm = lengthNorm(view);
  let impacts: TermImpacts | null = null;
  let same = true;
  let grow = 1;
  let max = 0;
  if (end > start) {
    impacts = termImpacts(base, id);
    const baseWeight = idf(base.rowCount, end - start);
    same = w === baseWeight && norm === (base.avgLength > 0 ? BM25_B / base.avgLength : 0);
    // base.avgLength > 0: a term with postings has a row with tokens
    if (!same) grow = (w / baseWeight) * Math.max(1, view.avgLength / base.avgLength) * (1 + BOUND_SLACK);
    max = impacts.max * grow;
  }
  const tail = view.tailPostings(id);
  if (tail)
    max = Math.max(
      max,
      perTerm(tailBounds, view, id, () => tailBound(view, tail, w, norm)),
    );
  return { id, w, start, end, impacts, same, grow, tail, max };
}

/**
 * The highest score a term's appended postings reach in a view, kept per view: a common term's
 * appended postings are thousands after a few thousand listing changes, and every query of the
 * generation asked for the same bound.
 */
const tailBounds = new WeakMap<SearchView, Map<number, number>>();

function tailBound(view: SearchView, tail: TailPostings, w: number, norm: number): number {
  const lengths = view.tailLengths;
  const first = view.base.rowCount;
  let max = 0;
  for (let p = tail.start; p < tail.end; p++) {
    const s = termScore(w, tail.tfs[p], lengths[tail.rows[p] - first], norm) * (1 + BOUND_SLACK);
    if (s > max) max = s;
  }
  return max;
}

/** The term's view score (weight 1) in a row, or -1 when the row does not hold it. */
function scoreIn(view: SearchView, t: ViewTerm, row: number, norm: number): number {
  const { base } = view;
  if (row < base.rowCount) {
    const p = lowerBound(base.rows, row, t.start, t.end);
    if (p === t.end || base.rows[p] !== row) return -1;
    return t.same ? t.impacts!.scores[p - t.start] : termScore(t.w, base.tfs[p], base.lengths[row], norm);
  }
  const tail = t.tail;
  if (!tail) return -1;
  const p = lowerBound(tail.rows, row, tail.start, tail.end);
  if (p === tail.end || tail.rows[p] !== row) return -1;
  return termScore(t.w, tail.tfs[p], view.tailLengths[row - base.rowCount], norm);
}

const isDeadIn = (dead: Uint32Array | null, row: number): boolean => dead !== null && getBit(dead, row);

/** The k best live rows by relevance (ties by tie rank), best first, with their scores. */
export function rankSearch(target: FieldIndex | SearchView, search: PreparedSearch, k: number, options: RankOptions = {}): RankedMatch {
  const view = asView(target);
  const tie = options.tieRank;
  const accept = options.accept;
  const heap = new TopKHeap(k);
  const conjunctive = search.minMatches === search.terms.length && search.terms.every((t) => t.inexact.length === 0);
  if (!conjunctive) {
    const bounded = k > 0 ? rankByMaxScore(view, search, k, accept, tie) : null;
    if (bounded) return bounded;
    const all = evaluateSearch(view, search);
    for (let i = 0; i < all.rows.length; i++) {
      const row = all.rows[i];
      if (!accept || accept(row)) heap.offer(row, all.scores[i], tie ? tie[row] : row);
    }
    const { ids, values } = heap.drain();
    return { rows: ids, scores: values };
  }
  if (search.terms.some((t) => t.exact < 0) || k === 0) return { rows: new Uint32Array(0), scores: new Float64Array(0) };

  const ids = search.terms.map((t) => t.exact);
  let driverAt = 0;
  ids.forEach((id, j) => {
    if (view.postingCount(id) < view.postingCount(ids[driverAt])) driverAt = j;
  });
  const terms = ids.map((id) => viewTerm(view, id));
  const d = terms[driverAt];
  let othersMax = 0;
  terms.forEach((t, j) => {
    if (j !== driverAt) othersMax += t.max;
  });
  const norm = lengthNorm(view);
  const dead = view.deadBits;
  const { base } = view;
  // Scores are summed in query-term order, exactly as the full evaluation does, so they are bit-identical.

  if (d.impacts) {
    const { rows, tfs, lengths } = base;
    const m = terms.length;
    const starts = Uint32Array.from(terms, (t) => t.start);
    const ends = Uint32Array.from(terms, (t) => t.end);
    /** A term's base scores where they are this view's, else null (computed per posting). */
    const cached = terms.map((t) => (t.same ? (t.impacts?.scores ?? null) : null));
    const driverScores = d.impacts.scores;
    const n = d.end - d.start;
    const order = n >= IMPACT_MIN_POSTINGS ? impactOrder(base, d.id, driverScores) : null;
    for (let i = 0; i < n; i++) {
      const p = order ? order[i] : i;
      // Impact order: nothing later can beat the k-th best once this bound falls below it.
      if (order && heap.full && driverScores[p] * d.grow + othersMax < heap.threshold) break;
      const row = rows[d.start + p];
      if (isDeadIn(dead, row) || (accept && !accept(row))) continue;
      let score = 0;
      let j = 0;
      for (; j < m; j++) {
        const q = j === driverAt ? d.start + p : lowerBound(rows, row, starts[j], ends[j]);
        if (q === ends[j] || rows[q] !== row) break;
        const c = cached[j];
        score += c !== null ? c[q - starts[j]] : termScore(terms[j].w, tfs[q], lengths[row], norm);
      }
      if (j === m) heap.offer(row, score, tie ? tie[row] : row);
    }
  }
  // Appended rows after the base walk, whose k-th best they must beat: a row whose driver score
  // plus the other terms' bounds falls short is skipped without looking its other terms up (after
  // 16,000 listing changes at 100k, a common term had 9,641 appended postings; scored in full
  // before the walk, they made a 0.03 ms search take 0.8 ms).
  const tail = d.tail;
  if (tail) {
    const lengths = view.tailLengths;
    for (let p = tail.start; p < tail.end; p++) {
      const row = tail.rows[p];
      if (isDeadIn(dead, row)) continue;
      const driverScore = termScore(d.w, tail.tfs[p], lengths[row - base.rowCount], norm);
      if (heap.full && (driverScore + othersMax) * (1 + BOUND_SLACK) < heap.threshold) continue;
      if (accept && !accept(row)) continue;
      let score = 0;
      let j = 0;
      for (; j < terms.length; j++) {
        const s = j === driverAt ? driverScore : scoreIn(view, terms[j], row, norm);
        if (s < 0) break;
        score += s;
      }
      if (j === terms.length) heap.offer(row, score, tie ? tie[row] : row);
    }
  }
  const { ids: rows, values } = heap.drain();
  return { rows, scores: values };
}

/**
 * Top-k for threshold searches (min_matches below the term count, prefix and fuzzy expansions)
 * without scoring every match: a MaxScore split. The live rows of the rarest term are scored in
 * full (every other term found by binary search) to seed the k-th best score θ; the terms whose
 * summed upper bounds (scaled base maxima and exact tail maxima, see the file comment) stay below θ
 * are non-essential — a row holding only those cannot reach the top k — so only rows of the
 * essential terms' postings are scored. Exact: the same rows and bit-identical scores as evaluating
 * every match. Returns null when the split would not pay (no selective seed term, or every term
 * essential); the caller then evaluates in full.
 */
export function rankByMaxScore(
  target: FieldIndex | SearchView,
  search: PreparedSearch,
  k: number,
  accept: ((row: number) => boolean) | undefined,
  tie: ArrayLike<number> | undefined,
): RankedMatch | null {
  const view = asView(target);
  const { base } = view;
  const heap = new TopKHeap(k);
  const entry = (id: number, weight: number, exact: boolean) => ({ id, weight, exact, w: termWeight(view, id, weight), term: viewTerm(view, id) });
  const lists = search.terms.map((t) => [...(t.exact >= 0 ? [entry(t.exact, 1, true)] : []), ...t.inexact.map((id) => entry(id, INEXACT_WEIGHT, false))]);
  const sizes = lists.map((l) => l.reduce((n, e) => n + view.postingCount(e.id), 0));
  const bounds = lists.map((l) => l.reduce((m, e) => Math.max(m, e.weight * e.term.max), 0) * (1 + BOUND_SLACK));
  let seed = 0;
  for (let i = 1; i < sizes.length; i++) if (sizes[i] < sizes[seed]) seed = i;
  if (sizes[seed] * 20 > view.rowCount) return null;

  const norm = lengthNorm(view);
  /** Term i's score for a row (exact wins, else the best inexact word), or -1 when it does not match. */
  const termScoreOf = (i: number, row: number): number => {
    let best = -1;
    for (const e of lists[i]) {
      const tf = view.tfOf(e.id, row);
      if (tf === 0) continue;
      const s = termScore(e.w, tf, view.lengthOf(row), norm);
      if (e.exact) return s;
      if (s > best) best = s;
    }
    return best;
  };
  const dead = view.deadBits;
  const seen = new Set<number>();
  const score = (row: number): void => {
    if (seen.has(row) || isDeadIn(dead, row)) return;
    seen.add(row);
    if (accept && !accept(row)) return;
    let total = 0;
    let matched = 0;
    for (let i = 0; i < lists.length; i++) {
      const s = termScoreOf(i, row);
      if (s >= 0) {
        total += s;
        matched++;
      }
    }
    if (matched >= search.minMatches) heap.offer(row, total, tie ? tie[row] : row);
  };
  const scoreTerm = (i: number): void => {
    for (const { term } of lists[i]) {
      for (let p = term.start; p < term.end; p++) score(base.rows[p]);
      if (term.tail) for (let p = term.tail.start; p < term.tail.end; p++) score(term.tail.rows[p]);
    }
  };

  scoreTerm(seed);
  if (!heap.full) return null;
  const theta = heap.threshold;
  // Non-essential: the lowest-bound terms while their bounds sum below θ.
  const byBound = bounds.map((_, i) => i).sort((a, b) => bounds[a] - bounds[b]);
  const essential = new Set(byBound);
  let sum = 0;
  for (const i of byBound) {
    if (sum + bounds[i] >= theta) break;
    sum += bounds[i];
    essential.delete(i);
  }
  if (essential.size === lists.length) return null;
  for (const i of essential) if (i !== seed) scoreTerm(i);
  const { ids, values } = heap.drain();
  return { rows: ids, scores: values };
}
