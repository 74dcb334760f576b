/**
 * The naive JavaScript scan: what a user writes without an engine, and the comparison's reference.
 * Listings are plain arrays (one per field); every query walks all of them. Text fields are
 * tokenized once at load (SERVICE.md §4 tokens; address tokens USPS-normalized) into per-listing
 * arrays of word ids, and every search query scans all of them, computing document frequencies and
 * textbook BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N − n + 0.5)/(n + 0.5))) in the scan. Address
 * search adds the §4 type-ahead prefix on the last term and one-edit (Damerau OSA) matching for
 * words of 5+ letters, found by a scan of the vocabulary, each scoring half the matched word's BM25.
 *
 * The search semantics are test/search/oracle.ts NaiveSearch's, rewritten over word ids: that
 * oracle keeps every listing's words as strings, which does not fit in memory at 1M listings.
 *
 * Its answers are what every other engine is checked against: exact for sorted, counted and grouped
 * families; for ranked families it also returns every key whose score reaches the k-th score
 * (`acceptable`), so recall@k tolerates ties.
 */
import { normalizeAddressToken, tokenize } from '../../../src/search/tokenize.js';
import type { SearchFieldName } from '../../../src/schema/search-fields.js';
import { osa } from '../../../test/search/oracle.js';
import {
  distanceMeters,
  forEachListing,
  instantOf,
  locationOf,
  nearestRank,
  searchText,
  sortGroups,
  type Answer,
  type FamilyParams,
  type Group,
} from '../families.js';
import type { Peer } from '../peer.js';

const K1 = 1.2;
const B = 0.75;

/** One search field: every listing's words as ids into the field's vocabulary. */
class TextField {
  readonly vocabulary: string[] = [];
  private readonly ids = new Map<string, number>();
  // Growable typed buffers: at 1M listings the keyword field holds ~170M words, past the
  // length a plain JS array can reach.
  wordsOf = new Int32Array(1 << 20);
  private length = 0;
  private offsets: number[] = [0];
  starts!: Uint32Array;
  avgLength = 0;

  constructor(readonly address: boolean) {}

  add(text: string): void {
    for (const raw of tokenize(text)) {
      const word = this.address ? normalizeAddressToken(raw) : raw;
      let id = this.ids.get(word);
      if (id === undefined) {
        id = this.vocabulary.length;
        this.ids.set(word, id);
        this.vocabulary.push(word);
      }
      if (this.length === this.wordsOf.length) {
        const grown = new Int32Array(this.wordsOf.length * 2);
        grown.set(this.wordsOf);
        this.wordsOf = grown;
      }
      this.wordsOf[this.length++] = id;
    }
    this.offsets.push(this.length);
  }

  finish(): void {
    this.wordsOf = this.wordsOf.slice(0, this.length);
    this.starts = Uint32Array.from(this.offsets);
    this.avgLength = this.length / (this.starts.length - 1);
    this.offsets = [];
  }

  id(word: string): number {
    return this.ids.get(word) ?? -1;
  }
}

const LETTERS5 = /^\p{L}{5,}$/u;

class NaivePeer implements Peer {
  readonly name = 'naive JavaScript scan (reference)';
  readonly loads = 'Property only (the fields the families read)';
  private n = 0;
  private readonly key: string[] = [];
  private readonly listingId: string[] = [];
  private readonly status: Array<string | null> = [];
  private readonly propertyType: Array<string | null> = [];
  private readonly city: Array<string | null> = [];
  private readonly price: Array<number | null> = [];
  private readonly beds: Array<number | null> = [];
  private readonly modified: Array<number | null> = [];
  private readonly point: Array<{ lat: number; lon: number } | null> = [];
  private readonly text: Record<'KeywordSearchText' | 'RawAddressSearchText' | 'ListAgentSearchText', TextField> = {
    KeywordSearchText: new TextField(false),
    RawAddressSearchText: new TextField(true),
    ListAgentSearchText: new TextField(false),
  };

  async load(dir: string, log: (line: string) => void): Promise<void> {
    this.n = await forEachListing(dir, (r, i) => {
      this.key.push(r.ListingKey as string);
      this.listingId.push(r.ListingId as string);
      this.status.push((r.StandardStatus as string | undefined) ?? null);
      this.propertyType.push((r.PropertyType as string | undefined) ?? null);
      this.city.push((r.City as string | undefined) ?? null);
      this.price.push(typeof r.ListPrice === 'number' ? r.ListPrice : null);
      this.beds.push(typeof r.BedroomsTotal === 'number' ? r.BedroomsTotal : null);
      this.modified.push(instantOf(r, 'ModificationTimestamp'));
      this.point.push(locationOf(r));
      for (const [field, index] of Object.entries(this.text)) index.add(searchText(r, field as SearchFieldName));
      if ((i + 1) % 100_000 === 0) log(`naive: ${i + 1} listings`);
    });
    for (const index of Object.values(this.text)) index.finish();
  }

