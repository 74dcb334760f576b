/**
 * Robustness: whatever the input, parseQuery returns an AST or throws a QueryError with a known
 * code, the option it concerns and a position inside that option's value; never another
 * exception, never a stack overflow, never a hang (16 KB inputs of pathological shapes; the
 * vitest timeout guards against the latter, no timing is asserted).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueryError } from '../../src/errors.js';
import { PARSE_ERROR_CODES } from '../../src/odata/errors.js';
import { parseQuery, splitQuery, type ParseOptions } from '../../src/odata/parse-query.js';
import { QUERIES } from '../../bench/parse.bench.js';

/** Top-level option errors concern the option name and carry no position. */
const WITHOUT_POSITION = new Set(['UnknownQueryOption', 'RepeatedQueryOption']);

/** Parses `text`; if it throws, checks the error is a well-formed QueryError. Returns its code. */
function parseOrCodedError(text: string, options?: ParseOptions): string | null {
  try {
    parseQuery(text, options);
    return null;
  } catch (e) {
    if (!(e instanceof QueryError)) throw new Error(`not a QueryError for ${JSON.stringify(text.slice(0, 200))}: ${String(e)}`, { cause: e });
    expect(PARSE_ERROR_CODES).toContain(e.code);
    expect(e.option).toBeTypeOf('string');
    expect(e.message.length).toBeGreaterThan(0);
    if (e.position === undefined) {
      // Only errors about a top-level option name have no position.
      expect(WITHOUT_POSITION).toContain(e.code);
    } else {
      const option = splitQuery(text).find((o) => o.name === e.option);
      expect(option, `option ${String(e.option)} is in the query`).toBeDefined();
      expect(e.position).toBeGreaterThanOrEqual(0);
      expect(e.position).toBeLessThanOrEqual(option?.value.length ?? -1);
      expect(e.message).toContain(`position ${String(e.position)}`);
    }
    return e.code;
  }
}

const VALID: readonly string[] = [
  ...QUERIES,
  "$filter=Appliances/all(a: a ne 'Range') and not (x in (1,2,3)) or -Price mul 2 ge 10.5e-1&$orderby=x desc",
  '$expand=Media($select=MediaKey;$filter=Order le 5;$orderby=Order;$top=1;$skip=0),OpenHouse&$count=false&$ignorenulls=true',
  '$apply=groupby((City),aggregate(ListPrice with p90 as P,$count as N))/filter(N gt 2)&$select=*&$format=json',
  "$filter=geo.distance(RawLocation,geography'POINT(-1.5 2.25)') le 10 and substring(City,1,2) eq 'ea' and now() gt 2024-01-01T00:00:00+01:00",
];

/** Characters that matter to the grammar, plus a few that never do. */
const ALPHABET = [...'()\',/:;=&$@*-+. \t"[]{}#%?!~^\\_aez019', 'and ', ' or ', ' eq ', 'not ', 'in ', "'", 'é', '\n', '\u0000', '𝔘'];

type Edit = { kind: 'insert' | 'replace' | 'delete' | 'duplicate'; at: number; text: string; len: number };

const edit: fc.Arbitrary<Edit> = fc.record({
  kind: fc.constantFrom<Edit['kind']>('insert', 'replace', 'delete', 'duplicate'),
  at: fc.nat(),
  text: fc.oneof(fc.constantFrom(...ALPHABET), fc.string({ unit: 'binary', maxLength: 3 })),
  len: fc.integer({ min: 1, max: 12 }),
});

function applyEdit(s: string, e: Edit): string {
  const at = s.length === 0 ? 0 : e.at % (s.length + 1);
  switch (e.kind) {
    case 'insert':
      return s.slice(0, at) + e.text + s.slice(at);
    case 'replace':
      return s.slice(0, at) + e.text + s.slice(at + 1);
    case 'delete':
      return s.slice(0, at) + s.slice(at + e.len);
    case 'duplicate':
      return s.slice(0, at + e.len) + s.slice(at, at + e.len) + s.slice(at + e.len);
  }
}

describe('random mutations of valid queries', () => {
  it('the unmutated queries parse', () => {
    for (const q of VALID) expect(parseOrCodedError(q)).toBeNull();
  });

  it('parse or throw a coded QueryError with a position in range', () => {
    const codes = new Map<string, number>();
    fc.assert(
      fc.property(fc.constantFrom(...VALID), fc.array(edit, { minLength: 1, maxLength: 6 }), (base, edits) => {
        const code = parseOrCodedError(edits.reduce(applyEdit, base)) ?? 'parsed';
        codes.set(code, (codes.get(code) ?? 0) + 1);
      }),
      { seed: 1234, numRuns: 3000 },
    );
    // The mutations reach both outcomes and several kinds of errors.
    expect(codes.get('parsed')).toBeGreaterThan(0);
    expect(codes.get('InvalidSyntax')).toBeGreaterThan(0);
    expect(codes.size).toBeGreaterThan(4);
  });

  it('arbitrary text in any option value gives a coded error or an AST', () => {
    const option = fc.constantFrom('$filter', '$orderby', '$select', '$expand', '$apply', '$top', '$skip', '$count', '$ignorenulls', '$format');
    fc.assert(
      fc.property(option, fc.string({ unit: 'binary', maxLength: 40 }), (name, value) => {
        parseOrCodedError(`${name}=${value}`);
      }),
      { seed: 99, numRuns: 2000 },
    );
  });

  it('arbitrary query strings give a coded error or an AST', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 60 }), (text) => {
        parseOrCodedError(text);
      }),
      { seed: 5, numRuns: 2000 },
    );
  });
});

