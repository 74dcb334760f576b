/**
 * Binding of $expand on Property (SERVICE.md §3): `Media`, `OpenHouse`, `PropertyChange` and
 * `PreferredMedia`, each with nested `$select;$filter;$orderby;$top;$skip` bound against the child
 * resource's schema: a nested plan (src/exec/expand.ts runs it). The single-valued `ListAgent`,
 * `BuyerAgent`, `CoListAgent`, `CoBuyerAgent` (a Member) and `ListOffice`, `BuyerOffice`,
 * `CoListOffice`, `CoBuyerOffice` (an Office) take nested `$select` and `$filter` (the record, or
 * null when the filter is not true for it); ordering and paging one record is `QueryOptionNotAllowed`.
 *
 * | code           | when                                                                 |
 * |----------------|----------------------------------------------------------------------|
 * | UnknownExpand  | a name that is not an expansion of Property, or $expand on another resource |
 * | RepeatedExpand | the same navigation property twice in one $expand                    |
 * | TopTooLarge    | nested $top above the child resource's $top maximum                   |
 * | QueryOptionNotAllowed | nested $orderby, $top or $skip on a single-valued navigation property |
 * and the binder's codes for nested $select/$filter/$orderby, all with option `$expand` and the
 * position in the `$expand` value.
 */
import { QueryError } from '../errors.js';
import type { ExpandItem, Span } from '../odata/ast.js';
import type { TableSchema } from '../schema/table-schema.js';
import { PROPERTY_REFERENCES } from '../schema/catalog.js';
import type { ChildResourceName, RosterResourceName } from '../schema/types.js';
import { bindFilter, bindOrderBy, bindSelect, type BindContext } from './bind.js';
import type { Bound } from './bound.js';

/** The navigation properties of Property and the resource each expands to. */
export const EXPANSIONS = {
  Media: 'Media',
  OpenHouse: 'OpenHouse',
  PropertyChange: 'PropertyChange',
  PreferredMedia: 'Media',
  ListAgent: 'Member',
  BuyerAgent: 'Member',
  CoListAgent: 'Member',
  CoBuyerAgent: 'Member',
  ListOffice: 'Office',
  BuyerOffice: 'Office',
  CoListOffice: 'Office',
  CoBuyerOffice: 'Office',
} as const satisfies Readonly<Record<string, ChildResourceName | RosterResourceName>>;

export type ExpansionName = keyof typeof EXPANSIONS;

const EXPANSION_NAMES = Object.keys(EXPANSIONS) as ExpansionName[];

/** Nested $top maximum: the child resource's $top maximum (SERVICE.md §3). */
export const EXPAND_TOP_LIMITS: Readonly<Record<ChildResourceName, number>> = { Media: 25_000, OpenHouse: 50_000, PropertyChange: 50_000 };

/** PreferredMedia returns at most this many photos. */
export const PREFERRED_MEDIA_MAX = 2;

/** One expansion after binding: names resolved against the child resource's schema. */
export interface BoundExpansion {
  readonly name: ExpansionName;
  readonly resource: ChildResourceName | RosterResourceName;
  /**
   * A single-valued navigation property (ListAgent, ListOffice, ...): the listing field holding the
   * target's key (ListAgentKey, ...); the expansion is one record or null. Null for collections.
   */
  readonly reference: string | null;
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
  /** The loaded schema of a child or roster resource. */
  readonly schemaOf: (resource: ChildResourceName | RosterResourceName) => TableSchema;
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
    const resource: ChildResourceName | RosterResourceName = EXPANSIONS[name];
    const schema = ctx.schemaOf(resource);
    const bc: BindContext = { schema, option: '$expand', spanOf: ctx.spanOf };
    const o = item.options;
    const select = o.select ? (bindSelect(o.select, bc)?.map((f) => f.name) ?? null) : null;
    const filter = o.filter ? bindFilter(o.filter, bc).expr : null;
    const reference = PROPERTY_REFERENCES.find((r) => r.name === name);
    if (reference !== undefined) {
      const paging = (['orderby', 'top', 'skip'] as const).find((k) => o[k] !== undefined);
      if (paging !== undefined) {
        fail(
          'QueryOptionNotAllowed',
          `$${paging} does not apply inside ${name}, which is one ${resource} record (or null); use $select or $filter there.`,
          item,
        );
      }
      return { name, resource, reference: reference.field, filter, order: [], select, skip: 0, top: 1 };
    }
    if (resource === 'Member' || resource === 'Office') throw new Error(`unreachable: ${name} is a reference without its key field`);
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
    return { name, resource, reference: null, filter, order, select, skip: o.skip ?? 0, top: o.top ?? limit };
  });
  return bound;
}
