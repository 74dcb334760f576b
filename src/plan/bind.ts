/**
 * The binder: checks a parsed query against a resource schema and types every expression
 * (SERVICE.md §3). Every mistake is a QueryError naming the field or operator, with the option
 * and, when the query was parsed with spans, the position of the offending node.
 *
 * | code                    | when                                                                    |
 * |-------------------------|-------------------------------------------------------------------------|
 * | UnknownField            | a name that is not a field of the resource (or lambda variable)        |
 * | SearchFieldNotAllowed   | a search field used anywhere but as search.text's first argument        |
 * | TypeMismatch            | operands or arguments of incompatible types (string vs number, ...);    |
 * |                         | a collection compared with null; a point compared with anything else   |
 * | NotFilterable           | a field that cannot be filtered on                                      |
 * | NotSortable             | $orderby on a collection or point                                       |
 * | InvalidGeoDistance      | geo.distance anywhere but `geo.distance(Location, POINT) le NUMBER`    |
 * | InvalidSearch           | search.text with a non-search field or non-literal arguments            |
 * | InvalidMinMatches       | min_matches that is not a positive integer                              |
 * | RelevanceWithoutSearch  | `relevance desc` without a search.text in $filter                       |
 * | InvalidRelevanceOrder   | `relevance asc`                                                          |
 * | TopTooLarge             | $top above the resource's maximum                                       |
 * | UnknownExpand           | $expand of something that is not an expansion of the resource           |
 * | NotSelectable           | $select of a field that cannot be selected                              |
 * | InvalidGroupBy          | $apply groupby of a collection, a point, or a field named twice         |
 * | InvalidAggregate        | $apply aggregate of an expression, or a method the field's type lacks   |
 * | DuplicateAlias          | $apply alias equal to another alias or to a group field                 |
 * | UnsupportedApply        | $apply step after groupby/aggregate; $expand with groupby/aggregate     |
 * | NotInApplyResult        | $orderby/$select after $apply naming no group field or alias            |
 *
 * ($apply is bound in bind-apply.ts.)
 */
import { QueryError } from '../errors.js';
import type { CompareOperator, Expr, LiteralExpr, OrderByItem, SelectItem, Span } from '../odata/ast.js';
import { isSearchField, SEARCH_FIELDS } from '../schema/search-fields.js';
import type { TableSchema } from '../schema/table-schema.js';
import { isHiddenField, type EdmType, type FieldDef } from '../schema/types.js';
import { odataKeyOf } from '../schema/catalog.js';
import type { Bound, Value, ValueType } from './bound.js';

export interface BindContext {
  readonly schema: TableSchema;
  /** The query option being bound (`$filter`, `$orderby`, `$expand`, ...). */
  readonly option: string;
  /** Source positions of AST nodes, when the query was parsed with spans. */
  readonly spanOf?: (node: object) => Span | undefined;
}

interface Scope {
  readonly variables: ReadonlyMap<string, ValueType>;
  searchCount: number;
}

const DAY_MS = 86_400_000;

export function valueTypeOf(type: EdmType): ValueType {
  switch (type) {
    case 'Edm.String':
      return 'string';
    case 'Edm.Boolean':
      return 'boolean';
    case 'Edm.Int16':
    case 'Edm.Int32':
    case 'Edm.Int64':
      return 'integer';
    case 'Edm.Decimal':
    case 'Edm.Double':
      return 'decimal';
    case 'Edm.Date':
      return 'date';
    case 'Edm.DateTimeOffset':
      return 'dateTimeOffset';
    case 'Edm.GeographyPoint':
      return 'point';
  }
}

const isNumeric = (t: ValueType): boolean => t === 'integer' || t === 'decimal';

/** Whether two value types may be compared with eq/ne/gt/... (null goes with anything). */
export function comparable(a: ValueType, b: ValueType): boolean {
  if (a === 'null' || b === 'null') return a !== 'point' && b !== 'point';
  if (isNumeric(a) && isNumeric(b)) return true;
  return a === b && a !== 'point';
}

