/**
 * The planner: parses and binds a query's options and makes its Plan (src/plan/plan.ts): which
 * access path feeds the rows, how they are ordered, which page. Access paths, cheapest first by
 * the result size the data's statistics give (PlanStatistics, answered per backend):
 *
 * - `search`: a top-level search.text conjunct (postings; the result size is known exactly);
 * - `geo`: a top-level geo.distance conjunct (KD-tree walk with the rest of the filter pushed in;
 *   the circle counted on the tree);
 * - `lookup`: top-level `Field eq 'v'` / `Field in (...)` on dictionary columns (an AND of
 *   per-value bitsets, each built on first use);
 * - `text`: `TextField eq 'v'` (the key index, or a hash of the column built on first use);
 * - `range`: top-level comparisons of a numeric column with constants (a binary-searched slice of
 *   the column's sorted permutation, built on first use);
 * - `scan`: every row;
 * - `children`: a navigation path's listing's children (`Property('K')/Media`): no other path is
 *   considered, since one listing's children are few and already grouped by the ChildIndex.
 *
 * Visibility (the caller's sources) is not part of a plan: the executor applies it at the root of
 * every plan, before anything else, so one plan serves every caller.
 * Ordering: `relevance desc` alone with one search conjunct and no $count → ranked top-k with
 * early stop; a single numeric key with $top and no $count → an ordered walk of the column's
 * sorted permutation that stops after skip+top matches, unless collecting the access path's rows
 * into a heap is estimated to visit fewer rows; otherwise all matches, then a heap. The estimates
 * go into the Plan (`estimates`), for explain.
 */
import { QueryError } from '../errors.js';
import { spanOf, type ParsedQuery, type SelectItem, type SelectProperty } from '../odata/ast.js';
import { parseQuery } from '../odata/parse-query.js';
import { PROPERTY_REFERENCES, type ReferenceDef } from '../schema/catalog.js';
import type { TableSchema } from '../schema/table-schema.js';
import type { ChildResourceName, ResourceName } from '../schema/types.js';
import { bindFilter, bindOrderBy, bindSelect, type BindContext, type BoundOrderKey } from './bind.js';
import { bindApply } from './bind-apply.js';
import { bindExpand, EXPAND_TOP_LIMITS, EXPANSIONS, type ExpansionName } from './bind-expand.js';
import { operandsOf, type Bound } from './bound.js';
import {
  QUERY_RESOURCES,
  type AccessPath,
  type ConjunctEstimate,
  type GeoNode,
  type LookupTerm,
  type OrderStrategy,
  type Plan,
  type PlanEstimates,
  type QueryResource,
  type SearchNode,
} from './plan.js';

/** Rows per page when neither $top nor Prefer: odata.maxpagesize says (SERVICE.md §3). */
export const DEFAULT_PAGE_SIZE = 10;

/** $top maximum per top-level resource (SERVICE.md §3). */
export const TOP_LIMITS: Readonly<Record<QueryResource, number>> = {
  Property: 50_000,
  OpenHouse: 50_000,
  Media: 25_000,
  Member: 50_000,
  Office: 50_000,
  Lookup: 50_000,
  EntityEvent: 50_000,
};

/**
 * What the planner asks of the data a query will run on: schemas to bind against and result
 * sizes to choose an access path by. A size is an upper bound, exact where it is cheap; null
 * means the data has no such index for the field, so the path is not offered.
 */
export interface PlanStatistics {
  schemaOf(resource: ResourceName): TableSchema;
  rowCount(resource: QueryResource): number;
  /** Rows the postings of a search.text call hold (all its terms and expansions); validates the call (QueryError). */
  searchRows(node: SearchNode): number;
  /** Rows holding any of the values of a dictionary column, or null when the field is not one. */
  lookupRows(resource: QueryResource, term: LookupTerm): number | null;
  /** Rows whose text field equals the value, through the key index or a text hash; null without one. */
  textRows(resource: QueryResource, field: string, value: string): number | null;
  /** Rows of the field's sorted permutation that the conjuncts' bounds allow; null when it has none. */
  rangeRows(resource: QueryResource, field: string, conjuncts: readonly Bound[]): number | null;
  /** Rows within a geo.distance circle (dead ones included; appended ones by their bounding boxes, an upper bound), or null when unknown. */
  geoRows(resource: QueryResource, node: GeoNode): number | null;
}

