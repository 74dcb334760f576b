/**
 * The Plan: what parsing, binding and planning make of one query, as data. A readonly,
 * JSON-serializable value (no closures, no table, index or generation references) that says which
 * access path feeds the rows, what is left of the filter after it, how the rows are ordered, which
 * page is returned, what each record holds and what is expanded or grouped. An executor compiles
 * what it needs from a Plan and the data it runs on (src/exec/execute.ts for the in-memory
 * generations); a plan made on one generation runs unchanged on a later one, since every access
 * path is a conjunct of the filter and so correct on any data.
 *
 * `engine.explain(resource, query, { format: 'json' })` returns this value.
 */
import type { ParsedQuery } from '../odata/ast.js';
import type { BoundOrderKey } from './bind.js';
import type { BoundGrouping } from './bind-apply.js';
import type { BoundExpansion, ExpansionName } from './bind-expand.js';
import type { Bound } from './bound.js';
import type { ChildResourceName } from '../schema/types.js';

export type QueryResource = 'Property' | 'Media' | 'OpenHouse' | 'Member' | 'Office' | 'Lookup' | 'EntityEvent';
export const QUERY_RESOURCES: readonly QueryResource[] = ['Property', 'Media', 'OpenHouse', 'Member', 'Office', 'Lookup', 'EntityEvent'];

export type SearchNode = Extract<Bound, { kind: 'search' }>;
export type GeoNode = Extract<Bound, { kind: 'geo' }>;

/** One `Field eq 'v'` / `Field in (...)` conjunct on a dictionary column. */
export interface LookupTerm {
  readonly field: string;
  readonly values: readonly string[];
}

/** Where candidate rows come from (the planner picks the cheapest by its statistics). */
export type AccessPath =
  | { readonly kind: 'scan' }
  /** A top-level search.text conjunct: its postings. */
  | { readonly kind: 'search'; readonly node: SearchNode }
  /** A top-level geo.distance conjunct: a KD-tree walk with the rest of the filter pushed in. */
  | { readonly kind: 'geo'; readonly node: GeoNode }
  /** Top-level lookups on dictionary columns: an AND of per-value bitsets. */
  | { readonly kind: 'lookup'; readonly terms: readonly LookupTerm[] }
  /** `TextField eq 'v'`: the key index, or a hash of the text column. */
  | { readonly kind: 'text'; readonly node: Bound; readonly field: string; readonly value: string }
  /** Top-level comparisons of a numeric field with constants: a binary-searched slice of its sorted permutation. */
  | { readonly kind: 'range'; readonly field: string }
  /**
   * A navigation path `Property('K')/<navigation>`: the live children of that one listing, found as
   * `$expand=<navigation>` finds them (the store's ChildIndex; src/exec/navigate.ts). The plan's
   * filter, order and projection are over the child resource.
   */
  | { readonly kind: 'children'; readonly parent: 'Property'; readonly key: string; readonly navigation: ExpansionName };

export type OrderStrategy =
  /** Key ascending (no $orderby, or only the key). */
  | { readonly kind: 'key' }
  /** `relevance desc` over one top-level search: impact-ordered postings with early stop. */
  | { readonly kind: 'ranked'; readonly node: SearchNode }
  /** One numeric field with $top and no $count: walk its sorted permutation, stop at the page. */
  | { readonly kind: 'walk'; readonly field: string; readonly descending: boolean }
  /** Every match, then a top-k heap on the keys (key last). */
  | { readonly kind: 'heap' }
  /**
   * A navigation path's children in the order `$expand` gives them: the navigation property's
   * default order read in place, or the $orderby among the siblings, ties by key.
   */
  | { readonly kind: 'siblings' };

export interface Page {
  readonly skip: number;
  /** Rows this response may hold ($top, Prefer: odata.maxpagesize, or the default page size). */
  readonly rows: number;
  /** $top as asked (the nextLink carries what is left of it). */
  readonly top: number | undefined;
}

/** One top-level conjunct the statistics could size, as explain shows it. */
export interface ConjunctEstimate {
  /** The conjunct in short (`StandardStatus in ('Active')`, `geo Location 5000 m`, `range ListPrice`). */
  readonly what: string;
  /** Rows it allows: an upper bound (exact for lookups, ranges, text and postings; a bounding-box count for a circle). */
  readonly rows: number;
}

/**
 * What the planner estimated before running anything (PlanStatistics), and what it chose by: the
 * rows each sized conjunct allows, the rows the access path yields, the matches of the whole
 * filter (the conjuncts taken as independent), and, where an ordered walk was weighed against
 * collecting the access path's rows into a top-k heap, the rows each would visit.
 */
export interface PlanEstimates {
  /** Rows of the table (dead ones included). */
  readonly rows: number;
  readonly conjuncts: readonly ConjunctEstimate[];
  /** Rows the chosen access path yields before the residual filter. */
  readonly access: number;
  /** Rows matching the whole filter, estimated. */
  readonly matches: number;
  /** An ordered walk's visits against collecting and a heap, in rows visited. */
  readonly order?: { readonly walk: number; readonly collect: number };
}

export interface Plan {
  /** The resource of the rows returned: the queried one, or a navigation path's target (Media for `Property('K')/PreferredMedia`). */
  readonly resource: QueryResource | ChildResourceName;
  /** The query options as parsed (a nextLink prints them back with the next page's $skip). */
  readonly query: ParsedQuery;
  /** `$filter` and every `$apply` filter step as one bound conjunction, or null. */
  readonly filter: Bound | null;
  /** Every search.text call of the filter, by ordinal (relevance sums their scores). */
  readonly searches: readonly SearchNode[];
  readonly access: AccessPath;
  /** The filter less the conjuncts the access path answers exactly, or null. */
  readonly residual: Bound | null;
  readonly strategy: OrderStrategy;
  /** $orderby as bound (empty under $apply groupby). */
  readonly order: readonly BoundOrderKey[];
  readonly page: Page;
  readonly count: boolean;
  /** Selected fields in schema order, or null for all. */
  readonly select: readonly string[] | null;
  /** Navigation properties $select names: each record carries their `@odata.navigationLink` (in request order). */
  readonly links: readonly string[];
  readonly ignoreNulls: boolean;
  /** $expand, each a nested plan over a child resource (Property only). */
  readonly expand: readonly BoundExpansion[] | null;
  /** $apply's groupby/aggregate step: the response rows are then its groups. */
  readonly grouping: BoundGrouping | null;
  /** The statistics the access path and order were chosen by (absent for a navigation path). */
  readonly estimates?: PlanEstimates;
}
