/**
 * search.text in PostgreSQL against the in-memory engine on the same data: the same matching
 * listings (also through engine.query), scores bit-identical to the in-memory BM25 (and within
 * 1e-9 of the textbook oracle), the same relevance order, the same errors, the GIN index usable.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Generation } from '../../src/access/generation.js';
import { Engine } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import { generateListings } from '../../src/generate/dataset.js';
import { Rng } from '../../src/generate/prng.js';
import { Layout, tokensColumn } from '../../src/pg/layout.js';
import { loadIntoPostgres } from '../../src/pg/load.js';
import { checkSearch, prepareSearchSql, type SearchSql } from '../../src/pg/search.js';
import { Params, type Queryable } from '../../src/pg/sql.js';
import type { SearchNode } from '../../src/plan/plan.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../../src/schema/search-fields.js';
import { evaluateSearch, prepareSearch } from '../../src/search/bm25.js';
import { searchViewOf } from '../live/helpers.js';
import { ADDRESS_RECORDS, bm25Queries, ERROR_CASES, NAME_RECORDS, randomQueries, THRESHOLD_RECORDS, THRESHOLD_WORDS } from '../search/fixtures.js';
import { NaiveSearch } from '../search/oracle.js';
import { freshDatabase, pgSkip } from './helpers.js';

type Rec = Record<string, unknown>;
type Scores = Map<string, number>;

const node = (field: SearchFieldName, text: string, minMatches?: number, ordinal = 0): SearchNode => ({
  kind: 'search',
  type: 'boolean',
  field,
  text,
  minMatches,
  ordinal,
});

/** search.text(...) as OData text. */
const call = (field: SearchFieldName, text: string, min?: number): string =>
  `search.text(${field},'${text.replace(/'/g, "''")}'${min === undefined ? '' : `,${min}`})`;

/** One data set in the in-memory engine and in one PostgreSQL schema of the suite's database. */
class Fixture {
  private constructor(
    readonly engine: Engine,
    readonly layout: Layout,
    private readonly db: pg.Pool,
  ) {}

  /** The engine's newest generation, its live rows, loaded by the PostgreSQL loader into `schema`. */
  static async load(db: pg.Pool, schema: string, engine: Engine): Promise<Fixture> {
    const gen = (engine as unknown as { gen: Generation }).gen;
    await loadIntoPostgres(db, new Layout(schema), gen.store, { access: gen.access });
    return new Fixture(engine, new Layout(schema), db);
  }

  /** Keys and scores of the listings the calls' conjunction matches in PostgreSQL, each listing's score the sum over the calls. */
  async pg(field: SearchFieldName, text: string, min?: number): Promise<Scores> {
    const params = new Params();
    const sql = await prepareSearchSql(this.db, this.layout, node(field, text, min), 'p', params, 0);
    return this.select([sql], params);
  }

  async select(calls: SearchSql[], params: Params, order = ''): Promise<Scores> {
    const relevance = calls.map((c) => `CASE WHEN ${c.test} THEN ${c.score} ELSE '0'::float8 END`).join(' + ');
    const { rows } = await this.db.query<{ key: string; score: number }>(
      `SELECT p."ListingKey" AS key, ${relevance} AS score FROM ${this.layout.table('Property')} AS p ${calls.map((c) => c.join).join(' ')}
       WHERE ${calls.map((c) => c.test).join(' AND ')} ${order}`,
      params.values,
    );
    return new Map(rows.map((r) => [r.key, r.score]));
  }

  /** Keys and scores of the in-memory engine's evaluation on its newest generation. */
  mem(field: SearchFieldName, text: string, min?: number): Scores {
    const view = searchViewOf(this.engine, field);
    const table = this.engine.store.Property;
    const match = evaluateSearch(view, prepareSearch(view, text, min));
    return new Map([...match.rows].map((row, i) => [table.keyOf(row), match.scores[i]]));
  }

