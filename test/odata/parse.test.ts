/**
 * Hand-written cases for parseQuery: every literal form, every function, lambdas, keywords used
 * as names, precedence and associativity by tree shape, each query option, and errors with their
 * code, option and exact position.
 */
import { describe, expect, it } from 'vitest';
import { spanOf, type Expr, type LiteralExpr } from '../../src/odata/ast.js';
import { parseQuery } from '../../src/odata/parse-query.js';
import { printExpr, printQuery } from '../../src/odata/printer.js';
import { filter, queryErrorOf, sexpr } from './helpers.js';

const lit = (text: string): LiteralExpr => {
  const e = filter(text);
  expect(e.kind).toBe('literal');
  return e as LiteralExpr;
};

describe('literals', () => {
  it.each([
    ["'Seattle'", { type: 'string', value: 'Seattle' }],
    ["''", { type: 'string', value: '' }],
    ["'it''s'", { type: 'string', value: "it's" }],
    ["''''", { type: 'string', value: "'" }],
    ["'a&b=c;(d),e/f'", { type: 'string', value: 'a&b=c;(d),e/f' }],
    ["'  spaced  '", { type: 'string', value: '  spaced  ' }],
    ["'Ünïcødé ✓'", { type: 'string', value: 'Ünïcødé ✓' }],
    ['true', { type: 'boolean', value: true }],
    ['false', { type: 'boolean', value: false }],
    ['null', { type: 'null' }],
    ['42', { type: 'integer', text: '42', value: 42 }],
    ['0', { type: 'integer', text: '0', value: 0 }],
    ['-7', { type: 'integer', text: '-7', value: -7 }],
    ['+5', { type: 'integer', text: '+5', value: 5 }],
    ['9007199254740993', { type: 'integer', text: '9007199254740993' }],
    ['3.14', { type: 'decimal', text: '3.14', value: 3.14 }],
    ['-0.50', { type: 'decimal', text: '-0.50', value: -0.5 }],
    ['1e10', { type: 'double', text: '1e10', value: 1e10 }],
    ['1.5E-3', { type: 'double', text: '1.5E-3', value: 0.0015 }],
    ['-1.234567e+3', { type: 'double', text: '-1.234567e+3', value: -1234.567 }],
    ['2024-05-01', { type: 'date', text: '2024-05-01', value: Date.UTC(2024, 4, 1) }],
    ['2024-02-29', { type: 'date', value: Date.UTC(2024, 1, 29) }],
    ['2000-02-29', { type: 'date', value: Date.UTC(2000, 1, 29) }],
    ['0000-01-01', { type: 'date', value: -62167219200000 }],
    ['2024-05-01T10:00:00Z', { type: 'dateTimeOffset', value: Date.UTC(2024, 4, 1, 10) }],
    ['2024-05-01T10:00Z', { type: 'dateTimeOffset', value: Date.UTC(2024, 4, 1, 10) }],
    ['2024-05-01t10:00:00z', { type: 'dateTimeOffset', value: Date.UTC(2024, 4, 1, 10) }],
    ['2024-05-01T10:00:00.5Z', { type: 'dateTimeOffset', value: Date.UTC(2024, 4, 1, 10, 0, 0, 500) }],
    ['2024-05-01T10:00:00.123456789012Z', { type: 'dateTimeOffset', value: Date.UTC(2024, 4, 1, 10, 0, 0, 123) }],
    ['2024-05-01T12:00:00+02:00', { type: 'dateTimeOffset', value: Date.UTC(2024, 4, 1, 10) }],
    ['2024-05-01T04:30:00-05:30', { type: 'dateTimeOffset', value: Date.UTC(2024, 4, 1, 10) }],
    ['1972-06-30T23:59:60Z', { type: 'dateTimeOffset', value: Date.UTC(1972, 6, 1) }],
    ["geography'POINT(-122.3321 47.6062)'", { type: 'geographyPoint', srid: null, lon: -122.3321, lat: 47.6062 }],
    ["geography'SRID=4326;POINT(-122.3321 47.6062)'", { type: 'geographyPoint', srid: 4326, lon: -122.3321, lat: 47.6062 }],
    ["geography'srid=4326;Point(0 0)'", { type: 'geographyPoint', srid: 4326, lon: 0, lat: 0 }],
    ["geography'POINT(180 -90)'", { type: 'geographyPoint', lon: 180, lat: -90 }],
    ["geography'POINT(1e1   4.5E0)'", { type: 'geographyPoint', lon: 10, lat: 4.5 }],
  ] as const)('%s', (text, expected) => {
    expect(lit(text)).toMatchObject({ kind: 'literal', ...expected });
  });

  it('keeps the text of numbers beyond a double (Edm.Int64, Edm.Decimal)', () => {
    expect(lit('123456789012345678901234567890.123456789')).toMatchObject({ type: 'decimal', text: '123456789012345678901234567890.123456789' });
  });

  it('compares instants, not text: offsets normalise to the same epoch value', () => {
    expect(lit('2024-05-01T12:00:00+02:00').kind).toBe('literal');
    const a = lit('2024-05-01T12:00:00+02:00') as { value: number };
    const b = lit('2024-05-01T10:00:00Z') as { value: number };
    expect(a.value).toBe(b.value);
  });
});