/** How messages name a value type ('a number', 'a timestamp', ...). */
export const TYPE_WORDS: Record<ValueType, string> = {
  string: 'a string',
  integer: 'an integer',
  decimal: 'a number',
  boolean: 'a boolean',
  date: 'a date',
  dateTimeOffset: 'a timestamp',
  point: 'a geography point',
  null: 'null',
};

class Binder {
  constructor(private readonly ctx: BindContext) {}

  fail(code: string, message: string, node?: object): never {
    const span = node ? this.ctx.spanOf?.(node) : undefined;
    throw new QueryError(code, message, { option: this.ctx.option, position: span?.start });
  }

  field(name: string, node: object): FieldDef {
    if (isSearchField(name)) {
      this.fail('SearchFieldNotAllowed', `${name} is a search field: use it only as search.text(${name}, '...').`, node);
    }
    const f = this.ctx.schema.field(name);
    if (!f || isHiddenField(f)) this.fail('UnknownField', `${this.ctx.schema.resource} has no field '${name}'.`, node);
    return f;
  }

  literal(node: LiteralExpr): Bound {
    switch (node.type) {
      case 'null':
        return { kind: 'const', type: 'null', value: null };
      case 'boolean':
        return { kind: 'const', type: 'boolean', value: node.value };
      case 'string':
        return { kind: 'const', type: 'string', value: node.value };
      case 'integer':
        return { kind: 'const', type: 'integer', value: node.value };
      case 'decimal':
      case 'double':
        return { kind: 'const', type: 'decimal', value: node.value };
      case 'date':
        return { kind: 'const', type: 'date', value: node.value / DAY_MS };
      case 'dateTimeOffset':
        return { kind: 'const', type: 'dateTimeOffset', value: node.value };
      case 'geographyPoint':
        return this.fail('InvalidGeoDistance', 'A geography literal can only be the second argument of geo.distance(...) le METERS.', node);
    }
  }

