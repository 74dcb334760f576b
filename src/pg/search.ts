/**
 * search.text in PostgreSQL (SERVICE.md §4), with the in-memory engine's matching and its scores
 * bit for bit. The query side (terms, min_matches, which prefixes and one-edit look-ups) is
 * src/search/bm25.ts's `searchQuery`; the term statistics come from `#terms` and `#search` in one
 * round trip; idf and every term's weight are computed here with bm25.ts's functions and reach the
 * statement as bind parameters; the statement computes per row only what depends on the row (term
 * frequencies in `S#tokens`, `S#length`), with the operations in the order of bm25.ts's termScore,
 * so the float8 results are the same IEEE doubles the in-memory engine computes.
 *
 * Row SQL. A LATERAL subquery per call joins the row's tokens (counted: tf) with the call's words
 * (each query term's exact word at weight 1, and for RawAddressSearchText its prefix and one-edit
 * words at INEXACT_WEIGHT), keeps per query term the exact word's score if the row holds it, else
 * the best inexact one, counts the terms matched and sums their scores in query-term order
 * (`sum(... ORDER BY term)`: float8 sum adds its inputs in that order, as the in-memory loop does).
 * When every word is some term's exact word (every field but the address one), each term's tf is
 * read with array_positions instead. The call's test also holds `S#tokens && words` (`@>` when
 * every term must match), which the GIN index on `S#tokens` answers: rows outside it cannot match.
 *
 * One-edit look-ups. A word within one edit of a query word w of L characters shares its first
 * ⌊L/2⌋ characters or its last L − ⌊L/2⌋ − 1 (an edit at or after position ⌊L/2⌋ leaves the
 * first half, one before it the rest), and is at most one character longer or shorter; the
 * statistics query keeps the field's terms that pass this test (at 100k listings, 20k address
 * terms: about 3 ms and a handful of candidates per word, as fast as fuzzystrmatch's
 * levenshtein_less_equal, without an extension or its 255-character limit) and the final test is
 * lexicon.ts's own (isFuzzyCandidate, osaDistanceAtMostOne).
 */
import type { SearchNode } from '../plan/plan.js';
import { BM25_B, BM25_K1, INEXACT_WEIGHT, normOf, searchQuery, weightOf, type SearchQuery } from '../search/bm25.js';
import { isFuzzyCandidate, osaDistanceAtMostOne } from '../search/lexicon.js';
import type { SearchFieldName } from '../schema/search-fields.js';
import { lengthColumn, tokensColumn, type Layout } from './layout.js';
import type { Params, Queryable } from './sql.js';

