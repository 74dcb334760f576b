/**
 * Canonical OData text for an AST: single spaces around keyword operators, no spaces after
 * commas, the fewest parentheses that keep the tree's shape, options in a fixed order. For every
 * AST the parser can produce, `parse(print(ast))` deep-equals `ast` (tested with generated ASTs),
 * so the printed text can serve as a cache key for a query's meaning.
 *
 * Numbers, dates and timestamps print as written (`text`), so `1.50` stays `1.50`: the AST keeps
 * the literal's spelling because Edm.Decimal and Edm.Int64 values may exceed a double.
 */
import {
  visitExpr,
  type AggregateItem,
  type ApplyTransformation,
  type ExpandItem,
  type Expr,
  type ExprHandlers,
  type ListExpr,
  type LiteralExpr,
  type OrderByItem,
  type ParsedQuery,
  type SelectItem,
} from './ast.js';
import { QUERY_KEYS } from './parse-query.js';

/** Binding strength, loosest first. */
const enum Prec {
  Or = 1,
  And = 2,
  Compare = 3,
  Additive = 4,
  Multiplicative = 5,
  Prefix = 6,
  Primary = 7,
}

function precedence(e: Expr): Prec {
  switch (e.kind) {
    case 'or':
      return Prec.Or;
    case 'and':
      return Prec.And;
    case 'compare':
    case 'in':
      return Prec.Compare;
    case 'arithmetic':
      return e.operator === 'add' || e.operator === 'sub' ? Prec.Additive : Prec.Multiplicative;
    case 'not':
    case 'negate':
      return Prec.Prefix;
    default:
      return Prec.Primary;
  }
}

type BinaryNode = Extract<Expr, { kind: 'or' | 'and' | 'compare' | 'in' | 'arithmetic' }>;

function isBinary(e: Expr): e is BinaryNode {
  return e.kind === 'or' || e.kind === 'and' || e.kind === 'compare' || e.kind === 'in' || e.kind === 'arithmetic';
}

function operatorOf(e: BinaryNode): string {
  switch (e.kind) {
    case 'or':
    case 'and':
    case 'in':
      return e.kind;
    default:
      return e.operator;
  }
}

function formatCoordinate(n: number): string {
  return Object.is(n, -0) ? '-0' : String(n);
}

export function printLiteral(e: LiteralExpr): string {
  switch (e.type) {
    case 'null':
      return 'null';
    case 'boolean':
      return e.value ? 'true' : 'false';
    case 'string':
      return `'${e.value.replace(/'/g, "''")}'`;
    case 'geographyPoint':
      return `geography'${e.srid === null ? '' : `SRID=${e.srid};`}POINT(${formatCoordinate(e.lon)} ${formatCoordinate(e.lat)})'`;
    default:
      return e.text;
  }
}

function wrap(text: string, parens: boolean): string {
  return parens ? `(${text})` : text;
}

function printList(list: ListExpr): string {
  return `(${list.items.map(printLiteral).join(',')})`;
}

/** The right operand of `in`: a list, or an expression that must not read as one. */
function printInRight(right: ListExpr | Expr): string {
  if (right.kind === 'list') return printList(right);
  const text = printOperand(right, precedence(right) <= Prec.Compare);
  return text.startsWith('(') && !(precedence(right) <= Prec.Compare) ? `(${text})` : text;
}

function printOperand(e: Expr, parens: boolean): string {
  return wrap(printExpr(e), parens);
}

/**
 * A left-deep chain of one precedence level (`a and b and c`, 3,000 deep for a 16 KB filter) is
 * printed in a loop, so printing never recurses deeper than the nesting the parser allowed.
 */
function printBinary(node: BinaryNode): string {
  const level = precedence(node);
  const chain: BinaryNode[] = [];
  let leftmost: Expr = node;
  while (isBinary(leftmost) && precedence(leftmost) === level) {
    chain.push(leftmost);
    leftmost = leftmost.left;
  }
  let out = printOperand(leftmost, precedence(leftmost) < level);
  for (let i = chain.length - 1; i >= 0; i--) {
    const link = chain[i];
    const right = link.kind === 'in' ? printInRight(link.right) : printOperand(link.right, precedence(link.right) <= level);
    out += ` ${operatorOf(link)} ${right}`;
  }
  return out;
}

