import { describe, expect, it } from 'vitest';
import { QueryError } from '../../src/errors.js';
import { generateListings } from '../../src/generate/dataset.js';
import { Rng } from '../../src/generate/prng.js';
import { evaluateSearch, prepareSearch, type SearchMatch } from '../../src/search/bm25.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../../src/schema/search-fields.js';
import { buildSearchIndexes, type SearchIndexes } from '../../src/search/indexes.js';
import { osaDistanceAtMostOne } from '../../src/search/lexicon.js';
import { rankByMaxScore, rankSearch } from '../../src/search/ranked.js';
import { normalizeAddressToken, tokenize } from '../../src/search/tokenize.js';
import { ADDRESS_NORMAL_FORM } from '../../src/search/usps.js';
import { ADDRESS_RECORDS, bm25Queries, ERROR_CASES, NAME_RECORDS, randomQueries, THRESHOLD_RECORDS, THRESHOLD_WORDS } from './fixtures.js';
import { NaiveSearch, osa } from './oracle.js';

type Rec = Record<string, unknown>;

const indexRecords = (records: Rec[]): SearchIndexes => buildSearchIndexes(records.length, (row, field) => records[row][field]);

function run(indexes: SearchIndexes, field: SearchFieldName, text: string, min?: number): SearchMatch {
  return evaluateSearch(indexes[field], prepareSearch(indexes[field], text, min));
}
const asMap = (m: SearchMatch): Map<number, number> => new Map([...m.rows].map((r, i) => [r, m.scores[i]]));
const keysOf = (records: Rec[], m: SearchMatch): string[] => [...m.rows].map((r) => records[r].ListingKey as string);

function expectSameAsOracle(actual: SearchMatch, expected: Map<number, number>, label: string): void {
  expect([...actual.rows], label).toEqual([...expected.keys()].sort((a, b) => a - b));
  actual.rows.forEach((row, i) => expect(Math.abs(actual.scores[i] - expected.get(row)!), `${label} row ${row}`).toBeLessThan(1e-9));
}

describe('tokenizer', () => {
  it.each([
    ['123 N. Main St #4B', ['123', 'n', 'main', 'st', '4b']],
    ["José O'Brien-Smith", ['jose', 'o', 'brien', 'smith']],
    ['Zoë ÉCOLE Núñez Müller', ['zoe', 'ecole', 'nunez', 'muller']],
    ['ﬁne ½ Ｗｉｄｅ', ['fine', '1', '2', 'wide']],
    ['Stainless Steel Appliance(s)', ['stainless', 'steel', 'appliance', 's']],
    ['', []],
    ['  --  ', []],
  ])('tokenizes %j', (text, tokens) => {
    expect(tokenize(text)).toEqual(tokens);
  });
});

describe('USPS normalization', () => {
  it.each([
    ['st', 'street'],
    ['str', 'street'],
    ['strt', 'street'],
    ['street', 'street'],
    ['ave', 'avenue'],
    ['av', 'avenue'],
    ['avn', 'avenue'],
    ['blvd', 'boulevard'],
    ['boul', 'boulevard'],
    ['n', 'north'],
    ['north', 'north'],
    ['ne', 'northeast'],
    ['sw', 'southwest'],
    // forms listed in two groups: the group whose primary name it is, else the first
    ['park', 'park'],
    ['parks', 'parks'],
    ['pkwy', 'parkway'],
    ['mdw', 'meadow'],
    ['spur', 'spur'],
    ['main', 'main'],
  ])('%s -> %s', (form, normal) => {
    expect(normalizeAddressToken(form)).toBe(normal);
  });

  it('covers the whole C1 table (every group maps its forms to one name)', () => {
    expect(ADDRESS_NORMAL_FORM.size).toBeGreaterThan(480);
    expect(new Set(ADDRESS_NORMAL_FORM.values()).size).toBeGreaterThan(200);
  });
});

describe('edit distance', () => {
  it('agrees with a full dynamic-programming OSA distance', () => {
    const words = ['maple', 'mapel', 'maples', 'mple', 'naple', 'apple', 'mapple', 'amplе', 'lamep', 'capel', 'map'];
    for (const a of words) for (const b of words) expect(osaDistanceAtMostOne(a, b), `${a}/${b}`).toBe(osa(a, b) <= 1);
  });
});