  expr(node: Expr, scope: Scope): Bound {
    switch (node.kind) {
      case 'literal':
        return this.literal(node);
      case 'member': {
        const [head, ...rest] = node.path;
        const varType = scope.variables.get(head);
        if (varType !== undefined) {
          if (rest.length) this.fail('UnknownField', `Lambda variable '${head}' is a value and has no property '${rest.join('/')}'.`, node);
          return { kind: 'var', type: varType, name: head };
        }
        if (rest.length) this.fail('UnknownField', `${this.ctx.schema.resource} has no navigation path '${node.path.join('/')}'.`, node);
        const f = this.field(head, node);
        if (f.collection) {
          this.fail('TypeMismatch', `${f.name} is a collection: use ${f.name}/any(x: ...), ${f.name}/all(x: ...) or 'value' in ${f.name}.`, node);
        }
        if (!f.filterable) this.fail('NotFilterable', `${f.name} cannot be used in a filter.`, node);
        return { kind: 'field', type: valueTypeOf(f.type), field: f };
      }
      case 'not': {
        const operand = this.boolean(node.operand, scope, 'not');
        return { kind: 'not', type: 'boolean', operand };
      }
      case 'and':
      case 'or':
        return {
          kind: node.kind,
          type: 'boolean',
          left: this.boolean(node.left, scope, node.kind),
          right: this.boolean(node.right, scope, node.kind),
        };
      case 'negate': {
        const operand = this.expr(node.operand, scope);
        if (!isNumeric(operand.type) && operand.type !== 'null')
          this.fail('TypeMismatch', `Unary minus needs a number, not ${TYPE_WORDS[operand.type]}.`, node);
        return { kind: 'negate', type: operand.type === 'null' ? 'null' : operand.type, operand };
      }
      case 'arithmetic': {
        const left = this.expr(node.left, scope);
        const right = this.expr(node.right, scope);
        for (const side of [left, right]) {
          if (!isNumeric(side.type) && side.type !== 'null') {
            this.fail('TypeMismatch', `'${node.operator}' needs numbers, not ${TYPE_WORDS[side.type]}.`, node);
          }
        }
        const type: ValueType =
          left.type === 'integer' && right.type === 'integer'
            ? 'integer'
            : left.type === 'null' && right.type === 'null'
              ? 'null'
              : left.type === 'null'
                ? right.type
                : right.type === 'null'
                  ? left.type
                  : 'decimal';
        return { kind: 'arith', type, op: node.operator, left, right };
      }
      case 'compare':
        return this.compare(node.operator, node.left, node.right, scope, node);
      case 'in': {
        const left = this.expr(node.left, scope);
        if (node.right.kind === 'list') {
          const values: Value[] = [];
          for (const item of node.right.items) {
            const b = this.literal(item);
            if (!comparable(left.type, b.type)) {
              this.fail('TypeMismatch', `'in' compares ${TYPE_WORDS[left.type]} with ${TYPE_WORDS[b.type]}.`, item);
            }
            values.push(b.kind === 'const' ? b.value : null);
          }
          return { kind: 'in', type: 'boolean', left, values };
        }
        const right = node.right;
        if (right.kind !== 'member' || right.path.length !== 1) {
          return this.fail('TypeMismatch', "The right side of 'in' must be a list of literals or a collection field.", right);
        }
        const f = this.field(right.path[0], right);
        if (!f.collection) this.fail('TypeMismatch', `${f.name} is not a collection; use eq, or 'in' with a list.`, right);
        const elem = valueTypeOf(f.type);
        if (!comparable(left.type, elem))
          this.fail('TypeMismatch', `'in' compares ${TYPE_WORDS[left.type]} with elements of ${f.name} (${TYPE_WORDS[elem]}).`, node);
        return { kind: 'member', type: 'boolean', value: left, collection: f };
      }
      case 'lambda': {
        const [name, ...rest] = node.collection.path;
        if (rest.length) this.fail('UnknownField', `${this.ctx.schema.resource} has no navigation path '${node.collection.path.join('/')}'.`, node.collection);
        const f = this.field(name, node.collection);
        if (!f.collection) this.fail('TypeMismatch', `${f.name} is not a collection: '${node.operator}' needs one.`, node.collection);
        if (node.variable === null || node.predicate === null) {
          return { kind: 'lambda', type: 'boolean', op: node.operator, collection: f, variable: null, predicate: null };
        }
        const variables = new Map(scope.variables);
        variables.set(node.variable, valueTypeOf(f.type));
        const inner: Scope = { variables, searchCount: scope.searchCount };
        const predicate = this.boolean(node.predicate, inner, node.operator);
        scope.searchCount = inner.searchCount;
        return { kind: 'lambda', type: 'boolean', op: node.operator, collection: f, variable: node.variable, predicate };
      }
      case 'call':
        return this.call(node, scope);
    }
  }

  boolean(node: Expr, scope: Scope, what: string): Bound {
    const b = this.expr(node, scope);
    if (b.type !== 'boolean' && b.type !== 'null') this.fail('TypeMismatch', `'${what}' needs a boolean operand, not ${TYPE_WORDS[b.type]}.`, node);
    return b;
  }