const handlers: ExprHandlers<string> = {
  literal: printLiteral,
  member: (e) => e.path.join('/'),
  call: (e) => `${e.name}(${e.args.map(printExpr).join(',')})`,
  lambda: (e) =>
    `${e.collection.path.join('/')}/${e.operator}(${e.variable === null || e.predicate === null ? '' : `${e.variable}:${printExpr(e.predicate)}`})`,
  not: (e) => `not ${printOperand(e.operand, precedence(e.operand) < Prec.Prefix)}`,
  // `-5` would read back as the literal -5, not the negation of 5: literals get parentheses.
  negate: (e) => `-${printOperand(e.operand, precedence(e.operand) < Prec.Prefix || e.operand.kind === 'literal')}`,
  and: printBinary,
  or: printBinary,
  compare: printBinary,
  arithmetic: printBinary,
  in: printBinary,
};

/** Canonical text of an expression (a `$filter` value). */
export function printExpr(e: Expr): string {
  return visitExpr(e, handlers);
}

export function printOrderBy(items: readonly OrderByItem[]): string {
  return items.map((i) => (i.direction === 'desc' ? `${printExpr(i.expr)} desc` : printExpr(i.expr))).join(',');
}

export function printSelect(items: readonly SelectItem[]): string {
  return items.map((i) => (i.kind === 'star' ? '*' : i.name)).join(',');
}

export function printExpand(items: readonly ExpandItem[]): string {
  return items
    .map((item) => {
      const o = item.options;
      const parts: string[] = [];
      if (o.select !== undefined) parts.push(`$select=${printSelect(o.select)}`);
      if (o.filter !== undefined) parts.push(`$filter=${printExpr(o.filter)}`);
      if (o.orderby !== undefined) parts.push(`$orderby=${printOrderBy(o.orderby)}`);
      if (o.top !== undefined) parts.push(`$top=${o.top}`);
      if (o.skip !== undefined) parts.push(`$skip=${o.skip}`);
      return parts.length === 0 ? item.name : `${item.name}(${parts.join(';')})`;
    })
    .join(',');
}

function printAggregateItem(a: AggregateItem): string {
  if (a.kind === 'aggregateCount') return `$count as ${a.alias}`;
  const base = `${printExpr(a.expr)} with ${a.method}`;
  return a.alias === null ? base : `${base} as ${a.alias}`;
}

export function printApply(trafos: readonly ApplyTransformation[]): string {
  return trafos
    .map((t) => {
      switch (t.kind) {
        case 'filter':
          return `filter(${printExpr(t.predicate)})`;
        case 'aggregate':
          return `aggregate(${t.items.map(printAggregateItem).join(',')})`;
        case 'groupby': {
          const props = `(${t.properties.map((p) => p.path.join('/')).join(',')})`;
          return t.aggregate === null ? `groupby(${props})` : `groupby(${props},aggregate(${t.aggregate.items.map(printAggregateItem).join(',')}))`;
        }
      }
    })
    .join('/');
}

const optionPrinters: { readonly [K in (typeof QUERY_KEYS)[number]]: (v: NonNullable<ParsedQuery[K]>) => string } = {
  filter: printExpr,
  select: printSelect,
  orderby: printOrderBy,
  top: String,
  skip: String,
  skiptoken: (v) => v,
  count: String,
  ignorenulls: String,
  expand: printExpand,
  apply: printApply,
  format: (v) => v,
};

/** The options present, in a fixed order, as [`$name`, canonical value] pairs. */
export function printQueryOptions(q: ParsedQuery): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const key of QUERY_KEYS) {
    const value = q[key];
    if (value === undefined) continue;
    out.push([`$${key}`, (optionPrinters[key] as (v: unknown) => string)(value)]);
  }
  return out;
}

/** Canonical query string: the options present, in a fixed order, `&`-separated. */
export function printQuery(q: ParsedQuery): string {
  return printQueryOptions(q)
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
}