export interface SearchSql {
  /** FROM-clause addition computing this call for the row of `alias` (`LEFT JOIN LATERAL (...) AS "search#0" ON true`), or '' */
  readonly join: string;
  /** boolean SQL, never NULL: the call is true for the row */
  readonly test: string;
  /** float8 SQL: the call's BM25 score for the row (used only where test is true) */
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
SELECT 3, f.at::int, t.term, t.df, NULL FROM unnest($5::text[], $6::text[], $7::int[]) WITH ORDINALITY AS f(head, tail, length, at)
  JOIN ${layout.terms} AS t ON t.field = $1 AND char_length(t.term) BETWEEN f.length - 1 AND f.length + 1
    AND (starts_with(t.term, f.head) OR right(t.term, char_length(f.tail)) = f.tail COLLATE "C")`;
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
  /** Query terms with at least one word. */
  readonly termsWithWords: number;
}

function wordsOf(query: SearchQuery, stats: Statistics, prefixes: string[], fuzzy: string[]): Words {
  const out: Words = { word: [], term: [], weight: [], exact: [], termsWithWords: 0 };
  const add = (word: string, term: number, weight: number, exact: boolean): void => {
    out.word.push(word);
    out.term.push(term);
    out.weight.push(weight);
    out.exact.push(exact);
  };
  let termsWithWords = 0;
  query.terms.forEach((t, i) => {
    const before = out.word.length;
    const df = stats.exact.get(t.term);
    if (df !== undefined) add(t.term, i, weightOf(1, stats.rows, df), true);
    const inexact = new Map<string, number>();
    for (const p of t.prefixes) for (const [word, n] of stats.prefixed[prefixes.indexOf(p)]) inexact.set(word, n);
    if (t.fuzzy) for (const [word, n] of stats.fuzzy[fuzzy.indexOf(t.term)]) inexact.set(word, n);
    inexact.delete(t.term);
    for (const [word, n] of inexact) add(word, i, weightOf(INEXACT_WEIGHT, stats.rows, n), false);
    if (out.word.length > before) termsWithWords++;
  });
  return { ...out, termsWithWords };
}

/** A float8 constant of the scoring expression, printed so that PostgreSQL reads back the same double. */
const float8 = (x: number): string => `'${String(x)}'::float8`;

/**
 * Reads what the call needs from the statistics (df of each query term, N, average length, and for
 * RawAddressSearchText the prefix and one-edit expansions of the terms from `#terms`) in one round
 * trip, and returns the SQL for one statement; every term/idf/weight goes through `params` (arrays
 * as single parameters). Throws the in-memory engine's QueryErrors for a bad call before reading.
 */
export async function prepareSearchSql(db: Queryable, layout: Layout, node: SearchNode, alias: string, params: Params, ordinal: number): Promise<SearchSql> {
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
  if (words.termsWithWords < query.minMatches) return { join: '', test: 'false', score: float8(0) };

  const tokens = `${alias}.${tokensColumn(node.field)}`;
  const length = `${alias}.${lengthColumn(node.field)}`;
  const name = `"search#${ordinal}"`;
  const wordList = params.add(words.word, 'text[]');
  const norm = params.add(normOf(stats.totalLength / stats.rows), 'float8');
  const min = params.add(query.minMatches, 'int');
  // termScore's expression: (w × tf × (k1 + 1)) / (tf + k1 × (1 − b + norm × length))
  const scoreOf = (w: string, tf: string): string =>
    `(${w} * ${tf} * ${float8(BM25_K1 + 1)}) / (${tf} + ${float8(BM25_K1)} * (${float8(1 - BM25_B)} + ${norm} * ${length}::float8))`;
  const onlyExact = words.exact.every((e) => e);
  let from: string;
  if (onlyExact) {
    const weight = params.add(words.weight, 'float8[]');
    from = `SELECT count(*)::int AS hits, sum(${scoreOf('q.weight', 'c.tf')} ORDER BY q.at) AS score
  FROM unnest(${wordList}, ${weight}) WITH ORDINALITY AS q(word, weight, at)
  CROSS JOIN LATERAL (SELECT least(cardinality(array_positions(${tokens}, q.word)), ${MAX_TF})::float8 AS tf) AS c
  WHERE c.tf > 0`;
  } else {
    const term = params.add(words.term, 'int[]');
    const weight = params.add(words.weight, 'float8[]');
    const exact = params.add(words.exact, 'boolean[]');
    // An exact match always wins: the best exact score when there is one, else the best inexact one.
    from = `SELECT count(*)::int AS hits, sum(m.best ORDER BY m.term) AS score FROM (
    SELECT q.term, coalesce(max(${scoreOf('q.weight', 'd.tf')}) FILTER (WHERE q.exact), max(${scoreOf('q.weight', 'd.tf')})) AS best
    FROM (SELECT t.word, least(count(*), ${MAX_TF})::float8 AS tf FROM unnest(${tokens}) AS t(word) GROUP BY t.word) AS d
    JOIN unnest(${wordList}, ${term}, ${weight}, ${exact}) AS q(word, term, weight, exact) ON q.word = d.word
    GROUP BY q.term
  ) AS m`;
  }
  const every = query.minMatches === query.terms.length && onlyExact;
  return {
    join: `LEFT JOIN LATERAL (${from}) AS ${name} ON true`,
    test: `(${tokens} ${every ? '@>' : '&&'} ${wordList} AND ${name}.hits >= ${min})`,
    score: `${name}.score`,
  };
}
