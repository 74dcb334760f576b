/**
 * Binding of `$apply` (SERVICE.md §3, the OData Data Aggregation subset): `filter(...)` steps,
 * then at most one `groupby(...)` or `aggregate(...)`. Filter steps before the grouping are row
 * filters, so they join `$filter` in one conjunction and reach the planner like any filter (an
 * index can serve them). The grouping step is checked against the schema, and `$orderby` and
 * `$select` are bound over its result properties (the group fields, then the aliases).
 *
 * Error codes (listed with the others at the top of bind.ts): UnknownField, SearchFieldNotAllowed,
 * InvalidGroupBy, InvalidAggregate, DuplicateAlias, UnsupportedApply, NotInApplyResult.
 */
import { QueryError } from '../errors.js';
import type { AggregateItem, AggregateMethod, ApplyTransformation, Expr, OrderByItem, ParsedQuery, SelectItem } from '../odata/ast.js';
import { isSearchField } from '../schema/search-fields.js';
import type { FieldDef } from '../schema/types.js';
import { bindFilter, TYPE_WORDS, valueTypeOf, type BindContext, type BoundFilter } from './bind.js';
import type { Bound, ValueType } from './bound.js';

export type AggregateOp = 'count' | 'sum' | 'average' | 'min' | 'max' | 'countdistinct' | 'percentile';

export interface BoundAggregate {
  /** The result property: `as Alias`, else `Field_method` with the method as written. */
  readonly alias: string;
  readonly op: AggregateOp;
  /** The aggregated field; null for `$count`. */
  readonly field: FieldDef | null;
  /** For `percentile`, p in (0, 100] (median is 50); 0 otherwise. */
  readonly p: number;
}

export interface ApplyOrderKey {
  readonly property: string;
  readonly descending: boolean;
}

export interface BoundGrouping {
  /** `groupby` fields in the order written; empty for a bare `aggregate(...)` (one result row). */
  readonly groupBy: readonly FieldDef[];
  readonly aggregates: readonly BoundAggregate[];
  /** Result properties in order: the group fields, then the aliases. */
  readonly properties: readonly string[];
  /** `$orderby` over result properties; empty means group values ascending. */
  readonly order: readonly ApplyOrderKey[];
  /** `$select`ed properties in result order, or null for all. */
  readonly select: readonly string[] | null;
}

export interface BoundApply {
  /** `$filter` and every `filter(...)` step as one conjunction, or null when there is neither. */
  readonly filter: Bound | null;
  /** search.text calls in `filter`; their ordinals are 0..searchCount-1. */
  readonly searchCount: number;
  /** The groupby/aggregate step; null when the chain only filters (the result is then records). */
  readonly grouping: BoundGrouping | null;
}

const PERCENTILES: Partial<Record<AggregateMethod, number>> = { median: 50, p10: 10, p25: 25, p50: 50, p75: 75, p90: 90, p95: 95 };

const NUMERIC: readonly ValueType[] = ['integer', 'decimal'];
const ORDERED: readonly ValueType[] = ['integer', 'decimal', 'date', 'dateTimeOffset'];

/** The value types each method accepts (collections and points never reach this table). */
const METHOD_TYPES: Record<Exclude<AggregateOp, 'count'>, readonly ValueType[]> = {
  sum: NUMERIC,
  average: NUMERIC,
  percentile: ORDERED,
  min: [...ORDERED, 'string'],
  max: [...ORDERED, 'string'],
  countdistinct: [...ORDERED, 'string', 'boolean'],
};

const ACCEPTS: Record<Exclude<AggregateOp, 'count'>, string> = {
  sum: 'numbers',
  average: 'numbers',
  percentile: 'numbers, dates and timestamps',
  min: 'numbers, dates, timestamps and strings',
  max: 'numbers, dates, timestamps and strings',
  countdistinct: 'numbers, dates, timestamps, strings and booleans',
};

function opOf(method: AggregateMethod): Exclude<AggregateOp, 'count'> {
  switch (method) {
    case 'avg':
    case 'average':
      return 'average';
    case 'sum':
    case 'min':
    case 'max':
    case 'countdistinct':
      return method;
    default:
      return 'percentile';
  }
}

/**
 * Binds `$apply` (with `$filter`, `$orderby` and `$select` where the grouping changes their
 * meaning). `filter` is the already bound `$filter`; `contextOf` gives the context of an option.
 */