export interface PlanRequest {
  readonly resource: QueryResource;
  /** The query string of OData options, percent-decoded. */
  readonly text: string;
  /** The client's `Prefer: odata.maxpagesize=N`. */
  readonly maxPageSize?: number;
  /** A navigation path `resource('key')/name`: the query is over that listing's children. */
  readonly navigation?: NavigationRequest;
  /** Only the number of matches (`/Property/$count`): the query may hold `$filter` alone. */
  readonly countOnly?: boolean;
}

/** A navigation path's key and navigation property, as the caller names them. */
export interface NavigationRequest {
  readonly key: string;
  readonly name: string;
}

/** A navigation path, resolved: its access path and the resource its rows are of. */
interface Navigation {
  readonly access: Extract<AccessPath, { kind: 'children' }>;
  readonly resource: ChildResourceName;
}

/**
 * Parses, binds and plans a query. Every mistake is a QueryError; a binder's error carries the
 * position in its option (the query is parsed again with source spans for it: parsing without
 * them is faster, and errors are rare).
 */
export function planQuery(request: PlanRequest, stats: PlanStatistics): Plan {
  const nav = checkedNavigation(request);
  try {
    return planParsed(request, parseQuery(request.text, { spans: false }), stats, nav);
  } catch (err) {
    if (!(err instanceof QueryError) || err.position !== undefined || err.option === undefined) throw err;
    return planParsed(request, parseQuery(request.text, { spans: true }), stats, nav);
  }
}

/**
 * Binds and plans a query already parsed from the request's text (the plan cache's instance of a
 * cached shape, src/plan/template.ts): planQuery without the parse, so with the same checks in the
 * same order. A binder error here carries no position: the caller plans the text again with
 * planQuery for the error as it reports it.
 */
export function planParsedQuery(request: PlanRequest, parsed: ParsedQuery, stats: PlanStatistics): Plan {
  return planParsed(request, parsed, stats, checkedNavigation(request));
}

/** The request's resource checked, and its navigation path resolved (or null). */
function checkedNavigation(request: PlanRequest): Navigation | null {
  if (!QUERY_RESOURCES.includes(request.resource)) {
    throw new QueryError('UnknownResource', `No resource '${String(request.resource)}': query ${QUERY_RESOURCES.join(', ')}.`);
  }
  return request.navigation ? navigationOf(request.resource, request.navigation) : null;
}

/**
 * A single-valued navigation path's reference (`Property('K')/ListAgent`, ...), checked: one of
 * Property's PROPERTY_REFERENCES, else `UnknownNavigationProperty` (a 404 over HTTP). Both
 * backends' `navigateOne` start here.
 */
export function singleNavigationOf(resource: QueryResource, navigation: string): ReferenceDef {
  const reference = resource === 'Property' ? PROPERTY_REFERENCES.find((r) => r.name === navigation) : undefined;
  if (reference === undefined) {
    const names = PROPERTY_REFERENCES.map((r) => r.name).join(', ');
    throw new QueryError(
      'UnknownNavigationProperty',
      `${resource} has no single-valued navigation property '${navigation.slice(0, 100)}'; use one of ${names} on Property.`,
    );
  }
  return reference;
}

/**
 * A navigation path's navigation property, checked: one of Property's (bind-expand.ts EXPANSIONS,
 * the one declaration of them), else `UnknownNavigationProperty` (a 404 over HTTP: the path
 * names no resource).
 */
