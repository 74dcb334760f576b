/**
 * `parseQuery(text)`: the query string of OData options (already percent-decoded) to one AST per
 * option, by syntax alone (no schema). See SERVICE.md §3 and §6.
 */
import { QueryError } from '../errors.js';
import {
  attachSpans,
  type ApplyTransformation,
  type ExpandItem,
  type Expr,
  type OrderByItem,
  type ParsedQuery,
  type SelectItem,
  type SpanRecorder,
} from './ast.js';
import { queryError } from './errors.js';
import { nonNegativeInteger, parser, type Entry, type ParseLimits } from './grammar.js';

export type { ParseLimits } from './grammar.js';

export interface ParseOptions {
  /** Nesting levels (parentheses, function calls, lambdas, prefix operators); default 64. */
  readonly maxDepth?: number;
  /** Items in one `in (...)` list; default 1,000. */
  readonly maxInListItems?: number;
  /** Keys in one `$orderby`; default 8. */
  readonly maxOrderByItems?: number;
  /**
   * Record where each node was in the text, for `spanOf(query, node)` (binder error positions).
   * Off by default: it costs about a tenth of the parse time.
   */
  readonly spans?: boolean;
}

export const DEFAULT_LIMITS: ParseLimits = Object.freeze({ maxDepth: 64, maxInListItems: 1000, maxOrderByItems: 8 });

const SYSTEM_OPTIONS = ['$filter', '$select', '$orderby', '$top', '$skip', '$skiptoken', '$count', '$ignorenulls', '$expand', '$apply', '$format'] as const;
type SystemOption = (typeof SYSTEM_OPTIONS)[number];

function isSystemOption(name: string): name is SystemOption {
  return (SYSTEM_OPTIONS as readonly string[]).includes(name);
}

/** One `name=value` of the query string. `hasValue` is false for a bare `name` (no `=`). */
export interface RawOption {
  readonly name: string;
  readonly value: string;
  readonly hasValue: boolean;
  /** Offset of the value in the query string (of the end of the name when there is no `=`). */
  readonly offset: number;
}

/** Options whose values hold OData string literals, which may contain `&`. */
const QUOTED_OPTIONS = new Set(['$filter', '$orderby', '$expand', '$apply']);

/**
 * Splits on `&`. In the value of an option that holds OData expressions, a `&` between single
 * quotes belongs to a string literal (`$filter=Name eq 'A&B'` is one option: the caller decoded
 * `%26` before we saw it); every other parameter is split on every `&`, since its value is not
 * an OData literal (an apostrophe in `foo=it's` or `$format=...` does not open a string).
 * Empty segments (`a&&b`, a trailing `&`) are ignored, and so is one leading `?`.
 */
export function splitQuery(text: string): RawOption[] {
  const out: RawOption[] = [];
  let i = text.startsWith('?') ? 1 : 0;
  while (i <= text.length) {
    const start = i;
    while (i < text.length && text[i] !== '=' && text[i] !== '&') i++;
    const quoteAware = text[i] === '=' && QUOTED_OPTIONS.has(text.slice(start, i));
    let inString = false;
    while (i < text.length) {
      const c = text[i];
      if (c === "'" && quoteAware) inString = !inString;
      else if (c === '&' && !inString) break;
      i++;
    }
    const segment = text.slice(start, i);
    i++;
    if (segment === '') continue;
    const eq = segment.indexOf('=');
    out.push(
      eq < 0
        ? { name: segment, value: '', hasValue: false, offset: start + segment.length }
        : { name: segment.slice(0, eq), value: segment.slice(eq + 1), hasValue: true, offset: start + eq + 1 },
    );
  }
  return out;
}

function limitsOf(options: ParseOptions | undefined): ParseLimits {
  if (options === undefined) return DEFAULT_LIMITS;
  return {
    maxDepth: options.maxDepth ?? DEFAULT_LIMITS.maxDepth,
    maxInListItems: options.maxInListItems ?? DEFAULT_LIMITS.maxInListItems,
    maxOrderByItems: options.maxOrderByItems ?? DEFAULT_LIMITS.maxOrderByItems,
  };
}

const isBlank = (c: string | undefined): boolean => c === ' ' || c === '\t';

/**
 * OData does not allow whitespace around a whole option value (`$filter= x`, `$top=5 `). The
 * lexer skips whitespace, so this is checked around the parse: leading whitespace first (nothing
 * can fail earlier), trailing whitespace only once the rest has parsed (so `a eq ` reports the
 * missing operand, the more useful error).
 */
