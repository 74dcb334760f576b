/**
 * A deliberately plain reference for search.text (SERVICE.md §4): textbook BM25 over arrays of
 * tokens, brute-force prefix and edit-distance matching. No postings, no scratch arrays, no tricks.
 */
import { SEARCH_FIELD_SOURCES, type SearchFieldName } from '../../src/schema/search-fields.js';
import { normalizeAddressToken, tokenize } from '../../src/search/tokenize.js';

type Rec = Record<string, unknown>;

export function fieldText(record: Rec, field: SearchFieldName): string[] {
  const parts: string[] = [];
  const add = (v: unknown): void => {
    if (v === null || v === undefined) return;
    if (Array.isArray(v)) v.forEach(add);
    else parts.push(String(v));
  };
  for (const s of SEARCH_FIELD_SOURCES[field]) {
    if (typeof s === 'string') add(record[s]);
    else if (record[s.fullName]) add(record[s.fullName]);
    else {
      add(record[s.firstName]);
      add(record[s.lastName]);
    }
  }
  return parts;
}

/** Full Damerau (optimal string alignment) distance by dynamic programming. */
export function osa(a: string, b: string): number {
  const d: number[][] = [];
  for (let i = 0; i <= a.length; i++) d.push(Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

export class NaiveSearch {
  readonly docs: string[][];
  readonly N: number;
  readonly avg: number;
  readonly address: boolean;

  constructor(records: Rec[], field: SearchFieldName) {
    this.address = field === 'RawAddressSearchText';
    this.docs = records.map((r) =>
      fieldText(r, field)
        .flatMap((t) => tokenize(t))
        .map((t) => (this.address ? normalizeAddressToken(t) : t)),
    );
    this.N = records.length;
    this.avg = this.docs.reduce((s, d) => s + d.length, 0) / this.N;
  }

  private readonly dfs = new Map<string, number>();
  df(term: string): number {
    let n = this.dfs.get(term);
    if (n === undefined) {
      n = this.docs.filter((d) => d.includes(term)).length;
      this.dfs.set(term, n);
    }
    return n;
  }

  bm25(term: string, doc: string[]): number {
    const tf = doc.filter((t) => t === term).length;
    if (tf === 0) return 0;
    const n = this.df(term);
    const idf = Math.log(1 + (this.N - n + 0.5) / (n + 0.5));
    return (idf * (tf * (1.2 + 1))) / (tf + 1.2 * (1 - 0.75 + (0.75 * doc.length) / this.avg));
  }

  /** Map row -> score for rows that satisfy search.text(field, text, minMatches). */
  search(text: string, minMatches?: number): Map<number, number> {
    const raw = tokenize(text);
    const terms: Array<{ raw: string; term: string }> = [];
    for (const r of raw) {
      const term = this.address ? normalizeAddressToken(r) : r;
      if (!terms.some((t) => t.term === term)) terms.push({ raw: r, term });
    }
    const lastRaw = raw[raw.length - 1];
    const need = Math.min(minMatches ?? (this.address ? Math.ceil(0.4 * terms.length) : terms.length), terms.length);
    const out = new Map<number, number>();
    this.docs.forEach((doc, row) => {
      let matched = 0;
      let score = 0;
      terms.forEach(({ raw: r, term }, i) => {
        if (doc.includes(term)) {
          matched++;
          score += this.bm25(term, doc);
          return;
        }
        if (!this.address) return;
        let best = -1;
        const isLast = i === terms.length - 1 || r === lastRaw;
        for (const w of new Set(doc)) {
          const prefix = isLast && lastRaw.length >= 2 && (w.startsWith(lastRaw) || w.startsWith(term));
          const fuzzy = /^\p{L}{5,}$/u.test(term) && /^\p{L}{5,}$/u.test(w) && osa(term, w) <= 1;
          if (prefix || fuzzy) best = Math.max(best, 0.5 * this.bm25(w, doc));
        }
        if (best >= 0) {
          matched++;
          score += best;
        }
      });
      if (matched >= need) out.set(row, score);
    });
    return out;
  }
}