function navigationOf(resource: QueryResource, { key, name }: NavigationRequest): Navigation {
  const valid = Object.keys(EXPANSIONS).join(', ');
  const shown = name.slice(0, 100);
  if (resource !== 'Property') {
    throw new QueryError(
      'UnknownNavigationProperty',
      `${resource} has no navigation properties ('${shown}'); navigation paths start at Property('KEY'): ${valid}.`,
    );
  }
  if (!Object.hasOwn(EXPANSIONS, name)) {
    throw new QueryError('UnknownNavigationProperty', `Property has no navigation property '${shown}'; use one of ${valid}.`);
  }
  if (PROPERTY_REFERENCES.some((r) => r.name === name)) {
    throw new QueryError(
      'SingleValuedNavigation',
      `${name} is single-valued (one ${EXPANSIONS[name as ExpansionName]} or none), not a collection: read it as one record.`,
    );
  }
  const navigation = name as ExpansionName;
  return { access: { kind: 'children', parent: 'Property', key, navigation }, resource: EXPANSIONS[navigation] as ChildResourceName };
}

function planParsed({ resource: queried, maxPageSize, countOnly }: PlanRequest, parsed: ParsedQuery, stats: PlanStatistics, nav: Navigation | null): Plan {
  const resource = nav?.resource ?? queried;
  if (countOnly) {
    for (const option of Object.keys(parsed)) {
      if (option !== 'filter') {
        throw new QueryError('QueryOptionNotAllowed', `$${option} does not apply to a count (${resource}/$count): it takes $filter only.`, {
          option: `$${option}`,
        });
      }
    }
  }
  const schema = stats.schemaOf(resource);
  const span = (node: object) => spanOf(parsed, node);
  const expand = parsed.expand ? bindExpand(parsed.expand, { resource, schemaOf: (r) => stats.schemaOf(r), spanOf: span }) : null;
  if (parsed.format !== undefined && parsed.format !== 'json') {
    throw new QueryError('UnsupportedFormat', `$format=${parsed.format} is not available here: data comes as json.`, { option: '$format' });
  }
  const ctx = (option: string): BindContext => ({ schema, option, spanOf: span });
  const bound = parsed.filter ? bindFilter(parsed.filter, ctx('$filter')) : null;
  const applied = parsed.apply ? bindApply(parsed, ctx, bound) : null;
  const grouping = applied?.grouping ?? null;
  const filter = applied ? applied.filter : (bound?.expr ?? null);
  const order = parsed.orderby && !grouping ? bindOrderBy(parsed.orderby, ctx('$orderby'), applied?.searchCount ?? bound?.searchCount ?? 0) : [];
  // $select may name navigation properties: the records then carry their navigation links
  const navigation = (item: SelectItem): boolean => item.kind === 'property' && resource === 'Property' && Object.hasOwn(EXPANSIONS, item.name);
  // without $select every field but hidden ones (EntityEvent's storage key): bindSelect decides
  const selectItems: readonly SelectItem[] | null = grouping ? null : (parsed.select ?? [{ kind: 'star' }]);
  const links = [...new Set(selectItems?.filter(navigation).map((i) => (i as SelectProperty).name) ?? [])];
  const select = selectItems
    ? (bindSelect(
        selectItems.filter((i) => !navigation(i)),
        ctx('$select'),
      )?.map((f) => f.name) ?? null)
    : null;

  const limit = nav ? EXPAND_TOP_LIMITS[nav.resource] : TOP_LIMITS[queried];
  if (parsed.top !== undefined && parsed.top > limit) {
    throw new QueryError('TopTooLarge', `$top=${parsed.top} is above the maximum of ${limit} for ${resource}.`, { option: '$top' });
  }
  const maxPage = maxPageSize !== undefined && maxPageSize > 0 ? Math.min(Math.floor(maxPageSize), limit) : undefined;
  const rows = countOnly ? 0 : parsed.top !== undefined ? Math.min(parsed.top, maxPage ?? parsed.top) : (maxPage ?? DEFAULT_PAGE_SIZE);
  const count = countOnly === true || parsed.count === true;

  const searches = searchCalls(filter);
  // every call is checked (bad terms, min_matches) whether or not it can feed the rows
  const searchSizes = new Map(searches.map((node) => [node, stats.searchRows(node)]));
  const top = conjuncts(filter);
  const need = (parsed.skip ?? 0) + rows + 1;
  const chosen = nav
    ? { access: nav.access, strategy: { kind: 'siblings' } as const, estimates: undefined }
    : chooseAccessAndOrder(queried, top, { order, searches, searchSizes, count, grouping: grouping !== null, hasTop: parsed.top !== undefined, need }, stats);
  const { access, strategy } = chosen;
  const answered = answeredBy(access, top);
  return {
    resource,
    query: parsed,
    filter,
    searches,
    access,
    residual: andOf(top.filter((e) => !answered.has(e))),
    strategy,
    order,
    page: { skip: parsed.skip ?? 0, rows, top: parsed.top },
    count,
    select,
    links,
    ignoreNulls: parsed.ignorenulls === true,
    expand,
    grouping,
    ...(chosen.estimates ? { estimates: chosen.estimates } : {}),
  };
}