  compare(op: CompareOperator, leftNode: Expr, rightNode: Expr, scope: Scope, node: Expr): Bound {
    const geo =
      leftNode.kind === 'call' && leftNode.name === 'geo.distance'
        ? leftNode
        : rightNode.kind === 'call' && rightNode.name === 'geo.distance'
          ? rightNode
          : null;
    if (geo) {
      if (geo !== leftNode || op !== 'le') {
        this.fail('InvalidGeoDistance', "geo.distance is only supported as 'geo.distance(Location, geography'POINT(lon lat)') le METERS'.", node);
      }
      return this.geo(geo, rightNode);
    }
    const collection = this.collectionBeside(leftNode, rightNode) ?? this.collectionBeside(rightNode, leftNode);
    if (collection) {
      this.fail(
        'TypeMismatch',
        `${collection} is a collection, and a collection is never null (an absent one is []): test ${collection}/any() for a non-empty one.`,
        node,
      );
    }
    const left = this.expr(leftNode, scope);
    const right = this.expr(rightNode, scope);
    if (left.type === 'point' || right.type === 'point') return this.pointCompare(op, left, right, node);
    if (!comparable(left.type, right.type)) {
      const name = left.kind === 'field' ? left.field.name : right.kind === 'field' ? right.field.name : 'the operands';
      this.fail('TypeMismatch', `'${op}' cannot compare ${TYPE_WORDS[left.type]} with ${TYPE_WORDS[right.type]} (${name}).`, node);
    }
    if ((left.type === 'boolean' || right.type === 'boolean') && op !== 'eq' && op !== 'ne') {
      this.fail('TypeMismatch', `'${op}' is not defined for booleans; use eq or ne.`, node);
    }
    return booleanTest(op, left, right) ?? { kind: 'compare', type: 'boolean', op, left, right };
  }

  /** The name of the collection field `node` is, when `other` is the null literal (a collection is never null). */
  collectionBeside(node: Expr, other: Expr): string | null {
    if (other.kind !== 'literal' || other.type !== 'null' || node.kind !== 'member' || node.path.length !== 1) return null;
    const f = isSearchField(node.path[0]) ? undefined : this.ctx.schema.field(node.path[0]);
    return f?.collection ? f.name : null;
  }

  /** A geography point compares only with null (`Location eq null`, `ne null`): the point on the left. */
  pointCompare(op: CompareOperator, left: Bound, right: Bound, node: Expr): Bound {
    const point = left.type === 'point' ? left : right;
    const other = point === left ? right : left;
    if (other.type !== 'null' || (op !== 'eq' && op !== 'ne')) {
      const name = point.kind === 'field' ? point.field.name : 'a geography point';
      this.fail(
        'TypeMismatch',
        `${name} is a geography point: it compares only with null ('eq null', 'ne null'); use geo.distance(${name}, geography'POINT(lon lat)') le METERS for distances.`,
        node,
      );
    }
    return { kind: 'compare', type: 'boolean', op, left: point, right: other };
  }

  geo(call: Extract<Expr, { kind: 'call' }>, limit: Expr): Bound {
    const [pointArg, literal] = call.args;
    const bad = (): never =>
      this.fail(
        'InvalidGeoDistance',
        "geo.distance takes Location or RawLocation and a literal geography'POINT(lon lat)', compared with 'le' to a number of meters.",
        call,
      );
    if (pointArg?.kind !== 'member' || pointArg.path.length !== 1) return bad();
    const f = this.field(pointArg.path[0], pointArg);
    if (f.type !== 'Edm.GeographyPoint') return bad();
    if (literal?.kind !== 'literal' || literal.type !== 'geographyPoint') return bad();
    if (literal.srid !== null && literal.srid !== 4326) {
      this.fail('InvalidGeoDistance', `geo.distance supports SRID 4326 only, not ${literal.srid}.`, literal);
    }
    const meters = limit.kind === 'negate' && limit.operand.kind === 'literal' ? limit.operand : limit;
    if (meters.kind !== 'literal' || (meters.type !== 'integer' && meters.type !== 'decimal' && meters.type !== 'double')) return bad();
    const value = limit === meters ? meters.value : -meters.value;
    return { kind: 'geo', type: 'boolean', field: f, lon: literal.lon, lat: literal.lat, meters: value };
  }

