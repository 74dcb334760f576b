/**
 * search.text in PostgreSQL (SERVICE.md §4), with the in-memory engine's matching and its scores
 * bit for bit. The query side (terms, min_matches, which prefixes and one-edit look-ups) is
 * src/search/bm25.ts's `searchQuery`; the term statistics come from `#terms` and `#search` in one
 * round trip; idf and every term's weight are computed here with bm25.ts's functions and reach the
 * statement as bind parameters; the statement computes per row only what depends on the row (term
 * frequencies in `S#tokens`, `S#length`), with the operations in the order of bm25.ts's termScore,
 * so the float8 results are the same IEEE doubles the in-memory engine computes.
 *
 * Row SQL: the test is an expression over the row's `S#tokens`; the score is one too, or a join.
 * - The test: `S#tokens @> words` when every term must match exactly, `&&` when one term is
 *   enough, else `&&` and the count of terms whose words the row holds (`tokens && term's words`
 *   per term) against min_matches. The GIN index on `S#tokens` answers the `@>` / `&&` part.
 * - The score, only where the statement reads it (relevance). When every word is a query term's
 *   exact word (every field but the address one, and address queries with no expansion): one
 *   termScore per term, each tf read once by array_positions, summed in query-term order; a term
 *   the row lacks scores 0, and adding 0 leaves a double as it is. Otherwise (prefix and one-edit
 *   words at INEXACT_WEIGHT) a subquery grouped by listing key joined to the row: it joins each
 *   matching row's tokens with the words, keeps per term the exact word's score if the row holds
 *   it, else the best inexact one, and adds them in query-term order as the in-memory loop does
 *   (see `scoreSql`). Measured at 100k listings (15k rows matching two keywords):
 *   array_positions over the row's ~130 keyword tokens is most of the cost, so each tf is read
 *   once; counting the row's tokens costs about 1.5 to 2 times as much again, so the exact case,
 *   where most large results are, does without it.
 *
 * One-edit look-ups. A word within one edit of a query word w of L characters is at most one
 * character longer or shorter and shares w's first ⌊L/2⌋ characters or its last L − ⌊L/2⌋ − 1 (an
 * edit at or after position ⌊L/2⌋ leaves the first half, one before it the rest): two range scans,
 * of `#terms`' primary key and of its index on (field, reverse(term)), find them, and the final
 * test is lexicon.ts's own (isFuzzyCandidate, osaDistanceAtMostOne). Measured at 100k listings
 * (20k address terms), six words: 1.4 ms, against 27 ms for a scan of the field's terms with the
 * same test and 14-19 ms for fuzzystrmatch's levenshtein_less_equal(term, w, 2) on each (which
 * also needs the extension and refuses words over 255 characters).
 */
import type { SearchNode } from '../plan/plan.js';
import { BM25_B, BM25_K1, INEXACT_WEIGHT, normOf, searchQuery, weightOf, type SearchQuery } from '../search/bm25.js';
import { isFuzzyCandidate, osaDistanceAtMostOne } from '../search/lexicon.js';
import type { SearchFieldName } from '../schema/search-fields.js';
import { lengthColumn, quote, tokensColumn, type Layout } from './layout.js';
import type { Params, Queryable } from './sql.js';

export interface SearchSql {
  /** boolean SQL, never NULL: the call is true for the row */
  readonly test: string;
  /**
   * float8 SQL: the call's BM25 score for the row (used only where test is true). Reading it adds
   * its parameters to `params` (the first time only), so read it only for a statement that uses it.
   */
  readonly score: string;
  /**
   * What the score needs in the statement's FROM after the row's table: '' until the score is read,
   * and '' for a score computed from the row alone; read it after the score.
   */
  readonly join: string;
}

const ADDRESS_FIELD: SearchFieldName = 'RawAddressSearchText';
/** Term frequencies are 16-bit in the in-memory postings. */
const MAX_TF = 0xffff;
/** Above every letter and digit: a prefix followed by it bounds the terms starting with the prefix. */
const ABOVE_TOKENS = '\u{10FFFF}';

function queryOf(node: SearchNode): SearchQuery {
  return searchQuery(node.text, node.field === ADDRESS_FIELD, node.minMatches);
}

/** Validates the call like the in-memory engine (same QueryError codes/messages for no tokens, bad min_matches, too many terms) without touching the database. */
export function checkSearch(node: SearchNode): void {
  queryOf(node);
}