  /** The keys engine.query answers for the filter. */
  keys(filter: string, extra: Record<string, string> = {}): string[] {
    return this.engine.query('Property', { $filter: filter, $select: 'ListingKey', $top: 50000, ...extra }).value.map((r) => r.ListingKey as string);
  }
}

const sorted = (keys: Iterable<string>): string[] => [...keys].sort();

/** PostgreSQL's answer equals the in-memory engine's: same keys, every score the same double. */
async function expectSameAsEngine(f: Fixture, field: SearchFieldName, text: string, min?: number): Promise<Scores> {
  const label = `${field} ${JSON.stringify(text)} min ${String(min)}`;
  const got = await f.pg(field, text, min);
  const want = f.mem(field, text, min);
  expect(sorted(got.keys()), label).toEqual(sorted(want.keys()));
  for (const [key, score] of want) if (!Object.is(got.get(key), score)) expect(got.get(key), `${label}: ${key}`).toBe(score);
  expect(sorted(got.keys()), `${label} (engine.query)`).toEqual(sorted(f.keys(call(field, text, min))));
  return got;
}

function expectOracle(got: Scores, oracle: Map<number, number>, records: Rec[], label: string): void {
  const want = new Map([...oracle].map(([row, score]) => [records[row].ListingKey as string, score]));
  expect(sorted(got.keys()), label).toEqual(sorted(want.keys()));
  for (const [key, score] of want) expect(Math.abs(got.get(key)! - score), `${label}: ${key}`).toBeLessThan(1e-9);
}

const codeOf = (fn: () => unknown): { code: string; message: string } | undefined => {
  try {
    fn();
  } catch (e) {
    if (e instanceof QueryError) return { code: e.code, message: e.message };
    throw e;
  }
  return undefined;
};

