/**
 * The field index builder (src/search/postings.ts) against a plain reference: tokenize every text,
 * normalize address tokens, give term ids through a Map in first-seen order, count per row. The
 * builder's character-level lookup, its UTF-8 and ASCII byte paths, the steps form and the
 * column-reading build of a whole table must all give exactly the reference's index.
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { generateListings } from '../../src/generate/dataset.js';
import { Rng } from '../../src/generate/prng.js';
import { SEARCH_FIELDS } from '../../src/schema/search-fields.js';
import { buildSearchIndexesOfTable, searchIndexOfTableSteps, searchTextsOf } from '../../src/search/indexes.js';
import { BUILD_STEP_TOKENS, buildFieldIndex, FieldIndexBuilder, type FieldIndex } from '../../src/search/postings.js';
import { normalizeAddressToken, tokenize } from '../../src/search/tokenize.js';
import { runNow } from '../../src/util/steps.js';
import { TermDictionary } from '../../src/search/terms.js';

/** The reference index of rows of texts. */
function referenceIndex(rowTexts: readonly (readonly string[])[], address: boolean): FieldIndex {
  const termIds = new Map<string, number>();
  const terms: string[] = [];
  const counts: Map<number, number>[] = [];
  const lengths = new Uint32Array(rowTexts.length);
  let total = 0;
  rowTexts.forEach((texts, row) => {
    const count = new Map<number, number>();
    for (const text of texts) {
      for (const token of tokenize(text)) {
        const term = address ? normalizeAddressToken(token) : token;
        let id = termIds.get(term);
        if (id === undefined) {
          id = terms.length;
          termIds.set(term, id);
          terms.push(term);
        }
        count.set(id, (count.get(id) ?? 0) + 1);
        lengths[row]++;
      }
    }
    total += lengths[row];
    counts.push(count);
  });
  const postings: { row: number; tf: number }[][] = terms.map(() => []);
  counts.forEach((count, row) => {
    for (const [id, n] of count) postings[id].push({ row, tf: Math.min(n, 0xffff) });
  });
  const offsets = new Uint32Array(terms.length + 1);
  postings.forEach((p, t) => (offsets[t + 1] = offsets[t] + p.length));
  const flat = postings.flat();
  return {
    rowCount: rowTexts.length,
    address,
    terms: TermDictionary.of(terms),
    offsets,
    rows: Uint32Array.from(flat, (p) => p.row),
    tfs: Uint16Array.from(flat, (p) => p.tf),
    lengths,
    avgLength: rowTexts.length === 0 ? 0 : total / rowTexts.length,
  };
}

function expectSameIndex(actual: FieldIndex, expected: FieldIndex, label: string): void {
  expect(actual.rowCount, label).toBe(expected.rowCount);
  expect(actual.address, label).toBe(expected.address);
  expect(actual.terms.list(), label).toEqual(expected.terms.list());
  expected.terms.list().forEach((term, id) => expect(actual.terms.id(term), label).toBe(id));
  expect([...actual.offsets], label).toEqual([...expected.offsets]);
  expect([...actual.rows], label).toEqual([...expected.rows]);
  expect([...actual.tfs], label).toEqual([...expected.tfs]);
  expect([...actual.lengths], label).toEqual([...expected.lengths]);
  expect(actual.avgLength, label).toBe(expected.avgLength);
}

const WORDS = [
  'Street',
  'ST',
  'st',
  'str',
  'North',
  'N',
  'nw',
  'Avenue',
  'AVE',
  'apt',
  'Unit',
  'Suite',
  'Oak',
  'MAPLE',
  'pool',
  'Pool',
  'spa',
  'x',
  'A1',
  '42b',
];
const NON_ASCII = ['Zoë', 'café', 'Ｆｕｌｌ', 'ﬁne', 'Straße', 'Σίσυφος', 'e\u0301te', '😀', 'naïve', 'Ångström', '\u00a0', 'İstanbul', 'ǅemal'];
const SEPARATORS = [' ', ' ', ' ', ',', '-', '.', '/', "'", '#', '\t', '\n', '\u0000', '  ', '_', '(', ')'];

/** A random text of words, digits, separators; non-ASCII ones with `nonAscii`. */
function randomText(rng: Rng, nonAscii: boolean): string {
  const kind = rng.int(0, 19);
  if (kind === 0) return '';
  if (kind === 1) return SEPARATORS[rng.int(0, SEPARATORS.length - 1)];
  if (kind === 2) return 'Ab'.repeat(rng.int(100, 3000)) + ' z'; // a token longer than any scratch buffer
  const parts: string[] = [];
  for (let n = rng.int(1, 30); n > 0; n--) {
    const pick = rng.int(0, 9);
    if (pick < 4) parts.push(WORDS[rng.int(0, WORDS.length - 1)]);
    else if (pick < 6) parts.push(String(rng.int(0, 99999)));
    else if (pick < 8) {
      // a fresh word: many distinct terms grow the builder's tables
      let w = '';
      for (let k = rng.int(1, 12); k > 0; k--) w += String.fromCharCode((rng.chance(0.2) ? 65 : 97) + rng.int(0, 25));
      parts.push(w);
    } else if (nonAscii && pick === 8) parts.push(NON_ASCII[rng.int(0, NON_ASCII.length - 1)]);
    else parts.push(WORDS[rng.int(0, WORDS.length - 1)].toUpperCase());
    parts.push(SEPARATORS[rng.int(0, SEPARATORS.length - 1)]);
  }
  return parts.join('');
}