/** What the statistics say about one call's words. */
interface Statistics {
  /** Live listings (N) and their total token length in the field. */
  readonly rows: number;
  readonly totalLength: number;
  /** df of each query term that is a term of the field. */
  readonly exact: ReadonlyMap<string, number>;
  /** Per prefix (as given), the terms starting with it and their df. */
  readonly prefixed: ReadonlyArray<ReadonlyArray<readonly [string, number]>>;
  /** Per fuzzy word (as given), the terms within one edit of it and their df. */
  readonly fuzzy: ReadonlyArray<ReadonlyArray<readonly [string, number]>>;
}

interface StatisticsRow extends Record<string, unknown> {
  part: number;
  at: number;
  term: string | null;
  df: number;
  total: number | null;
}

/** The first ⌊L/2⌋ and the last L − ⌊L/2⌋ − 1 characters (code points, as PostgreSQL counts) of a word of L. */
function halves(word: string): { head: string; tail: string; length: number } {
  const chars = [...word];
  const half = Math.floor(chars.length / 2);
  return { head: chars.slice(0, half).join(''), tail: chars.slice(half + 1).join(''), length: chars.length };
}

/** One statement: N and total length, df of the exact terms, prefix matches, one-edit candidates. */
async function readStatistics(
  db: Queryable,
  layout: Layout,
  field: SearchFieldName,
  exact: string[],
  prefixes: string[],
  fuzzy: string[],
): Promise<Statistics> {
  const words = fuzzy.map(halves);
  const sql = `SELECT 0 AS part, 0 AS at, NULL::text AS term, s.n::float8 AS df, s.total_length::float8 AS total FROM ${layout.search} AS s WHERE s.field = $1
UNION ALL
SELECT 1, 0, t.term, t.df, NULL FROM ${layout.terms} AS t WHERE t.field = $1 AND t.term = ANY ($2::text[] COLLATE "C")
UNION ALL
SELECT 2, p.at::int, t.term, t.df, NULL FROM unnest($3::text[]) WITH ORDINALITY AS p(prefix, at)
  JOIN ${layout.terms} AS t ON t.field = $1 AND t.term >= p.prefix COLLATE "C" AND t.term < (p.prefix || $4::text) COLLATE "C"
UNION ALL
SELECT 3, f.at::int, t.term, t.df, NULL FROM unnest($5::text[], $7::int[]) WITH ORDINALITY AS f(head, length, at)
  JOIN ${layout.terms} AS t ON t.field = $1 AND t.term >= f.head COLLATE "C" AND t.term < (f.head || $4::text) COLLATE "C"
    AND char_length(t.term) BETWEEN f.length - 1 AND f.length + 1
UNION ALL
SELECT 3, f.at::int, t.term, t.df, NULL FROM unnest($6::text[], $7::int[]) WITH ORDINALITY AS f(tail, length, at)
  JOIN ${layout.terms} AS t ON t.field = $1 AND reverse(t.term) >= reverse(f.tail) COLLATE "C" AND reverse(t.term) < (reverse(f.tail) || $4::text) COLLATE "C"
    AND char_length(t.term) BETWEEN f.length - 1 AND f.length + 1`;
  const { rows } = await db.query<StatisticsRow>(sql, [
    field,
    exact,
    prefixes,
    ABOVE_TOKENS,
    words.map((w) => w.head),
    words.map((w) => w.tail),
    words.map((w) => w.length),
  ]);
  let n = 0;
  let totalLength = 0;
  const exactDf = new Map<string, number>();
  const prefixed = prefixes.map((): Array<readonly [string, number]> => []);
  const near = fuzzy.map((): Array<readonly [string, number]> => []);
  for (const r of rows) {
    const df = Number(r.df);
    if (r.part === 0) {
      n = df;
      totalLength = Number(r.total);
    } else if (r.part === 1) exactDf.set(r.term!, df);
    else if (r.part === 2) {
      if (r.term!.startsWith(prefixes[r.at - 1])) prefixed[r.at - 1].push([r.term!, df]);
    } else {
      const word = fuzzy[r.at - 1];
      if (r.term !== word && isFuzzyCandidate(r.term!) && osaDistanceAtMostOne(word, r.term!)) near[r.at - 1].push([r.term!, df]);
    }
  }
  return { rows: n, totalLength, exact: exactDf, prefixed, fuzzy: near };
}

