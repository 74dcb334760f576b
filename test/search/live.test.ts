/**
 * Search over live data (src/search/live.ts): after every change, each view answers search.text
 * exactly as textbook BM25 over the live listings only (the oracle rebuilt from exactly those
 * records), ranked top-k equals sorting every match, and older views keep their answers.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { generateListings } from '../../src/generate/dataset.js';
import { evaluateSearch, idf, prepareSearch, type PreparedSearch, type SearchMatch } from '../../src/search/bm25.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../../src/schema/search-fields.js';
import { buildSearchIndexes, searchTextsOf, searchTokenSources, type SearchIndexes } from '../../src/search/indexes.js';
import { SearchView, type SearchChange } from '../../src/search/live.js';
import { buildFieldIndex } from '../../src/search/postings.js';
import { IMPACT_MIN_POSTINGS, rankByMaxScore, rankSearch, type RankOptions } from '../../src/search/ranked.js';
import { tokenize, tokenizeInto } from '../../src/search/tokenize.js';
import { NaiveSearch } from './oracle.js';

type Rec = Record<string, unknown>;
type Views = Record<SearchFieldName, SearchView>;

const indexRecords = (records: Rec[]): SearchIndexes => buildSearchIndexes(records.length, (row, field) => records[row][field]);

/** A field's tokens of a record, as buildSearchIndexes tokenizes them (not address-normalized). */
function tokensOfRecord(field: SearchFieldName, record: Rec, out: string[]): void {
  for (const text of searchTextsOf(field, 0, (_, f) => record[f], [])) tokenizeInto(text, out);
}

/**
 * One lineage of generations over a row space of records (every version ever appended). Ops of a
 * batch apply in order: an upsert appends the record and kills the key's live row (possibly one
 * appended earlier in the same batch); a removal kills the key's live row.
 */
class Lineage {
  readonly rows: Rec[];
  private dead: Uint32Array;
  views: Views;
  private readonly keyRow = new Map<string, number>();

  constructor(base: Rec[], indexes: SearchIndexes) {
    this.rows = [...base];
    this.dead = new Uint32Array((base.length + 31) >>> 5);
    this.views = Object.fromEntries(SEARCH_FIELDS.map((f) => [f, SearchView.of(indexes[f])])) as Views;
    base.forEach((r, row) => this.keyRow.set(r.ListingKey as string, row));
  }

  liveRows(): number[] {
    return [...this.keyRow.values()].sort((a, b) => a - b);
  }

  liveKeys(): string[] {
    return this.liveRows().map((row) => this.rows[row].ListingKey as string);
  }

  apply(ops: Array<{ upsert: Rec } | { remove: string }>): Views {
    const from = this.rows.length;
    const removed: number[] = [];
    const pending: Rec[] = [];
    const killed: number[] = [];
    for (const op of ops) {
      const key = 'upsert' in op ? (op.upsert.ListingKey as string) : op.remove;
      const old = this.keyRow.get(key);
      if (old !== undefined) {
        killed.push(old);
        removed.push(old);
        this.keyRow.delete(key);
      }
      if ('upsert' in op) {
        this.keyRow.set(key, from + pending.length);
        pending.push(op.upsert);
      }
    }
    this.rows.push(...pending);
    const to = this.rows.length;
    // a new bitmap per generation: the previous one stays as its views saw it
    const dead = new Uint32Array((to + 31) >>> 5);
    dead.set(this.dead);
    for (const row of killed) dead[row >>> 5] |= 1 << (row & 31);
    this.dead = dead;
    const next = {} as Views;
    for (const f of SEARCH_FIELDS) {
      const change: SearchChange = { from, to, dead, removed, tokensOf: (row, out) => tokensOfRecord(f, this.rows[row], out) };
      next[f] = this.views[f].next(change);
    }
    this.views = next;
    return next;
  }
}

const asMap = (m: SearchMatch): Map<number, number> => new Map([...m.rows].map((r, i) => [r, m.scores[i]]));

