/**
 * Navigation paths (SERVICE.md §2): the `children` access path and `siblings` order of a plan
 * whose rows are one listing's children, `Property('K')/Media`, `/OpenHouse`, `/PropertyChange`,
 * `/PreferredMedia`. The rows are exactly those `$expand=<navigation>` puts on that listing, in the
 * same order: both read them through src/exec/expand.ts (`ChildRows`), with the path's $filter and
 * $orderby in the place of the nested ones; $skip, $top, $count, paging and $apply then apply to
 * them as to any collection (src/exec/execute.ts, src/exec/page.ts).
 *
 * The listing is looked up on the generation the query reads (a nextLink's pinned one): it must be
 * live and visible to the caller, else `EntityNotFound`, the same whether the key exists in another
 * source or not. Its children are visible through it (a child belongs to one listing only).
 */
import type { Generation } from '../access/generation.js';
import { QueryError } from '../errors.js';
import type { AccessPath, Plan } from '../plan/plan.js';
import type { ChildResourceName } from '../schema/types.js';
import { ChildRows } from './expand.js';

export type ChildrenPath = Extract<AccessPath, { kind: 'children' }>;

/** One navigation path's children on one generation, for one query. */
export class NavigationRows {
  private readonly rows: ChildRows;
  private readonly parentRow: number;
  private every: Uint32Array | null = null;

  /**
   * @param visible the caller's visibility of Property rows (live rows of its sources), or null for every row
   */
  constructor(plan: Plan, path: ChildrenPath, gen: Generation, visible: ((row: number) => boolean) | null, nowMs: number) {
    const listings = gen.store.Property;
    const row = listings.rowOfKey(path.key);
    if (row < 0 || gen.access.of(listings).isDead(row) || (visible !== null && !visible(row))) {
      throw new QueryError('EntityNotFound', `No listing with ListingKey '${path.key.slice(0, 100)}' is visible to the caller's sources.`);
    }
    this.parentRow = row;
    const order = plan.order.map((k) => {
      if (k.kind !== 'expr') throw new Error('unreachable: relevance needs a search.text, which children do not have');
      return { expr: k.expr, descending: k.descending };
    });
    this.rows = new ChildRows(gen.store, { name: path.navigation, resource: plan.resource as ChildResourceName, filter: plan.filter, order }, nowMs);
  }

  /** The first `limit` children in order (the page and one more, to know whether more remain). */
  ordered(limit: number): Uint32Array {
    return this.every !== null ? this.every.subarray(0, limit) : toRows(this.rows.of(this.parentRow, 0, limit));
  }

  /** Every child the filter keeps, in order ($count, $apply). */
  all(): Uint32Array {
    return (this.every ??= toRows(this.rows.of(this.parentRow, 0, Infinity)));
  }
}

const toRows = (rows: ArrayLike<number>): Uint32Array => (rows instanceof Uint32Array ? rows : Uint32Array.from(rows));