/**
 * Work per match of collecting an access path's rows into a top-k heap (a sort key materialized,
 * heap steps), counted in rows an ordered walk visits (the planner's unit of cost; a row the
 * access path yields counts one). Measured on the 100k benchmark set: about 25 ns per row walked
 * or yielded by the KD-tree, 100-125 ns per match kept in the heap.
 */
const HEAP_COST_PER_MATCH = 5;

/** What the order choice weighs besides the conjuncts. */
interface OrderRequest {
  readonly order: readonly BoundOrderKey[];
  readonly searches: readonly SearchNode[];
  readonly searchSizes: ReadonlyMap<SearchNode, number>;
  readonly count: boolean;
  /** $apply groups every match: no walk stops early. */
  readonly grouping: boolean;
  readonly hasTop: boolean;
  /** Ordered rows the executor asks for: skip + page + 1. */
  readonly need: number;
}

/**
 * The access path and the order strategy, by estimated rows visited. The access path is the
 * conjunct (or the AND of dictionary lookups) with the fewest rows. The order is chooseOrder's,
 * then weighed where two strategies can answer: an ordered walk of a sorted permutation visits
 * about need × slice / matches rows (the whole slice when fewer match), while collecting the
 * access path's rows and a heap costs their number plus HEAP_COST_PER_MATCH per match; so a small
 * circle or a rare value under a long order walk is collected (`geo.distance(...) le 1000 and
 * StandardStatus eq 'Active'`, by price, where fewer than a page match and the walk would read the
 * whole permutation), and a common one is walked. Likewise in key order, a walk of every row in key
 * order that stops at the page is chosen over collecting many matches (not under $count or $apply,
 * which read every match). Matches are estimated with the conjuncts taken as independent.
 */
function chooseAccessAndOrder(
  resource: QueryResource,
  top: readonly Bound[],
  req: OrderRequest,
  stats: PlanStatistics,
): { access: AccessPath; strategy: OrderStrategy; estimates: PlanEstimates } {
  const total = stats.rowCount(resource);
  const { candidates, sized } = sizeConjuncts(resource, top, req.searchSizes, stats);
  let best: { path: AccessPath; size: number } | null = null;
  for (const c of candidates) if (best === null || c.size < best.size) best = c;
  best ??= { path: { kind: 'scan' }, size: total };
  // sizes are upper bounds (a search's postings of every term may even exceed the rows)
  let matches = total;
  for (const c of sized) matches = total > 0 ? (matches * Math.min(c.rows, total)) / total : 0;
  matches = Math.min(matches, best.size);
  let strategy = chooseOrder(req.order, top, req.searches, req.count, req.hasTop, (name) => stats.rangeRows(resource, name, []) !== null);
  let access = best.path;
  let accessRows = best.size;
  let weighed: PlanEstimates['order'];
  const collect = (): number => Math.round(accessRows + matches * HEAP_COST_PER_MATCH);
  if (strategy.kind === 'walk') {
    const slice = stats.rangeRows(resource, strategy.field, top) ?? total;
    weighed = { walk: walkVisits(slice, Math.min(matches, slice), req.need), collect: collect() };
    if (weighed.collect < weighed.walk) strategy = { kind: 'heap' };
  } else if (strategy.kind === 'key' && !req.count && !req.grouping && access.kind !== 'scan' && access.kind !== 'search') {
    // (not over a search: its size is a loose bound, and as a residual it is evaluated whole anyway)
    weighed = { walk: walkVisits(total, matches, req.need), collect: collect() };
    if (weighed.walk < weighed.collect) [access, accessRows] = [{ kind: 'scan' }, total];
  }
  return {
    access,
    strategy,
    estimates: { rows: total, conjuncts: sized, access: accessRows, matches: Math.round(matches), ...(weighed ? { order: weighed } : {}) },
  };
}