/** The words of a call: per query term (by its position) the exact word and the inexact ones, with their BM25 weights. */
interface Words {
  readonly word: string[];
  readonly term: number[];
  readonly weight: number[];
  readonly exact: boolean[];
  /** The words of each query term that has any, in query-term order. */
  readonly byTerm: string[][];
}

function wordsOf(query: SearchQuery, stats: Statistics, prefixes: string[], fuzzy: string[]): Words {
  const out: Words = { word: [], term: [], weight: [], exact: [], byTerm: [] };
  const add = (word: string, term: number, weight: number, exact: boolean): void => {
    out.word.push(word);
    out.term.push(term);
    out.weight.push(weight);
    out.exact.push(exact);
  };
  query.terms.forEach((t, i) => {
    const before = out.word.length;
    const df = stats.exact.get(t.term);
    if (df !== undefined) add(t.term, i, weightOf(1, stats.rows, df), true);
    const inexact = new Map<string, number>();
    for (const p of t.prefixes) for (const [word, n] of stats.prefixed[prefixes.indexOf(p)]) inexact.set(word, n);
    if (t.fuzzy) for (const [word, n] of stats.fuzzy[fuzzy.indexOf(t.term)]) inexact.set(word, n);
    inexact.delete(t.term);
    for (const [word, n] of inexact) add(word, i, weightOf(INEXACT_WEIGHT, stats.rows, n), false);
    if (out.word.length > before) out.byTerm.push(out.word.slice(before));
  });
  return out;
}

/** A float8 constant of the scoring expression, printed so that PostgreSQL reads back the same double. */
const float8 = (x: number): string => `'${String(x)}'::float8`;

/**
 * Reads what the call needs from the statistics (df of each query term, N, average length, and for
 * RawAddressSearchText the prefix and one-edit expansions of the terms from `#terms`) in one round
 * trip, and returns the SQL for one statement; every term/idf/weight goes through `params` (arrays
 * as single parameters). Throws the in-memory engine's QueryErrors for a bad call before reading.
 */
export async function prepareSearchSql(
  db: Queryable,
  layout: Layout,
  node: SearchNode,
  alias: string,
  params: Params,
  ordinal: number,
  required = false,
): Promise<SearchSql> {
  const query = queryOf(node);
  const prefixes = [...new Set(query.terms.flatMap((t) => t.prefixes))];
  const fuzzy = query.terms.filter((t) => t.fuzzy).map((t) => t.term);
  const stats = await readStatistics(
    db,
    layout,
    node.field,
    query.terms.map((t) => t.term),
    prefixes,
    fuzzy,
  );
  const words = wordsOf(query, stats, prefixes, fuzzy);
  // Too few query terms have any word in the field: no row can match.
  if (words.byTerm.length < query.minMatches) return { test: 'false', score: float8(0), join: '' };

  const all = params.add(words.word, 'text[]');
  // Each term's words and min_matches are bound once; the score's subquery tests its own alias with the same parameters.
  let counted: { readonly terms: string[]; readonly min: string } | undefined;
  const testOf = (row: string): string => {
    const tokens = `${row}.${tokensColumn(node.field)}`;
    if (words.exact.every((e) => e) && query.minMatches === query.terms.length) return `(${tokens} @> ${all})`;
    if (query.minMatches === 1) return `(${tokens} && ${all})`;
    counted ??= { terms: words.byTerm.map((w) => params.add(w, 'text[]')), min: params.add(query.minMatches, 'int') };
    // A term matches when the row holds any of its words; the first test only lets the GIN index find candidates.
    const matched = counted.terms.map((p) => `(${tokens} && ${p})::int`).join(' + ');
    return `(${tokens} && ${all} AND ${matched} >= ${counted.min})`;
  };
  const test = testOf(alias);

  // The score's parameters are added when the statement asks for the score (relevance), so a statement that only filters binds none of them.
  let score: Score | undefined;
  const scored = (): Score =>
    (score ??= scoreSql(
      words,
      all,
      normOf(stats.totalLength / stats.rows),
      { layout, field: node.field, alias, ordinal, required, terms: query.terms.length, testOf },
      params,
    ));
  return {
    test,
    get score(): string {
      return scored().sql;
    },
    get join(): string {
      return score?.join ?? '';
    },
  };
}

/** Where a call's score is computed: the row (`alias`) of the layout's table, and the call's test for any alias of that table. */
interface ScoreContext {
  readonly layout: Layout;
  readonly field: SearchFieldName;
  readonly alias: string;
  /** The call's ordinal in the query: names its join. */
  readonly ordinal: number;
  /** Every row of the statement passes the call's test (a conjunct of the filter): its scores may be an inner join. */
  readonly required: boolean;
  /** The number of query terms (each word names its term by position). */
  readonly terms: number;
  readonly testOf: (alias: string) => string;
}

