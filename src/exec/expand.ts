/**
 * $expand on Property (SERVICE.md §3): `Media`, `OpenHouse`, `PropertyChange` and `PreferredMedia`,
 * each with nested `$select;$filter;$orderby;$top;$skip`, added to each record of a page as JSON
 * arrays after the listing's fields, in the order the request lists them.
 *
 * Children are found through the store's ChildIndex (offsets per listing row), which already holds
 * each listing's children in the default expand order (Media by Order, OpenHouse by
 * OpenHouseStartTime, PropertyChange by ModificationTimestamp desc, nulls lowest, ties by key): a
 * request without nested $orderby reads them in place and stops at $skip + $top. A nested $orderby
 * sorts only the listing's matching children, ties by their keys ranked among the siblings (a
 * table-wide key rank of every Media row would cost seconds to build for one page).
 *
 * PreferredMedia never builds a record it does not return: it walks the listing's Media rows
 * (already by Order) reading the MediaCategory and PreferredPhotoYN columns, and stops as soon as
 * it holds the preferred photo and another photo (see `preferredPhotos`).
 *
 * Visibility: only children of the page's listings are read, and those passed the caller's
 * visibility; `expandInto` re-checks it and fails loudly (a defect, not bad input) if not. A Member
 * or Office has a source of its own: it is found by the listing's key field through the target
 * table's key index (O(1)) and given only when it is live and the caller sees it (else null).
 *
 * Binding is src/plan/bind-expand.ts; this file runs the bound expansions against one store.
 * `ChildRows` (one navigation property's children of a listing) is also what navigation paths,
 * `Property('K')/Media`, read through (src/exec/navigate.ts), so the two cannot disagree.
 */
import type { BoundExpansion, ExpansionName } from '../plan/bind-expand.js';
import { PREFERRED_MEDIA_MAX } from '../plan/bind-expand.js';
import type { Bound } from '../plan/bound.js';
import type { ChildResourceName, RosterResourceName } from '../schema/types.js';
import { getBit } from '../util/bits.js';
import type { Children } from '../store/children.js';
import type { Column, JsonValue } from '../store/columns.js';
import type { Store } from '../store/store.js';
import type { Table } from '../store/table.js';
import { compile, type Evaluator } from './compile.js';
import { orderRows, type SortKey } from './order.js';

/** What one query's expansions need at run time. */
export interface ExpandEnv {
  /** The engine clock's now for this query (now() in nested filters). */
  readonly nowMs: number;
  /** $ignorenulls=true: drop null fields of child records too. */
  readonly ignoreNulls: boolean;
  /** The caller's visibility of Property rows, or null for every source. */
  readonly visible: ((row: number) => boolean) | null;
  /** The caller's visibility of a Member or Office row (live rows of its sources), or null for every row. */
  readonly visibleOf: (resource: RosterResourceName) => ((row: number) => boolean) | null;
}

/**
 * What finding a listing's children needs of a navigation property: the parts an expansion
 * (BoundExpansion) and a navigation path (`Property('K')/Media`, src/exec/navigate.ts) share.
 */
export interface ChildQuery {
  readonly name: ExpansionName;
  readonly resource: ChildResourceName;
  /** The nested $filter (a navigation path's $filter), or null. */
  readonly filter: Bound | null;
  /** $orderby keys; empty for the navigation property's default order. */
  readonly order: ReadonlyArray<{ readonly expr: Bound; readonly descending: boolean }>;
}

/**
 * One navigation property of Property compiled over a store for one clock reading: the children of
 * a listing as `$expand` returns them (filter, order, then skip and top). Expansions and
 * navigation paths both read children through it, so they cannot disagree.
 */
export class ChildRows {
  readonly table: Table;
  private readonly index: Children;
  /** The $filter, or null. */
  private readonly accept: Evaluator | null;
  private readonly keys: readonly SortKey[];
  /** PreferredMedia only: whether a Media row is a photo / the preferred photo. */
  private readonly photo: ((row: number) => boolean) | null;
  private readonly preferred: ((row: number) => boolean) | null;

  constructor(
    store: Store,
    readonly query: ChildQuery,
    nowMs: number,
  ) {
    const none = (): boolean => false;
    const table = store.table(query.resource);
    const cc = { table, nowMs, searchHit: none, geoTest: () => none };
    const preferredMedia = query.name === 'PreferredMedia';
    this.table = table;
    this.index = store.children[query.resource];
    this.accept = query.filter ? compile(query.filter, cc) : null;
    this.keys = query.order.map((k) => ({ read: compile(k.expr, cc), descending: k.descending }));
    this.photo = preferredMedia ? photoTest(table) : null;
    this.preferred = preferredMedia ? preferredTest(table) : null;
  }