/** Rows an ordered walk over `slice` rows visits to find `need` of `matches` spread evenly in it. */
function walkVisits(slice: number, matches: number, need: number): number {
  return matches >= need && matches > 0 ? Math.min(slice, Math.ceil((need * slice) / matches)) : slice;
}

/**
 * The access paths the top-level conjuncts offer, each with its rows by the statistics, and every
 * sized conjunct once (a field's range conjuncts together) for the match estimate.
 */
function sizeConjuncts(
  resource: QueryResource,
  top: readonly Bound[],
  searchSizes: ReadonlyMap<SearchNode, number>,
  stats: PlanStatistics,
): { candidates: Array<{ path: AccessPath; size: number }>; sized: ConjunctEstimate[] } {
  const candidates: Array<{ path: AccessPath; size: number }> = [];
  const sized: ConjunctEstimate[] = [];
  const consider = (path: AccessPath, size: number, what: string): void => {
    candidates.push({ path, size });
    sized.push({ what, rows: size });
  };
  const lookups: LookupTerm[] = [];
  let lookupSize = Infinity;
  const ranged = new Set<string>();
  for (const e of top) {
    if (e.kind === 'search') consider({ kind: 'search', node: e }, searchSizes.get(e)!, `search.text(${e.field}) postings`);
    else if (e.kind === 'geo') {
      consider({ kind: 'geo', node: e }, stats.geoRows(resource, e) ?? stats.rowCount(resource) / 4, `geo.distance(${e.field.name}) le ${e.meters}`);
    } else {
      const l = lookupOf(e);
      const size = l ? stats.lookupRows(resource, l) : null;
      if (l && size !== null) {
        lookups.push(l);
        lookupSize = Math.min(lookupSize, size);
        sized.push({ what: `${l.field} in (${l.values.map((v) => `'${v}'`).join(',')})`, rows: size });
      }
      if (e.kind === 'compare' && e.op === 'eq' && e.left.kind === 'field' && e.right.kind === 'const' && typeof e.right.value === 'string') {
        const rows = stats.textRows(resource, e.left.field.name, e.right.value);
        if (rows !== null)
          consider({ kind: 'text', node: e, field: e.left.field.name, value: e.right.value }, rows, `${e.left.field.name} eq '${e.right.value}'`);
      }
      // A range on a numeric field: the slice of its sorted permutation (binary search).
      const field =
        e.kind === 'compare' && e.op !== 'ne' && e.left.kind === 'field' && e.right.kind === 'const' && typeof e.right.value === 'number'
          ? e.left.field.name
          : null;
      const rows = field && !ranged.has(field) ? stats.rangeRows(resource, field, top) : null;
      if (field && rows !== null) {
        ranged.add(field);
        consider({ kind: 'range', field }, rows, `range of ${field}`);
      }
    }
  }
  // All dictionary lookups together: an AND of bitsets, no larger than the smallest of them.
  if (lookups.length) candidates.push({ path: { kind: 'lookup', terms: lookups }, size: lookupSize });
  return { candidates, sized };
}

