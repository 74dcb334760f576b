/**
 * The typed AST of every query option parseQuery understands. Nodes are plain readonly data,
 * discriminated on `kind`; nothing here has behaviour. Walkers dispatch through a
 * `Record<Kind, handler>` (see `ExprHandlers`) so that adding a kind breaks every walker that has
 * not learnt it yet, at compile time.
 *
 * Source positions are deliberately not fields of the nodes: `parse(print(ast))` must deep-equal
 * `ast`, and printing normalises whitespace. On request (`parseQuery(text, { spans: true })`) the
 * parser records each node's span in a side table instead; `spanOf(query, node)` reads it (for a
 * binder error that wants to point at a field).
 */

// ---------------------------------------------------------------------------------------------
// Expressions ($filter, $orderby keys, $apply filter/aggregate operands)
// ---------------------------------------------------------------------------------------------

export type CompareOperator = 'eq' | 'ne' | 'gt' | 'ge' | 'lt' | 'le';
export type ArithmeticOperator = 'add' | 'sub' | 'mul' | 'div' | 'mod';

/** The built-in functions of SERVICE.md §3, with their arities (min, max). */
export const FUNCTION_ARITY = {
  contains: [2, 2],
  startswith: [2, 2],
  endswith: [2, 2],
  tolower: [1, 1],
  toupper: [1, 1],
  length: [1, 1],
  indexof: [2, 2],
  substring: [2, 3],
  trim: [1, 1],
  concat: [2, 2],
  year: [1, 1],
  month: [1, 1],
  day: [1, 1],
  hour: [1, 1],
  minute: [1, 1],
  second: [1, 1],
  date: [1, 1],
  now: [0, 0],
  'geo.distance': [2, 2],
  'search.text': [2, 3],
} as const satisfies Record<string, readonly [number, number]>;

export type FunctionName = keyof typeof FUNCTION_ARITY;

export function isFunctionName(name: string): name is FunctionName {
  return Object.prototype.hasOwnProperty.call(FUNCTION_ARITY, name);
}

export interface NullLiteral {
  readonly kind: 'literal';
  readonly type: 'null';
}

export interface BooleanLiteral {
  readonly kind: 'literal';
  readonly type: 'boolean';
  readonly value: boolean;
}

/** `value` is the decoded text: `'it''s'` has the value `it's`. */
export interface StringLiteral {
  readonly kind: 'literal';
  readonly type: 'string';
  readonly value: string;
}

/**
 * `integer` (`42`, `-7`), `decimal` (`3.50`) or `double` (`1.5e3`). `text` is the literal as
 * written (kept so Edm.Int64 and Edm.Decimal values beyond a double's precision are not lost);
 * `value` is `Number(text)`.
 */
export interface NumberLiteral {
  readonly kind: 'literal';
  readonly type: 'integer' | 'decimal' | 'double';
  readonly text: string;
  readonly value: number;
}

/** `2024-05-01`; `value` is the epoch milliseconds of that day's start, UTC. */
export interface DateLiteral {
  readonly kind: 'literal';
  readonly type: 'date';
  readonly text: string;
  readonly value: number;
}

/** `2024-05-01T10:00:00Z` or with an offset; `value` is the instant in epoch milliseconds. */
export interface DateTimeOffsetLiteral {
  readonly kind: 'literal';
  readonly type: 'dateTimeOffset';
  readonly text: string;
  readonly value: number;
}

/** `geography'POINT(lon lat)'`, optionally `SRID=n;` first (`srid` is null when absent). */
export interface GeographyPointLiteral {
  readonly kind: 'literal';
  readonly type: 'geographyPoint';
  readonly srid: number | null;
  readonly lon: number;
  readonly lat: number;
}

export type LiteralExpr = NullLiteral | BooleanLiteral | StringLiteral | NumberLiteral | DateLiteral | DateTimeOffsetLiteral | GeographyPointLiteral;