/** Every match sorted best first (ties by tie rank), then filtered and cut: what rankSearch must return, bit for bit. */
function sortedTopK(all: SearchMatch, k: number, tieRank: ArrayLike<number>, accept?: (row: number) => boolean): Array<[number, number]> {
  return [...all.rows]
    .map((row, i) => [row, all.scores[i]] as [number, number])
    .filter(([row]) => !accept || accept(row))
    .sort((a, b) => b[1] - a[1] || tieRank[a[0]] - tieRank[b[0]])
    .slice(0, k);
}

const TIE_RANK = Uint32Array.from({ length: 100_000 }, (_, i) => (i * 7919) % 100_003); // unrelated to row order, distinct

interface Coverage {
  tailOnly: number;
  allDead: number;
  split: number;
  tailExpansions: number;
  checks: number;
}

/**
 * Checks one query on one view against the oracle over the live records, and rankSearch against
 * sorting every match (several k, with and without accept, row and tie-rank ties).
 */
function checkQuery(view: SearchView, oracle: NaiveSearch, live: number[], text: string, min: number | undefined, cov: Coverage): void {
  const label = `'${text}' min ${String(min)} (rows ${view.rowCount}, live ${view.liveCount})`;
  const prepared = prepareSearch(view, text, min);
  const got = evaluateSearch(view, prepared);
  const want = oracle.search(text, min);
  const wantRows = [...want.keys()].map((i) => live[i]);
  expect([...got.rows], label).toEqual(wantRows);
  [...want.values()].forEach((score, j) => expect(Math.abs(got.scores[j] - score), `${label} row ${got.rows[j]}`).toBeLessThan(1e-9));
  cov.checks++;
  for (const t of prepared.terms) {
    if (t.exact >= 0) {
      expect(view.liveDocFreq(t.exact), `${label} df of ${t.term}`).toBe(oracle.df(t.term));
      if (t.exact >= view.base.terms.size && got.rows.length > 0) cov.tailOnly++;
      if (view.liveDocFreq(t.exact) === 0) cov.allDead++;
    }
    if (t.inexact.some((id) => id >= view.base.terms.size)) cov.tailExpansions++;
  }
  const accept = (row: number): boolean => row % 3 !== 1;
  for (const k of [1, 3, 10]) {
    for (const options of [{}, { accept }, { tieRank: TIE_RANK }, { accept, tieRank: TIE_RANK }] as RankOptions[]) {
      const ranked = rankSearch(view, prepared, k, options);
      const expected = sortedTopK(got, k, options.tieRank ?? Uint32Array.from({ length: view.rowCount }, (_, i) => i), options.accept);
      expect([...ranked.rows], `${label} top ${k}`).toEqual(expected.map(([row]) => row));
      expect([...ranked.scores], `${label} top ${k}`).toEqual(expected.map(([, s]) => s));
    }
    if (rankByMaxScore(view, prepared, k, undefined, undefined)) cov.split++;
  }
}

// Words the generated data never holds: they enter through upserts and new listings.
const NOVEL = ['zephyrine', 'quillmore', 'brambleton', 'xylandra', 'corvantis', 'plumbrook'];
const cap = (w: string): string => w[0].toUpperCase() + w.slice(1);
const SUFFIXES = [
  ['Parkway', 'Pkwy'],
  ['Street', 'St'],
  ['Avenue', 'Ave'],
];
const DIRS = [
  ['North', 'N'],
  ['Southwest', 'SW'],
  ['East', 'E'],
];

/** A new version of a listing: the groups of fields named by the bits of `alter` changed, with novel word w. */
function altered(r: Rec, w: number, alter: number): Rec {
  const word = NOVEL[w];
  const out: Rec = { ...r };
  if (alter & 1) out.PublicRemarks = `${String(r.PublicRemarks ?? '')} ${word} garden ${word}`;
  if (alter & 2) {
    const [suffix, abbr] = SUFFIXES[w % SUFFIXES.length];
    const [dir, dirAbbr] = DIRS[w % DIRS.length];
    Object.assign(out, {
      StreetNumber: String(100 + w),
      StreetDirPrefix: dirAbbr,
      StreetName: cap(word),
      StreetSuffix: suffix,
      UnparsedAddress: `${100 + w} ${w % 2 ? dir : dirAbbr} ${cap(word)} ${w % 2 ? abbr : suffix}`,
    });
  }
  if (alter & 4) {
    Object.assign(out, {
      ListAgentFullName: `${cap(word)} Okafor`,
      BuyerAgentFullName: '',
      BuyerAgentFirstName: cap(word),
      BuyerAgentLastName: 'Vance',
      ListOfficeName: `${cap(word)} Realty`,
      BuyerOfficeName: `${cap(NOVEL[(w + 1) % NOVEL.length])} Homes`,
    });
  }
  // short remarks and no co-agents: the average length falls
  if (alter & 8) Object.assign(out, { PublicRemarks: word, CoListAgentFullName: undefined, CoListOfficeName: undefined });
  return out;
}

