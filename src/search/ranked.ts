/**
 * Top-k by relevance without scoring every listing of a frequent term.
 *
 * For a conjunctive search (every term required, exact terms only — the default outside
 * RawAddressSearchText) the driver term's postings are walked in impact order (its BM25 term
 * score, highest first); each candidate's other terms are looked up by binary search in their
 * row-sorted postings. The walk stops once the driver's next score plus the other terms' maximum
 * scores cannot reach the k-th best: the answer is exactly the top k of the full evaluation.
 * Other searches (address thresholds, prefix and fuzzy expansions) evaluate every match and keep
 * the top k with a heap. DESIGN.md "Text search" has the measurements.
 */
import { TopKHeap } from '../exec/top-k.js';
import { BM25_B, BM25_K1, INEXACT_WEIGHT, evaluateSearch, idf, type PreparedSearch } from './bm25.js';
import type { FieldIndex } from './postings.js';

/** Terms with fewer postings than this are cheaper to evaluate in full than to impact-sort. */
export const IMPACT_MIN_POSTINGS = 2048;

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

/** Posting positions of each term sorted by term score descending (ties by row), built on demand. */
const impactOrders = new WeakMap<FieldIndex, Map<number, Uint32Array>>();

function termScores(index: FieldIndex, termId: number): Float64Array {
  const start = index.offsets[termId];
  const out = new Float64Array(index.offsets[termId + 1] - start);
  for (let i = 0; i < out.length; i++) out[i] = postingScore(index, termId, 1, start + i);
  return out;
}

/** One cache per index and term, filled on first use (indexes are frozen, so never stale). */
function perTerm<V>(cache: WeakMap<FieldIndex, Map<number, V>>, index: FieldIndex, termId: number, make: () => V): V {
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

function impactOrder(index: FieldIndex, termId: number, scores: Float64Array): Uint32Array {
  return perTerm(impactOrders, index, termId, () => {
    const order = new Uint32Array(scores.length);
    for (let i = 0; i < order.length; i++) order[i] = i;
    return order.sort((a, b) => scores[b] - scores[a] || a - b);
  });
}

interface TermImpacts {
  /** Term score per posting, in posting order. */
  readonly scores: Float64Array;
  readonly max: number;
}
const termImpactCache = new WeakMap<FieldIndex, Map<number, TermImpacts>>();
function termImpacts(index: FieldIndex, termId: number): TermImpacts {
  return perTerm(termImpactCache, index, termId, () => {
    const scores = termScores(index, termId);
    let max = 0;
    for (let i = 0; i < scores.length; i++) if (scores[i] > max) max = scores[i];
    return { scores, max };
  });
}

/** Position of row in the term's postings, or -1. */
function findPosting(index: FieldIndex, termId: number, row: number): number {
  let lo = index.offsets[termId];
  let hi = index.offsets[termId + 1];
  const rows = index.rows;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (rows[mid] < row) lo = mid + 1;
    else hi = mid;
  }
  return lo < index.offsets[termId + 1] && rows[lo] === row ? lo : -1;
}

/** The k best rows by relevance (ties by tie rank), best first, with their scores. */
export function rankSearch(index: FieldIndex, search: PreparedSearch, k: number, options: RankOptions = {}): RankedMatch {
  const tie = options.tieRank;
  const accept = options.accept;
  const heap = new TopKHeap(k);
  const conjunctive = search.minMatches === search.terms.length && search.terms.every((t) => t.inexact.length === 0);
  if (!conjunctive) {
    const bounded = k > 0 ? rankByMaxScore(index, search, k, accept, tie) : null;
    if (bounded) return bounded;
    const all = evaluateSearch(index, search);
    for (let i = 0; i < all.rows.length; i++) {
      const row = all.rows[i];
      if (!accept || accept(row)) heap.offer(row, all.scores[i], tie ? tie[row] : row);
    }
    const { ids, values } = heap.drain();
    return { rows: ids, scores: values };
  }
  if (search.terms.some((t) => t.exact < 0) || k === 0) return { rows: new Uint32Array(0), scores: new Float64Array(0) };

  const { offsets } = index;
  const ids = search.terms.map((t) => t.exact);
  const df = (id: number): number => offsets[id + 1] - offsets[id];
  let driverAt = 0;
  ids.forEach((id, j) => {
    if (df(id) < df(ids[driverAt])) driverAt = j;
  });
  const driver = ids[driverAt];
  const impacts = ids.map((id) => termImpacts(index, id));
  const driverScores = impacts[driverAt].scores;
  const order = df(driver) >= IMPACT_MIN_POSTINGS ? impactOrder(index, driver, driverScores) : null;
  let othersMax = 0;
  impacts.forEach((im, j) => {
    if (j !== driverAt) othersMax += im.max;
  });
  const start = offsets[driver];
  const n = df(driver);
  for (let i = 0; i < n; i++) {
    const p = order ? order[i] : i;
    // Impact order: nothing later can beat the k-th best once this bound falls below it.
    if (order && heap.full && driverScores[p] + othersMax < heap.threshold) break;
    const row = index.rows[start + p];
    if (accept && !accept(row)) continue;
    // Sum in query-term order, exactly as the full evaluation does, so scores are bit-identical.
    let score = 0;
    let ok = true;
    for (let j = 0; j < ids.length; j++) {
      if (j === driverAt) {
        score += driverScores[p];
        continue;
      }
      const pos = findPosting(index, ids[j], row);
      if (pos < 0) {
        ok = false;
        break;
      }
      score += impacts[j].scores[pos - offsets[ids[j]]];
    }
    if (ok) heap.offer(row, score, tie ? tie[row] : row);
  }
  const { ids: rows, values } = heap.drain();
  return { rows, scores: values };
}