function grammar<T>(entry: Entry, option: string, value: string, limits: ParseLimits, spans?: SpanRecorder): T {
  if (isBlank(value[0])) {
    throw queryError('InvalidSyntax', option, value, 0, 'unexpected whitespace at the start of the value');
  }
  const result = parser.run<T>(entry, value, option, limits, spans);
  if (isBlank(value[value.length - 1])) {
    let at = value.length;
    while (at > 0 && isBlank(value[at - 1])) at--;
    throw queryError('InvalidSyntax', option, value, at, 'unexpected whitespace at the end of the value');
  }
  return result;
}

function integerOption(option: string, value: string): number {
  const r = nonNegativeInteger(value);
  if (typeof r === 'number') return r;
  throw queryError(r.code, option, value, r.offset, r.what);
}

function booleanOption(option: string, value: string): boolean {
  if (value === 'true') return true;
  if (value === 'false') return false;
  const found = value === '' ? 'end of input' : `'${value.length > 30 ? `${value.slice(0, 30)}…` : value}'`;
  throw queryError('InvalidSyntax', option, value, 0, `expected true or false, found ${found}`);
}

/** Parses the `$filter` expression grammar alone (the value of one option). */
export function parseFilter(value: string, options?: ParseOptions, option = '$filter'): Expr {
  return grammar<Expr>('filterEntry', option, value, limitsOf(options));
}

/**
 * Parses a query string of OData options (`$filter=...&$orderby=...`, already percent-decoded)
 * into one AST per option. Unknown `$` options and repeated options are errors; parameters without
 * `$` are ignored, as OData allows. Throws only QueryError.
 */
export function parseQuery(text: string, options?: ParseOptions): ParsedQuery {
  const limits = limitsOf(options);
  const result: {
    filter?: Expr;
    select?: readonly SelectItem[];
    orderby?: readonly OrderByItem[];
    top?: number;
    skip?: number;
    skiptoken?: string;
    count?: boolean;
    ignorenulls?: boolean;
    expand?: readonly ExpandItem[];
    apply?: readonly ApplyTransformation[];
    format?: string;
  } = {};
  const seen = new Set<string>();
  const spans: SpanRecorder | undefined = options?.spans === true ? { nodes: [], offsets: [] } : undefined;
  for (const { name, value, hasValue } of splitQuery(text)) {
    if (!name.startsWith('$')) continue;
    if (!isSystemOption(name)) {
      const hint = isSystemOption(name.toLowerCase()) ? ` (option names are case-sensitive: use ${name.toLowerCase()})` : '';
      throw new QueryError('UnknownQueryOption', `unknown query option '${name}'${hint}; supported: ${SYSTEM_OPTIONS.join(', ')}`, {
        option: name,
      });
    }
    if (seen.has(name)) {
      throw new QueryError('RepeatedQueryOption', `the query option '${name}' appears more than once`, { option: name });
    }
    seen.add(name);
    if (!hasValue) {
      throw queryError('InvalidSyntax', name, value, 0, `expected '=' and a value after ${name}`);
    }
    switch (name) {
      case '$filter':
        result.filter = grammar<Expr>('filterEntry', name, value, limits, spans);
        break;
      case '$select':
        result.select = grammar<SelectItem[]>('selectEntry', name, value, limits, spans);
        break;
      case '$orderby':
        result.orderby = grammar<OrderByItem[]>('orderbyEntry', name, value, limits, spans);
        break;
      case '$expand':
        result.expand = grammar<ExpandItem[]>('expandEntry', name, value, limits, spans);
        break;
      case '$apply':
        result.apply = grammar<ApplyTransformation[]>('applyEntry', name, value, limits, spans);
        break;
      case '$top':
        result.top = integerOption(name, value);
        break;
      case '$skip':
        result.skip = integerOption(name, value);
        break;
      case '$skiptoken':
        // Opaque to the parser (OData: 1*qchar-no-AMP); the engine says whether it knows it.
        if (value === '') throw queryError('InvalidSyntax', name, value, 0, 'expected a skip token, found end of input');
        result.skiptoken = value;
        break;
      case '$count':
        result.count = booleanOption(name, value);
        break;
      case '$ignorenulls':
        result.ignorenulls = booleanOption(name, value);
        break;
      case '$format':
        if (value === '') throw queryError('InvalidSyntax', name, value, 0, 'expected a format such as json, found end of input');
        result.format = value;
        break;
    }
  }
  if (spans !== undefined) attachSpans(result, spans);
  return result;
}

/** The option keys of ParsedQuery in canonical (printing) order. */
export const QUERY_KEYS = [
  'filter',
  'select',
  'orderby',
  'top',
  'skip',
  'skiptoken',
  'count',
  'ignorenulls',
  'expand',
  'apply',
  'format',
] as const satisfies readonly (keyof ParsedQuery)[];