/** Query texts per field for one generation: fixed, novel, and taken from live and dead records. */
function queriesOf(lineage: Lineage, dead: Rec[]): Record<SearchFieldName, Array<[string, number?]>> {
  const live = lineage.liveRows();
  const someLive = live.length ? lineage.rows[live[(live.length * 5) >>> 3]] : {};
  const lastDead = dead.slice(-3);
  const n = NOVEL.map(cap);
  const address = (r: Rec): string =>
    [r.StreetNumber, r.StreetName, r.StreetSuffix, r.City]
      .filter((v) => v !== undefined)
      .map(String)
      .join(' ');
  return {
    KeywordSearchText: [
      ['pool'],
      ['pool granite'],
      ['granite pool spa', 2],
      [NOVEL[0]],
      [`${NOVEL[1]} garden`],
      [`${NOVEL[2]} ${NOVEL[3]} pool`, 1],
      [NOVEL[4]],
      ...lastDead.map((r): [string] => [String(r.ListingId)]),
    ],
    RawAddressSearchText: [
      [`${n[0]} Parkway`],
      [`102 E ${n[2]} Avenue`],
      [`North ${n[1]} St`, 2],
      ['bramb'],
      ['101 quil'],
      ['plumbrok'],
      ['zephyrnie parkway'],
      ['xylandr'],
      [`corvantis ave`, 1],
      ['sw 7th ave'],
      [address(someLive)],
      [address(someLive), 100],
      ...lastDead.map((r): [string, number] => [address(r), 2]),
    ],
    ListAgentSearchText: [
      [`${n[0]} Okafor`],
      ['okafor'],
      [String(someLive.ListAgentFullName ?? 'smith')],
      ...lastDead.map((r): [string] => [String(r.ListAgentFullName ?? 'jones')]),
    ],
    BuyerAgentSearchText: [[`${n[2]} vance`], ['vance'], [`${n[3]} vance smith`, 2]],
    ListOfficeSearchText: [['realty'], [`${n[1]} realty`], [`${n[4]} realty group`, 1]],
    BuyerOfficeSearchText: [['homes'], [`${n[2]} homes`], [`${n[5]} homes`]],
  };
}