  /** Rows passing a predicate, sorted by a numeric field descending (nulls last), ties by key. */
  private sortedDesc(rows: number[], values: Array<number | null>): number[] {
    return rows.sort((a, b) => {
      const x = values[a];
      const y = values[b];
      if (x !== y) {
        if (x === null) return 1;
        if (y === null) return -1;
        return y - x;
      }
      return this.key[a] < this.key[b] ? -1 : this.key[a] > this.key[b] ? 1 : 0;
    });
  }

  private rows(keep: (row: number) => boolean): number[] {
    const out: number[] = [];
    for (let row = 0; row < this.n; row++) if (keep(row)) out.push(row);
    return out;
  }

  private keys(rows: number[]): Answer {
    return { kind: 'keys', keys: rows.map((r) => this.key[r]) };
  }

  /**
   * search.text as SERVICE.md §4 defines it: row → relevance for every row with at least `need`
   * matching terms (need defaults to all terms, or 40% for the address field).
   */
  search(field: keyof NaivePeer['text'], query: string, minMatches?: number): Map<number, number> {
    const index = this.text[field];
    const raw = tokenize(query);
    const terms: Array<{ raw: string; term: string }> = [];
    for (const r of raw) {
      const term = index.address ? normalizeAddressToken(r) : r;
      if (!terms.some((t) => t.term === term)) terms.push({ raw: r, term });
    }
    const lastRaw = raw[raw.length - 1];
    const need = Math.min(minMatches ?? (index.address ? Math.ceil(0.4 * terms.length) : terms.length), terms.length);
    // Per term: its own word id, and (address only) the vocabulary words it also matches inexactly.
    const exact = terms.map((t) => index.id(t.term));
    const inexact = terms.map(({ raw: r, term }, i) => {
      const ids = new Set<number>();
      if (!index.address) return ids;
      const isLast = i === terms.length - 1 || r === lastRaw;
      index.vocabulary.forEach((w, id) => {
        if (id === exact[i]) return;
        const prefix = isLast && lastRaw.length >= 2 && (w.startsWith(lastRaw) || w.startsWith(term));
        if (prefix || (LETTERS5.test(term) && LETTERS5.test(w) && Math.abs(w.length - term.length) <= 1 && osa(term, w) <= 1)) ids.add(id);
      });
      return ids;
    });
    const wanted = new Uint8Array(index.vocabulary.length);
    for (const id of exact) if (id >= 0) wanted[id] = 1;
    for (const ids of inexact) for (const id of ids) wanted[id] = 1;
    // First scan: document frequencies of every word the query can match.
    const df = new Map<number, number>();
    const lastRow = new Int32Array(index.vocabulary.length).fill(-1);
    for (let row = 0; row < this.n; row++) {
      for (let p = index.starts[row]; p < index.starts[row + 1]; p++) {
        const w = index.wordsOf[p];
        if (wanted[w] === 1 && lastRow[w] !== row) {
          lastRow[w] = row;
          df.set(w, (df.get(w) ?? 0) + 1);
        }
      }
    }
    // Second scan: term frequencies and scores.
    const bm25 = (w: number, tf: number, length: number): number => {
      const n = df.get(w)!;
      const idf = Math.log(1 + (this.n - n + 0.5) / (n + 0.5));
      return (idf * tf * (K1 + 1)) / (tf + K1 * (1 - B + (B * length) / index.avgLength));
    };
    const out = new Map<number, number>();
    const tf = new Map<number, number>();
    for (let row = 0; row < this.n; row++) {
      tf.clear();
      const start = index.starts[row];
      const end = index.starts[row + 1];
      for (let p = start; p < end; p++) {
        const w = index.wordsOf[p];
        if (wanted[w] === 1) tf.set(w, (tf.get(w) ?? 0) + 1);
      }
      if (tf.size === 0) continue;
      let matched = 0;
      let score = 0;
      for (let i = 0; i < terms.length; i++) {
        const f = exact[i] >= 0 ? tf.get(exact[i]) : undefined;
        if (f !== undefined) {
          matched++;
          score += bm25(exact[i], f, end - start);
          continue;
        }
        let best = -1;
        for (const [w, count] of tf) if (inexact[i].has(w)) best = Math.max(best, 0.5 * bm25(w, count, end - start));
        if (best >= 0) {
          matched++;
          score += best;
        }
      }
      if (matched >= need) out.set(row, score);
    }
    return out;
  }