describe('BM25 equals a textbook implementation on generated data', () => {
  const records = [...generateListings({ listings: 1500, seed: 'bm25' })].map((l) => l.property);
  const indexes = indexRecords(records);
  const naive = Object.fromEntries(SEARCH_FIELDS.map((f) => [f, new NaiveSearch(records, f)])) as Record<SearchFieldName, NaiveSearch>;
  const sample = (i: number): Rec => records[(i * 97) % records.length];

  const queries = bm25Queries(sample);

  it.each(queries)('%s %j (min %s)', (field, text, min) => {
    const expected = naive[field].search(text, min);
    expectSameAsOracle(run(indexes, field, text, min), expected, `${field} '${text}'`);
    if (text !== 'nonexistentword') expect(expected.size, 'the query should match something').toBeGreaterThan(0);
  });

  it('address queries exercise inexact matches (some scores are not plain BM25 sums)', () => {
    const typo = run(indexes, 'RawAddressSearchText', 'washingtn street seattle');
    const exact = run(indexes, 'RawAddressSearchText', 'washington street seattle');
    expect(typo.rows.length).toBeGreaterThan(0);
    expect(typo.scores.reduce((a, b) => a + b, 0)).toBeLessThan(exact.scores.reduce((a, b) => a + b, 0));
  });

  it('random address and keyword queries built from the data', () => {
    for (let i = 0; i < 40; i++) {
      const { address: text, keyword: kw } = randomQueries(sample, i);
      expectSameAsOracle(run(indexes, 'RawAddressSearchText', text), naive.RawAddressSearchText.search(text), text);
      expectSameAsOracle(run(indexes, 'KeywordSearchText', kw), naive.KeywordSearchText.search(kw), kw);
    }
  });
});