/** One posting's BM25 term score, computed exactly as evaluateSearch does (weight inside idf). */
function postingScore(index: FieldIndex, termId: number, weight: number, p: number): number {
  const w = weight * idf(index.rowCount, index.offsets[termId + 1] - index.offsets[termId]);
  const norm = index.avgLength > 0 ? BM25_B / index.avgLength : 0;
  const tf = index.tfs[p];
  return (w * tf * (BM25_K1 + 1)) / (tf + BM25_K1 * (1 - BM25_B + norm * index.lengths[index.rows[p]]));
}

/**
 * Top-k for threshold searches (min_matches below the term count, prefix and fuzzy expansions)
 * without scoring every match: a MaxScore split. The rows of the rarest term are scored in full
 * (every other term found by binary search) to seed the k-th best score θ; the terms whose
 * summed upper bounds stay below θ are non-essential — a row holding only those cannot reach the
 * top k — so only rows of the essential terms' postings are scored. Exact: the same rows and
 * bit-identical scores as evaluating every match. Returns null when the split would not pay
 * (no selective seed term, or every term essential); the caller then evaluates in full.
 */
export function rankByMaxScore(
  index: FieldIndex,
  search: PreparedSearch,
  k: number,
  accept: ((row: number) => boolean) | undefined,
  tie: ArrayLike<number> | undefined,
): RankedMatch | null {
  const { offsets, rows } = index;
  const heap = new TopKHeap(k);
  const lists = search.terms.map((t) => [
    ...(t.exact >= 0 ? [{ id: t.exact, weight: 1, exact: true }] : []),
    ...t.inexact.map((id) => ({ id, weight: INEXACT_WEIGHT, exact: false })),
  ]);
  const sizes = lists.map((l) => l.reduce((n, e) => n + offsets[e.id + 1] - offsets[e.id], 0));
  // Upper bound of each term's score, with slack so rounding can never make it too low.
  const bounds = lists.map((l) => l.reduce((m, e) => Math.max(m, e.weight * termImpacts(index, e.id).max), 0) * (1 + 1e-9));
  let seed = 0;
  for (let i = 1; i < sizes.length; i++) if (sizes[i] < sizes[seed]) seed = i;
  if (sizes[seed] * 20 > index.rowCount) return null;

  /** Term i's score for a row (exact wins, else the best inexact word), or -1 when it does not match. */
  const termScore = (i: number, row: number): number => {
    let best = -1;
    for (const e of lists[i]) {
      const p = findPosting(index, e.id, row);
      if (p < 0) continue;
      const s = postingScore(index, e.id, e.weight, p);
      if (e.exact) return s;
      if (s > best) best = s;
    }
    return best;
  };
  const seen = new Set<number>();
  const score = (row: number): void => {
    if (seen.has(row)) return;
    seen.add(row);
    if (accept && !accept(row)) return;
    let total = 0;
    let matched = 0;
    for (let i = 0; i < lists.length; i++) {
      const s = termScore(i, row);
      if (s >= 0) {
        total += s;
        matched++;
      }
    }
    if (matched >= search.minMatches) heap.offer(row, total, tie ? tie[row] : row);
  };
  const scoreTerm = (i: number): void => {
    for (const e of lists[i]) for (let p = offsets[e.id]; p < offsets[e.id + 1]; p++) score(rows[p]);
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
