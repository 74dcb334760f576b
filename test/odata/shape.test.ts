/**
 * The literal-lifting scan (src/odata/shape.ts): texts that differ only in literals have one
 * shape, texts that differ otherwise have two, and on generated queries of every option the
 * lifted literals are exactly the lexer's literal tokens (strings, numbers, dates, geography
 * points), at the same offsets.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseQuery, splitQuery } from '../../src/odata/parse-query.js';
import { printQuery } from '../../src/odata/printer.js';
import { queryShape, type LiftedLiteral } from '../../src/odata/shape.js';
import { DateLike, Geography, lexer, NumberLit, StringLit } from '../../src/odata/tokens.js';
import { query } from './arbitraries.js';

const shapeOf = (text: string): string | undefined => queryShape(text)?.text;

describe('queryShape', () => {
  it('gives texts that differ only in literals one shape, and lifts the literals in order', () => {
    const a = queryShape("$filter=ListingId eq 'A1'&$select=ListingKey");
    const b = queryShape("$filter=ListingId eq 'it''s & more'&$select=ListingKey");
    expect(a?.text).toBe(b?.text);
    expect(a?.images).toEqual(["'A1'"]);
    expect(b?.images).toEqual(["'it''s & more'"]);
    const q1 =
      "$filter=StandardStatus eq 'Active' and ListPrice ge 300000 and ListPrice le 6.5e5 and ModificationTimestamp lt 2024-05-01T10:00:00Z&$orderby=ListPrice desc&$top=25&$skip=5";
    const q2 =
      "$filter=StandardStatus eq 'Closed' and ListPrice ge -1 and ListPrice le 2 and ModificationTimestamp lt 2023-01-01&$orderby=ListPrice desc&$top=0&$skip=100";
    expect(shapeOf(q1)).toBe(shapeOf(q2));
    expect(queryShape(q1)?.images).toEqual(["'Active'", '300000', '6.5e5', '2024-05-01T10:00:00Z', '25', '5']);
    const geo = (lon: number, lat: number, m: number) => `$filter=geo.distance(Location, geography'POINT(${lon} ${lat})') le ${m}`;
    expect(shapeOf(geo(-122.3, 47.6, 5000))).toBe(shapeOf(geo(-117, 32.5, 20)));
    expect(queryShape(geo(-122.3, 47.6, 5000))?.images).toEqual(["geography'POINT(-122.3 47.6)'", '5000']);
  });

  it('keeps everything that is not a literal in the shape', () => {
    const pairs: Array<[string, string]> = [
      ["$filter=City eq 'A'", "$filter=PostalCode eq 'A'"],
      ["$filter=City eq 'A'", "$filter=City ne 'A'"],
      ['$filter=BedroomsTotal eq 1', '$filter=BedroomsTotal eq null'],
      ['$filter=PoolPrivateYN eq true', '$filter=PoolPrivateYN eq false'],
      ['$filter=p10 eq 1', '$filter=p11 eq 1'],
      ['$top=5', '$top=5x'],
      ['$select=ListingKey', '$select=ListPrice'],
      ['$count=true', '$count=false'],
      ["$filter=City eq 'A'&$skiptoken=abc", "$filter=City eq 'A'&$skiptoken=abd"],
      ['$expand=Media($top=5)', '$expand=Media($top=6)'],
      ["$filter=City eq 'A'&foo=1", "$filter=City eq 'A'&foo=2"],
    ];
    for (const [a, b] of pairs) expect(shapeOf(a), `${a} / ${b}`).not.toBe(shapeOf(b));
  });

  it('gives up where it cannot be sure', () => {
    expect(queryShape("$filter=City eq 'A")).toBeNull();
    expect(queryShape("$filter=City eq 'A'\u0000")).toBeNull();
  });
});

/** The lexer's literal tokens of one option value: [offset, image]. */
function lexedLiterals(value: string): Array<[number, string]> | null {
  const lexed = lexer.tokenize(value);
  if (lexed.errors.length) return null;
  return lexed.tokens
    .filter((t) => [StringLit, NumberLit, DateLike, Geography].includes(t.tokenType) && !(t.tokenType === NumberLit && value[t.startOffset - 1] === '='))
    .map((t) => [t.startOffset, t.image]);
}

describe('the scan agrees with the lexer', () => {
  it('on generated queries of every option: the lifted literals are the lexer literal tokens', () => {
    let lifted = 0;
    fc.assert(
      fc.property(query, (q) => {
        const text = printQuery(q);
        const found: LiftedLiteral[] = [];
        const shape = queryShape(text, found);
        if (text.includes('\u0000')) {
          expect(shape).toBeNull(); // a NUL could be mistaken for a placeholder
          return;
        }
        expect(shape, text).not.toBeNull();
        for (const option of splitQuery(text)) {
          const mine = found.filter((l) => l.option === option.name).map((l): [number, string] => [l.offset, l.image]);
          if (['$filter', '$orderby', '$expand', '$apply'].includes(option.name)) expect(mine, text).toEqual(lexedLiterals(option.value));
          else if (option.name === '$top' || option.name === '$skip') expect(mine, text).toEqual([[0, option.value]]);
          else expect(mine, text).toEqual([]);
        }
        lifted += found.length;
        // the shape is the text with each literal replaced, and the parse does not depend on where it came from
        expect(parseQuery(text)).toEqual(q);
      }),
      { seed: 18, numRuns: 600 },
    );
    expect(lifted).toBeGreaterThan(600);
  });
});