interface Score {
  readonly sql: string;
  readonly join: string;
}

/**
 * The call's BM25 score for the row: per query term the exact word's score if the row holds it,
 * else the best of its inexact words, summed in query-term order. `all` is the placeholder of
 * every word, in the order of `words`.
 */
function scoreSql(words: Words, all: string, lengthNorm: number, ctx: ScoreContext, params: Params): Score {
  const norm = params.add(lengthNorm, 'float8');
  // termScore's expression: (w × tf × (k1 + 1)) / (tf + k1 × (1 − b + norm × length))
  const scoreOf = (w: string, tf: string, length: string): string =>
    `(${w} * ${tf} * ${float8(BM25_K1 + 1)}) / (${tf} + ${float8(BM25_K1)} * (${float8(1 - BM25_B)} + ${norm} * ${length}::float8))`;
  const tokens = (row: string): string => `${row}.${tokensColumn(ctx.field)}`;
  const length = (row: string): string => `${row}.${lengthColumn(ctx.field)}`;
  if (words.exact.every((e) => e)) {
    // One word per query term: each tf read once (array_positions is most of the cost; the fence,
    // ORDER BY a constant, keeps the planner from copying the expression into each of its two uses
    // without a sort, and unlike OFFSET 0 it is a subquery Citus pushes down with the row), and one
    // termScore per term. A term the row lacks scores 0 (tf = 0), and adding 0 leaves a double as
    // it is, so the sum in query-term order is the in-memory one.
    const tfs = words.word.map(
      (word, i) => `least(cardinality(array_positions(${tokens(ctx.alias)}, ${params.add(word, 'text')})), ${MAX_TF})::float8 AS tf${i}`,
    );
    const sum = words.weight.map((w, i) => scoreOf(params.add(w, 'float8'), `c.tf${i}`, length(ctx.alias))).join(' + ');
    return { sql: `(SELECT ${sum} FROM (SELECT ${tfs.join(', ')} ORDER BY NOT true) AS c)`, join: '' };
  }
  const weight = params.add(words.weight, 'float8[]');
  const term = params.add(words.term, 'int[]');
  const exact = params.add(words.exact, 'boolean[]');
  // Prefixes can bring many words: each matching row's tokens are joined with them (a hash of the
  // words, built once per statement), each occurrence scored with its word's tf (a word held twice
  // scores the same twice, and the best of equal scores is that score). An exact match always wins: per query term the best exact score when there is one,
  // else the best inexact one; the terms are added in query-term order, a term the row lacks as 0
  // (adding 0 leaves a double as it is, so the sum is the in-memory loop's). The scores of all
  // matching rows are one subquery grouped by the listing key (the distribution column: Citus
  // computes it whole on each shard, where it refuses an aggregate in a subquery over the row)
  // joined to the row on that key. Grouped by the table's own key, PostgreSQL estimates it as
  // many rows as match, and so chooses between fetching the few listings by key and reading the
  // many again. When every row of the statement passes the call's test, the join is inner.
  const key = '"ListingKey"';
  const r = '"#r"';
  const scores = quote(`#score${ctx.ordinal}`);
  const s = scoreOf('q.weight', `least(cardinality(array_positions(${tokens(r)}, w.word)), ${MAX_TF})::float8`, length(r));
  const best = Array.from(
    { length: ctx.terms },
    (_, i) => `coalesce(max(${s}) FILTER (WHERE q.term = ${i} AND q.exact), max(${s}) FILTER (WHERE q.term = ${i}), 0::float8)`,
  );
  const table = `SELECT ${r}.${key} AS k, ${best.join(' + ')} AS score
      FROM ${ctx.layout.table('Property')} AS ${r} CROSS JOIN unnest(${tokens(r)}) AS w(word)
      JOIN unnest(${all}, ${term}, ${weight}, ${exact}) AS q(word, term, weight, exact) ON q.word = w.word
      WHERE ${ctx.testOf(r)}
      GROUP BY ${r}.${key}`;
  return { sql: `${scores}.score`, join: `${ctx.required ? 'JOIN' : 'LEFT JOIN'} (${table}) AS ${scores} ON ${scores}.k = ${ctx.alias}.${key}` };
}