describe('functions', () => {
  it.each([
    ["contains(PublicRemarks,'pool')", "(contains PublicRemarks 'pool')"],
    ["startswith(City,'Sea')", "(startswith City 'Sea')"],
    ["endswith(City,'tle')", "(endswith City 'tle')"],
    ['tolower(City)', '(tolower City)'],
    ['toupper(City)', '(toupper City)'],
    ['length(City)', '(length City)'],
    ["indexof(City,'t')", "(indexof City 't')"],
    ['substring(City,1)', '(substring City 1)'],
    ['substring(City,1,2)', '(substring City 1 2)'],
    ['trim(City)', '(trim City)'],
    ["concat(City,', WA')", "(concat City ', WA')"],
    ['year(ListingContractDate)', '(year ListingContractDate)'],
    ['month(ListingContractDate)', '(month ListingContractDate)'],
    ['day(ListingContractDate)', '(day ListingContractDate)'],
    ['hour(ModificationTimestamp)', '(hour ModificationTimestamp)'],
    ['minute(ModificationTimestamp)', '(minute ModificationTimestamp)'],
    ['second(ModificationTimestamp)', '(second ModificationTimestamp)'],
    ['date(ModificationTimestamp)', '(date ModificationTimestamp)'],
    ['now()', '(now)'],
    ['now( )', '(now)'],
    ["geo.distance(Location,geography'POINT(-122.3 47.6)')", '(geo.distance Location POINT(-122.3 47.6))'],
    ["search.text(KeywordSearchText,'pool view')", "(search.text KeywordSearchText 'pool view')"],
    ["search.text(RawAddressSearchText, '123 Main St', 2)", "(search.text RawAddressSearchText '123 Main St' 2)"],
    ["contains( tolower( PublicRemarks ) , 'view' )", "(contains (tolower PublicRemarks) 'view')"],
    ['year(now()) sub year(ListingContractDate) le 2', '(le (sub (year (now)) (year ListingContractDate)) 2)'],
    ["geo.distance(RawLocation, geography'SRID=4326;POINT(-122.3 47.6)') le 5000", '(le (geo.distance RawLocation POINT(-122.3 47.6)) 5000)'],
  ])('%s', (text, shape) => {
    expect(sexpr(filter(text))).toBe(shape);
  });
});

describe('lambdas and paths', () => {
  it.each([
    ["Appliances/any(a: a eq 'Dishwasher')", "(any Appliances a (eq a 'Dishwasher'))"],
    ["Appliances/any(a:a eq 'Dishwasher')", "(any Appliances a (eq a 'Dishwasher'))"],
    ["Appliances/all(x: x ne 'Range')", "(all Appliances x (ne x 'Range'))"],
    ['Appliances/any()', '(any Appliances)'],
    ['Appliances/any( )', '(any Appliances)'],
    ['Media/any(m: m/Order le 2 and m/MediaCategory eq null)', '(any Media m (and (le m/Order 2) (eq m/MediaCategory null)))'],
    ["Rooms/any(r: r/Features/any(f: f eq 'Fireplace'))", "(any Rooms r (any r/Features f (eq f 'Fireplace')))"],
    ["not Appliances/any(a: a eq 'Dishwasher')", "(not (any Appliances a (eq a 'Dishwasher')))"],
    ['Address/City/Name eq 1', '(eq Address/City/Name 1)'],
    ['Appliances/any eq 1', '(eq Appliances/any 1)'],
  ])('%s', (text, shape) => {
    expect(sexpr(filter(text))).toBe(shape);
  });
});

describe('keywords are whole words', () => {
  it.each([
    'order',
    'Order',
    'ordinal',
    'Orange',
    'Android',
    'android',
    'notes',
    'nothing',
    'index',
    'inner',
    'India',
    'address',
    'added',
    'subtotal',
    'mode',
    'divide',
    'multi',
    'equal',
    'neighbour',
    'ge0',
    'ltd',
    'length2',
    'nullable',
    'trueValue',
    'falsehood',
    'ascending',
    'description',
    'without',
    'ask',
    'AND',
    'Or',
    'NOT',
    'Eq',
    'year2',
    'contains_x',
    'any',
    'all',
    '_private',
    'has',
    'divby',
  ])('%s is a name', (name) => {
    expect(sexpr(filter(`${name} eq 1`))).toBe(`(eq ${name} 1)`);
  });

  it('reads `order eq 1 and notes ne null or Android` as names around operators', () => {
    expect(sexpr(filter('order eq 1 and notes ne null or Android'))).toBe('(or (and (eq order 1) (ne notes null)) Android)');
  });

  it('reads a function name without parentheses as a name', () => {
    expect(sexpr(filter('year eq 2024 and date lt now()'))).toBe('(and (eq year 2024) (lt date (now)))');
  });
});