  call(node: Extract<Expr, { kind: 'call' }>, scope: Scope): Bound {
    if (node.name === 'geo.distance') {
      return this.fail('InvalidGeoDistance', "geo.distance is only supported as 'geo.distance(Location, geography'POINT(lon lat)') le METERS'.", node);
    }
    if (node.name === 'search.text') return this.search(node, scope);
    const args = node.args.map((a) => this.expr(a, scope));
    const want = (i: number, ...types: ValueType[]): void => {
      const t = args[i].type;
      if (t !== 'null' && !types.includes(t)) {
        this.fail(
          'TypeMismatch',
          `${node.name}() argument ${i + 1} must be ${types.map((x) => TYPE_WORDS[x]).join(' or ')}, not ${TYPE_WORDS[t]}.`,
          node.args[i],
        );
      }
    };
    let type: ValueType;
    switch (node.name) {
      case 'contains':
      case 'startswith':
      case 'endswith':
        want(0, 'string');
        want(1, 'string');
        type = 'boolean';
        break;
      case 'tolower':
      case 'toupper':
      case 'trim':
        want(0, 'string');
        type = 'string';
        break;
      case 'length':
        want(0, 'string');
        type = 'integer';
        break;
      case 'indexof':
        want(0, 'string');
        want(1, 'string');
        type = 'integer';
        break;
      case 'substring':
        want(0, 'string');
        want(1, 'integer');
        if (args.length > 2) want(2, 'integer');
        type = 'string';
        break;
      case 'concat':
        want(0, 'string');
        want(1, 'string');
        type = 'string';
        break;
      case 'year':
      case 'month':
      case 'day':
        want(0, 'date', 'dateTimeOffset');
        type = 'integer';
        break;
      case 'hour':
      case 'minute':
      case 'second':
        want(0, 'dateTimeOffset');
        type = 'integer';
        break;
      case 'date':
        want(0, 'dateTimeOffset');
        type = 'date';
        break;
      case 'now':
        type = 'dateTimeOffset';
        break;
    }
    return { kind: 'call', type, fn: node.name, args };
  }

  search(node: Extract<Expr, { kind: 'call' }>, scope: Scope): Bound {
    const [fieldArg, textArg, minArg] = node.args;
    if (fieldArg?.kind !== 'member' || fieldArg.path.length !== 1 || !isSearchField(fieldArg.path[0])) {
      return this.fail('InvalidSearch', `search.text's first argument must be one of ${SEARCH_FIELDS.join(', ')}.`, fieldArg ?? node);
    }
    if (this.ctx.schema.resource !== 'Property') {
      this.fail('InvalidSearch', `search.text is available on Property, not ${this.ctx.schema.resource}.`, node);
    }
    if (textArg?.kind !== 'literal' || textArg.type !== 'string') {
      return this.fail('InvalidSearch', "search.text's second argument must be a string literal: the words to search for.", textArg ?? node);
    }
    let minMatches: number | undefined;
    if (minArg !== undefined) {
      const m = minArg.kind === 'negate' && minArg.operand.kind === 'literal' ? minArg.operand : minArg;
      if (m.kind !== 'literal' || (m.type !== 'integer' && m.type !== 'decimal' && m.type !== 'double')) {
        return this.fail('InvalidMinMatches', 'search.text min_matches must be a positive integer literal.', minArg);
      }
      minMatches = m === minArg ? m.value : -m.value;
      if (!Number.isInteger(minMatches) || minMatches < 1 || m.type !== 'integer') {
        this.fail('InvalidMinMatches', `search.text min_matches must be a positive integer, got ${m === minArg ? m.text : `-${m.text}`}.`, minArg);
      }
    }
    const ordinal = scope.searchCount++;
    return { kind: 'search', type: 'boolean', field: fieldArg.path[0], text: textArg.value, minMatches, ordinal };
  }
}

/**
 * Whether a boolean expression is never null (true or false for every row): search.text,
 * geo.distance, comparisons, `in` and membership are two-valued, and so is logic over them.
 */
function neverNull(b: Bound): boolean {
  switch (b.kind) {
    case 'search':
    case 'geo':
    case 'compare':
    case 'in':
    case 'member':
      return true;
    case 'const':
      return b.value !== null;
    case 'not':
      return neverNull(b.operand);
    case 'and':
    case 'or':
      return neverNull(b.left) && neverNull(b.right);
    case 'lambda':
      return b.predicate === null || neverNull(b.predicate);
    default:
      return false;
  }
}