export type LiteralType = LiteralExpr['type'];

/**
 * A property path: `ListPrice`, `Appliances`, or inside a lambda `a` / `a/Name`. The binder
 * decides whether the first segment is a field or a lambda variable.
 */
export interface MemberExpr {
  readonly kind: 'member';
  readonly path: readonly string[];
}

export interface CallExpr {
  readonly kind: 'call';
  readonly name: FunctionName;
  readonly args: readonly Expr[];
}

/**
 * `Appliances/any(a: a eq 'Dishwasher')`. `any()` has neither variable nor predicate (true when
 * the collection is not empty); `all` always has both.
 */
export interface LambdaExpr {
  readonly kind: 'lambda';
  readonly operator: 'any' | 'all';
  readonly collection: MemberExpr;
  readonly variable: string | null;
  readonly predicate: Expr | null;
}

export interface NotExpr {
  readonly kind: 'not';
  readonly operand: Expr;
}

export interface NegateExpr {
  readonly kind: 'negate';
  readonly operand: Expr;
}

export interface AndExpr {
  readonly kind: 'and';
  readonly left: Expr;
  readonly right: Expr;
}

export interface OrExpr {
  readonly kind: 'or';
  readonly left: Expr;
  readonly right: Expr;
}

export interface CompareExpr {
  readonly kind: 'compare';
  readonly operator: CompareOperator;
  readonly left: Expr;
  readonly right: Expr;
}

export interface ArithmeticExpr {
  readonly kind: 'arithmetic';
  readonly operator: ArithmeticOperator;
  readonly left: Expr;
  readonly right: Expr;
}

/** The parenthesised literal list on the right of `in`: `(1,2,3)`, possibly empty. */
export interface ListExpr {
  readonly kind: 'list';
  readonly items: readonly LiteralExpr[];
}

/**
 * `X in (1,2)` has a `list` on the right. OData also allows any expression there (a
 * collection-valued one, e.g. `'Dishwasher' in Appliances`); then `right` is that expression.
 */
export interface InExpr {
  readonly kind: 'in';
  readonly left: Expr;
  readonly right: ListExpr | Expr;
}

export type Expr = LiteralExpr | MemberExpr | CallExpr | LambdaExpr | NotExpr | NegateExpr | AndExpr | OrExpr | CompareExpr | ArithmeticExpr | InExpr;

export type ExprKind = Expr['kind'];

/** One handler per expression kind; a missing kind is a compile error. */
export type ExprHandlers<R> = { readonly [K in ExprKind]: (node: Extract<Expr, { kind: K }>) => R };

/** Dispatches `node` to the handler of its kind. */
export function visitExpr<R>(node: Expr, handlers: ExprHandlers<R>): R {
  return (handlers[node.kind] as (n: Expr) => R)(node);
}

// ---------------------------------------------------------------------------------------------
// $orderby, $select, $expand, $apply
// ---------------------------------------------------------------------------------------------

/** One `$orderby` key. Without `asc`/`desc` the direction is `asc`. `relevance desc` is a member. */
export interface OrderByItem {
  readonly kind: 'orderby';
  readonly expr: Expr;
  readonly direction: 'asc' | 'desc';
}

export interface SelectStar {
  readonly kind: 'star';
}

export interface SelectProperty {
  readonly kind: 'property';
  readonly name: string;
}

export type SelectItem = SelectStar | SelectProperty;

/** The options allowed inside `$expand=Nav(...)`, each at most once. */
export interface ExpandOptions {
  readonly select?: readonly SelectItem[];
  readonly filter?: Expr;
  readonly orderby?: readonly OrderByItem[];
  readonly top?: number;
  readonly skip?: number;
}

export interface ExpandItem {
  readonly kind: 'expand';
  readonly name: string;
  readonly options: ExpandOptions;
}