describe('precedence and associativity, by tree shape', () => {
  it.each([
    ['a or b and c', '(or a (and b c))'],
    ['a and b or c', '(or (and a b) c)'],
    ['a or b or c', '(or (or a b) c)'],
    ['a and b and c', '(and (and a b) c)'],
    ['a eq 1 and b eq 2', '(and (eq a 1) (eq b 2))'],
    ['a eq 1 or b eq 2 and c eq 3', '(or (eq a 1) (and (eq b 2) (eq c 3)))'],
    ['a eq b eq c', '(eq (eq a b) c)'],
    ['a lt b ne true', '(ne (lt a b) true)'],
    ['a add b mul c', '(add a (mul b c))'],
    ['a mul b add c', '(add (mul a b) c)'],
    ['a sub b sub c', '(sub (sub a b) c)'],
    ['a div b mul c', '(mul (div a b) c)'],
    ['a mod b div c mod d', '(mod (div (mod a b) c) d)'],
    ['a add b sub c add d', '(add (sub (add a b) c) d)'],
    ['a add b eq c mul d', '(eq (add a b) (mul c d))'],
    ['a add b gt c and d', '(and (gt (add a b) c) d)'],
    ['not a eq b', '(eq (not a) b)'],
    ['not a and b', '(and (not a) b)'],
    ['not (a eq b)', '(not (eq a b))'],
    ['not(a eq b)', '(not (eq a b))'],
    ['not not a', '(not (not a))'],
    ['-a mul b', '(mul (- a) b)'],
    ['- a add b', '(add (- a) b)'],
    ['-(a add b)', '(- (add a b))'],
    ['--a', '(- (- a))'],
    ['- -5', '(- -5)'],
    ['a sub -5', '(sub a -5)'],
    ['(a or b) and c', '(and (or a b) c)'],
    ['a and (b or c)', '(and a (or b c))'],
    ['((a))', 'a'],
    ['a mul (b add c)', '(mul a (add b c))'],
    ['a in (1,2) and b', '(and (in a [1 2]) b)'],
    ['a add b in (1,2)', '(in (add a b) [1 2])'],
    ['a in (1,2) eq true', '(eq (in a [1 2]) true)'],
    ['not a in (1)', '(in (not a) [1])'],
    ['a eq 1 or b in (2) and c', '(or (eq a 1) (and (in b [2]) c))'],
  ])('%s', (text, shape) => {
    expect(sexpr(filter(text))).toBe(shape);
  });
});

describe('in', () => {
  it.each([
    ["StandardStatus in ('Active','Pending')", "(in StandardStatus ['Active' 'Pending'])"],
    ["StandardStatus in ( 'Active' , 'Pending' )", "(in StandardStatus ['Active' 'Pending'])"],
    ['BedroomsTotal in (3)', '(in BedroomsTotal [3])'],
    ['BedroomsTotal in ()', '(in BedroomsTotal [])'],
    ['x in (-1,2.5,1e3,true,null,2024-05-01)', '(in x [-1 2.5 1e3 true null 2024-05-01])'],
    ['FirstName in (FirstName)', '(in FirstName FirstName)'],
    ['x in ((5))', '(in x 5)'],
    ["'Dishwasher' in Appliances", "(in 'Dishwasher' Appliances)"],
    ['x in y add 1', '(in x (add y 1))'],
  ])('%s', (text, shape) => {
    expect(sexpr(filter(text))).toBe(shape);
  });

  it('accepts 1,000 items and rejects 1,001 with InListTooLong at the first extra item', () => {
    const items = Array.from({ length: 1000 }, (_, i) => String(i));
    expect(sexpr(filter(`x in (${items.join(',')})`)).split(' ')).toHaveLength(1002);
    const text = `x in (${[...items, '1000'].join(',')})`;
    const e = queryErrorOf(() => filter(text));
    expect(e).toMatchObject({ code: 'InListTooLong', option: '$filter', position: text.lastIndexOf('1000') });
  });

  it('takes its limit from the options', () => {
    expect(queryErrorOf(() => filter('x in (1,2,3)', { maxInListItems: 2 }))).toMatchObject({ code: 'InListTooLong', position: 10 });
  });
});

describe('whitespace follows OData', () => {
  it.each([
    ['a  eq\t1', '(eq a 1)'],
    ['a\teq\t1\tand\tb\teq\t2', '(and (eq a 1) (eq b 2))'],
    ['( a eq 1 )', '(eq a 1)'],
    ["contains( a , 'x' )", "(contains a 'x')"],
    ['- a', '(- a)'],
  ])('%s', (text, shape) => {
    expect(sexpr(filter(text))).toBe(shape);
  });

  it.each([
    ['(a)eq 1', 3, "expected a space before 'eq'"],
    ["a eq'x'", 4, "expected a space after 'eq'"],
    ["'x'eq a", 3, "expected a space before 'eq'"],
    ['a eq 1and b', 6, "expected a space before 'and'"],
    ["contains (a,'x')", 8, 'unexpected whitespace'],
    ['a / b eq 1', 1, 'unexpected whitespace'],
    ['a/ b eq 1', 2, 'unexpected whitespace'],
    ["not'x'", 3, "expected a space after 'not'"],
    ['a eq(b c)', 4, "expected a space after 'eq'"],
    ['a in(1,2)', 4, "expected a space after 'in'"],
    [' a eq 1', 0, 'whitespace at the start'],
    ['a eq 1 ', 6, 'whitespace at the end'],
    ['a eq 1\t\t', 6, 'whitespace at the end'],
    ['a\neq 1', 1, 'unexpected character'],
    ['Coll/any (x: x eq 1)', 8, 'unexpected whitespace'],
  ] as const)('%j fails at %i', (text, position, message) => {
    const e = queryErrorOf(() => filter(text));
    expect(e).toMatchObject({ code: 'InvalidSyntax', option: '$filter', position });
    expect(e.message).toContain(message);
  });
});