describe('SearchView over changes (random upserts, additions, removals; oracle over the live records)', () => {
  const all = [...generateListings({ listings: 420, seed: 'live-search' })].map((l) => l.property);
  const base = all.slice(0, 300);
  const spare = all.slice(300); // new listings
  const indexes = indexRecords(base);

  const op = fc.oneof(
    fc.record({ kind: fc.constant('upsert' as const), pick: fc.nat(), word: fc.nat({ max: NOVEL.length - 1 }), alter: fc.integer({ min: 1, max: 15 }) }),
    fc.record({ kind: fc.constant('supersede' as const), pick: fc.nat(), word: fc.nat({ max: NOVEL.length - 1 }), alter: fc.integer({ min: 1, max: 15 }) }),
    fc.record({ kind: fc.constant('add' as const), word: fc.nat({ max: NOVEL.length - 1 }), alter: fc.nat({ max: 15 }) }),
    fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }),
  );
  const run = fc.array(fc.array(op, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 5 });

  it('answers exactly as textbook BM25 over the live listings after every change; older views keep their answers', () => {
    const cov: Coverage = { tailOnly: 0, allDead: 0, split: 0, tailExpansions: 0, checks: 0 };
    fc.assert(
      fc.property(run, (batches) => {
        const lineage = new Lineage(base, indexes);
        let spareAt = 0;
        const dead: Rec[] = [];
        const history: Array<{ views: Views; field: SearchFieldName; prepared: PreparedSearch; match: SearchMatch; top: Uint32Array }> = [];
        for (const batch of batches) {
          const ops: Array<{ upsert: Rec } | { remove: string }> = [];
          const keys = lineage.liveKeys();
          const latest = new Map<string, Rec>(lineage.liveRows().map((row) => [lineage.rows[row].ListingKey as string, lineage.rows[row]]));
          for (const o of batch) {
            if (o.kind === 'add') {
              if (spareAt < spare.length) ops.push({ upsert: altered(spare[spareAt++], o.word, o.alter) });
              continue;
            }
            if (keys.length === 0) continue;
            const key = keys[o.pick % keys.length];
            const now = latest.get(key);
            if (o.kind === 'remove') {
              if (now) dead.push(now);
              ops.push({ remove: key });
              latest.delete(key);
              continue;
            }
            const from = now ?? base.find((r) => r.ListingKey === key)!;
            const first = altered(from, o.word, o.alter);
            const last = o.kind === 'supersede' ? altered(first, (o.word + 1) % NOVEL.length, o.alter ^ 8) : first;
            ops.push({ upsert: first });
            if (last !== first) ops.push({ upsert: last });
            latest.set(key, last);
            if (now) dead.push(now);
          }
          const views = lineage.apply(ops);
          const live = lineage.liveRows();
          const liveRecords = live.map((row) => lineage.rows[row]);
          const queries = queriesOf(lineage, dead);
          for (const field of SEARCH_FIELDS) {
            const view = views[field];
            const oracle = new NaiveSearch(liveRecords, field);
            expect(view.liveCount).toBe(live.length);
            expect(view.rowCount).toBe(lineage.rows.length);
            if (live.length > 0) expect(view.avgLength).toBe(oracle.avg);
            for (const row of [0, live[0] ?? 0, view.rowCount - 1]) expect(view.isDead(row)).toBe(!live.includes(row));
            for (const [text, min] of queries[field]) checkQuery(view, oracle, live, text, min, cov);
            const [text, min] = queries[field][queries[field].length - 1];
            const prepared = prepareSearch(view, text, min);
            history.push({ views, field, prepared, match: evaluateSearch(view, prepared), top: rankSearch(view, prepared, 3).rows });
          }
        }
        // Every older view answers exactly as it did, after all the newer views were made.
        for (const h of history) {
          // prefix and fuzzy expansions stay within the vocabulary of the view prepared on
          for (const t of h.prepared.terms) expect(t.inexact.every((id) => id < h.views[h.field].termCount)).toBe(true);
          const again = evaluateSearch(h.views[h.field], h.prepared);
          expect([...again.rows]).toEqual([...h.match.rows]);
          expect([...again.scores]).toEqual([...h.match.scores]);
          expect([...rankSearch(h.views[h.field], h.prepared, 3).rows]).toEqual([...h.top]);
        }
      }),
      { seed: 20261122, numRuns: 8, endOnFailure: true },
    );
    // the cases the brief asks for were reached
    expect(cov.tailOnly, 'matches of terms only appended rows hold').toBeGreaterThan(10);
    expect(cov.allDead, 'terms every holder of which is dead').toBeGreaterThan(3);
    expect(cov.tailExpansions, 'prefix and fuzzy expansions to tail terms').toBeGreaterThan(10);
    expect(cov.split, 'ranked through the MaxScore split').toBeGreaterThan(10);
  }, 120_000);

  it('a FieldIndex stands for its generation-0 view (the call shape the engine still uses)', () => {
    for (const field of SEARCH_FIELDS) {
      const view = SearchView.of(indexes[field]);
      expect(view.liveCount).toBe(base.length);
      expect(view.avgLength).toBe(indexes[field].avgLength);
      for (const text of ['pool granite', 'maple street', 'realty', 'smith', 'sw 7th av']) {
        let viaIndex: SearchMatch;
        try {
          viaIndex = evaluateSearch(indexes[field], prepareSearch(indexes[field], text));
        } catch {
          continue;
        }
        const viaView = evaluateSearch(view, prepareSearch(view, text));
        expect(asMap(viaView)).toEqual(asMap(viaIndex));
      }
    }
  });
});