export const AGGREGATE_METHODS = ['sum', 'min', 'max', 'average', 'avg', 'countdistinct', 'median', 'p10', 'p25', 'p50', 'p75', 'p90', 'p95'] as const;

/** As written: `avg` stays `avg` (the binder treats it as `average` and names a default alias). */
export type AggregateMethod = (typeof AGGREGATE_METHODS)[number];

export function isAggregateMethod(name: string): name is AggregateMethod {
  return (AGGREGATE_METHODS as readonly string[]).includes(name);
}

/** `F with M [as Alias]`; without an alias the result is named `F_M` (decided by the binder). */
export interface AggregateWith {
  readonly kind: 'aggregateWith';
  readonly expr: Expr;
  readonly method: AggregateMethod;
  readonly alias: string | null;
}

/** `$count as Alias`. */
export interface AggregateCount {
  readonly kind: 'aggregateCount';
  readonly alias: string;
}

export type AggregateItem = AggregateWith | AggregateCount;

export interface FilterTransformation {
  readonly kind: 'filter';
  readonly predicate: Expr;
}

export interface AggregateTransformation {
  readonly kind: 'aggregate';
  readonly items: readonly AggregateItem[];
}

export interface GroupByTransformation {
  readonly kind: 'groupby';
  readonly properties: readonly MemberExpr[];
  readonly aggregate: AggregateTransformation | null;
}

export type ApplyTransformation = FilterTransformation | GroupByTransformation | AggregateTransformation;

// ---------------------------------------------------------------------------------------------
// The whole query string
// ---------------------------------------------------------------------------------------------

/** One field per system query option that was present; absent options are absent keys. */
export interface ParsedQuery {
  readonly filter?: Expr;
  readonly select?: readonly SelectItem[];
  readonly orderby?: readonly OrderByItem[];
  readonly top?: number;
  readonly skip?: number;
  /**
   * Raw `$skiptoken` value: opaque to the parser. The engine writes one into every nextLink to pin
   * the data generation the first page read (DESIGN.md, "Change").
   */
  readonly skiptoken?: string;
  readonly count?: boolean;
  readonly ignorenulls?: boolean;
  readonly expand?: readonly ExpandItem[];
  readonly apply?: readonly ApplyTransformation[];
  /** Raw `$format` value; the service decides which formats it serves. */
  readonly format?: string;
}

// ---------------------------------------------------------------------------------------------
// Source spans (side table, see the header comment)
// ---------------------------------------------------------------------------------------------

export interface Span {
  /** 0-based offset of the node's first character in its query option's value. */
  readonly start: number;
  /** Offset just past the node's last character. */
  readonly end: number;
}

/**
 * The parser appends each node and its [start, end) to flat arrays (cheap: a WeakMap entry per
 * node would cost a third of the parse time); the first lookup turns them into a Map.
 */
export interface SpanRecorder {
  readonly nodes: object[];
  readonly offsets: number[];
}

const spanTables = new WeakMap<ParsedQuery, SpanRecorder | Map<object, Span>>();

/**
 * Where `node` (any node of `query`) was in the text: offsets into the value of the option that
 * holds it (for nodes inside `$expand=Nav(...)`, the `$expand` value). Undefined unless `query`
 * came from `parseQuery(text, { spans: true })`.
 */
export function spanOf(query: ParsedQuery, node: object): Span | undefined {
  let table = spanTables.get(query);
  if (table === undefined) return undefined;
  if (!(table instanceof Map)) {
    const map = new Map<object, Span>();
    for (let i = 0; i < table.nodes.length; i++) {
      map.set(table.nodes[i], { start: table.offsets[2 * i], end: table.offsets[2 * i + 1] });
    }
    table = map;
    spanTables.set(query, map);
  }
  return table.get(node);
}

/** @internal attaches the spans recorded while parsing `query`. */
export function attachSpans(query: ParsedQuery, recorder: SpanRecorder): void {
  spanTables.set(query, recorder);
}