describe('16 KB inputs', () => {
  const KB16 = 16 * 1024;
  const fill = (unit: string) => unit.repeat(Math.ceil(KB16 / unit.length)).slice(0, KB16);

  it.each([
    ['(', 'NestingTooDeep'],
    ['not ', 'NestingTooDeep'],
    ['-', 'NestingTooDeep'],
    ['tolower(', 'NestingTooDeep'],
    ['a/any(x:', 'NestingTooDeep'],
    [')', 'InvalidSyntax'],
    ['a/', 'InvalidSyntax'],
    ['a eq 1 and ', 'InvalidSyntax'],
    ['%', 'InvalidSyntax'],
    ['\u0000', 'InvalidSyntax'],
  ])('$filter of %j repeated fails with %s', (unit, code) => {
    expect(parseOrCodedError(`$filter=${fill(unit)}`)).toBe(code);
  });

  it.each([
    ['$filter', 'a eq 1 and ', 'a eq 1'],
    ['$filter', 'a or ', 'a'],
    ['$filter', 'a add ', '1 eq 2'],
    ['$orderby', 'a,', 'a'],
    ['$select', 'a,', 'a'],
    ['$expand', 'Media,', 'Media'],
  ])('%s of %j repeated, ending well, parses', (option, unit, last) => {
    const body = fill(unit);
    const value = body.slice(0, body.length - (body.length % unit.length)) + last;
    const code = option === '$orderby' ? parseOrCodedError(`${option}=${value}`, { maxOrderByItems: 1e6 }) : parseOrCodedError(`${option}=${value}`);
    expect(code).toBeNull();
  });

  it.each([
    ['$filter=x in (', '1,', 'InListTooLong'],
    ['$filter=', "'abc'", 'InvalidLiteral'],
    ['$filter=a', '/b', null],
    ['$orderby=', '(', 'NestingTooDeep'],
    ['$orderby=', 'a,', 'TooManyOrderByKeys'],
    ['$expand=A(', 'A(', 'InvalidSyntax'],
    ['$expand=A($filter=', '(', 'NestingTooDeep'],
    ['$expand=A(', '$top=1;', 'RepeatedQueryOption'],
    ['$apply=filter(', '(', 'NestingTooDeep'],
    ['$apply=', 'filter(', 'UnknownFunction'],
    ['$apply=', 'filter(true)/', 'InvalidSyntax'],
    ['$apply=groupby((', 'a,', 'InvalidSyntax'],
    ['$select=', 'A'.repeat(200), 'InvalidSyntax'],
    ['', '$top=1&', 'RepeatedQueryOption'],
    ['', '&', null],
    ['', 'x=1&', null],
  ])('%s + %j repeated -> %s', (prefix, unit, code) => {
    expect(parseOrCodedError(prefix + fill(unit))).toBe(code);
  });

  it('16,383 quotes are an unterminated string; 16,384 are one string of 8,191 quotes', () => {
    expect(parseOrCodedError(`$filter=${"'".repeat(KB16 - 1)}`)).toBe('InvalidLiteral');
    const q = parseQuery(`$filter=${"'".repeat(KB16)}`);
    expect(q.filter).toEqual({ kind: 'literal', type: 'string', value: "'".repeat(KB16 / 2 - 1) });
  });

  it('a 16 KB string literal and a 16 KB in-list of 999 long strings parse', () => {
    expect(parseOrCodedError(`$filter=x eq '${'ab'.repeat(8000)}'`)).toBeNull();
    expect(parseOrCodedError(`$filter=x in (${Array.from({ length: 999 }, () => "'abcdefghijklmn'").join(',')})`)).toBeNull();
  });

  it('seeded random garbage of 16 KB gives a coded error', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: KB16, maxLength: KB16 }), fc.constantFrom('$filter=', '$apply=', '$expand=', ''), (junk, prefix) => {
        parseOrCodedError(prefix + junk);
      }),
      { seed: 16384, numRuns: 20 },
    );
  });

  it('a nesting limit set far above the default still ends in a coded error, not a stack overflow', () => {
    expect(parseOrCodedError(`$filter=${fill('(')}`, { maxDepth: 1_000_000 })).toBe('NestingTooDeep');
    expect(parseOrCodedError(`$filter=${fill('not ')}a`, { maxDepth: 1_000_000 })).toBeNull();
    // ...and the shared parser is still in a good state afterwards.
    expect(parseOrCodedError('$filter=(a eq 1)')).toBeNull();
  });
});