describe('SearchView on a larger base (impact-ordered walk under changes)', () => {
  const all = [...generateListings({ listings: 2700, seed: 'live-rank' })].map((l) => l.property);
  const base = all.slice(0, 2600);
  const indexes = indexRecords(base);

  it('ranked top-k stays exact as listings are removed and long and short versions appended', () => {
    const field = 'KeywordSearchText';
    expect(indexes[field].offsets[indexes[field].terms.id('granite') + 1] - indexes[field].offsets[indexes[field].terms.id('granite')]).toBeGreaterThanOrEqual(
      IMPACT_MIN_POSTINGS,
    );
    const lineage = new Lineage(base, indexes);
    const rng = fc.sample(fc.array(fc.nat(), { minLength: 400, maxLength: 400 }), { seed: 7, numRuns: 1 })[0];
    let at = 0;
    const queries = ['granite', 'granite room', 'room granite pool', 'granite zephyrine'];
    const checkAll = (): void => {
      const view = lineage.views[field];
      const live = lineage.liveRows();
      const oracle = new NaiveSearch(
        live.map((row) => lineage.rows[row]),
        field,
      );
      for (const text of queries) {
        const prepared = prepareSearch(view, text);
        const all = evaluateSearch(view, prepared);
        const want = oracle.search(text);
        expect([...all.rows]).toEqual([...want.keys()].map((i) => live[i]));
        [...want.values()].forEach((s, j) => expect(Math.abs(all.scores[j] - s)).toBeLessThan(1e-9));
        for (const k of [1, 10, 40]) {
          const got = rankSearch(view, prepared, k, { tieRank: TIE_RANK });
          const expected = sortedTopK(all, k, TIE_RANK);
          expect([...got.rows], `${text} top ${k}`).toEqual(expected.map(([row]) => row));
          expect([...got.scores]).toEqual(expected.map(([, s]) => s));
        }
      }
    };
    checkAll();
    for (let batch = 0; batch < 6; batch++) {
      const keys = lineage.liveKeys();
      const ops: Array<{ upsert: Rec } | { remove: string }> = [];
      // remove the current top of 'granite' (the walk's first postings) and some at random
      const view = lineage.views[field];
      for (const row of rankSearch(view, prepareSearch(view, 'granite'), 5).rows) ops.push({ remove: lineage.rows[row].ListingKey as string });
      for (let i = 0; i < 20; i++) ops.push({ remove: keys[rng[at++] % keys.length] });
      for (let i = 0; i < 15; i++) {
        const r = lineage.rows[lineage.liveRows()[rng[at++] % 2000]];
        // alternately much longer (average up) and very short (average down) versions
        const remarks = batch % 2 === 0 ? `${String(r.PublicRemarks)} ${String(r.PublicRemarks)} granite zephyrine` : 'granite room zephyrine';
        ops.push({ upsert: { ...r, PublicRemarks: remarks } });
      }
      if (batch === 2) for (const r of all.slice(2600)) ops.push({ upsert: r });
      lineage.apply(ops);
      checkAll();
    }
  }, 60_000);
});

