/** Small helpers shared by the parser tests. */
import { expect } from 'vitest';
import { QueryError } from '../../src/errors.js';
import type { Expr, ListExpr, LiteralExpr } from '../../src/odata/ast.js';
import { parseQuery, type ParseOptions } from '../../src/odata/parse-query.js';

/** The `$filter` AST of `filter`. */
export function filter(text: string, options?: ParseOptions): Expr {
  const q = parseQuery(`$filter=${text}`, options);
  if (q.filter === undefined) throw new Error('no filter');
  return q.filter;
}

function literal(l: LiteralExpr): string {
  switch (l.type) {
    case 'null':
      return 'null';
    case 'boolean':
      return String(l.value);
    case 'string':
      return `'${l.value}'`;
    case 'geographyPoint':
      return `POINT(${l.lon} ${l.lat})`;
    default:
      return l.text;
  }
}

/**
 * A compact S-expression of an expression, for asserting tree shapes:
 * `a add b mul c` is `(add a (mul b c))`.
 */
export function sexpr(e: Expr | ListExpr): string {
  switch (e.kind) {
    case 'literal':
      return literal(e);
    case 'member':
      return e.path.join('/');
    case 'list':
      return `[${e.items.map(sexpr).join(' ')}]`;
    case 'call':
      return `(${e.name}${e.args.map((a) => ` ${sexpr(a)}`).join('')})`;
    case 'lambda':
      return `(${e.operator} ${sexpr(e.collection)}${e.variable === null ? '' : ` ${e.variable}`}${e.predicate === null ? '' : ` ${sexpr(e.predicate)}`})`;
    case 'not':
      return `(not ${sexpr(e.operand)})`;
    case 'negate':
      return `(- ${sexpr(e.operand)})`;
    case 'and':
    case 'or':
      return `(${e.kind} ${sexpr(e.left)} ${sexpr(e.right)})`;
    case 'in':
      return `(in ${sexpr(e.left)} ${sexpr(e.right)})`;
    case 'compare':
    case 'arithmetic':
      return `(${e.operator} ${sexpr(e.left)} ${sexpr(e.right)})`;
  }
}

/** Runs `fn` and returns the QueryError it throws (failing the test if it throws anything else). */
export function queryErrorOf(fn: () => unknown): QueryError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(QueryError);
    return e as QueryError;
  }
  throw new Error('expected a QueryError, but nothing was thrown');
}
