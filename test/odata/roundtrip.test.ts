/**
 * Printer/parser round trip on generated ASTs: for any AST the parser can produce,
 * parse(print(ast)) deep-equals ast, and printing is a fixed point (print(parse(print(ast))) is
 * the same text). Seeded, so every run checks the same cases.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseQuery } from '../../src/odata/parse-query.js';
import { printExpr, printQuery } from '../../src/odata/printer.js';
import { expr, query } from './arbitraries.js';
import { filter } from './helpers.js';

describe('print then parse', () => {
  it('gives back every generated expression', () => {
    fc.assert(
      fc.property(expr, (e) => {
        const text = printExpr(e);
        expect(filter(text)).toEqual(e);
      }),
      { seed: 20240501, numRuns: 1500 },
    );
  });

  it('gives back every generated query (all options)', () => {
    fc.assert(
      fc.property(query, (q) => {
        const text = printQuery(q);
        const back = parseQuery(text);
        expect(back).toEqual(q);
        expect(printQuery(back)).toBe(text);
      }),
      { seed: 4326, numRuns: 500 },
    );
  });

  it('is canonical: reparsed text prints identically, whatever whitespace the input had', () => {
    const spaced = fc.property(expr, (e) => {
      const text = printExpr(e);
      fc.pre(!text.includes("'")); // keep the substitutions out of string and geography literals
      // Add optional whitespace where OData allows it (BWS): inside parentheses, around commas.
      const loose = text.replace(/\(/g, '( ').replace(/\)/g, ' )').replace(/,/g, ' , ');
      expect(printExpr(filter(loose))).toBe(text);
    });
    fc.assert(spaced, { seed: 7, numRuns: 300 });
  });
});