describe('the early-stop bound when the average length rose', () => {
  /**
   * Base: 2,100 short listings holding 'zeta' once (3 tokens) and 5 long ones holding it three
   * times (63 tokens); average ≈ 3.1. In base statistics the short ones score higher, so the impact
   * order walks them first and the long ones last. Then 2,000 listings of 200 tokens without 'zeta'
   * are appended: the average rises to ≈ 99, N to 4,105, and now each long listing outscores every
   * short one. A walk bounding a base posting by its base score times the idf ratio alone stops
   * right after filling the heap with short listings and misses all five long ones; the bound must
   * also grow by A'/A. Checked by hand: with `Math.max(1, view.avgLength / base.avgLength)` replaced
   * by 1 in ranked.ts viewTerm, this test fails (rankSearch returns short listings).
   */
  it('rankSearch returns the exact top k', () => {
    const filler = (n: number, from = 0): string => Array.from({ length: n }, (_, i) => `w${(from + i) % 50}`).join(' ');
    const texts: string[] = [];
    for (let i = 0; i < 2100; i++) texts.push(`zeta ${filler(2, i)}`);
    for (let i = 0; i < 5; i++) texts.push(`zeta zeta zeta ${filler(60, i)}`);
    const index = buildFieldIndex(texts.length, (row, out) => out.push(texts[row]), { address: false });
    const g0 = SearchView.of(index);
    const appended = Array.from({ length: 2000 }, (_, i) => filler(200, i));
    const rows = [...texts, ...appended];
    const tokensOf = (row: number, out: string[]): void => {
      tokenizeInto(rows[row], out);
    };
    const g1 = g0.next({ from: texts.length, to: rows.length, dead: new Uint32Array((rows.length + 31) >>> 5), removed: [], tokensOf });
    expect(g1.avgLength / g0.avgLength).toBeGreaterThan(25);

    const longRows = [2100, 2101, 2102, 2103, 2104];
    for (const k of [1, 5, 6]) {
      const all = evaluateSearch(g1, prepareSearch(g1, 'zeta'));
      const want = sortedTopK(
        all,
        k,
        Uint32Array.from({ length: rows.length }, (_, i) => i),
      );
      const got = rankSearch(g1, prepareSearch(g1, 'zeta'), k);
      expect([...got.rows]).toEqual(want.map(([row]) => row));
      expect([...got.scores]).toEqual(want.map(([, s]) => s));
      expect([...got.rows].slice(0, 5)).toEqual(longRows.slice(0, k));
    }

    // Why the factor matters here: a long listing's base score, scaled by the idf ratio only, is
    // below the k-th best view score (a short listing's) while its view score is above it.
    const base0 = asMap(evaluateSearch(g0, prepareSearch(g0, 'zeta')));
    const view1 = asMap(evaluateSearch(g1, prepareSearch(g1, 'zeta')));
    const id = g1.termId('zeta');
    const idfRatio = idf(g1.liveCount, g1.liveDocFreq(id)) / idf(g0.liveCount, g0.liveDocFreq(id));
    expect(base0.get(0)!).toBeGreaterThan(base0.get(2100)!); // impact order: short first
    expect(base0.get(2100)! * idfRatio).toBeLessThan(view1.get(0)!); // naive bound says stop
    expect(view1.get(2100)!).toBeGreaterThan(view1.get(0)!); // yet the long one is better
  });
});

