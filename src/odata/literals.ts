/**
 * Validation of the literal tokens the lexer matches loosely (numbers, dates, timestamps,
 * geography points). The lexer patterns are deliberately generous (`2024-5-1`, `42.`,
 * `2024-05-01T10:00`) so that a near-miss becomes one InvalidLiteral error that points at the
 * offending character, as the ABNF would, instead of a confusing "expected an operator" later.
 */
import type { DateLiteral, DateTimeOffsetLiteral, GeographyPointLiteral, LiteralExpr, NumberLiteral } from './ast.js';
import type { ParseErrorCode } from './errors.js';

export interface LiteralFailure {
  readonly code: ParseErrorCode;
  /** Offset of the offending character, relative to the start of the literal text. */
  readonly offset: number;
  readonly what: string;
}

function fail(offset: number, what: string, code: ParseErrorCode = 'InvalidLiteral'): LiteralFailure {
  return { code, offset, what };
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

function found(text: string, i: number): string {
  return i < text.length ? `'${text[i]}'` : 'the end of the literal';
}

/** `[+-]?\d+(\.\d*)?([eE][+-]?\d*)?` as lexed; requires digits after `.` and in the exponent. */
export function numberLiteral(text: string): NumberLiteral | LiteralFailure {
  let i = 0;
  if (text[i] === '+' || text[i] === '-') i++;
  while (isDigit(text[i])) i++;
  let type: NumberLiteral['type'] = 'integer';
  if (text[i] === '.') {
    i++;
    if (!isDigit(text[i])) return fail(i, `expected a digit after the decimal point of '${text}', found ${found(text, i)}`);
    while (isDigit(text[i])) i++;
    type = 'decimal';
  }
  if (text[i] === 'e' || text[i] === 'E') {
    i++;
    if (text[i] === '+' || text[i] === '-') i++;
    if (!isDigit(text[i])) return fail(i, `expected the digits of the exponent of '${text}', found ${found(text, i)}`);
    while (isDigit(text[i])) i++;
    type = 'double';
  }
  return { kind: 'literal', type, text, value: Number(text) };
}

const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isLeap(y: number): boolean {
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
}

/** Reads a two-digit field whose first digit must be in `first` and second in `second(first)`. */
function twoDigits(text: string, i: number, name: string, first: (c: string) => boolean, second: (c0: string, c1: string) => boolean): number | LiteralFailure {
  const c0 = text[i];
  if (c0 === undefined || !isDigit(c0) || !first(c0)) return fail(i, `invalid ${name} in '${text}': found ${found(text, i)}`);
  const c1 = text[i + 1];
  if (c1 === undefined || !isDigit(c1) || !second(c0, c1)) return fail(i + 1, `invalid ${name} in '${text}': found ${found(text, i + 1)}`);
  return (c0.charCodeAt(0) - 48) * 10 + (c1.charCodeAt(0) - 48);
}

const month = (text: string, i: number) =>
  twoDigits(
    text,
    i,
    'month (01-12)',
    (c) => c === '0' || c === '1',
    (a, b) => (a === '0' ? b !== '0' : b <= '2'),
  );
const day = (text: string, i: number) =>
  twoDigits(
    text,
    i,
    'day (01-31)',
    (c) => c <= '3',
    (a, b) => (a === '0' ? b !== '0' : a === '3' ? b <= '1' : true),
  );
const hour = (text: string, i: number) =>
  twoDigits(
    text,
    i,
    'hour (00-23)',
    (c) => c <= '2',
    (a, b) => (a === '2' ? b <= '3' : true),
  );
const minute = (text: string, i: number) =>
  twoDigits(
    text,
    i,
    'minute (00-59)',
    (c) => c <= '5',
    () => true,
  );
const second = (text: string, i: number) =>
  twoDigits(
    text,
    i,
    'second (00-60)',
    (c) => c <= '6',
    (a, b) => (a === '6' ? b === '0' : true),
  );

function expectChar(text: string, i: number, ch: string, what: string): LiteralFailure | null {
  return text[i] === ch ? null : fail(i, `expected '${ch}' ${what} in '${text}', found ${found(text, i)}`);
}

function utc(y: number, mo: number, d: number, h: number, mi: number, s: number, ms: number): number {
  const t = new Date(0);
  t.setUTCFullYear(y, mo - 1, d);
  t.setUTCHours(h, mi, s, ms);
  return t.getTime();
}

/**
 * `YYYY-MM-DD` or `YYYY-MM-DDThh:mm[:ss[.fff]](Z|±hh:mm)` (T and Z in either case). Fields are
 * checked digit by digit as in the ABNF, then the day against the calendar (2023-02-29 fails).
 */
export function dateLiteral(text: string): DateLiteral | DateTimeOffsetLiteral | LiteralFailure {
  let i = 0;
  while (isDigit(text[i])) i++;
  if (i !== 4) return fail(Math.min(i, 4), `expected a four-digit year in '${text}'`);
  const y = Number(text.slice(0, 4));
  let err = expectChar(text, 4, '-', 'after the year');
  if (err) return err;
  const mo = month(text, 5);
  if (typeof mo !== 'number') return mo;
  err = expectChar(text, 7, '-', 'after the month');
  if (err) return err;
  const d = day(text, 8);
  if (typeof d !== 'number') return d;
  const maxDay = mo === 2 && !isLeap(y) ? 28 : DAYS_IN_MONTH[mo - 1];
  if (d > maxDay) return fail(8, `'${text.slice(0, 10)}' is not a calendar date`);
  if (text.length === 10) return { kind: 'literal', type: 'date', text, value: utc(y, mo, d, 0, 0, 0, 0) };
  if (text[10] !== 'T' && text[10] !== 't') return fail(10, `expected 'T' and a time after the date in '${text}'`);
  const h = hour(text, 11);
  if (typeof h !== 'number') return h;
  err = expectChar(text, 13, ':', 'between hour and minute');
  if (err) return err;
  const mi = minute(text, 14);
  if (typeof mi !== 'number') return mi;
  i = 16;
  let s = 0;
  let ms = 0;
  if (text[i] === ':') {
    const sec = second(text, i + 1);
    if (typeof sec !== 'number') return sec;
    s = sec;
    i += 3;
    if (text[i] === '.') {
      const start = ++i;
      while (isDigit(text[i])) i++;
      if (i === start) return fail(i, `expected digits after the decimal point of the seconds in '${text}'`);
      if (i - start > 12) return fail(start + 12, `at most 12 digits of fractional seconds are allowed in '${text}'`);
      ms = Number(text.slice(start, Math.min(i, start + 3)).padEnd(3, '0'));
    }
  }
  let offsetMinutes = 0;
  const z = text[i];
  if (z === 'Z' || z === 'z') {
    i++;
  } else if (z === '+' || z === '-') {
    const oh = hour(text, i + 1);
    if (typeof oh !== 'number') return oh;
    err = expectChar(text, i + 3, ':', 'in the time zone offset');
    if (err) return err;
    const om = minute(text, i + 4);
    if (typeof om !== 'number') return om;
    offsetMinutes = (z === '-' ? -1 : 1) * (oh * 60 + om);
    i += 6;
  } else {
    return fail(i, `expected a time zone ('Z' or an offset such as +02:00) in '${text}', found ${found(text, i)}`);
  }
  if (i !== text.length) return fail(i, `unexpected ${found(text, i)} after the time zone in '${text}'`);
  const value = utc(y, mo, d, h, mi, s, ms) - offsetMinutes * 60_000;
  return { kind: 'literal', type: 'dateTimeOffset', text, value };
}

const COORDINATE = /[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

function coordinate(body: string, i: number): { value: number; end: number } | null {
  COORDINATE.lastIndex = i;
  const m = COORDINATE.exec(body);
  if (!m) return null;
  return { value: Number(m[0]), end: i + m[0].length };
}

/**
 * The text between the quotes of `geography'...'`: `[SRID=n;]POINT(lon lat)` (`SRID`, `POINT`
 * in any case, one or more spaces between the coordinates). `base` is the offset of the body
 * within the literal, so failures point into the literal.
 */
export function geographyLiteral(body: string, base: number): GeographyPointLiteral | LiteralFailure {
  let i = 0;
  let srid: number | null = null;
  if (body.slice(0, 5).toUpperCase() === 'SRID=') {
    i = 5;
    const start = i;
    while (isDigit(body[i])) i++;
    if (i === start || i - start > 5) return fail(base + start, `expected an SRID of 1 to 5 digits in geography'${body}'`);
    srid = Number(body.slice(start, i));
    if (body[i] !== ';') return fail(base + i, `expected ';' after the SRID in geography'${body}'`);
    i++;
  }
  if (body.slice(i, i + 6).toUpperCase() !== 'POINT(') {
    if (/^[A-Za-z]/.test(body.slice(i))) {
      return fail(base + i, `only POINT(lon lat) geography literals are supported, found geography'${body}'`, 'UnsupportedSyntax');
    }
    return fail(base + i, `expected POINT(lon lat) in geography'${body}'`);
  }
  i += 6;
  const lonStart = i;
  const lon = coordinate(body, i);
  if (!lon) return fail(base + i, `expected a longitude in geography'${body}'`);
  i = lon.end;
  const gap = i;
  while (body[i] === ' ') i++;
  if (i === gap) return fail(base + i, `expected a space between longitude and latitude in geography'${body}'`);
  const lat = coordinate(body, i);
  if (!lat) return fail(base + i, `expected a latitude in geography'${body}'`);
  const latStart = i;
  i = lat.end;
  if (body[i] !== ')') {
    return fail(base + i, `expected ')' after the latitude in geography'${body}' (points have two coordinates, lon lat)`);
  }
  if (i + 1 !== body.length) return fail(base + i + 1, `unexpected text after the point in geography'${body}'`);
  if (!(Math.abs(lon.value) <= 180)) return fail(base + lonStart, `longitude ${lon.value} is outside -180..180`);
  if (!(Math.abs(lat.value) <= 90)) return fail(base + latStart, `latitude ${lat.value} is outside -90..90`);
  return { kind: 'literal', type: 'geographyPoint', srid, lon: lon.value, lat: lat.value };
}

/** The literal tokens whose image carries a value (true, false and null are keywords). */
export type ValueTokenKind = 'string' | 'number' | 'date' | 'geography';

/**
 * The literal a token's image stands for: the grammar's reading of StringLit, NumberLit, DateLike
 * and Geography tokens, shared with the plan cache, which reads the literals it lifts out of a
 * query's text (src/odata/shape.ts) the same way.
 */
export function literalOfToken(kind: ValueTokenKind, image: string): LiteralExpr | LiteralFailure {
  switch (kind) {
    case 'string': {
      const body = image.slice(1, -1);
      return { kind: 'literal', type: 'string', value: body.includes("''") ? body.replace(/''/g, "'") : body };
    }
    case 'number':
      return numberLiteral(image);
    case 'date':
      return dateLiteral(image);
    case 'geography':
      return geographyLiteral(image.slice(10, -1), 10);
  }
}

export function isLiteralFailure(x: object): x is LiteralFailure {
  return 'offset' in x;
}
