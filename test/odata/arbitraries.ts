/**
 * fast-check generators of ASTs the parser can produce: every node kind, every literal form,
 * names that look like keywords (`order`, `notes`), strings with quotes and `&`.
 */
import fc from 'fast-check';
import {
  AGGREGATE_METHODS,
  FUNCTION_ARITY,
  type AggregateItem,
  type ApplyTransformation,
  type ArithmeticOperator,
  type CompareOperator,
  type ExpandItem,
  type ExpandOptions,
  type Expr,
  type FunctionName,
  type ListExpr,
  type LiteralExpr,
  type MemberExpr,
  type OrderByItem,
  type ParsedQuery,
  type SelectItem,
} from '../../src/odata/ast.js';
import { dateLiteral, numberLiteral } from '../../src/odata/literals.js';

/** Plain names, including ones that start like keywords or are function names. */
export const NAMES = [
  'ListPrice',
  'City',
  'StandardStatus',
  'order',
  'Order',
  'Android',
  'notes',
  'ordinal',
  'index',
  'inner',
  'year',
  'date',
  'any',
  'all',
  'a',
  'x',
  '_id',
  'Media',
  'nullable',
  'ascending',
  'withdrawn',
  'As',
  'IN',
  'p10',
] as const;

export const name = fc.constantFrom(...NAMES);

const numberText = fc.oneof(
  fc.stringMatching(/^[+-]?\d{1,20}$/),
  fc.stringMatching(/^[+-]?\d{1,12}\.\d{1,12}$/),
  fc.stringMatching(/^[+-]?\d{1,6}(\.\d{1,6})?[eE][+-]?\d{1,3}$/),
);

const pad = (n: number, width: number) => String(n).padStart(width, '0');
const DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

const dateText = fc
  .record({ y: fc.integer({ min: 0, max: 9999 }), m: fc.integer({ min: 1, max: 12 }), d: fc.integer({ min: 1, max: 31 }) })
  .map(({ y, m, d }) => {
    const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
    const max = m === 2 && !leap ? 28 : DAYS[m - 1];
    return `${pad(y, 4)}-${pad(m, 2)}-${pad(Math.min(d, max), 2)}`;
  });

const timeText = fc
  .record({
    h: fc.integer({ min: 0, max: 23 }),
    mi: fc.integer({ min: 0, max: 59 }),
    s: fc.option(fc.integer({ min: 0, max: 59 }), { nil: undefined }),
    frac: fc.option(fc.stringMatching(/^\d{1,12}$/), { nil: undefined }),
    t: fc.constantFrom('T', 't'),
    zone: fc.oneof(
      fc.constantFrom('Z', 'z'),
      fc
        .record({ sign: fc.constantFrom('+', '-'), h: fc.integer({ min: 0, max: 23 }), m: fc.integer({ min: 0, max: 59 }) })
        .map(({ sign, h, m }) => `${sign}${pad(h, 2)}:${pad(m, 2)}`),
    ),
  })
  .map(({ h, mi, s, frac, t, zone }) => {
    const seconds = s === undefined ? '' : `:${pad(s, 2)}${frac === undefined ? '' : `.${frac}`}`;
    return `${t}${pad(h, 2)}:${pad(mi, 2)}${seconds}${zone}`;
  });

function fromText<T extends object>(build: (text: string) => T | object, text: string): T {
  const r = build(text);
  if ('offset' in r) throw new Error(`generator produced an invalid literal ${text}`);
  return r as T;
}

export const literal: fc.Arbitrary<LiteralExpr> = fc.oneof(
  fc.constant<LiteralExpr>({ kind: 'literal', type: 'null' }),
  fc.boolean().map((value): LiteralExpr => ({ kind: 'literal', type: 'boolean', value })),
  fc.string({ unit: 'binary', maxLength: 12 }).map((value): LiteralExpr => ({ kind: 'literal', type: 'string', value })),
  fc.constantFrom("'", "''", '&', "a'&'b", ' ', ')', ';').map((value): LiteralExpr => ({ kind: 'literal', type: 'string', value })),
  numberText.map((text) => fromText<LiteralExpr>(numberLiteral, text)),
  dateText.map((text) => fromText<LiteralExpr>(dateLiteral, text)),
  fc.tuple(dateText, timeText).map(([d, t]) => fromText<LiteralExpr>(dateLiteral, d + t)),
  fc
    .record({
      srid: fc.option(fc.integer({ min: 0, max: 99999 }), { nil: null }),
      lon: fc.double({ min: -180, max: 180, noNaN: true }),
      lat: fc.double({ min: -90, max: 90, noNaN: true }),
    })
    .map(({ srid, lon, lat }): LiteralExpr => ({ kind: 'literal', type: 'geographyPoint', srid, lon, lat })),
);

const FUNCTIONS = Object.keys(FUNCTION_ARITY) as FunctionName[];
const COMPARE: CompareOperator[] = ['eq', 'ne', 'gt', 'ge', 'lt', 'le'];
const ARITHMETIC: ArithmeticOperator[] = ['add', 'sub', 'mul', 'div', 'mod'];

/**
 * The grammar's generators over a set of names: `grammarOf(name)` with the syntax-only NAMES
 * (below) for the parser's tests, or with a data set's field names (and extra atoms that are
 * well typed) for whole queries against a schema (test/service/fuzz.test.ts).
 */