describe('SearchView bookkeeping', () => {
  const texts = ['alpha beta', 'beta gamma gamma', 'delta'];
  const index = buildFieldIndex(texts.length, (row, out) => out.push(texts[row]), { address: false });

  it('counts live rows, live document frequencies and lengths; older views keep theirs', () => {
    const g0 = SearchView.of(index);
    const rows = [...texts, 'beta epsilon', 'epsilon epsilon zeta'];
    const tokensOf = (row: number, out: string[]): void => {
      tokenizeInto(rows[row], out);
    };
    // upsert of row 1 as row 3; row 4 appended and superseded in the same batch (dead already)
    const dead1 = new Uint32Array(1);
    dead1[0] = (1 << 1) | (1 << 4);
    const g1 = g0.next({ from: 3, to: 5, dead: dead1, removed: [1, 4], tokensOf });
    expect([g1.rowCount, g1.liveCount, g1.avgLength]).toEqual([5, 3, (2 + 1 + 2) / 3]);
    expect([g0.rowCount, g0.liveCount, g0.avgLength]).toEqual([3, 3, 6 / 3]);
    expect(g1.liveDocFreq(g1.termId('beta'))).toBe(2); // rows 0 and 3
    expect(g1.postingCount(g1.termId('beta'))).toBe(3); // rows 0, 1 (dead) and 3
    expect(g1.liveDocFreq(g1.termId('gamma'))).toBe(0);
    expect(g1.liveDocFreq(g1.termId('zeta'))).toBe(0); // only in a row dead on arrival
    expect(g0.termId('epsilon')).toBe(-1);
    expect(g1.termId('epsilon')).toBeGreaterThanOrEqual(index.terms.size);
    expect(g0.liveDocFreq(g0.termId('gamma'))).toBe(1);
    expect([...evaluateSearch(g1, prepareSearch(g1, 'beta')).rows]).toEqual([0, 3]);
    expect([...evaluateSearch(g0, prepareSearch(g0, 'beta')).rows]).toEqual([0, 1]);

    // a removal-only change from the newest view; then everything removed
    const dead2 = dead1.slice();
    dead2[0] |= 1;
    const g2 = g1.next({ from: 5, to: 5, dead: dead2, removed: [0], tokensOf });
    expect(g2.liveDocFreq(g2.termId('beta'))).toBe(1);
    const dead3 = Uint32Array.of(0b11111);
    const g3 = g2.next({ from: 5, to: 5, dead: dead3, removed: [2, 3], tokensOf });
    expect([g3.liveCount, g3.avgLength]).toEqual([0, 0]);
    expect(evaluateSearch(g3, prepareSearch(g3, 'beta epsilon', 1)).rows).toHaveLength(0);
    expect(rankSearch(g3, prepareSearch(g3, 'beta'), 5).rows).toHaveLength(0);
    expect([...evaluateSearch(g1, prepareSearch(g1, 'beta')).rows]).toEqual([0, 3]);
  });

  it('counts dead holders when asked, in any order of views and from branches, as the live rows say', () => {
    // 'common' in every row (postings far more than the rows removed: counted up the chain of
    // removals), 'rare' in a few (fewer postings than rows removed: counted from its postings)
    const base = Array.from({ length: 400 }, (_, r) => `common w${r % 7}${r % 50 === 0 ? ' rare' : ''}`);
    const big = buildFieldIndex(base.length, (row, out) => out.push(base[row]), { address: false });
    const tokensOf = (row: number, out: string[]): void => {
      tokenizeInto(base[row], out);
    };
    const views: Array<{ view: SearchView; dead: Set<number> }> = [{ view: SearchView.of(big), dead: new Set() }];
    const removeFrom = (at: number, rows: number[]): { view: SearchView; dead: Set<number> } => {
      const { view, dead } = views[at];
      const next = new Set([...dead, ...rows]);
      const bits = new Uint32Array((base.length + 31) >>> 5);
      for (const r of next) bits[r >>> 5] |= 1 << (r & 31);
      return { view: view.next({ from: base.length, to: base.length, dead: bits, removed: rows, tokensOf }), dead: next };
    };
    // 55 changes removing rows 0, 7, 14, ..., 378 (rows 0 and 350 hold 'rare')
    for (let k = 0; k < 55; k++) views.push(removeFrom(views.length - 1, [k * 7]));
    const expected = (dead: Set<number>, term: string): number => base.filter((t, r) => !dead.has(r) && t.split(' ').includes(term)).length;
    const check = (at: { view: SearchView; dead: Set<number> }, term: string): void => {
      expect(at.view.liveDocFreq(at.view.termId(term))).toBe(expected(at.dead, term));
    };
    // newest first, then older ones (counts kept by newer views are not theirs), then in between
    for (const i of [55, 3, 30, 54, 0, 31, 45]) for (const term of ['common', 'rare', 'w3']) check(views[i], term);
    // a branch: a removal from an older view, after its descendants counted
    const branch = removeFrom(20, [399, 398]);
    for (const term of ['common', 'rare', 'w3']) check(branch, term);
    check(views[21], 'common');
  });

  it('rejects a change that does not fit the view', () => {
    const g0 = SearchView.of(index);
    const tokensOf = (row: number, out: string[]): void => {
      tokenizeInto(['x', 'y', 'z', 'w'][row - 3] ?? texts[row], out);
    };
    const none = new Uint32Array(1);
    expect(() => g0.next({ from: 2, to: 4, dead: none, removed: [], tokensOf })).toThrow(RangeError);
    expect(() => g0.next({ from: 3, to: 4, dead: none, removed: [0], tokensOf })).toThrow(RangeError); // not marked dead
    const g1 = g0.next({ from: 3, to: 4, dead: none, removed: [], tokensOf });
    // only the newest view of a lineage appends; a removal-only change may start anywhere
    expect(() => g0.next({ from: 3, to: 4, dead: none, removed: [], tokensOf })).toThrow(/newest/);
    expect(g0.next({ from: 3, to: 3, dead: Uint32Array.of(1), removed: [0], tokensOf }).liveCount).toBe(2);
    expect(g1.next({ from: 4, to: 5, dead: none, removed: [], tokensOf }).rowCount).toBe(5);
  });

  it('gives a term new to the lineage its id only once a change has added it (a refused change leaves no trace)', () => {
    const g0 = SearchView.of(index);
    const rows = [...texts, 'omega alpha', 'sigma omega'];
    const tokensOf = (row: number, out: string[]): void => {
      tokenizeInto(rows[row], out);
    };
    const none = new Uint32Array(1);
    // row 3 brings 'omega', new to the lineage, then the change is refused (row 0 is listed as removed but not dead)
    expect(() => g0.next({ from: 3, to: 4, dead: none, removed: [0], tokensOf })).toThrow(RangeError);
    // the same rows again, the second first: 'sigma' is the first new term now, 'omega' the second
    rows[3] = 'sigma omega';
    rows[4] = 'omega alpha';
    const g1 = g0.next({ from: 3, to: 5, dead: none, removed: [], tokensOf });
    expect(g1.termOf(g1.termId('sigma'))).toBe('sigma');
    expect(g1.termOf(g1.termId('omega'))).toBe('omega');
    expect(g1.liveDocFreq(g1.termId('sigma'))).toBe(1);
    expect(g1.liveDocFreq(g1.termId('omega'))).toBe(2);
    expect([...rankSearch(g1, prepareSearch(g1, 'sigma'), 5).rows]).toEqual([3]);
    expect([...rankSearch(g1, prepareSearch(g1, 'omega'), 5).rows].sort()).toEqual([3, 4]);
  });

  it('grows the shared scratch arrays past the base row count', () => {
    let view = SearchView.of(index);
    const rows = [...texts];
    for (let batch = 0; batch < 5; batch++) {
      const from = rows.length;
      for (let i = 0; i < 10; i++) rows.push(`beta b${batch} ${i % 2 ? 'gamma' : 'delta'}`);
      const tokensOf = (row: number, out: string[]): void => {
        tokenizeInto(rows[row], out);
      };
      view = view.next({ from, to: rows.length, dead: new Uint32Array((rows.length + 31) >>> 5), removed: [], tokensOf });
      // a threshold search goes through the scratch arrays
      const m = evaluateSearch(view, prepareSearch(view, 'gamma delta', 1));
      expect(m.rows.length).toBe(rows.filter((t) => /gamma|delta/.test(t)).length);
      expect(m.rows[m.rows.length - 1]).toBe(rows.length - 1);
    }
  });
});