  /** The children of the listing at Property row `parentRow`, in order, after the filter, the order, `skip` and `top`. */
  of(parentRow: number, skip: number, top: number): ArrayLike<number> {
    return this.photo !== null ? this.preferredRows(parentRow, skip, top) : this.childRows(parentRow, skip, top);
  }

  /** The listing's children after $filter, $orderby, $skip, $top. */
  private childRows(parentRow: number, skip: number, top: number): ArrayLike<number> {
    const kids = this.index.childrenOf(parentRow);
    const accept = this.accept;
    if (this.keys.length === 0) {
      // default order: the index order, read in place up to $skip + $top
      if (accept === null) return kids.subarray(Math.min(skip, kids.length), Math.min(kids.length, skip + top));
      const out: number[] = [];
      let skipped = 0;
      for (let i = 0; i < kids.length && out.length < top; i++) {
        const r = kids[i];
        if (accept(r) !== true) continue;
        if (skipped < skip) skipped++;
        else out.push(r);
      }
      return out;
    }
    const matched = accept === null ? kids : kids.filter((r) => accept(r) === true);
    const ordered = this.orderSiblings(matched, Math.min(matched.length, skip + top));
    return ordered.subarray(Math.min(skip, ordered.length));
  }

  /**
   * The first `limit` of `rows` (children of one listing) in the $orderby, ties by key.
   * orderRows runs over positions 0..n-1 so that the key tie-break is the rank among these rows.
   */
  private orderSiblings(rows: Uint32Array, limit: number): Uint32Array {
    const n = rows.length;
    if (n === 0 || limit === 0) return new Uint32Array(0);
    const positions = new Uint32Array(n);
    for (let i = 0; i < n; i++) positions[i] = i;
    const keys = new Array<string>(n);
    for (let i = 0; i < n; i++) keys[i] = this.table.keyOf(rows[i]);
    const byKey = positions.slice().sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : 0));
    const rank = new Uint32Array(n);
    for (let i = 0; i < n; i++) rank[byKey[i]] = i;
    const sortKeys: SortKey[] = this.keys.map((k) => ({ read: (pos: number) => k.read(rows[pos]), descending: k.descending }));
    const order = orderRows(positions, sortKeys, rank, limit);
    const out = new Uint32Array(order.length);
    for (let i = 0; i < order.length; i++) out[i] = rows[order[i]];
    return out;
  }

  /**
   * PreferredMedia: at most two photos (MediaCategory 'Photo' or null) among the listing's Media
   * rows that pass the $filter — the preferred photo (PreferredPhotoYN true; the first in the
   * default order, i.e. the lowest Order, ties by MediaKey) first, then the first other photo in
   * that order. The rows are already in that order, so the walk stops once it holds a preferred
   * photo and two photos; only a listing without a preferred photo is read to the end, and even
   * then only two columns per row. $orderby, $skip and $top then apply to these (≤ 2) rows.
   */
  private preferredRows(parentRow: number, skip: number, top: number): ArrayLike<number> {
    const kids = this.index.childrenOf(parentRow);
    const photo = this.photo!;
    const preferred = this.preferred!;
    const accept = this.accept;
    let first = -1; // first photo
    let second = -1; // second photo
    let pref = -1; // first preferred photo
    for (let i = 0; i < kids.length; i++) {
      const r = kids[i];
      if (!photo(r) || (accept !== null && accept(r) !== true)) continue;
      if (first < 0) first = r;
      else if (second < 0) second = r;
      if (pref < 0 && preferred(r)) pref = r;
      if (pref >= 0 && second >= 0) break;
    }
    const picked: number[] = [];
    if (pref >= 0) {
      picked.push(pref);
      const other = first !== pref ? first : second;
      if (other >= 0) picked.push(other);
    } else {
      if (first >= 0) picked.push(first);
      if (second >= 0) picked.push(second);
    }
    const ordered = this.keys.length === 0 ? picked : this.orderSiblings(Uint32Array.from(picked), PREFERRED_MEDIA_MAX);
    return ordered.slice(Math.min(skip, ordered.length), skip + top);
  }
}

/** A request's bound expansions over one store; adds them to records with `expandInto`. */
/**
 * A single-valued navigation property (ListAgent, ListOffice, ...) compiled over a store: the
 * Member or Office record a listing names by its key field, if live, visible and passing the
 * nested $filter.
 */