export interface Grammar {
  readonly member: fc.Arbitrary<MemberExpr>;
  readonly expr: fc.Arbitrary<Expr>;
  readonly query: fc.Arbitrary<ParsedQuery>;
}

export function grammarOf(name: fc.Arbitrary<string>, atoms: ReadonlyArray<fc.Arbitrary<Expr>> = []): Grammar {
  const member: fc.Arbitrary<MemberExpr> = fc.array(name, { minLength: 1, maxLength: 3 }).map((path) => ({ kind: 'member', path }));
  /** Expressions up to a few levels deep (well inside the nesting limit). */
  const expr: fc.Arbitrary<Expr> = fc.letrec<{ expr: Expr; list: ListExpr }>((tie) => {
    const sub = tie('expr');
    return {
      list: fc.array(literal, { maxLength: 4 }).map((items): ListExpr => ({ kind: 'list', items })),
      expr: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        literal,
        member,
        ...atoms,
        fc.constantFrom(...FUNCTIONS).chain((fn) => {
          const [min, max] = FUNCTION_ARITY[fn];
          return fc.array(sub, { minLength: min, maxLength: max }).map((args): Expr => ({ kind: 'call', name: fn, args }));
        }),
        fc.oneof(
          fc
            .record({ collection: member, variable: name, predicate: sub })
            .map(({ collection, variable, predicate }): Expr => ({ kind: 'lambda', operator: 'all', collection, variable, predicate })),
          fc
            .record({ collection: member, variable: name, predicate: sub })
            .map(({ collection, variable, predicate }): Expr => ({ kind: 'lambda', operator: 'any', collection, variable, predicate })),
          member.map((collection): Expr => ({ kind: 'lambda', operator: 'any', collection, variable: null, predicate: null })),
        ),
        sub.map((operand): Expr => ({ kind: 'not', operand })),
        sub.map((operand): Expr => ({ kind: 'negate', operand })),
        fc.tuple(sub, sub).map(([left, right]): Expr => ({ kind: 'and', left, right })),
        fc.tuple(sub, sub).map(([left, right]): Expr => ({ kind: 'or', left, right })),
        fc.tuple(fc.constantFrom(...COMPARE), sub, sub).map(([operator, left, right]): Expr => ({ kind: 'compare', operator, left, right })),
        fc.tuple(fc.constantFrom(...ARITHMETIC), sub, sub).map(([operator, left, right]): Expr => ({ kind: 'arithmetic', operator, left, right })),
        fc.tuple(sub, fc.oneof(tie('list'), sub)).map(([left, right]): Expr => ({ kind: 'in', left, right })),
      ),
    };
  }).expr;

  const orderby: fc.Arbitrary<OrderByItem[]> = fc.array(
    fc
      .record({ expr, direction: fc.constantFrom<'asc' | 'desc'>('asc', 'desc') })
      .map(({ expr: e, direction }): OrderByItem => ({ kind: 'orderby', expr: e, direction })),
    { minLength: 1, maxLength: 8 },
  );

  const select: fc.Arbitrary<SelectItem[]> = fc.array(
    fc.oneof(
      fc.constant<SelectItem>({ kind: 'star' }),
      name.map((n): SelectItem => ({ kind: 'property', name: n })),
    ),
    { minLength: 1, maxLength: 4 },
  );

  const count = fc.integer({ min: 0, max: 1_000_000 });

  const expandOptions: fc.Arbitrary<ExpandOptions> = fc.record({ select, filter: expr, orderby, top: count, skip: count }, { requiredKeys: [] });

  const expand: fc.Arbitrary<ExpandItem[]> = fc.array(
    fc.record({ name, options: expandOptions }).map(({ name: n, options }): ExpandItem => ({ kind: 'expand', name: n, options })),
    { minLength: 1, maxLength: 3 },
  );

  const aggregateItem: fc.Arbitrary<AggregateItem> = fc.oneof(
    name.map((alias): AggregateItem => ({ kind: 'aggregateCount', alias })),
    fc
      .record({ expr, method: fc.constantFrom(...AGGREGATE_METHODS), alias: fc.option(name, { nil: null }) })
      .map(({ expr: e, method, alias }): AggregateItem => ({ kind: 'aggregateWith', expr: e, method, alias })),
  );

  const aggregate = fc.array(aggregateItem, { minLength: 1, maxLength: 3 }).map((items) => ({ kind: 'aggregate' as const, items }));

  const apply: fc.Arbitrary<ApplyTransformation[]> = fc.array(
    fc.oneof(
      expr.map((predicate): ApplyTransformation => ({ kind: 'filter', predicate })),
      fc
        .record({ properties: fc.array(member, { minLength: 1, maxLength: 3 }), aggregate: fc.option(aggregate, { nil: null }) })
        .map(({ properties, aggregate: a }): ApplyTransformation => ({ kind: 'groupby', properties, aggregate: a })),
      aggregate,
    ),
    { minLength: 1, maxLength: 3 },
  );

  const query: fc.Arbitrary<ParsedQuery> = fc.record(
    {
      filter: expr,
      select,
      orderby,
      top: count,
      skip: count,
      count: fc.boolean(),
      ignorenulls: fc.boolean(),
      expand,
      apply,
      format: fc.stringMatching(/^[a-z]{1,8}(\/[a-z0-9+.-]{1,8})?$/),
    },
    { requiredKeys: [] },
  );
  return { member, expr, query };
}

export const { member, expr, query } = grammarOf(name);