function randomRows(seed: string, rows: number, nonAscii: boolean): string[][] {
  const rng = new Rng(seed);
  const out: string[][] = [];
  for (let r = 0; r < rows; r++) {
    const texts: string[] = [];
    for (let n = rng.int(0, 4); n > 0; n--) texts.push(randomText(rng, nonAscii && rng.chance(0.3)));
    out.push(texts);
  }
  // one row whose term frequency overflows 16 bits (clamped), and one with no text at all
  out[Math.min(3, rows - 1)] = ['pool '.repeat(70_000)];
  out[Math.min(5, rows - 1)] = [];
  return out;
}

describe('FieldIndexBuilder equals the reference index', () => {
  for (const address of [false, true]) {
    for (const nonAscii of [false, true]) {
      const label = `${address ? 'address' : 'plain'} field, ${nonAscii ? 'with' : 'without'} non-ASCII text`;
      const rows = randomRows(`build ${label}`, 1500, nonAscii);
      const expected = referenceIndex(rows, address);

      it(`from texts (${label})`, () => {
        expectSameIndex(
          buildFieldIndex(rows.length, (row, out) => out.push(...rows[row]), { address }),
          expected,
          label,
        );
      });

      it(`from tokens (${label})`, () => {
        const tokens = rows.map((texts) => texts.flatMap((t) => tokenize(t)));
        expectSameIndex(
          buildFieldIndex(tokens.length, (row, out) => out.push(...tokens[row]), { address, tokenized: true }),
          expected,
          label,
        );
      });

      it(`from UTF-8 bytes, term ids of repeated values and texts mixed (${label})`, () => {
        const encoder = new TextEncoder();
        const builder = new FieldIndexBuilder(rows.length, address);
        const repeated = new Map<string, Int32Array>();
        for (const texts of rows) {
          texts.forEach((text, k) => {
            const bytes = encoder.encode(`..${text}..`);
            const ascii = /^[\x00-\x7f]*$/.test(text); // eslint-disable-line no-control-regex -- the ASCII range on purpose
            if (k % 3 === 0) builder.addUtf8(bytes, 2, bytes.length - 2);
            else if (k % 3 === 1 && ascii) builder.addAscii(bytes, 2, bytes.length - 2);
            else if (text.length < 100) {
              let ids = repeated.get(text);
              if (ids === undefined) repeated.set(text, (ids = builder.termsOfText(text)));
              builder.addTerms(ids);
            } else builder.addText(text);
          });
          builder.endRow();
        }
        expectSameIndex(runNow(builder.finish(7)), expected, label);
      });
    }
  }

  it('of no rows', () => {
    expectSameIndex(
      buildFieldIndex(0, () => {}, { address: false }),
      referenceIndex([], false),
      'empty',
    );
  });

  it('refuses to finish before every row was added', () => {
    const builder = new FieldIndexBuilder(2, false);
    builder.addText('one');
    builder.endRow();
    expect(() => runNow(builder.finish(64))).toThrow(/1 rows added of 2/);
  });
});

describe('buildSearchIndexesOfTable equals the reference index of each field', () => {
  for (const nonAscii of [false, true]) {
    it(`over loaded listings ${nonAscii ? 'with' : 'without'} non-ASCII text in the free-text and name columns`, async () => {
      const rng = new Rng(`table ${nonAscii}`);
      const records: Record<string, unknown>[] = [...generateListings({ listings: 600, seed: 'build table' })].map((l) => ({ ...l.property }));
      records.forEach((r, i) => {
        if (rng.chance(0.5)) r.PublicRemarks = randomText(rng, nonAscii && rng.chance(0.5));
        if (rng.chance(0.2)) r.UnparsedAddress = randomText(rng, nonAscii && rng.chance(0.5));
        if (rng.chance(0.2)) r.City = WORDS[rng.int(0, WORDS.length - 1)] + (nonAscii ? ' Zoë' : ' Town');
        if (i % 7 === 0) r.ListAgentFullName = '';
        if (i % 11 === 0) r.ListAgentFullName = nonAscii ? 'Ångström, JOSÉ' : 'SMITH, Jo';
      });
      const engine = await Engine.open({ data: { Property: records } });
      const indexes = buildSearchIndexesOfTable(engine.store.Property);
      for (const field of SEARCH_FIELDS) {
        const rows = records.map((r) => searchTextsOf(field, 0, (_, name) => r[name], []));
        const reference = referenceIndex(rows, field === 'RawAddressSearchText');
        expectSameIndex(indexes[field], reference, field);
        // in steps (compaction's), with room for too few, exactly enough or too many pairs
        for (const pairs of [undefined, 10, reference.rows.length, 4 * reference.rows.length]) {
          const steps = searchIndexOfTableSteps(engine.store.Property, field, pairs);
          let yields = 0;
          let next = steps.next();
          for (; !next.done; next = steps.next()) yields++;
          // a yield once BUILD_STEP_TOKENS tokens were added since the last, at the end of a row
          const tokens = reference.lengths.reduce((a, b) => a + b, 0);
          expect(yields, field).toBeGreaterThanOrEqual(Math.floor(tokens / (BUILD_STEP_TOKENS + Math.max(...reference.lengths))));
          expectSameIndex(next.value, reference, `${field} in steps, room for ${pairs} pairs`);
        }
      }
    });
  }
});
