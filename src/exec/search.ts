/**
 * The search operators: search.text postings as an access path, as a residual test (membership as
 * a bitset, made on first use per query) and as relevance (the sum of a row's BM25 scores over the
 * filter's search.text calls, found by binary search in each call's ascending rows). Ranked top-k
 * with early stop is src/search/ranked.ts.
 */
import type { Generation } from '../access/generation.js';
import type { SearchNode } from '../plan/plan.js';
import { evaluateSearch, type PreparedSearch, type SearchMatch } from '../search/bm25.js';
import { lowerBound } from '../util/binary-search.js';
import { getBit, newBitmap, setBit } from '../util/bits.js';
import { Uint32List } from '../util/uint32-list.js';

/** A search.text call prepared against one generation's search view (term ids, min_matches). */
export interface PreparedCall {
  readonly node: SearchNode;
  readonly prepared: PreparedSearch;
}

/** The rows a search.text call matches that `accept` allows, ascending. */
export function collectSearch(gen: Generation, call: PreparedCall, accept: (row: number) => boolean): Uint32Array {
  const match = evaluateSearch(gen.access.search[call.node.field], call.prepared);
  const out = new Uint32List(match.rows.length);
  for (const row of match.rows) if (accept(row)) out.push(row);
  return out.done();
}

/** One query's search.text results, each evaluated on first use. */
export class SearchResults {
  private readonly results = new Map<number, { match: SearchMatch; bits: Uint32Array }>();

  constructor(
    private readonly gen: Generation,
    private readonly rowCount: number,
    private readonly calls: ReadonlyMap<number, PreparedCall>,
  ) {}

  private of(ordinal: number): { match: SearchMatch; bits: Uint32Array } {
    let r = this.results.get(ordinal);
    if (!r) {
      const call = this.calls.get(ordinal)!;
      const match = evaluateSearch(this.gen.access.search[call.node.field], call.prepared);
      const bits = newBitmap(this.rowCount);
      for (const row of match.rows) setBit(bits, row);
      r = { match, bits };
      this.results.set(ordinal, r);
    }
    return r;
  }

  /** Whether the call with this ordinal matches the row. */
  hit(ordinal: number, row: number): boolean {
    return getBit(this.of(ordinal).bits, row);
  }

  /** The row's relevance: the sum of its scores over every call that matches it. */
  relevance(row: number): number {
    let sum = 0;
    for (const ordinal of this.calls.keys()) {
      const { match, bits } = this.of(ordinal);
      if (!getBit(bits, row)) continue;
      sum += match.scores[lowerBound(match.rows, row)];
    }
    return sum;
  }
}