/** Top-level conjuncts of a filter (a and b and c → [a, b, c]), without recursion on long chains. */
export function conjuncts(expr: Bound | null): Bound[] {
  if (!expr) return [];
  const out: Bound[] = [];
  const stack: Bound[] = [expr];
  while (stack.length) {
    const e = stack.pop()!;
    if (e.kind === 'and') stack.push(e.right, e.left);
    else out.push(e);
  }
  return out;
}

/**
 * Every search.text call of a filter, in ordinal order: wherever it stands (under and/or/not, in
 * a comparison such as `search.text(...) eq null`, inside a lambda's predicate).
 */
export function searchCalls(expr: Bound | null): SearchNode[] {
  const out: SearchNode[] = [];
  const stack: Bound[] = expr ? [expr] : [];
  while (stack.length) {
    const e = stack.pop()!;
    if (e.kind === 'search') out.push(e);
    else stack.push(...operandsOf(e));
  }
  return out.sort((a, b) => a.ordinal - b.ordinal);
}

/** `Field eq 'v'` or `Field in ('a','b')` on a string field: a lookup candidate. */
export function lookupOf(e: Bound): LookupTerm | null {
  if (e.kind === 'compare' && e.op === 'eq' && e.left.kind === 'field' && e.right.kind === 'const' && typeof e.right.value === 'string') {
    return { field: e.left.field.name, values: [e.right.value] };
  }
  if (e.kind === 'in' && e.left.kind === 'field' && e.values.every((v) => typeof v === 'string')) {
    return { field: e.left.field.name, values: [...new Set(e.values as string[])] };
  }
  return null;
}

export function chooseOrder(
  requested: readonly BoundOrderKey[],
  topLevel: readonly Bound[],
  allSearches: readonly SearchNode[],
  wantCount: boolean,
  hasTop: boolean,
  numericField: (name: string) => boolean,
): OrderStrategy {
  // A trailing `Key asc` repeats the tie-break every order ends with (`$orderby=T asc,Key asc`,
  // as keyset-paging clients write it, is `$orderby=T asc`): it does not stop a walk.
  const last = requested[requested.length - 1];
  const keyLast = last !== undefined && last.kind === 'expr' && last.expr.kind === 'field' && last.expr.field.key && !last.descending;
  const order = keyLast ? requested.slice(0, -1) : requested;
  if (order.length === 0) return { kind: 'key' };
  const first = order[0];
  if (!wantCount && order.length === 1 && first.kind === 'relevance' && allSearches.length === 1 && topLevel.includes(allSearches[0])) {
    return { kind: 'ranked', node: allSearches[0] };
  }
  if (!wantCount && hasTop && order.length === 1 && first.kind === 'expr' && first.expr.kind === 'field' && numericField(first.expr.field.name)) {
    return { kind: 'walk', field: first.expr.field.name, descending: first.descending };
  }
  return { kind: 'heap' };
}

/** The top-level conjuncts a candidate source answers exactly (left out of the residual filter). */
export function answeredBy(source: AccessPath, top: readonly Bound[]): Set<Bound> {
  switch (source.kind) {
    case 'scan':
    case 'children':
      return new Set();
    case 'search':
    case 'geo':
    case 'text':
      return new Set([source.node]);
    case 'lookup': {
      const fields = new Set(source.terms.map((t) => t.field));
      return new Set(
        top.filter((e) => {
          const l = lookupOf(e);
          return l !== null && fields.has(l.field);
        }),
      );
    }
    case 'range':
      return new Set(
        top.filter(
          (e) =>
            e.kind === 'compare' &&
            e.op !== 'ne' &&
            e.left.kind === 'field' &&
            e.left.field.name === source.field &&
            e.right.kind === 'const' &&
            typeof e.right.value === 'number',
        ),
      );
  }
}

/** `a and b and ...` of the given conjuncts, or null for none. */
export function andOf(parts: readonly Bound[]): Bound | null {
  let out: Bound | null = null;
  for (const e of parts) out = out === null ? e : { kind: 'and', type: 'boolean', left: out, right: e };
  return out;
}
