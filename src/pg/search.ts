/**
 * search.text in PostgreSQL (SERVICE.md §4), with the in-memory engine's matching and its scores
 * bit for bit. The query side (terms, min_matches, which prefixes and one-edit look-ups) is
 * src/search/bm25.ts's `searchQuery`; the term statistics come from `#terms` and `#search` in one
 * round trip; idf and every term's weight are computed here with bm25.ts's functions and reach the
 * statement as bind parameters; the statement computes per row only what depends on the row (term
 * frequencies in `S#tokens`, `S#length`), with the operations in the order of bm25.ts's termScore,
 * so the float8 results are the same IEEE doubles the in-memory engine computes.
 *
 * Row SQL: no join, two expressions over the row's `S#tokens` and `S#length`.
 * - The test: `S#tokens @> words` when every term must match exactly, `&&` when one term is
 *   enough, else `&&` and the count of terms whose words the row holds (`tokens && term's words`
 *   per term) against min_matches. The GIN index on `S#tokens` answers the `@>` / `&&` part.
 * - The score, only where the statement reads it (relevance). When every word is a query term's
 *   exact word (every field but the address one, and address queries with no expansion): one
 *   termScore per term, each tf read once by array_positions, summed in query-term order; a term
 *   the row lacks scores 0, and adding 0 leaves a double as it is. Otherwise (prefix and one-edit
 *   words at INEXACT_WEIGHT) a subquery counts the row's tokens, joins them with the words, keeps
 *   per term the exact word's score if the row holds it, else the best inexact one, and sums them
 *   in query-term order (`sum(... ORDER BY term)`: float8 sum is float8pl over its inputs in that
 *   order, as the in-memory loop adds them). Measured at 100k listings (15k rows matching two
 *   keywords): array_positions over the row's ~130 keyword tokens is most of the cost, so each tf
 *   is read once; a per-row subquery over unnest costs about 1.5 to 2 times as much again, so the
 *   exact case, where most large results are, does without one.
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
import { lengthColumn, tokensColumn, type Layout } from './layout.js';
import type { Params, Queryable } from './sql.js';

export interface SearchSql {
  /** FROM-clause addition computing this call for the row of `alias`, or '' (always '' as built here: the test and score read only the row) */
  readonly join: string;
  /** boolean SQL, never NULL: the call is true for the row */
  readonly test: string;
  /**
   * float8 SQL: the call's BM25 score for the row (used only where test is true). Reading it adds
   * its parameters to `params` (the first time only), so read it only for a statement that uses it.
   */
  readonly score: string;
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
export async function prepareSearchSql(db: Queryable, layout: Layout, node: SearchNode, alias: string, params: Params, _ordinal: number): Promise<SearchSql> {
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
  if (words.byTerm.length < query.minMatches) return { join: '', test: 'false', score: float8(0) };

  const tokens = `${alias}.${tokensColumn(node.field)}`;
  const length = `${alias}.${lengthColumn(node.field)}`;
  const all = params.add(words.word, 'text[]');
  const onlyExact = words.exact.every((e) => e);
  let test: string;
  if (onlyExact && query.minMatches === query.terms.length) test = `${tokens} @> ${all}`;
  else if (query.minMatches === 1) test = `${tokens} && ${all}`;
  else {
    // A term matches when the row holds any of its words; the first test only lets the GIN index find candidates.
    const matched = words.byTerm.map((w) => `(${tokens} && ${params.add(w, 'text[]')})::int`).join(' + ');
    test = `(${tokens} && ${all} AND ${matched} >= ${params.add(query.minMatches, 'int')})`;
  }

  // The score's parameters are added when the statement asks for the score (relevance), so a statement that only filters binds none of them.
  const row: RowColumns = { tokens, length };
  let score: string | undefined;
  return {
    join: '',
    test: `(${test})`,
    get score(): string {
      return (score ??= scoreExpression(words, all, normOf(stats.totalLength / stats.rows), row, params));
    },
  };
}

interface RowColumns {
  /** The row's `S#tokens` and `S#length`, qualified by its alias. */
  readonly tokens: string;
  readonly length: string;
}

/**
 * The call's BM25 score for the row: per query term the exact word's score if the row holds it,
 * else the best of its inexact words, summed in query-term order. `all` is the placeholder of
 * every word, in the order of `words`.
 */
function scoreExpression(words: Words, all: string, lengthNorm: number, { tokens, length }: RowColumns, params: Params): string {
  const norm = params.add(lengthNorm, 'float8');
  // termScore's expression: (w × tf × (k1 + 1)) / (tf + k1 × (1 − b + norm × length))
  const scoreOf = (w: string, tf: string): string =>
    `(${w} * ${tf} * ${float8(BM25_K1 + 1)}) / (${tf} + ${float8(BM25_K1)} * (${float8(1 - BM25_B)} + ${norm} * ${length}::float8))`;
  if (words.exact.every((e) => e)) {
    // One word per query term: each tf read once (array_positions is most of the cost; the fence,
    // ORDER BY a constant, keeps the planner from copying the expression into each of its two uses
    // without a sort, and unlike OFFSET 0 it is a subquery Citus pushes down with the row), and one
    // termScore per term. A term the row lacks scores 0 (tf = 0), and adding 0 leaves a double as
    // it is, so the sum in query-term order is the in-memory one.
    const tfs = words.word.map((word, i) => `least(cardinality(array_positions(${tokens}, ${params.add(word, 'text')})), ${MAX_TF})::float8 AS tf${i}`);
    const sum = words.weight.map((w, i) => scoreOf(params.add(w, 'float8'), `c.tf${i}`)).join(' + ');
    return `(SELECT ${sum} FROM (SELECT ${tfs.join(', ')} ORDER BY NOT true) AS c)`;
  }
  const weight = params.add(words.weight, 'float8[]');
  const term = params.add(words.term, 'int[]');
  const exact = params.add(words.exact, 'boolean[]');
  // Prefixes can bring many words: the row's tokens are counted once and joined with them (a hash
  // of the words, built once per statement). An exact match always wins: the best exact score when
  // there is one, else the best inexact one.
  return `(SELECT sum(m.best ORDER BY m.term) FROM (
    SELECT q.term, coalesce(max(${scoreOf('q.weight', 'd.tf')}) FILTER (WHERE q.exact), max(${scoreOf('q.weight', 'd.tf')})) AS best
    FROM (SELECT t.word, least(count(*), ${MAX_TF})::float8 AS tf FROM unnest(${tokens}) AS t(word) GROUP BY t.word) AS d
    JOIN unnest(${all}, ${term}, ${weight}, ${exact}) AS q(word, term, weight, exact) ON q.word = d.word
    GROUP BY q.term
  ) AS m)`;
}