describe('$filter errors: code, option and exact position', () => {
  it.each([
    // [filter value, code, position, fragment of the message]
    ['', 'InvalidSyntax', 0, 'expected an expression'],
    ['a eq', 'InvalidSyntax', 4, 'found end of input'],
    ['a eq 1 and', 'InvalidSyntax', 10, 'found end of input'],
    ['a eq 1 and )', 'InvalidSyntax', 11, "found ')'"],
    ['a eqq 1', 'InvalidSyntax', 2, "found 'eqq'"],
    ['a b', 'InvalidSyntax', 2, "found 'b'"],
    ['(a eq 1', 'InvalidSyntax', 7, "expected ')'"],
    ['a eq 1)', 'InvalidSyntax', 6, "found ')'"],
    ['a eq (1 b)', 'InvalidSyntax', 8, "expected ')', found 'b'"],
    ["'unterminated", 'InvalidLiteral', 0, 'unterminated string'],
    ["a eq 'it's'", 'InvalidSyntax', 9, "found 's'"],
    ["a eq 'x' and b eq 'y", 'InvalidLiteral', 18, 'unterminated'],
    ['a eq 1.', 'InvalidLiteral', 7, 'digit after the decimal point'],
    ['a eq 1e', 'InvalidLiteral', 7, 'exponent'],
    ['a eq .5', 'InvalidSyntax', 5, "unexpected character '.'"],
    ['a eq 2024-13-01', 'InvalidLiteral', 11, 'month'],
    ['a eq 2024-00-01', 'InvalidLiteral', 11, 'month'],
    ['a eq 2024-05-32', 'InvalidLiteral', 14, 'day'],
    ['a eq 2023-02-29', 'InvalidLiteral', 13, 'not a calendar date'],
    ['a eq 2024-04-31', 'InvalidLiteral', 13, 'not a calendar date'],
    ['a eq 2024-5-01', 'InvalidLiteral', 10, 'month'],
    ['a eq 24-05-01', 'InvalidLiteral', 7, 'four-digit year'],
    ['a eq 2024-05-01T10:00:00', 'InvalidLiteral', 24, 'time zone'],
    ['a eq 2024-05-01T24:00Z', 'InvalidLiteral', 17, 'hour'],
    ['a eq 2024-05-01T10:60Z', 'InvalidLiteral', 19, 'minute'],
    ['a eq 2024-05-01T10:00:61Z', 'InvalidLiteral', 23, 'second'],
    ['a eq 2024-05-01T10Z', 'InvalidLiteral', 18, "expected ':'"],
    ['a eq 2024-05-01T10:00:00.Z', 'InvalidLiteral', 25, 'digits after the decimal point'],
    ['a eq 2024-05-01T10:00:00+0200', 'InvalidLiteral', 27, "expected ':'"],
    ["a eq geography'POINT(200 10)'", 'InvalidLiteral', 21, 'longitude'],
    ["a eq geography'POINT(10 -91)'", 'InvalidLiteral', 24, 'latitude'],
    ["a eq geography'POINT(10)'", 'InvalidLiteral', 23, 'space between'],
    ["a eq geography'POINT(1 2 3)'", 'InvalidLiteral', 24, 'two coordinates'],
    ["a eq geography'SRID=;POINT(1 2)'", 'InvalidLiteral', 20, 'SRID'],
    ["a eq geography'POLYGON((1 2,3 4))'", 'UnsupportedSyntax', 15, 'only POINT'],
    ["a eq geometry'POINT(1 2)'", 'UnsupportedSyntax', 5, 'geometry'],
    ['foo(1)', 'UnknownFunction', 0, "unknown function 'foo'"],
    ['a eq round(b)', 'UnknownFunction', 5, "'round' is not supported"],
    ['cast(a,Edm.String)', 'UnknownFunction', 0, 'not supported'],
    ['contains(a)', 'InvalidArguments', 10, 'takes 2 arguments, found 1'],
    ["contains(a,'b','c')", 'InvalidArguments', 14, 'takes 2 arguments, found 3'],
    ['substring(a)', 'InvalidArguments', 11, '2 to 3 arguments'],
    ['now(1)', 'InvalidArguments', 4, 'takes 0 arguments, found 1'],
    ["search.text(KeywordSearchText,'a',1,2)", 'InvalidArguments', 35, '2 to 3 arguments'],
    ['tolower()', 'InvalidArguments', 8, 'takes 1 argument, found 0'],
    ['Coll/all()', 'InvalidSyntax', 9, 'lambda variable'],
    ['Coll/first(x: x)', 'UnsupportedSyntax', 10, 'only the lambdas'],
    ['Coll/any(x: x eq 1)/Name', 'InvalidSyntax', 19, "found '/'"],
    ['Coll/any(x.y: x eq 1)', 'UnsupportedSyntax', 10, 'qualified names'],
    ['any(x: x eq 1)', 'UnknownFunction', 0, "unknown function 'any'"],
    ['length(a)/b eq 1', 'UnsupportedSyntax', 9, 'path after a function call'],
    ['Model.Type/Name eq 1', 'UnsupportedSyntax', 5, 'qualified names'],
    ['Address/Model.Type eq 1', 'UnsupportedSyntax', 13, 'qualified names'],
    ["style eq Sales.Pattern'Yellow'", 'UnsupportedSyntax', 9, 'typed literals'],
    ["d eq duration'P1D'", 'UnsupportedSyntax', 5, 'typed literals'],
    ['style has 1', 'UnsupportedSyntax', 6, "'has' operator"],
    ['a divby 2 eq 1', 'UnsupportedSyntax', 2, "'divby' operator"],
    ['$it/Name eq 1', 'UnsupportedSyntax', 0, "'$it' is not supported"],
    ['a eq @alias', 'UnsupportedSyntax', 5, "'@alias' is not supported"],
    ['a in [1,2]', 'UnsupportedSyntax', 5, 'JSON'],
    ['a eq "x"', 'UnsupportedSyntax', 5, 'JSON'],
    ['Items(1)/Name eq 1', 'UnknownFunction', 0, "unknown function 'Items'"],
    ['a in (1, b)', 'InvalidSyntax', 9, 'expected a literal'],
    ['a in (b, 1)', 'InvalidSyntax', 7, 'literals only'],
    ['a in (1,2) add 1', 'InvalidSyntax', 11, 'after the list'],
    ['a eq 1;b', 'InvalidSyntax', 6, "found ';'"],
    ['a eq 50%', 'InvalidSyntax', 7, 'percent-decoded'],
    ['a eq #1', 'InvalidSyntax', 5, "unexpected character '#'"],
    [`${'x'.repeat(129)} eq 1`, 'InvalidSyntax', 128, 'at most 128 characters'],
  ] as const)('%j -> %s at %i', (text, code, position, message) => {
    const e = queryErrorOf(() => parseQuery(`$filter=${text}`));
    expect({ code: e.code, option: e.option, position: e.position }).toEqual({ code, option: '$filter', position });
    expect(e.message).toContain(message);
  });

  it('says what it expected and what it found, and quotes the text near the position', () => {
    const e = queryErrorOf(() => parseQuery("$filter=ListPrice gt 500000 andd City eq 'Seattle' and ListPrice lt 900000"));
    expect(e.message).toBe(
      "$filter, position 20: expected an operator or the end of the expression, found 'andd'; near \"ListPrice gt 500000 ⟩andd City eq 'Seattle' a…\"",
    );
  });
});