/**
 * `X eq true` is X itself when X is never null (`X eq false`, `X ne true`: not X), so that
 * `search.text(...) eq true` stays a search conjunct the planner can answer from postings and
 * rank by; any other boolean comparison keeps the ordinary null rules (null eq true is false).
 */
function booleanTest(op: CompareOperator, left: Bound, right: Bound): Bound | null {
  if (op !== 'eq' && op !== 'ne') return null;
  const [test, constant] =
    right.kind === 'const' && typeof right.value === 'boolean' ? [left, right.value] : [right, left.kind === 'const' ? left.value : null];
  if (typeof constant !== 'boolean' || test.kind === 'const' || test.type !== 'boolean' || !neverNull(test)) return null;
  return constant === (op === 'eq') ? test : { kind: 'not', type: 'boolean', operand: test };
}

export interface BoundFilter {
  readonly expr: Bound;
  /** Number of search.text calls (relevance needs at least one). */
  readonly searchCount: number;
}

/** `firstOrdinal`: the ordinal of the first search.text call (when filters are chained, as in $apply). */
export function bindFilter(node: Expr, ctx: BindContext, firstOrdinal = 0): BoundFilter {
  const binder = new Binder(ctx);
  const scope: Scope = { variables: new Map(), searchCount: firstOrdinal };
  const expr = binder.boolean(node, scope, ctx.option);
  return { expr, searchCount: scope.searchCount };
}

export type BoundOrderKey = { readonly kind: 'relevance' } | { readonly kind: 'expr'; readonly expr: Bound; readonly descending: boolean };

export function bindOrderBy(items: readonly OrderByItem[], ctx: BindContext, searchCount: number): BoundOrderKey[] {
  const binder = new Binder(ctx);
  const scope: Scope = { variables: new Map(), searchCount: 0 };
  return items.map((item): BoundOrderKey => {
    const e = item.expr;
    if (e.kind === 'member' && e.path.length === 1 && e.path[0] === 'relevance' && !ctx.schema.field('relevance')) {
      if (item.direction !== 'desc') binder.fail('InvalidRelevanceOrder', "Only 'relevance desc' is supported: relevance orders best matches first.", e);
      if (searchCount === 0) binder.fail('RelevanceWithoutSearch', "'relevance desc' needs a search.text(...) in $filter.", e);
      return { kind: 'relevance' };
    }
    if (e.kind === 'member' && e.path.length === 1) {
      const f = binder.field(e.path[0], e);
      if (!f.sortable) binder.fail('NotSortable', `${f.name} cannot be ordered by (${f.collection ? 'a collection' : 'a geography point'}).`, e);
    }
    const expr = binder.expr(e, scope);
    if (expr.type === 'point' || (expr.type === 'boolean' && expr.kind !== 'field')) {
      binder.fail('NotSortable', `$orderby needs a field or a scalar expression, not ${TYPE_WORDS[expr.type]}.`, e);
    }
    return { kind: 'expr', expr, descending: item.direction === 'desc' };
  });
}

/** The selected fields in schema order, or null for all fields. */
export function bindSelect(items: readonly SelectItem[], ctx: BindContext): FieldDef[] | null {
  const binder = new Binder(ctx);
  const schema = ctx.schema;
  if (items.some((i) => i.kind === 'star')) {
    // a schema with hidden fields (EntityEvent's storage key) never selects all of them
    return schema.fields.some(isHiddenField) ? schema.fields.filter((f) => !isHiddenField(f)) : null;
  }
  // the selected fields and the key, in schema order: by position, not by a pass over every field
  const key = schema.indexOf(odataKeyOf(schema.resource));
  const positions = new Set<number>(key >= 0 ? [key] : []);
  for (const item of items) {
    if (item.kind !== 'property') continue;
    const f = binder.field(item.name, item);
    if (!f.selectable) binder.fail('NotSelectable', `${f.name} cannot be selected.`, item);
    positions.add(schema.indexOf(f.name));
  }
  return [...positions].sort((a, b) => a - b).map((i) => schema.fields[i]);
}
