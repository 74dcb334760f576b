/**
 * The shape of a query text: the text with its literals lifted out, as a database's generic plan
 * sees a statement with parameters. `ListingId eq 'A'` and `ListingId eq 'B'` have one shape, so
 * the plan cache (src/plan/cache.ts) parses that shape once and reads each later query's literals
 * from this scan instead of parsing it again.
 *
 * One pass over the text, no parse: options are split as `splitQuery` splits them, and the values
 * of the expression options ($filter, $orderby, $expand, $apply) are cut into tokens where the
 * lexer (tokens.ts) would cut them: names and keywords (`[A-Za-z_]...`, digits included, so `x1`
 * holds no number), `$names`, `@names`, strings, geography literals, dates and numbers, by the
 * lexer's own patterns. Strings, numbers, dates and geography points are lifted; so are the values
 * of the top-level `$top` and `$skip` when they are digits. Everything else stays in the shape.
 * When the scan is unsure (an unterminated string, a NUL in the text) it gives up and the caller
 * parses the text in full; whether a shape's literals really are the parse's literals is checked
 * once per shape, by the plan cache, against the parse itself (src/plan/template.ts).
 */
import type { ValueTokenKind } from './literals.js';

/** What a lifted literal is: a literal token of an expression, or a top-level $top/$skip value. */
export type LiftedKind = ValueTokenKind | 'count';

export interface QueryShape {
  /** The text with each lifted literal replaced by a placeholder of its kind (NUL and a letter). */
  readonly text: string;
  /** The lifted literals' text, in text order. */
  readonly images: readonly string[];
}

/** Where each lifted literal is, for building a template (src/plan/template.ts): not on the hot path. */
export interface LiftedLiteral {
  readonly kind: LiftedKind;
  /** The option holding it (`$filter`, `$top`, ...). */
  readonly option: string;
  /** Offset in the option's value (the offsets the parser's spans use). */
  readonly offset: number;
  /** Offset in the whole text. */
  readonly at: number;
  readonly image: string;
}

const MARK: Readonly<Record<LiftedKind, string>> = { string: '\u0000s', number: '\u0000n', date: '\u0000d', geography: '\u0000g', count: '\u0000c' };

/** The lexer's patterns for the tokens that start with a digit or a sign (tokens.ts DateLike, NumberLit). */
const DATE_LIKE = /\d+-\d+-\d+(?:[Tt][0-9:.]*(?:[Zz]|[+-][0-9:]*)?)?/y;
const NUMBER = /[+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d*)?/y;

const isDigit = (c: number): boolean => c >= 48 && c <= 57;
const isNameStart = (c: number): boolean => (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
const isNamePart = (c: number): boolean => isNameStart(c) || isDigit(c);

/**
 * The shape of a query text, or null when the scan cannot say (the caller then parses in full).
 * With `found`, every lifted literal's place is pushed onto it.
 */
export function queryShape(text: string, found?: LiftedLiteral[]): QueryShape | null {
  if (text.includes('\u0000')) return null;
  let shape = '';
  let copied = 0;
  const images: string[] = [];
  const lift = (kind: LiftedKind, option: string, valueStart: number, start: number, end: number): void => {
    const image = text.slice(start, end);
    shape += text.slice(copied, start) + MARK[kind];
    copied = end;
    images.push(image);
    found?.push({ kind, option, offset: start - valueStart, at: start, image });
  };
  // The segments of splitQuery (parse-query.ts), found the same way.
  let i = text.charCodeAt(0) === 63 /* ? */ ? 1 : 0;
  while (i <= text.length) {
    const start = i;
    while (i < text.length && text[i] !== '=' && text[i] !== '&') i++;
    const hasValue = text[i] === '=';
    const name = text.slice(start, i);
    const expression = hasValue && (name === '$filter' || name === '$orderby' || name === '$expand' || name === '$apply');
    if (hasValue) i++;
    const valueStart = i;
    if (!expression) {
      while (i < text.length && text[i] !== '&') i++;
      if (hasValue && (name === '$top' || name === '$skip') && i > valueStart) {
        let j = valueStart;
        while (j < i && isDigit(text.charCodeAt(j))) j++;
        if (j === i) lift('count', name, valueStart, valueStart, i);
      }
      i++;
      continue;
    }
    // An expression option's value, token by token, up to the first `&` outside a string.
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 38 /* & */) break;
      if (c === 39 /* ' */) {
        let j = i + 1;
        for (;;) {
          const q = text.indexOf("'", j);
          if (q < 0) return null; // unterminated: splitQuery would run to the end, the lexer fails
          if (text.charCodeAt(q + 1) === 39) j = q + 2;
          else {
            j = q + 1;
            break;
          }
        }
        lift('string', name, valueStart, i, j);
        i = j;
      } else if (isNameStart(c)) {
        // geography'...' and geometry'...' come before names in the lexer's order
        if (text.startsWith("geography'", i) || text.startsWith("geometry'", i)) {
          const body = i + (text.charCodeAt(i + 3) === 103 /* g */ ? 10 : 9);
          const q = text.indexOf("'", body);
          if (q >= 0) {
            if (body - i === 10) lift('geography', name, valueStart, i, q + 1);
            i = q + 1;
            continue;
          }
        }
        let j = i + 1;
        while (j < text.length && isNamePart(text.charCodeAt(j))) j++;
        while (text.charCodeAt(j) === 46 /* . */ && isNameStart(text.charCodeAt(j + 1))) {
          j += 2;
          while (j < text.length && isNamePart(text.charCodeAt(j))) j++;
        }
        i = j;
      } else if (isDigit(c) || ((c === 43 || c === 45) /* + - */ && isDigit(text.charCodeAt(i + 1)))) {
        let kind: LiftedKind = 'number';
        let end = -1;
        if (isDigit(c)) {
          DATE_LIKE.lastIndex = i;
          if (DATE_LIKE.test(text)) {
            kind = 'date';
            end = DATE_LIKE.lastIndex;
          }
        }
        if (end < 0) {
          NUMBER.lastIndex = i;
          NUMBER.test(text);
          end = NUMBER.lastIndex;
        }
        // `$top=5` inside $expand is a count of the grammar's own, not a literal of the expression
        if (kind === 'date' || i === valueStart || text.charCodeAt(i - 1) !== 61 /* = */) lift(kind, name, valueStart, i, end);
        i = end;
      } else if (c === 36 /* $ */ || c === 64 /* @ */) {
        let j = i + 1;
        if (isNameStart(text.charCodeAt(j))) {
          j++;
          while (j < text.length && (isNamePart(text.charCodeAt(j)) || (c === 64 && text.charCodeAt(j) === 46))) j++;
        }
        i = j;
      } else i++;
    }
    i++;
  }
  return { text: copied === 0 ? text : shape + text.slice(copied), images };
}