describe('nesting limit', () => {
  const nested = (n: number) => `${'('.repeat(n)}a${')'.repeat(n)}`;

  it('accepts 64 levels of parentheses and rejects the 65th, at its position', () => {
    expect(sexpr(filter(nested(64)))).toBe('a');
    expect(queryErrorOf(() => filter(nested(65)))).toMatchObject({ code: 'NestingTooDeep', option: '$filter', position: 64 });
  });

  it('counts function calls, lambdas and prefix operators', () => {
    const calls = `${'tolower('.repeat(64)}a${')'.repeat(64)}`;
    expect(filter(calls).kind).toBe('call');
    expect(queryErrorOf(() => filter(`${'tolower('.repeat(65)}a${')'.repeat(65)}`))).toMatchObject({ code: 'NestingTooDeep', position: 64 * 8 + 7 });
    expect(queryErrorOf(() => filter(`${'not '.repeat(65)}a`))).toMatchObject({ code: 'NestingTooDeep', position: 64 * 4 });
    expect(queryErrorOf(() => filter(`${'-'.repeat(65)}a`))).toMatchObject({ code: 'NestingTooDeep', position: 64 });
    const lambdas = (n: number) => `${Array.from({ length: n }, (_, i) => `c${i}/any(x${i}:`).join('')}true${')'.repeat(n)}`;
    expect(filter(lambdas(64)).kind).toBe('lambda');
    expect(queryErrorOf(() => filter(lambdas(65)))).toMatchObject({ code: 'NestingTooDeep' });
  });

  it('takes its limit from the options', () => {
    expect(queryErrorOf(() => filter('((a))', { maxDepth: 1 }))).toMatchObject({ code: 'NestingTooDeep', position: 1 });
    expect(sexpr(filter(nested(200), { maxDepth: 200 }))).toBe('a');
  });

  it('does not count operator chains: 2,000 `and`s parse', () => {
    const text = Array.from({ length: 2000 }, (_, i) => `a${i} eq ${i}`).join(' and ');
    expect(filter(text).kind).toBe('and');
  });
});

describe('$orderby', () => {
  it.each([
    ['ListPrice', [['ListPrice', 'asc']]],
    ['ListPrice asc', [['ListPrice', 'asc']]],
    [
      'ListPrice desc,ListingKey',
      [
        ['ListPrice', 'desc'],
        ['ListingKey', 'asc'],
      ],
    ],
    [
      'ListPrice desc, ListingKey asc',
      [
        ['ListPrice', 'desc'],
        ['ListingKey', 'asc'],
      ],
    ],
    ['relevance desc', [['relevance', 'desc']]],
    ['tolower(City) desc', [['(tolower City)', 'desc']]],
    ['ListPrice div LivingArea', [['(div ListPrice LivingArea)', 'asc']]],
    ['ListPrice\tasc', [['ListPrice', 'asc']]],
    ['Order', [['Order', 'asc']]],
    ['ascending desc', [['ascending', 'desc']]],
  ] as const)('%s', (text, expected) => {
    const q = parseQuery(`$orderby=${text}`);
    expect(q.orderby?.map((o) => [sexpr(o.expr), o.direction])).toEqual(expected);
  });

  it('takes 8 keys and rejects a 9th with TooManyOrderByKeys at its position', () => {
    const keys = Array.from({ length: 9 }, (_, i) => `F${i}`);
    expect(parseQuery(`$orderby=${keys.slice(0, 8).join(',')}`).orderby).toHaveLength(8);
    expect(queryErrorOf(() => parseQuery(`$orderby=${keys.join(',')}`))).toMatchObject({
      code: 'TooManyOrderByKeys',
      option: '$orderby',
      position: 24,
    });
    expect(queryErrorOf(() => parseQuery('$orderby=a,b,c', { maxOrderByItems: 2 }))).toMatchObject({ code: 'TooManyOrderByKeys', position: 4 });
  });

  it.each([
    ['ListPrice up', 10, "expected an operator, 'asc', 'desc', ',' or the end of the value, found 'up'"],
    ['ListPrice,', 10, 'found end of input'],
    [',ListPrice', 0, "found ','"],
    ['(ListPrice)desc', 11, "expected a space before 'desc'"],
    ['ListPrice desc desc', 15, "found 'desc'"],
  ] as const)('%j fails at %i', (text, position, message) => {
    const e = queryErrorOf(() => parseQuery(`$orderby=${text}`));
    expect(e).toMatchObject({ code: 'InvalidSyntax', option: '$orderby', position });
    expect(e.message).toContain(message);
  });
});

describe('$select', () => {
  it('takes names and *', () => {
    expect(parseQuery('$select=ListingKey,ListPrice, City').select).toEqual([
      { kind: 'property', name: 'ListingKey' },
      { kind: 'property', name: 'ListPrice' },
      { kind: 'property', name: 'City' },
    ]);
    expect(parseQuery('$select=*').select).toEqual([{ kind: 'star' }]);
    expect(parseQuery('$select=order,notes').select).toEqual([
      { kind: 'property', name: 'order' },
      { kind: 'property', name: 'notes' },
    ]);
  });

  it.each([
    ['', 'InvalidSyntax', 0],
    ['A,', 'InvalidSyntax', 2],
    ['A B', 'InvalidSyntax', 2],
    ['Address/Street', 'InvalidSyntax', 7],
    ['Model.Name', 'UnsupportedSyntax', 5],
    ['A,1', 'InvalidSyntax', 2],
  ] as const)('%j fails: %s at %i', (text, code, position) => {
    expect(queryErrorOf(() => parseQuery(`$select=${text}`))).toMatchObject({ code, option: '$select', position });
  });
});

describe('$top, $skip, $skiptoken, $count, $ignorenulls, $format', () => {
  it('parses their values', () => {
    expect(parseQuery('$top=0&$skip=40&$count=true&$ignorenulls=false&$format=json')).toEqual({
      top: 0,
      skip: 40,
      count: true,
      ignorenulls: false,
      format: 'json',
    });
    expect(parseQuery('$top=007').top).toBe(7);
    // opaque to the parser; the engine says whether it knows the token
    expect(parseQuery('$skip=10&$skiptoken=8f6f11fb-3').skiptoken).toBe('8f6f11fb-3');
    expect(parseQuery("$skiptoken=a'b(c").skiptoken).toBe("a'b(c");
    expect(parseQuery('$format=application/json;odata.metadata=minimal').format).toBe('application/json;odata.metadata=minimal');
  });

  it.each([
    ['$top=-1', '$top', 'InvalidSyntax', 0],
    ['$top=1.5', '$top', 'InvalidSyntax', 1],
    ['$top=10x', '$top', 'InvalidSyntax', 2],
    ['$top=', '$top', 'InvalidSyntax', 0],
    ['$top= 5', '$top', 'InvalidSyntax', 0],
    ['$top=+5', '$top', 'InvalidSyntax', 0],
    ['$top=99999999999999999999', '$top', 'InvalidLiteral', 0],
    ['$skip=ten', '$skip', 'InvalidSyntax', 0],
    ['$skip=-0', '$skip', 'InvalidSyntax', 0],
    ['$count=yes', '$count', 'InvalidSyntax', 0],
    ['$count=True', '$count', 'InvalidSyntax', 0],
    ['$count', '$count', 'InvalidSyntax', 0],
    ['$ignorenulls=1', '$ignorenulls', 'InvalidSyntax', 0],
    ['$format=', '$format', 'InvalidSyntax', 0],
    ['$skiptoken=', '$skiptoken', 'InvalidSyntax', 0],
    ['$skiptoken', '$skiptoken', 'InvalidSyntax', 0],
    ['$skiptoken=a&$skiptoken=b', '$skiptoken', 'RepeatedQueryOption', undefined],
  ] as const)('%j fails: %s %s at %i', (text, option, code, position) => {
    expect(queryErrorOf(() => parseQuery(text))).toMatchObject({ code, option, position });
  });
});

describe('$expand', () => {
  it('takes navigation names with nested options', () => {
    const q = parseQuery('$expand=Media($select=MediaKey,MediaURL;$filter=Order le 5;$orderby=Order desc;$top=2;$skip=1),OpenHouse,PreferredMedia');
    expect(q.expand).toHaveLength(3);
    const [media, openHouse, preferred] = q.expand ?? [];
    expect(media.name).toBe('Media');
    expect(media.options.select).toEqual([
      { kind: 'property', name: 'MediaKey' },
      { kind: 'property', name: 'MediaURL' },
    ]);
    expect(sexpr(media.options.filter as Expr)).toBe('(le Order 5)');
    expect(media.options.orderby?.map((o) => [sexpr(o.expr), o.direction])).toEqual([['Order', 'desc']]);
    expect(media.options.top).toBe(2);
    expect(media.options.skip).toBe(1);
    expect(openHouse).toEqual({ kind: 'expand', name: 'OpenHouse', options: {} });
    expect(preferred.name).toBe('PreferredMedia');
  });

  it('allows nested values that contain ; and ) inside strings', () => {
    const q = parseQuery("$expand=Media($filter=ShortDescription eq 'a;b)c')");
    expect(sexpr(q.expand?.[0].options.filter as Expr)).toBe("(eq ShortDescription 'a;b)c')");
  });

  it.each([
    // positions are offsets into the $expand value
    ['Media($top=-1)', 'InvalidSyntax', 11],
    ['Media($top=1.5)', 'InvalidSyntax', 12],
    ['Media($top=x)', 'InvalidSyntax', 11],
    ['Media($filter=Order le)', 'InvalidSyntax', 22],
    ['Media($filter=Order le 5', 'InvalidSyntax', 24],
    ['Media($count=true)', 'UnknownQueryOption', 6],
    ['Media($expand=X)', 'UnknownQueryOption', 6],
    ['Media($levels=2)', 'UnknownQueryOption', 6],
    ['Media($top=1;$top=2)', 'RepeatedQueryOption', 13],
    ['Media()', 'InvalidSyntax', 6],
    ['Media ($top=1)', 'InvalidSyntax', 5],
    ['Media($top =1)', 'InvalidSyntax', 10],
    ['Media($top= 1)', 'InvalidSyntax', 11],
    ['Media($select=A;)', 'InvalidSyntax', 16],
    ['Media,', 'InvalidSyntax', 6],
    ['Media/Items', 'InvalidSyntax', 5],
    ['*', 'InvalidSyntax', 0],
    ['Model.Media', 'UnsupportedSyntax', 5],
    [`Media($orderby=${Array.from({ length: 9 }, (_, i) => `k${i}`).join(',')})`, 'TooManyOrderByKeys', 39],
  ] as const)('%j fails: %s at %i', (text, code, position) => {
    expect(queryErrorOf(() => parseQuery(`$expand=${text}`))).toMatchObject({ code, option: '$expand', position });
  });
});

describe('$apply', () => {
  it('parses filter, groupby and aggregate chained with /', () => {
    const q = parseQuery(
      "$apply=filter(StandardStatus eq 'Active')/groupby((City,StateOrProvince),aggregate(ListPrice with median as MedianPrice,LivingArea with avg,$count as Listings))",
    );
    expect(q.apply).toHaveLength(2);
    const [f, g] = q.apply ?? [];
    expect(f.kind).toBe('filter');
    expect(f.kind === 'filter' && sexpr(f.predicate)).toBe("(eq StandardStatus 'Active')");
    expect(g).toMatchObject({
      kind: 'groupby',
      properties: [
        { kind: 'member', path: ['City'] },
        { kind: 'member', path: ['StateOrProvince'] },
      ],
      aggregate: {
        kind: 'aggregate',
        items: [
          { kind: 'aggregateWith', expr: { kind: 'member', path: ['ListPrice'] }, method: 'median', alias: 'MedianPrice' },
          { kind: 'aggregateWith', expr: { kind: 'member', path: ['LivingArea'] }, method: 'avg', alias: null },
          { kind: 'aggregateCount', alias: 'Listings' },
        ],
      },
    });
  });

  it.each(['sum', 'min', 'max', 'average', 'avg', 'countdistinct', 'median', 'p10', 'p25', 'p50', 'p75', 'p90', 'p95'])('takes the method %s', (method) => {
    const q = parseQuery(`$apply=aggregate(ListPrice with ${method} as X)`);
    expect(q.apply?.[0]).toMatchObject({ kind: 'aggregate', items: [{ method }] });
  });

  it('parses groupby alone and aggregate alone, with whitespace where OData allows it', () => {
    expect(parseQuery('$apply=groupby((City))').apply).toEqual([{ kind: 'groupby', properties: [{ kind: 'member', path: ['City'] }], aggregate: null }]);
    expect(parseQuery('$apply=groupby( ( City , PostalCode ) , aggregate( ListPrice with sum ) )').apply?.[0]).toMatchObject({
      kind: 'groupby',
      aggregate: { items: [{ method: 'sum', alias: null }] },
    });
    expect(parseQuery('$apply=aggregate((ListPrice sub OriginalListPrice) mul 2 with max as M)').apply?.[0]).toMatchObject({
      kind: 'aggregate',
      items: [{ kind: 'aggregateWith', method: 'max', alias: 'M' }],
    });
  });

  it.each([
    ['aggregate(ListPrice with mean as X)', 'UnknownAggregateMethod', 25],
    ['aggregate(ListPrice with Custom.concat as X)', 'UnknownAggregateMethod', 25],
    ['aggregate(ListPrice)', 'InvalidSyntax', 19],
    ['aggregate(ListPrice as X)', 'InvalidSyntax', 20],
    ['aggregate($count)', 'InvalidSyntax', 16],
    ['aggregate()', 'InvalidSyntax', 10],
    ['aggregate(ListPrice with sum as)', 'InvalidSyntax', 31],
    ['aggregate(ListPrice with sum from Time)', 'InvalidSyntax', 29],
    ['groupby(City)', 'InvalidSyntax', 8],
    ['groupby((City),filter(true))', 'UnsupportedSyntax', 15],
    ['groupby((rollup(City)))', 'InvalidSyntax', 15],
    ['topcount(2,ListPrice)', 'UnsupportedSyntax', 0],
    ['identity', 'UnsupportedSyntax', 0],
    ['frobnicate(1)', 'InvalidSyntax', 0],
    ['filter(a)/', 'InvalidSyntax', 10],
    ['filter(a) /groupby((City))', 'InvalidSyntax', 9],
    ['filter (a)', 'InvalidSyntax', 6],
    ['filter(a eq)', 'InvalidSyntax', 11],
  ] as const)('%j fails: %s at %i', (text, code, position) => {
    expect(queryErrorOf(() => parseQuery(`$apply=${text}`))).toMatchObject({ code, option: '$apply', position });
  });
});

describe('the query string', () => {
  it('returns one AST per option and nothing for absent ones', () => {
    expect(parseQuery('')).toEqual({});
    expect(parseQuery('?$top=5')).toEqual({ top: 5 });
    expect(parseQuery('$top=5&&$skip=1&')).toEqual({ top: 5, skip: 1 });
  });

  it('ignores parameters without $, whatever their value', () => {
    expect(parseQuery("foo=bar&$top=1&filter=garbage(((&it's=x&@p='a'")).toEqual({ top: 1 });
  });

  it("keeps a '&' inside a string literal in its option (the caller decoded %26 already)", () => {
    const q = parseQuery("$filter=ListOfficeName eq 'Smith & Sons'&$top=1");
    expect(sexpr(q.filter as Expr)).toBe("(eq ListOfficeName 'Smith & Sons')");
    expect(q.top).toBe(1);
  });

  it.each([
    ['$search=blue', '$search'],
    ['$Filter=a', '$Filter'],
    ['$compute=a as b', '$compute'],
    ['$', '$'],
    ['$top=1&$levels=2', '$levels'],
  ])('rejects the unknown option in %j', (text, option) => {
    const e = queryErrorOf(() => parseQuery(text));
    expect(e).toMatchObject({ code: 'UnknownQueryOption', option, position: undefined });
    expect(e.message).toContain(option);
  });

  it('hints at the case of a known option', () => {
    expect(queryErrorOf(() => parseQuery('$OrderBy=a')).message).toContain('use $orderby');
  });

  it('rejects a repeated option', () => {
    expect(queryErrorOf(() => parseQuery('$top=1&$skip=2&$top=1'))).toMatchObject({ code: 'RepeatedQueryOption', option: '$top' });
  });
});

describe('spans', () => {
  it('are recorded on request, as offsets into the option value', () => {
    const q = parseQuery("$filter=ListPrice gt 5 and City eq 'X'&$expand=Media($filter=Order le 1)", { spans: true });
    const f = q.filter as Extract<Expr, { kind: 'and' }>;
    expect(spanOf(q, f)).toEqual({ start: 0, end: 30 });
    expect(spanOf(q, f.left)).toEqual({ start: 0, end: 14 });
    const city = (f.right as Extract<Expr, { kind: 'compare' }>).left;
    expect(spanOf(q, city)).toEqual({ start: 19, end: 23 });
    const nested = q.expand?.[0].options.filter as Extract<Expr, { kind: 'compare' }>;
    expect(spanOf(q, nested.left)).toEqual({ start: 14, end: 19 });
  });

  it('are absent by default', () => {
    const q = parseQuery('$filter=a eq 1');
    expect(spanOf(q, q.filter as Expr)).toBeUndefined();
  });
});

describe('printer', () => {
  it.each([
    ["ListPrice  gt 5 and (City eq 'O''Neil' or City eq 'X')", "ListPrice gt 5 and (City eq 'O''Neil' or City eq 'X')"],
    ['(a or b) and c', '(a or b) and c'],
    ['a or (b and c)', 'a or b and c'],
    ['a sub (b sub c)', 'a sub (b sub c)'],
    ['(a sub b) sub c', 'a sub b sub c'],
    ['- (5)', '-(5)'],
    ['-(-5)', '-(-5)'],
    ['not (a eq b)', 'not (a eq b)'],
    ['(not a) eq b', 'not a eq b'],
    ["Coll/any( x : x eq 'a' )", "Coll/any(x:x eq 'a')"],
    ["contains( a , 'b' )", "contains(a,'b')"],
    ['a in ( 1 , 2 )', 'a in (1,2)'],
    ["geography'srid=4326;point(-122.30 47.60)' eq x", "geography'SRID=4326;POINT(-122.3 47.6)' eq x"],
  ])('%s prints as %s', (text, printed) => {
    expect(printExpr(filter(text))).toBe(printed);
  });

  it('prints a whole query in canonical option order', () => {
    const q = parseQuery(
      '$top=5&$select=A,B&$filter=a eq 1&$expand=Media($top=1;$select=X)&$orderby=a desc&$count=true&$apply=groupby((A))&$skip=0&$ignorenulls=true&$format=json',
    );
    expect(printQuery(q)).toBe(
      '$filter=a eq 1&$select=A,B&$orderby=a desc&$top=5&$skip=0&$count=true&$ignorenulls=true&$expand=Media($select=X;$top=1)&$apply=groupby((A))&$format=json',
    );
    expect(parseQuery(printQuery(q))).toEqual(q);
  });
});
