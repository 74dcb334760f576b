/**
 * Error codes of the query parser. Every failure is a QueryError (src/errors.ts) with one of these
 * codes, `option` = the query option it occurs in (`$filter`; inside `$expand=Nav(...)` the outer
 * `$expand`), and, for failures inside a value, `position` = the 0-based offset into that
 * option's value. All of them are client errors (HTTP 400); the service maps codes to statuses.
 *
 * | code                   | when                                                               | position            |
 * |------------------------|--------------------------------------------------------------------|---------------------|
 * | InvalidSyntax          | a token where another was expected; missing/extra whitespace       | the offending token |
 * | InvalidLiteral         | a malformed literal: bad date/time field, `1.`, unterminated `'`,  | the offending char  |
 * |                        | geography point out of range, $top/$skip beyond 2^53               |                     |
 * | UnknownFunction        | `name(` where name is not a function the service has               | the name            |
 * | InvalidArguments       | a known function with too few or too many arguments                | the `)` or extra `,`|
 * | UnsupportedSyntax      | valid OData the service does not implement: `$it`, `@alias`, `has`, | the construct       |
 * |                        | `divby`, casts/qualified names, JSON arrays, key segments, ...     |                     |
 * | UnknownQueryOption     | a `$option` that is not in SERVICE.md §3 (names are case-sensitive) | nested: its `$name` |
 * | RepeatedQueryOption    | the same option twice (top level or inside one expand item)        | nested: its `$name` |
 * | NestingTooDeep         | more than maxDepth nested parentheses / calls / lambdas / unary ops | the `(` or operator |
 * | InListTooLong          | more than maxInListItems literals after `in`                       | the first extra item|
 * | TooManyOrderByKeys     | more than maxOrderByItems keys in one $orderby                     | the first extra key |
 * | UnknownAggregateMethod | `with M` where M is not sum/min/max/average/avg/countdistinct/     | the method          |
 * |                        | median/p10/p25/p50/p75/p90/p95                                     |                     |
 *
 * Top-level UnknownQueryOption and RepeatedQueryOption have no position (they concern the option
 * name, not its value).
 */
import { QueryError } from '../errors.js';

export const PARSE_ERROR_CODES = [
  'InvalidSyntax',
  'InvalidLiteral',
  'UnknownFunction',
  'InvalidArguments',
  'UnsupportedSyntax',
  'UnknownQueryOption',
  'RepeatedQueryOption',
  'NestingTooDeep',
  'InListTooLong',
  'TooManyOrderByKeys',
  'UnknownAggregateMethod',
] as const;

export type ParseErrorCode = (typeof PARSE_ERROR_CODES)[number];

const WINDOW = 24;

/** A short excerpt of `text` around `position`, with `⟩` marking the position. */
export function excerpt(text: string, position: number): string {
  const from = Math.max(0, position - WINDOW);
  const to = Math.min(text.length, position + WINDOW);
  const before = (from > 0 ? '…' : '') + text.slice(from, position);
  const after = text.slice(position, to) + (to < text.length ? '…' : '');
  return `"${before}⟩${after}"`;
}

/**
 * Builds the QueryError for a failure at `position` in `value` (the text of `option`).
 * `what` says what was expected and what was found; the excerpt quotes the text near it.
 */
export function queryError(code: ParseErrorCode, option: string, value: string, position: number, what: string): QueryError {
  const message = `${option}, position ${position}: ${what}; near ${excerpt(value, position)}`;
  return new QueryError(code, message, { option, position });
}

/** Describes a piece of input for a message: `'abc'`, or `end of input`. */
export function describeFound(text: string): string {
  if (text === '') return 'end of input';
  const shown = text.length > 30 ? `${text.slice(0, 30)}…` : text;
  return `'${shown}'`;
}