class Reference {
  readonly table: Table;
  /** The key field of Property (ListAgentKey, ...), or undefined when the data has none. */
  private readonly link: Column | undefined;
  private readonly accept: Evaluator | null;

  constructor(
    store: Store,
    private readonly item: BoundExpansion & { readonly reference: string },
    nowMs: number,
  ) {
    const none = (): boolean => false;
    this.table = store.table(item.resource);
    this.link = store.Property.column(item.reference);
    this.accept = item.filter ? compile(item.filter, { table: this.table, nowMs, searchHit: none, geoTest: () => none }) : null;
  }

  record(parentRow: number, env: ExpandEnv): JsonValue {
    const key = this.link?.json(parentRow, 0);
    if (typeof key !== 'string') return null;
    const row = this.table.rowOfKey(key);
    if (row < 0) return null;
    const visible = env.visibleOf(this.item.resource as RosterResourceName);
    if (visible !== null && !visible(row)) return null;
    if (this.accept !== null && this.accept(row) !== true) return null;
    const record = this.table.record(row, this.item.select ?? undefined, env.nowMs);
    if (env.ignoreNulls) for (const k of Object.keys(record)) if (record[k] === null) delete record[k];
    return record;
  }
}

export class Expansions {
  private compiled: ReadonlyArray<ChildRows | Reference> | null = null;
  private compiledAt = NaN;

  constructor(
    private readonly store: Store,
    readonly items: readonly BoundExpansion[],
  ) {}

  /**
   * Adds each expansion of the listing at Property row `parentRow` to `record`, as an array (empty
   * when there are no children), in request order.
   */
  expandInto(record: Record<string, JsonValue>, parentRow: number, env: ExpandEnv): void {
    if (env.visible !== null && !env.visible(parentRow)) {
      throw new Error(`expansion asked for Property row ${parentRow}, which the caller may not see`);
    }
    const compiled = this.compile(env.nowMs);
    for (let e = 0; e < compiled.length; e++) {
      const item = this.items[e];
      const c = compiled[e];
      record[item.name] = c instanceof Reference ? c.record(parentRow, env) : childRecords(c.table, c.of(parentRow, item.skip, item.top), item.select, env);
    }
  }

  private compile(nowMs: number): ReadonlyArray<ChildRows | Reference> {
    if (this.compiled !== null && this.compiledAt === nowMs) return this.compiled;
    this.compiled = this.items.map((item) =>
      item.reference !== null
        ? new Reference(this.store, { ...item, reference: item.reference }, nowMs)
        : new ChildRows(this.store, { ...item, resource: item.resource as ChildResourceName }, nowMs),
    );
    this.compiledAt = nowMs;
    return this.compiled;
  }
}

/** The records of child rows: the selected fields (all when null) in schema order, nulls dropped under $ignorenulls. */
function childRecords(table: Table, rows: ArrayLike<number>, select: readonly string[] | null, env: Pick<ExpandEnv, 'nowMs' | 'ignoreNulls'>): JsonValue[] {
  const out = new Array<JsonValue>(rows.length);
  const fields = select ?? undefined;
  for (let i = 0; i < rows.length; i++) {
    const child = table.record(rows[i], fields, env.nowMs);
    if (env.ignoreNulls) for (const k of Object.keys(child)) if (child[k] === null) delete child[k];
    out[i] = child;
  }
  return out;
}

/** Whether a Media row is a photo: MediaCategory 'Photo' or absent; reads the column directly. */
function photoTest(media: Table): (row: number) => boolean {
  const column = media.column('MediaCategory');
  if (column === undefined) return () => true;
  if (column.kind === 'dictionary') {
    const code = column.dictionary.indexOf('Photo');
    const { codes } = column;
    return (row) => codes[row] === 0 || codes[row] === code;
  }
  if (column.kind === 'text') {
    return (row) => {
      const v = column.get(row);
      return v === null || v === 'Photo';
    };
  }
  // a local field of another type: only its absence makes a photo
  return (row) => column.isNull(row);
}

/** Whether a Media row is marked preferred (PreferredPhotoYN true). */
function preferredTest(media: Table): (row: number) => boolean {
  const column = media.columnOf('PreferredPhotoYN', 'boolean');
  if (column === undefined) return () => false;
  const { bits, validity } = column;
  return (row) => getBit(validity, row) && getBit(bits, row);
}