  /** The top k of a search by score (ties by key), with every key whose score reaches the k-th. */
  private ranked(scores: Map<number, number>, top: number): Answer {
    const all = [...scores].sort((a, b) => b[1] - a[1] || (this.key[a[0]] < this.key[b[0]] ? -1 : 1));
    const keys = all.slice(0, top).map(([row]) => this.key[row]);
    const kth = all.length >= top ? all[top - 1][1] : -Infinity;
    const acceptable = all.filter(([, s]) => s >= kth - 1e-9 * Math.max(1, Math.abs(kth))).map(([row]) => this.key[row]);
    return { kind: 'keys', keys, acceptable };
  }

  prepare<F extends keyof FamilyParams>(family: F, params: FamilyParams[F]): () => Answer {
    const p = params;
    switch (family) {
      case 'Q1': {
        const q = p as FamilyParams['Q1'];
        return () =>
          this.keys(
            this.sortedDesc(
              this.rows(
                (r) =>
                  this.status[r] === q.status &&
                  this.price[r] !== null &&
                  this.price[r] >= q.priceMin &&
                  this.price[r] <= q.priceMax &&
                  this.beds[r] !== null &&
                  this.beds[r] >= q.bedsMin,
              ),
              this.price,
            ).slice(0, q.top),
          );
      }
      case 'Q2': {
        const q = p as FamilyParams['Q2'];
        return () => this.ranked(this.search('KeywordSearchText', q.terms), q.top);
      }
      case 'Q3': {
        const q = p as FamilyParams['Q3'];
        return () => this.ranked(this.search('RawAddressSearchText', q.terms, q.minMatches), q.top);
      }
      case 'Q4': {
        const q = p as FamilyParams['Q4'];
        return () =>
          this.keys(
            this.sortedDesc(
              this.rows((r) => this.point[r] !== null && distanceMeters(this.point[r], q) <= q.radiusM && this.status[r] === q.status),
              this.price,
            ).slice(0, q.top),
          );
      }
      case 'Q5': {
        const q = p as FamilyParams['Q5'];
        return () => {
          const byCity = new Map<string | null, { n: number; prices: number[] }>();
          for (let r = 0; r < this.n; r++) {
            if (this.status[r] !== q.status) continue;
            let g = byCity.get(this.city[r]);
            if (!g) byCity.set(this.city[r], (g = { n: 0, prices: [] }));
            g.n++;
            if (this.price[r] !== null) g.prices.push(this.price[r]!);
          }
          const groups: Group[] = [...byCity].map(([City, g]) => {
            g.prices.sort((a, b) => a - b);
            return { City, N: g.n, Median: nearestRank(g.prices, 50), P90: nearestRank(g.prices, 90) };
          });
          return { kind: 'groups', groups: sortGroups(groups) };
        };
      }
      case 'Q6': {
        const q = p as FamilyParams['Q6'];
        return () => {
          const scores = this.search('KeywordSearchText', q.terms);
          for (const row of scores.keys()) {
            const pt = this.point[row];
            const price = this.price[row];
            if (pt === null || distanceMeters(pt, q) > q.radiusM || price === null || price < q.priceMin || price > q.priceMax) scores.delete(row);
          }
          return this.ranked(scores, q.top);
        };
      }
      case 'Q7': {
        const q = p as FamilyParams['Q7'];
        return () => this.keys([...this.search('ListAgentSearchText', q.terms).keys()]);
      }
      case 'Q8': {
        const q = p as FamilyParams['Q8'];
        return () =>
          this.keys(
            this.sortedDesc(
              this.rows((r) => this.status[r] === q.status),
              this.modified,
            ).slice(q.skip, q.skip + q.top),
          );
      }
      case 'Q9': {
        const q = p as FamilyParams['Q9'];
        return () => ({
          kind: 'count',
          count: this.rows((r) => this.status[r] === q.status && this.propertyType[r] === q.propertyType && this.city[r] === q.city).length,
        });
      }
      case 'Q10': {
        const q = p as FamilyParams['Q10'];
        return () => this.keys(this.rows((r) => this.listingId[r] === q.listingId));
      }
      default:
        throw new Error(`unknown family ${String(family)}`);
    }
  }
}

export default (): Peer => new NaivePeer();
