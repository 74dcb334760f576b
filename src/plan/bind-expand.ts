/**
 * Binding of $expand on Property (SERVICE.md §3): `Media`, `OpenHouse`, `PropertyChange` and
 * `PreferredMedia`, each with nested `$select;$filter;$orderby;$top;$skip` bound against the child
 * resource's schema: a nested plan (src/exec/expand.ts runs it).
 *
 * | code           | when                                                                 |
 * |----------------|----------------------------------------------------------------------|
 * | UnknownExpand  | a name that is not an expansion of Property, or $expand on another resource |
 * | RepeatedExpand | the same navigation property twice in one $expand                    |
 * | TopTooLarge    | nested $top above the child resource's $top maximum                   |
 * and the binder's codes for nested $select/$filter/$orderby, all with option `$expand` and the
 * position in the `$expand` value.
 */
import { QueryError } from '../errors.js';
import type { ExpandItem, Span } from '../odata/ast.js';
import type { TableSchema } from '../schema/table-schema.js';
import type { ChildResourceName } from '../schema/types.js';
import { bindFilter, bindOrderBy, bindSelect, type BindContext } from './bind.js';
import type { Bound } from './bound.js';

/** The navigation properties of Property and the resource each expands to. */
export const EXPANSIONS = {
  Media: 'Media',
  OpenHouse: 'OpenHouse',
  PropertyChange: 'PropertyChange',
  PreferredMedia: 'Media',
} as const satisfies Readonly<Record<string, ChildResourceName>>;

export type ExpansionName = keyof typeof EXPANSIONS;

const EXPANSION_NAMES = Object.keys(EXPANSIONS) as ExpansionName[];

/** Nested $top maximum: the child resource's $top maximum (SERVICE.md §3). */
export const EXPAND_TOP_LIMITS: Readonly<Record<ChildResourceName, number>> = { Media: 25_000, OpenHouse: 50_000, PropertyChange: 50_000 };

/** PreferredMedia returns at most this many photos. */
export const PREFERRED_MEDIA_MAX = 2;

/** One expansion after binding: names resolved against the child resource's schema. */
export interface BoundExpansion {
  readonly name: ExpansionName;
  readonly resource: ChildResourceName;
  readonly filter: Bound | null;
  /** Nested $orderby keys (never relevance: children have no search.text); empty for the default order. */
  readonly order: ReadonlyArray<{ readonly expr: Bound; readonly descending: boolean }>;
  /** Selected fields in the child schema's order (key included), or null for all. */
  readonly select: readonly string[] | null;
  readonly skip: number;
  /** Nested $top, or the child resource's maximum. */
  readonly top: number;
}

export interface ExpandBindContext {
  /** The resource the request queries; only Property has expansions. */
  readonly resource: string;
  /** The loaded schema of a child resource. */
  readonly schemaOf: (resource: ChildResourceName) => TableSchema;
  /** Positions of nodes in the `$expand` value. */
  readonly spanOf?: (node: object) => Span | undefined;
}

/**
 * Checks a request's `$expand` items against the child resources' schemas and returns them bound;
 * every mistake is a QueryError with option `$expand`.
 */
export function bindExpand(items: readonly ExpandItem[], ctx: ExpandBindContext): BoundExpansion[] {
  const fail = (code: string, message: string, node: object): never => {
    throw new QueryError(code, message, { option: '$expand', position: ctx.spanOf?.(node)?.start });
  };
  const valid = EXPANSION_NAMES.join(', ');
  if (ctx.resource !== 'Property' && items.length > 0) {
    fail('UnknownExpand', `${ctx.resource} has no navigation properties to expand ('${items[0].name}'); $expand is available on Property: ${valid}.`, items[0]);
  }
  const seen = new Set<string>();
  const bound = items.map((item): BoundExpansion => {
    if (!Object.hasOwn(EXPANSIONS, item.name)) {
      fail('UnknownExpand', `Property has no navigation property '${item.name}'; expand one of ${valid}.`, item);
    }
    const name = item.name as ExpansionName;
    if (seen.has(name)) fail('RepeatedExpand', `${name} is expanded twice; name each navigation property once.`, item);
    seen.add(name);
    const resource = EXPANSIONS[name];
    const schema = ctx.schemaOf(resource);
    const bc: BindContext = { schema, option: '$expand', spanOf: ctx.spanOf };
    const o = item.options;
    const select = o.select ? (bindSelect(o.select, bc)?.map((f) => f.name) ?? null) : null;
    const filter = o.filter ? bindFilter(o.filter, bc).expr : null;
    const order = o.orderby
      ? bindOrderBy(o.orderby, bc, 0).map((k) => {
          if (k.kind !== 'expr') throw new Error('unreachable: relevance needs a search.text');
          return { expr: k.expr, descending: k.descending };
        })
      : [];
    const limit = EXPAND_TOP_LIMITS[resource];
    if (o.top !== undefined && o.top > limit) {
      fail('TopTooLarge', `$top=${o.top} in the expansion ${name} is above the maximum of ${limit} for ${resource}.`, item);
    }
    return { name, resource, filter, order, select, skip: o.skip ?? 0, top: o.top ?? limit };
  });
  return bound;
}