describe('thresholds and min_matches', () => {
  const words = THRESHOLD_WORDS;
  const records = THRESHOLD_RECORDS;
  const indexes = indexRecords(records);
  const firstMatchingRow = (m: SearchMatch): number => m.rows[0] + 1; // words needed = row + 1

  it.each([
    [1, 1],
    [2, 1],
    [3, 2],
    [5, 2],
    [10, 4],
  ])('RawAddressSearchText with %i terms needs %i (40%%, rounded up)', (n, need) => {
    const text = words.slice(0, n).join(' ');
    const m = run(indexes, 'RawAddressSearchText', text);
    expect(firstMatchingRow(m)).toBe(need);
    expect(m.rows.length).toBe(10 - need + 1);
  });

  it('other fields need every term by default', () => {
    expect(firstMatchingRow(run(indexes, 'KeywordSearchText', words.slice(0, 5).join(' ')))).toBe(5);
  });

  it('min_matches 1, equal to and above the term count (capped)', () => {
    const text = words.slice(0, 5).join(' ');
    expect(firstMatchingRow(run(indexes, 'KeywordSearchText', text, 1))).toBe(1);
    expect(firstMatchingRow(run(indexes, 'RawAddressSearchText', text, 5))).toBe(5);
    expect([...run(indexes, 'RawAddressSearchText', text, 1000).rows]).toEqual([...run(indexes, 'RawAddressSearchText', text, 5).rows]);
    expect(prepareSearch(indexes.KeywordSearchText, text, 1000).minMatches).toBe(5);
  });

  it('deduplicates query terms (the count is of distinct tokens)', () => {
    const p = prepareSearch(indexes.KeywordSearchText, 'w3 W3 w3 w1');
    expect(p.terms.map((t) => t.term)).toEqual(['w3', 'w1']);
    expect(p.minMatches).toBe(2);
    expect(asMap(run(indexes, 'KeywordSearchText', 'w3 w3 w1'))).toEqual(asMap(run(indexes, 'KeywordSearchText', 'w3 w1')));
    // address normalization happens before deduplication: 'St' and 'Street' are one term
    expect(prepareSearch(indexes.RawAddressSearchText, 'St Street').terms).toHaveLength(1);
  });

  it.each(ERROR_CASES)('rejects %j with min_matches %s as %s', (text, min, code) => {
    let error: unknown;
    try {
      prepareSearch(indexes.KeywordSearchText, text, min);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(QueryError);
    expect((error as QueryError).code).toBe(code);
    expect((error as QueryError).option).toBe('$filter');
  });

  it('accepts exactly 32 distinct terms', () => {
    expect(prepareSearch(indexes.KeywordSearchText, Array.from({ length: 32 }, (_, i) => `t${i}`).join(' ')).terms).toHaveLength(32);
  });
});

describe('address search', () => {
  const records = ADDRESS_RECORDS;
  const indexes = indexRecords(records);
  const find = (text: string, min?: number): string[] => keysOf(records, run(indexes, 'RawAddressSearchText', text, min));
  const best = (text: string): string => {
    const m = run(indexes, 'RawAddressSearchText', text);
    let top = 0;
    m.scores.forEach((s, i) => (s > m.scores[top] ? (top = i) : 0));
    return records[m.rows[top]].ListingKey as string;
  };

  it('matches abbreviations both ways', () => {
    expect(find('Maple St', 2)).toEqual(['A']);
    expect(find('Sunset Boulevard', 2)).toEqual(['B']);
    expect(find('Harbor Ave', 2)).toEqual(['C']);
    expect(find('South Main Street', 3)).toEqual(['E']);
    expect(find('1200 North Maple', 3)).toEqual(['A']);
    expect(find('Maplewood Court', 2)).toEqual(['D']);
  });

  it('matches a partial address typed so far (last term as a prefix)', () => {
    expect(find('45 Suns', 2)).toEqual(['B']);
    expect(find('1200 N Map', 3)).toEqual(['A']);
    expect(best('9 Maplew')).toBe('D');
    // only the last term is a prefix
    expect(find('Suns 45', 2)).toEqual([]);
  });

  it('matches a one-letter typo in a street name of 5+ letters', () => {
    expect(find('77 Harbr Avenue', 3)).toEqual(['C']); // deletion
    expect(find('45 Sunest Blvd', 3)).toEqual(['B']); // swap of neighbours
    expect(find('1200 Mapel', 2)).toEqual(['A']); // swap (not the last term's prefix)
    expect(find('Harbour Tampa', 2)).toEqual(['C']); // insertion
    expect(find('Harbpr Tampa', 2)).toEqual(['C']); // substitution
    expect(find('Harboxr Tampa', 2)).toEqual(['C']);
    expect(find('Hrbr Tampa', 2)).toEqual([]); // two edits
  });

  it('scores inexact matches at half and lets an exact match win', () => {
    const exact = run(indexes, 'RawAddressSearchText', 'Sunset', 1);
    const fuzzy = run(indexes, 'RawAddressSearchText', 'Sunest', 1);
    expect(fuzzy.scores[0]).toBeCloseTo(exact.scores[0] / 2, 12);
    // 'maple' is exact in A and one edit from nothing else; 'maplewood' in D is only a prefix match
    const m = asMap(run(indexes, 'RawAddressSearchText', 'maple', 1));
    expect(m.get(0)! > m.get(3)!).toBe(true);
  });

  it('finds a unit number and a ZIP code alone', () => {
    expect(find('4B')).toEqual(['A']);
    expect(find('Unit 4B Maple', 3)).toEqual(['A']);
    expect(find('98115')).toEqual(['D']);
    expect(find('85004')).toEqual(['E']);
  });

  it('does not match junk terms', () => {
    expect(find('zzqx')).toEqual([]);
    expect(find('qqqqq wwwww')).toEqual([]);
    expect(find('Maple zzqx xxzy qqqq', 2)).toEqual([]);
    // 40% of 4 terms is 2: one real term and three junk terms are not enough
    expect(find('Harbor zzqx xxzy qqqq')).toEqual([]);
    expect(find('Harbor Tampa xxzy qqqq')).toEqual(['C']);
  });
});

describe('agent and office names', () => {
  const records = NAME_RECORDS;
  const indexes = indexRecords(records);
  const find = (field: SearchFieldName, text: string): string[] => keysOf(records, run(indexes, field, text));

  it('matches with and without diacritics and apostrophes', () => {
    expect(find('ListAgentSearchText', 'jose')).toEqual(['A', 'B']);
    expect(find('ListAgentSearchText', 'José Núñez')).toEqual(['A']);
    expect(find('ListAgentSearchText', 'nunez jose')).toEqual(['A']);
    expect(find('ListOfficeSearchText', "o'brien")).toEqual(['A']);
    expect(find('ListOfficeSearchText', 'OBrien')).toEqual([]);
    expect(find('BuyerAgentSearchText', 'zoe obrien'.replace('obrien', "o'brien"))).toEqual(['A']);
    expect(find('BuyerOfficeSearchText', 'muller')).toEqual(['B']);
  });

  it('falls back to first and last name where the full name is absent', () => {
    expect(find('ListAgentSearchText', 'renee muller')).toEqual(['B']);
    expect(find('ListAgentSearchText', 'mary')).toEqual(['C']);
  });
});

describe('ranked top-k (impact-ordered, early stop)', () => {
  const records = [...generateListings({ listings: 6000, seed: 'rank' })].map((l) => l.property);
  const indexes = indexRecords(records);
  const tieRank = Uint32Array.from(records.keys()).reverse(); // ties by a rank unrelated to row order

  function reference(field: SearchFieldName, text: string, k: number, accept?: (row: number) => boolean): Array<[number, number]> {
    const all = run(indexes, field, text);
    return [...all.rows]
      .map((row, i) => [row, all.scores[i]] as [number, number])
      .filter(([row]) => !accept || accept(row))
      .sort((a, b) => b[1] - a[1] || tieRank[a[0]] - tieRank[b[0]])
      .slice(0, k);
  }

  it.each([
    ['KeywordSearchText', 'pool granite', 25],
    ['KeywordSearchText', 'pool', 10],
    ['KeywordSearchText', 'welcome home granite countertops', 7],
    ['KeywordSearchText', 'dishwasher microwave refrigerator', 1],
    ['KeywordSearchText', 'pool granite', 0],
    ['KeywordSearchText', 'pool granite', 100000],
    ['KeywordSearchText', 'pool nosuchword', 5],
    ['ListOfficeSearchText', 'realty', 30],
    ['RawAddressSearchText', 'maple street seattle 98103', 10],
  ] as Array<[SearchFieldName, string, number]>)('%s %j top %i equals sorting every match', (field, text, k) => {
    const got = rankSearch(indexes[field], prepareSearch(indexes[field], text), k, { tieRank });
    const want = reference(field, text, k);
    expect([...got.rows]).toEqual(want.map(([row]) => row));
    expect([...got.scores]).toEqual(want.map(([, s]) => s));
    if (text === 'pool granite' && k === 25) expect(got.rows.length).toBe(25);
  });

  it('threshold and fuzzy searches (MaxScore split) equal sorting every match, for 200 generated queries', () => {
    const rng = new Rng('maxscore');
    const pick = (): Rec => records[rng.int(0, records.length - 1)];
    let split = 0;
    for (let i = 0; i < 200; i++) {
      const a = pick();
      const b = pick();
      const words = [
        a.StreetNumber,
        a.StreetName,
        rng.pick(['St', 'Street', 'Ave', 'Way', 'Blvd']),
        b.City,
        rng.chance(0.5) ? a.PostalCode : 'zzqx',
        rng.chance(0.3) ? String(a.StreetName).slice(0, 3) : undefined,
      ]
        .filter((w) => w !== undefined)
        .map(String);
      const text = words.join(' ');
      const k = rng.pick([1, 5, 10, 25]);
      const min = rng.chance(0.3) ? rng.int(1, 3) : undefined;
      const field = rng.chance(0.8) ? 'RawAddressSearchText' : 'KeywordSearchText';
      const q = field === 'KeywordSearchText' ? `pool ${rng.pick(['granite', 'spa', 'view', 'quartz'])} ${rng.pick(['garage', 'deck', 'xyzzy'])}` : text;
      const prepared = prepareSearch(indexes[field], q, field === 'KeywordSearchText' ? rng.int(1, 2) : min);
      const got = rankSearch(indexes[field], prepared, k, { tieRank });
      if (rankByMaxScore(indexes[field], prepared, k, undefined, tieRank)) split++;
      const all = evaluateSearch(indexes[field], prepared);
      const want = [...all.rows]
        .map((row, j) => [row, all.scores[j]] as [number, number])
        .sort((x, y) => y[1] - x[1] || tieRank[x[0]] - tieRank[y[0]])
        .slice(0, k);
      expect([...got.rows], `${field} '${q}' k=${k}`).toEqual(want.map(([row]) => row));
      expect([...got.scores], `${field} '${q}'`).toEqual(want.map(([, sc]) => sc));
    }
    expect(split, 'queries answered through the MaxScore split').toBeGreaterThan(20);
  });

  it('applies the accept predicate inside the walk (visibility), not after truncation', () => {
    const accept = (row: number): boolean => records[row].OriginatingSystemName === 'HAR';
    const got = rankSearch(indexes.KeywordSearchText, prepareSearch(indexes.KeywordSearchText, 'pool granite'), 20, { tieRank, accept });
    const want = reference('KeywordSearchText', 'pool granite', 20, accept);
    expect(want).toHaveLength(20);
    expect([...got.rows]).toEqual(want.map(([row]) => row));
  });
});

describe('indexes read from the column store', () => {
  it('equal the indexes built from the JSON records (same terms, postings, lengths)', async () => {
    const { Engine } = await import('../../src/engine.js');
    const { buildSearchIndexesOfTable } = await import('../../src/search/indexes.js');
    const records = [...generateListings({ listings: 1200, seed: 'columns' })].map((l) => l.property);
    // a few rows exercise the agent-name fallbacks and empty values
    records[0] = { ...records[0], ListAgentFullName: '' };
    records[1] = { ...records[1], ListAgentFullName: undefined, ListAgentFirstName: 'Zoë', ListAgentLastName: "O'Brien" };
    const engine = await Engine.open({ data: { Property: records } });
    const fromColumns = buildSearchIndexesOfTable(engine.store.Property);
    const fromRecords = indexRecords(records);
    for (const field of SEARCH_FIELDS) {
      const a = fromColumns[field];
      const b = fromRecords[field];
      expect(a.terms.list(), field).toEqual(b.terms.list());
      expect([...a.offsets], field).toEqual([...b.offsets]);
      expect([...a.rows], field).toEqual([...b.rows]);
      expect([...a.tfs], field).toEqual([...b.tfs]);
      expect([...a.lengths], field).toEqual([...b.lengths]);
    }
  });
});