export function bindApply(parsed: ParsedQuery, contextOf: (option: string) => BindContext, filter: BoundFilter | null): BoundApply {
  const steps = parsed.apply ?? [];
  const ctx = contextOf('$apply');
  const fail = (code: string, message: string, node?: object, c: BindContext = ctx): never => {
    const span = node ? c.spanOf?.(node) : undefined;
    throw new QueryError(code, message, { option: c.option, position: span?.start });
  };

  let combined: Bound | null = filter?.expr ?? null;
  let searchCount = filter?.searchCount ?? 0;
  let grouping: ApplyTransformation | null = null;
  for (const step of steps) {
    if (grouping !== null) {
      fail('UnsupportedApply', `${step.kind}(...) after ${grouping.kind}(...) is not supported: filter first, then one groupby(...) or aggregate(...).`, step);
    }
    if (step.kind === 'filter') {
      const bound = bindFilter(step.predicate, ctx, searchCount);
      searchCount = bound.searchCount;
      combined = combined === null ? bound.expr : { kind: 'and', type: 'boolean', left: combined, right: bound.expr };
    } else {
      grouping = step;
    }
  }
  if (grouping === null) return { filter: combined, searchCount, grouping: null };
  if (parsed.expand) {
    throw new QueryError('UnsupportedApply', '$expand cannot be combined with groupby(...) or aggregate(...) in $apply.', { option: '$expand' });
  }

  const schema = ctx.schema;
  const field = (path: readonly string[], node: object): FieldDef => {
    const name = path[0];
    if (path.length > 1) fail('UnknownField', `${schema.resource} has no navigation path '${path.join('/')}'.`, node);
    if (isSearchField(name)) fail('SearchFieldNotAllowed', `${name} is a search field: use it only as search.text(${name}, '...').`, node);
    const f = schema.field(name);
    if (!f) return fail('UnknownField', `${schema.resource} has no field '${name}'.`, node);
    return f;
  };

  const groupBy: FieldDef[] = [];
  const names = new Set<string>();
  const properties: string[] = [];
  if (grouping.kind === 'groupby') {
    for (const member of grouping.properties) {
      const f = field(member.path, member);
      if (f.collection || f.type === 'Edm.GeographyPoint') {
        fail('InvalidGroupBy', `${f.name} cannot be grouped by: it is ${f.collection ? 'a collection' : 'a geography point'}; group by scalar fields.`, member);
      }
      if (names.has(f.name)) fail('InvalidGroupBy', `${f.name} appears twice in groupby.`, member);
      names.add(f.name);
      groupBy.push(f);
      properties.push(f.name);
    }
  }
  const items: readonly AggregateItem[] = grouping.kind === 'groupby' ? (grouping.aggregate?.items ?? []) : grouping.items;
  const aggregates: BoundAggregate[] = [];
  for (const item of items) {
    let agg: BoundAggregate;
    if (item.kind === 'aggregateCount') {
      agg = { alias: item.alias, op: 'count', field: null, p: 0 };
    } else {
      agg = aggregateWith(item.expr, item.method, item.alias, item, field, fail);
    }
    if (names.has(agg.alias)) {
      const clash = groupBy.some((f) => f.name === agg.alias) ? 'a group field' : 'another aggregate';
      fail('DuplicateAlias', `The alias '${agg.alias}' is already the name of ${clash}; give each result property its own name with 'as'.`, item);
    }
    names.add(agg.alias);
    aggregates.push(agg);
    properties.push(agg.alias);
  }

  const order = parsed.orderby ? bindApplyOrder(parsed.orderby, names, properties, contextOf('$orderby')) : [];
  const select = parsed.select ? bindApplySelect(parsed.select, names, properties, contextOf('$select')) : null;
  return { filter: combined, searchCount, grouping: { groupBy, aggregates, properties, order, select } };
}

function aggregateWith(
  expr: Expr,
  method: AggregateMethod,
  alias: string | null,
  item: object,
  field: (path: readonly string[], node: object) => FieldDef,
  fail: (code: string, message: string, node?: object) => never,
): BoundAggregate {
  if (expr.kind !== 'member') {
    return fail('InvalidAggregate', `Only fields can be aggregated: write 'Field with ${method}${alias ? ` as ${alias}` : ''}'.`, expr);
  }
  const f = field(expr.path, expr);
  const op = opOf(method);
  if (f.collection || f.type === 'Edm.GeographyPoint') {
    fail('InvalidAggregate', `${f.name} cannot be aggregated with ${method}: it is ${f.collection ? 'a collection' : 'a geography point'}.`, expr);
  }
  const type = valueTypeOf(f.type);
  if (!METHOD_TYPES[op].includes(type)) {
    fail('InvalidAggregate', `${method} needs ${ACCEPTS[op]}, but ${f.name} is ${TYPE_WORDS[type]}.`, expr);
  }
  return { alias: alias ?? `${f.name}_${method}`, op, field: f, p: PERCENTILES[method] ?? 0 };
}

function notInResult(what: string, node: object, properties: readonly string[], ctx: BindContext): never {
  const span = ctx.spanOf?.(node);
  const list = properties.length ? properties.join(', ') : '(none)';
  throw new QueryError('NotInApplyResult', `${ctx.option} ${what}: after $apply only the group fields and aliases exist (${list}).`, {
    option: ctx.option,
    position: span?.start,
  });
}

function bindApplyOrder(items: readonly OrderByItem[], names: ReadonlySet<string>, properties: readonly string[], ctx: BindContext): ApplyOrderKey[] {
  return items.map((item) => {
    const e = item.expr;
    if (e.kind !== 'member' || e.path.length !== 1) return notInResult('can only name a result property', e, properties, ctx);
    if (!names.has(e.path[0])) return notInResult(`names '${e.path.join('/')}'`, e, properties, ctx);
    return { property: e.path[0], descending: item.direction === 'desc' };
  });
}

function bindApplySelect(items: readonly SelectItem[], names: ReadonlySet<string>, properties: readonly string[], ctx: BindContext): string[] | null {
  if (items.some((i) => i.kind === 'star')) return null;
  const wanted = new Set<string>();
  for (const item of items) {
    if (item.kind !== 'property') continue;
    if (!names.has(item.name)) notInResult(`names '${item.name}'`, item, properties, ctx);
    wanted.add(item.name);
  }
  return properties.filter((p) => wanted.has(p));
}