describe.skipIf(pgSkip)('search.text in PostgreSQL', () => {
  let db: pg.Pool;
  let gen: Fixture;
  const records = [...generateListings({ listings: 1500, seed: 'bm25' })].map((l) => l.property);
  const naive = Object.fromEntries(SEARCH_FIELDS.map((f) => [f, new NaiveSearch(records, f)])) as Record<SearchFieldName, NaiveSearch>;
  const sample = (i: number): Rec => records[(i * 97) % records.length];

  beforeAll(async () => {
    db = new pg.Pool({ connectionString: await freshDatabase('search'), max: 2 });
    gen = await Fixture.load(db, 'gen', await Engine.open({ data: { Property: records } }));
  });
  afterAll(async () => {
    await db?.end();
  });

  describe('the in-memory search cases on generated data', () => {
    const queries: Array<[SearchFieldName, string, number?]> = [
      ...bm25Queries(sample),
      ['RawAddressSearchText', 'main st main'],
      ['RawAddressSearchText', 'St'],
      ['RawAddressSearchText', 'zzqx'],
    ];

    it.each(queries)('%s %j (min %s)', async (field, text, min) => {
      const got = await expectSameAsEngine(gen, field, text, min);
      expectOracle(got, naive[field].search(text, min), records, `${field} '${text}'`);
      if (text !== 'nonexistentword' && text !== 'zzqx') expect(got.size, 'the query should match something').toBeGreaterThan(0);
    });

    it('random address and keyword queries built from the data', async () => {
      for (let i = 0; i < 40; i++) {
        const { address: text, keyword: kw } = randomQueries(sample, i);
        expectOracle(await expectSameAsEngine(gen, 'RawAddressSearchText', text), naive.RawAddressSearchText.search(text), records, text);
        expectOracle(await expectSameAsEngine(gen, 'KeywordSearchText', kw), naive.KeywordSearchText.search(kw), records, kw);
      }
    });
  });

  describe('generated term lists (fast-check): vocabulary words with typos, prefixes, junk, every field, min_matches', () => {
    const vocabulary = new Map<SearchFieldName, string[]>();
    /** Per field, each listing's tokens: words taken from one listing make conjunctions that match. */
    const listingTokens = new Map<SearchFieldName, string[][]>();
    beforeAll(async () => {
      const { rows } = await db.query<{ field: SearchFieldName; terms: string[] }>(
        `SELECT field, array_agg(term ORDER BY term) AS terms FROM ${gen.layout.terms} GROUP BY field`,
      );
      for (const r of rows) vocabulary.set(r.field, r.terms);
      for (const field of SEARCH_FIELDS) {
        const tokens = await db.query<{ tokens: string[] }>(
          `SELECT ${tokensColumn(field)} AS tokens FROM ${gen.layout.table('Property')} ORDER BY "ListingKey"`,
        );
        listingTokens.set(
          field,
          tokens.rows.map((r) => r.tokens).filter((t) => t.length > 0),
        );
      }
    });

    const LETTERS = 'abcdefghijklmnopqrstuvwxyz';
    const mutate = (word: string, how: number, at: number, letter: number): string => {
      const i = at % Math.max(word.length, 1);
      const c = LETTERS[letter % 26];
      switch (how) {
        case 1: // substitution
          return word.slice(0, i) + c + word.slice(i + 1);
        case 2: // deletion
          return word.length > 1 ? word.slice(0, i) + word.slice(i + 1) : word;
        case 3: // insertion
          return word.slice(0, i) + c + word.slice(i);
        case 4: // swap of neighbours
          return i + 1 < word.length ? word.slice(0, i) + word[i + 1] + word[i] + word.slice(i + 2) : word;
        case 5: // prefix (type-ahead)
          return word.slice(0, Math.max(1, i));
        case 6: // upper case and punctuation: the tokenizer's business
          return `${word.toUpperCase()}.`;
        case 7: // junk
          return `qx${c}zv`;
        default:
          return word;
      }
    };
    const wordArb = fc.record({ pick: fc.nat(), anywhere: fc.nat({ max: 4 }), how: fc.nat({ max: 13 }), at: fc.nat({ max: 20 }), letter: fc.nat({ max: 25 }) });
    const queryArb = fc.record({
      field: fc.constantFrom(...SEARCH_FIELDS, 'RawAddressSearchText', 'RawAddressSearchText'),
      listing: fc.nat(),
      words: fc.array(wordArb, { minLength: 1, maxLength: 6 }),
      min: fc.option(fc.integer({ min: 1, max: 7 }), { nil: undefined }),
    });

    it('match the in-memory engine bit for bit and the oracle to 1e-9', async () => {
      let matched = 0;
      let inexact = 0;
      await fc.assert(
        fc.asyncProperty(queryArb, async ({ field, listing, words, min }) => {
          const all = listingTokens.get(field)!;
          const own = all[listing % all.length];
          const vocab = vocabulary.get(field)!;
          const text = words.map((w) => mutate(w.anywhere === 0 ? vocab[w.pick % vocab.length] : own[w.pick % own.length], w.how, w.at, w.letter)).join(' ');
          const got = await expectSameAsEngine(gen, field, text, min);
          expectOracle(got, naive[field].search(text, min), records, `${field} '${text}' ${String(min)}`);
          if (got.size > 0) matched++;
          if (got.size > 0 && prepareSearch(searchViewOf(gen.engine, field), text, min).terms.some((t) => t.inexact.length > 0)) inexact++;
        }),
        { seed: 16, numRuns: 250 },
      );
      expect(matched, 'queries matching something').toBeGreaterThan(75);
      expect(inexact, 'matching queries with prefix or one-edit words').toBeGreaterThan(25);
    });
  });

  describe('relevance', () => {
    const rankCases: Array<[SearchFieldName, string, number?]> = [
      ['KeywordSearchText', 'pool granite'],
      ['KeywordSearchText', 'pool granite spa view', 1],
      ['RawAddressSearchText', 'maple street seattle 98103'],
      ['RawAddressSearchText', `${sample(7).StreetName as string} st ${sample(7).City as string} 1`, 1],
      ['ListOfficeSearchText', 'realty'],
    ];

    it.each(rankCases)('%s %j: relevance desc, top 100, key tie-break equals the engine', async (field, text, min) => {
      const params = new Params();
      const sql = await prepareSearchSql(db, gen.layout, node(field, text, min), 'p', params, 0);
      const got = await gen.select([sql], params, 'ORDER BY score DESC, p."ListingKey" LIMIT 100');
      const want = gen.keys(call(field, text, min), { $orderby: 'relevance desc', $top: '100' });
      expect(want.length).toBeGreaterThan(20);
      expect([...got.keys()]).toEqual(want);
    });

    it('two calls: the conjunction, relevance the sum of both scores in call order', async () => {
      const a = node('RawAddressSearchText', 'street houston', undefined, 0);
      const b = node('KeywordSearchText', 'pool granite', 1, 1);
      const params = new Params();
      const calls = [await prepareSearchSql(db, gen.layout, a, 'p', params, 0), await prepareSearchSql(db, gen.layout, b, 'p', params, 1)];
      const got = await gen.select(calls, params, 'ORDER BY score DESC, p."ListingKey"');
      const filter = `${call(a.field, a.text)} and ${call(b.field, b.text, 1)}`;
      expect([...got.keys()]).toEqual(gen.keys(filter, { $orderby: 'relevance desc' }));
      const sa = gen.mem(a.field, a.text);
      const sb = gen.mem(b.field, b.text, 1);
      for (const [key, score] of got) expect(score).toBe(0 + sa.get(key)! + sb.get(key)!);
      expect(got.size).toBeGreaterThan(10);
    });

    it('a negated call is its complement (the GIN test is only a necessary condition)', async () => {
      const params = new Params();
      const sql = await prepareSearchSql(db, gen.layout, node('RawAddressSearchText', 'vista houst'), 'p', params, 0);
      const { rows } = await db.query<{ key: string }>(
        `SELECT p."ListingKey" AS key FROM ${gen.layout.table('Property')} AS p ${sql.join} WHERE NOT ${sql.test} ORDER BY 1`,
        params.values,
      );
      const want = gen.keys(`not ${call('RawAddressSearchText', 'vista houst')}`);
      expect(rows.map((r) => r.key)).toEqual(sorted(want));
      expect(want.length).toBeLessThan(records.length);
    });
  });

  describe('SQL', () => {
    it('a call the field cannot match is false without a join', async () => {
      const params = new Params();
      expect(await prepareSearchSql(db, gen.layout, node('KeywordSearchText', 'pool qqqzzz'), 'p', params, 0)).toEqual({
        join: '',
        test: 'false',
        score: "'0'::float8",
      });
      expect(params.values).toEqual([]);
      // 40% of three terms is two: one known term is not enough
      expect((await prepareSearchSql(db, gen.layout, node('RawAddressSearchText', 'houston qqqzzz zzqqqx'), 'p', params, 0)).test).toBe('false');
    });

    it('every literal is a bind parameter: the statement text is the same for other words of the same shape', async () => {
      const statements: string[] = [];
      for (const [field, text, word] of [
        ['KeywordSearchText', "pool o'granite; DROP TABLE x", 'granite'],
        ['KeywordSearchText', 'pool granite', 'pool'],
        ['KeywordSearchText', 'gas range', 'range'],
        ['RawAddressSearchText', 'washingtn street seattle', 'washington'],
        ['RawAddressSearchText', 'main st phoenix', 'phoenix'],
      ] as Array<[SearchFieldName, string, string]>) {
        const params = new Params();
        const sql = await prepareSearchSql(db, gen.layout, node(field, text, 1), 'p', params, 3);
        const { rows } = await db.query(`SELECT count(*) FROM ${gen.layout.table('Property')} AS p ${sql.join} WHERE ${sql.test}`, params.values);
        expect(Number(rows[0].count)).toBe(gen.keys(call(field, text, 1)).length);
        const statement = sql.test + sql.score + sql.join;
        statements.push(statement);
        expect(statement).not.toMatch(/pool|granite|drop|gas|range|wash|street|seattle|main|phoenix/i);
        expect(params.values.flat()).toContain(word);
      }
      expect(statements[1]).toBe(statements[2]);
    });

    it("reads the statistics in one statement, whose prefix and one-edit look-ups are ranges of #terms' indexes", async () => {
      const seen: Array<{ text: string; values: readonly unknown[] }> = [];
      const recording: Queryable = {
        query: (text, values) => {
          seen.push({ text, values: values ?? [] });
          return db.query(text, values as unknown[]) as never;
        },
      };
      await prepareSearchSql(recording, gen.layout, node('RawAddressSearchText', 'washingtn street seatt'), 'p', new Params(), 0);
      expect(seen).toHaveLength(1);
      const client = await db.connect();
      try {
        await client.query('SET enable_seqscan = off');
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${seen[0].text}`, seen[0].values as unknown[]);
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
        // the prefix, the first half of each one-edit word on the key, the last part on the reversed terms
        expect(plan).toMatch(/Index Cond: \(\(field = .*\) AND \(term >= \(p\.prefix\)/);
        expect(plan).toMatch(/Index Cond: \(\(field = .*\) AND \(term >= \(f\.head\)/);
        expect(plan).toMatch(/Index Scan on "#terms#reverse"/);
        expect(plan).not.toContain('Seq Scan');
      } finally {
        await client.query('RESET enable_seqscan');
        client.release();
      }
    });

    it('a statement that only filters binds only the parameters of its test; reading the score adds the rest, once', async () => {
      const params = new Params();
      const sql = await prepareSearchSql(db, gen.layout, node('RawAddressSearchText', 'vista houst'), 'p', params, 0);
      const before = params.values.length;
      const { rows } = await db.query(`SELECT count(*) FROM ${gen.layout.table('Property')} AS p ${sql.join} WHERE ${sql.test}`, params.values);
      expect(Number(rows[0].count)).toBe(gen.keys(call('RawAddressSearchText', 'vista houst')).length);
      const score = sql.score;
      expect(params.values.length).toBeGreaterThan(before);
      const after = params.values.length;
      expect(sql.score).toBe(score);
      expect(params.values.length).toBe(after);
    });

    it.each([
      ['KeywordSearchText', 'pool granite', undefined],
      ['KeywordSearchText', 'pool granite spa', 1],
      ['RawAddressSearchText', 'vista houst', undefined],
    ] as Array<[SearchFieldName, string, number | undefined]>)('%s %j (min %s) finds candidate rows through the GIN index', async (field, text, min) => {
      const params = new Params();
      const sql = await prepareSearchSql(db, gen.layout, node(field, text, min), 'p', params, 0);
      const client = await db.connect();
      try {
        // the table is small enough that a sequential scan would win: take it away to see that the test can use the index
        await client.query('SET enable_seqscan = off');
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(
          `EXPLAIN SELECT p."ListingKey" FROM ${gen.layout.table('Property')} AS p ${sql.join} WHERE ${sql.test}`,
          params.values,
        );
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
        expect(plan).toContain(`Bitmap Index Scan on "Property#${field}"`);
        expect(plan).toMatch(new RegExp(`Index Cond: \\("${field}#tokens" ${min === undefined && field !== 'RawAddressSearchText' ? '@>' : '&&'} `));
      } finally {
        await client.query('RESET enable_seqscan');
        client.release();
      }
    });
  });

  describe('errors', () => {
    const noDatabase: Queryable = {
      query: () => {
        throw new Error('the database was read');
      },
    };
    const cases = ERROR_CASES;

    it.each(cases)('%j with min_matches %s: %s, as the in-memory engine, without reading the database', async (text, min, code) => {
      for (const field of ['KeywordSearchText', 'RawAddressSearchText'] as const) {
        const view = searchViewOf(gen.engine, field);
        const want = codeOf(() => prepareSearch(view, text, min));
        expect(want?.code).toBe(code);
        expect(codeOf(() => checkSearch(node(field, text, min)))).toEqual(want);
        const rejected = await prepareSearchSql(noDatabase, gen.layout, node(field, text, min), 'p', new Params(), 0).then(
          () => undefined,
          (e: unknown) => (e instanceof QueryError ? { code: e.code, message: e.message } : e),
        );
        expect(rejected).toEqual(want);
      }
    });

    it('the engine answers the same codes over OData', () => {
      expect(() => gen.keys(call('KeywordSearchText', ' ,. '))).toThrow(expect.objectContaining({ code: 'EmptySearchQuery' }));
      expect(() => gen.keys(call('KeywordSearchText', cases[5][0]))).toThrow(expect.objectContaining({ code: 'TooManySearchTerms' }));
      expect(codeOf(() => checkSearch(node('KeywordSearchText', cases[5][0])))?.code).toBe('TooManySearchTerms');
      expect(codeOf(() => checkSearch(node('KeywordSearchText', Array.from({ length: 32 }, (_, i) => `t${i}`).join(' '))))).toBeUndefined();
    });
  });

  describe('prefix and one-edit words', () => {
    /** The words a call scores (each term's exact word and expansions), in PostgreSQL and in memory. */
    async function wordsOf(f: Fixture, text: string): Promise<{ pg: string[]; mem: string[] }> {
      const params = new Params();
      const sql = await prepareSearchSql(db, f.layout, node('RawAddressSearchText', text, 1), 'p', params, 0);
      const pgWords = sql.test === 'false' ? [] : (params.values[0] as string[]);
      const view = searchViewOf(f.engine, 'RawAddressSearchText');
      const memWords = prepareSearch(view, text, 1).terms.flatMap((t) => [...(t.exact >= 0 ? [t.exact] : []), ...t.inexact].map((id) => view.termOf(id)));
      return { pg: sorted(new Set(pgWords)), mem: sorted(new Set(memWords)) };
    }

    /** Every one-edit variant of a word (by UTF-16 unit, as the in-memory check counts): deletions, swaps, substitutions and insertions at each position. */
    function variants(word: string): string[] {
      const out = new Set<string>();
      for (let i = 0; i <= word.length; i++) {
        if (i < word.length) out.add(word.slice(0, i) + word.slice(i + 1));
        if (i + 1 < word.length) out.add(word.slice(0, i) + word[i + 1] + word[i] + word.slice(i + 2));
        if (i < word.length) out.add(`${word.slice(0, i)}q${word.slice(i + 1)}`);
        out.add(`${word.slice(0, i)}x${word.slice(i)}`);
      }
      return [...out];
    }

    it('equal the in-memory expansions for every one-edit variant of vocabulary words (edits at each position, either half)', async () => {
      const { rows } = await db.query<{ term: string }>(
        `SELECT term FROM ${gen.layout.terms} WHERE field = 'RawAddressSearchText' AND term ~ '^[a-z]{5,}$' ORDER BY term`,
      );
      const words = rows.map((r) => r.term).filter((_, i) => i % Math.ceil(rows.length / 24) === 0);
      let fuzzy = 0;
      for (const word of words) {
        for (const text of [word, ...variants(word)]) {
          const got = await wordsOf(gen, text);
          expect(got.pg, text).toEqual(got.mem);
          if (got.mem.includes(word) && text !== word) fuzzy++;
        }
      }
      expect(fuzzy, 'variants that found their word').toBeGreaterThan(words.length * 10);
    });

    it('letters beyond ASCII, astral ones included, and prefixes of them', async () => {
      const rows: Rec[] = [
        { ListingKey: 'U1', UnparsedAddress: '12 Straße Nord', City: 'Ærøskøbing' },
        { ListingKey: 'U2', UnparsedAddress: '7 𠀋𠀌𠀍𠀎 Road', City: 'Łódź' },
        { ListingKey: 'U3', UnparsedAddress: '9 Strasse Nord', City: 'Tōkyō 東京' },
        { ListingKey: 'U4', UnparsedAddress: '𠀋𠀌𠀍 Lane', City: 'Ærø' },
      ];
      const f = await Fixture.load(db, 'letters', await Engine.open({ data: { Property: rows } }));
      const texts = [
        'straße',
        'strase',
        'strasse',
        'strßae',
        'ærøskøbing',
        'ærøskobing',
        'ærøsk',
        'æ',
        'ær',
        '𠀋𠀌𠀍𠀎',
        '𠀋𠀌𠀍',
        '𠀋𠀌𠀍𠀏',
        '𠀋𠀌',
        '𠀋',
        'lodz',
        'łodz',
        'łodzz',
        'tokyo',
        '東京',
        '東',
        'nord 𠀋𠀌𠀍𠀐',
      ];
      for (const text of texts) {
        const got = await wordsOf(f, text);
        expect(got.pg, text).toEqual(got.mem);
        await expectSameAsEngine(f, 'RawAddressSearchText', text);
      }
      expect((await wordsOf(f, '𠀋𠀌𠀍𠀏')).mem).toContain('𠀋𠀌𠀍𠀎');
      expect((await wordsOf(f, 'ærøsk')).mem).toContain('ærøskøbing');
    });
  });

  describe('small data sets of the in-memory tests', () => {
    it('thresholds and min_matches (row k holds w1..wk)', async () => {
      const words = THRESHOLD_WORDS;
      const f = await Fixture.load(db, 'thresholds', await Engine.open({ data: { Property: THRESHOLD_RECORDS } }));
      const first = (s: Scores): number => Math.min(...[...s.keys()].map((k) => Number(k.slice(1))));
      for (const [n, need] of [
        [1, 1],
        [2, 1],
        [3, 2],
        [5, 2],
        [10, 4],
      ]) {
        const got = await expectSameAsEngine(f, 'RawAddressSearchText', words.slice(0, n).join(' '));
        expect(first(got)).toBe(need);
        expect(got.size).toBe(10 - need + 1);
      }
      const five = words.slice(0, 5).join(' ');
      expect(first(await expectSameAsEngine(f, 'KeywordSearchText', five))).toBe(5);
      expect(first(await expectSameAsEngine(f, 'KeywordSearchText', five, 1))).toBe(1);
      expect(first(await expectSameAsEngine(f, 'RawAddressSearchText', five, 5))).toBe(5);
      expect(sorted((await expectSameAsEngine(f, 'RawAddressSearchText', five, 1000)).keys())).toEqual(
        sorted((await f.pg('RawAddressSearchText', five, 5)).keys()),
      );
      expect(await expectSameAsEngine(f, 'KeywordSearchText', 'w3 W3 w3 w1')).toEqual(await f.pg('KeywordSearchText', 'w3 w1'));
    });

    it('addresses: abbreviations, type-ahead, one-edit typos, half scores, exact wins, junk', async () => {
      const f = await Fixture.load(db, 'addresses', await Engine.open({ data: { Property: ADDRESS_RECORDS } }));
      const find = async (text: string, min?: number): Promise<string[]> => sorted((await expectSameAsEngine(f, 'RawAddressSearchText', text, min)).keys());
      const cases: Array<[string, number | undefined, string[]]> = [
        ['Maple St', 2, ['A']],
        ['Sunset Boulevard', 2, ['B']],
        ['Harbor Ave', 2, ['C']],
        ['South Main Street', 3, ['E']],
        ['1200 North Maple', 3, ['A']],
        ['Maplewood Court', 2, ['D']],
        ['45 Suns', 2, ['B']],
        ['1200 N Map', 3, ['A']],
        ['Suns 45', 2, []],
        ['77 Harbr Avenue', 3, ['C']],
        ['45 Sunest Blvd', 3, ['B']],
        ['1200 Mapel', 2, ['A']],
        ['Harbour Tampa', 2, ['C']],
        ['Harbpr Tampa', 2, ['C']],
        ['Harboxr Tampa', 2, ['C']],
        ['Hrbr Tampa', 2, []],
        ['4B', undefined, ['A']],
        ['Unit 4B Maple', 3, ['A']],
        ['98115', undefined, ['D']],
        ['zzqx', undefined, []],
        ['qqqqq wwwww', undefined, []],
        ['Maple zzqx xxzy qqqq', 2, []],
        ['Harbor zzqx xxzy qqqq', undefined, []],
        ['Harbor Tampa xxzy qqqq', undefined, ['C']],
      ];
      for (const [text, min, keys] of cases) expect(await find(text, min), text).toEqual(keys);
      const exact = await f.pg('RawAddressSearchText', 'Sunset', 1);
      const fuzzy = await f.pg('RawAddressSearchText', 'Sunest', 1);
      expect(fuzzy.get('B')).toBeCloseTo(exact.get('B')! / 2, 12);
      const maple = await expectSameAsEngine(f, 'RawAddressSearchText', 'maple', 1);
      expect(maple.get('A')! > maple.get('D')!).toBe(true);
    });

    it('agent and office names with and without diacritics, first and last name fallback', async () => {
      const f = await Fixture.load(db, 'names', await Engine.open({ data: { Property: NAME_RECORDS } }));
      const find = async (field: SearchFieldName, text: string): Promise<string[]> => sorted((await expectSameAsEngine(f, field, text)).keys());
      expect(await find('ListAgentSearchText', 'jose')).toEqual(['A', 'B']);
      expect(await find('ListAgentSearchText', 'José Núñez')).toEqual(['A']);
      expect(await find('ListOfficeSearchText', "o'brien")).toEqual(['A']);
      expect(await find('ListOfficeSearchText', 'OBrien')).toEqual([]);
      expect(await find('BuyerAgentSearchText', "zoe o'brien")).toEqual(['A']);
      expect(await find('BuyerOfficeSearchText', 'muller')).toEqual(['B']);
      expect(await find('ListAgentSearchText', 'renee muller')).toEqual(['B']);
      expect(await find('ListAgentSearchText', 'mary')).toEqual(['C']);
    });
  });

  it('statistics of the live listings after upserts and removals (the in-memory engine on a later generation)', async () => {
    const base = [...generateListings({ listings: 600, seed: 'pg-live' })].map((l) => l.property);
    const engine = await Engine.open({ data: { Property: base } });
    const rng = new Rng('pg-live');
    await engine.remove(
      'Property',
      base.filter(() => rng.chance(0.2)).map((r) => r.ListingKey as string),
    );
    const changed: Rec[] = base
      .slice(0, 80)
      .map((r, i) => ({ ...r, PublicRemarks: `${String(r.PublicRemarks)} renovated pool ${i % 3 === 0 ? 'granite' : ''}`, City: i % 2 ? 'Houston' : r.City }));
    await engine.upsert('Property', changed);
    await engine.upsert(
      'Property',
      [...generateListings({ listings: 650, seed: 'pg-live-new' })].slice(600).map((l) => l.property),
    );
    const f = await Fixture.load(db, 'live', engine);
    for (const [field, text, min] of [
      ['KeywordSearchText', 'renovated pool granite', undefined],
      ['KeywordSearchText', 'renovated granite spa', 1],
      ['RawAddressSearchText', 'houston street 7', undefined],
      ['RawAddressSearchText', `${String(changed[3].StreetName)} housto`, undefined],
      ['ListAgentSearchText', String(changed[5].ListAgentLastName), undefined],
    ] as Array<[SearchFieldName, string, number | undefined]>) {
      expect((await expectSameAsEngine(f, field, text, min)).size, `${field} ${text}`).toBeGreaterThan(0);
    }
  });
});