describe('searchTokenSources', () => {
  it('emits the tokens buildSearchIndexes indexes, for a loaded table and a generation appended to it', async () => {
    const { loadRecords } = await import('../../src/store/load.js');
    const { loadBatch } = await import('../../src/store/append/batch.js');
    const { TableAppender } = await import('../../src/store/append/table-appender.js');
    const records = [...generateListings({ listings: 240, seed: 'token-sources' })].map((l) => l.property);
    records[0] = { ...records[0], ListAgentFullName: '', ListAgentFirstName: 'Zoë', ListAgentLastName: "O'Brien" };
    const base = loadRecords({ Property: records.slice(0, 200) }).Property;
    const later = records
      .slice(200)
      .map((r, i) => (i % 2 ? r : { ...r, PublicRemarks: `${String(r.PublicRemarks)} Brand-new roof`, ListAgentFullName: undefined }));
    const table = new TableAppender(base).append(loadBatch('Property', later, { now: base.clock }));
    const all = [...records.slice(0, 200), ...later];
    expect(table.rowCount).toBe(all.length);
    const sources = searchTokenSources(table);
    for (const field of SEARCH_FIELDS) {
      for (let row = 0; row < all.length; row++) {
        const got: string[] = [];
        sources[field](row, got);
        const want: string[] = [];
        tokensOfRecord(field, all[row], want);
        expect(got, `${field} row ${row}`).toEqual(want);
      }
    }
    expect(tokenize('Brand-new roof')).toEqual(['brand', 'new', 'roof']);
  });
});
