/**
 * A child resource grouped by listing: the children of Property row p are
 * rows[offsets[p], offsets[p + 1]) of the child table, already in the resource's default expand
 * order (Media by Order, OpenHouse by OpenHouseStartTime, PropertyChange by ModificationTimestamp
 * descending; nulls lowest; ties by the child's key), so a listing's children cost O(1) to find
 * and nothing to sort when the request names no order. Children of no listing are not grouped.
 */
import type { OrderKey } from '../schema/types.js';
import { runNow, type Steps } from '../util/steps.js';
import { lowerBound } from '../util/binary-search.js';
import { getBit } from '../util/bits.js';
import { compareUtf8 } from './bytes.js';
import { ParentKeyColumn } from './columns.js';
import type { Table } from './table.js';

/** A listing's children in the default expand order: the loaded grouping, or one generation's view of it. */
export interface Children {
  count(parentRow: number): number;
  /** The child rows of a listing, in the default order (a view; no copy). */
  childrenOf(parentRow: number): Uint32Array;
  readonly byteLength: number;
}

export class ChildIndex implements Children {
  constructor(
    /** Per Property row p (plus one): children are rows[offsets[p], offsets[p + 1]). */
    readonly offsets: Uint32Array,
    readonly rows: Uint32Array,
  ) {}

  count(parentRow: number): number {
    return this.offsets[parentRow + 1] - this.offsets[parentRow];
  }

  /** The child rows of a listing (a view; no copy). */
  childrenOf(parentRow: number): Uint32Array {
    return this.rows.subarray(this.offsets[parentRow], this.offsets[parentRow + 1]);
  }

  get byteLength(): number {
    return this.offsets.byteLength + this.rows.byteLength;
  }
}

interface SortKey {
  readonly values: Float64Array | null;
  readonly validity: Uint32Array | null;
  readonly descending: boolean;
}

export function buildChildIndex(child: Table, parentCount: number, linkField: string, order: readonly OrderKey[]): ChildIndex {
  return runNow(buildChildIndexSteps(child, parentCount, linkField, order));
}

/** Listings whose children buildChildIndexSteps sorts between two yields. */
const SORT_STEP_PARENTS = 1 << 6;

/** Child rows counted or placed in their listing's group between two check points (a power of two). */
const GROUP_STEP_ROWS = 1 << 13;

/** buildChildIndex as steps (compaction): it yields every GROUP_STEP_ROWS child rows grouped and every SORT_STEP_PARENTS listings sorted. */
export function* buildChildIndexSteps(child: Table, parentCount: number, linkField: string, order: readonly OrderKey[]): Steps<ChildIndex> {
  const offsets = new Uint32Array(parentCount + 1);
  const link = child.column(linkField);
  if (!(link instanceof ParentKeyColumn)) return new ChildIndex(offsets, new Uint32Array(0));
  const parentRow = link.parentRow;
  const n = child.rowCount;
  let linked = 0;
  for (let r = 0; r < n; r++) {
    const p = parentRow[r];
    if (p >= 0) {
      offsets[p + 1]++;
      linked++;
    }
    if ((r & (GROUP_STEP_ROWS - 1)) === GROUP_STEP_ROWS - 1) yield;
  }
  for (let p = 0; p < parentCount; p++) offsets[p + 1] += offsets[p];
  yield;
  const rows = new Uint32Array(linked);
  const next = offsets.slice(0, parentCount);
  for (let r = 0; r < n; r++) {
    const p = parentRow[r];
    if (p >= 0) rows[next[p]++] = r;
    if ((r & (GROUP_STEP_ROWS - 1)) === GROUP_STEP_ROWS - 1) yield;
  }

  const compare = childComparator(child, order);
  yield;

  for (let p = 0; p < parentCount; p++) {
    if (p % SORT_STEP_PARENTS === SORT_STEP_PARENTS - 1) yield;
    const s = offsets[p];
    const e = offsets[p + 1];
    if (e - s < 2) continue;
    if (e - s <= 48) {
      // Insertion sort: feeds usually send children in order already, so this is linear.
      for (let i = s + 1; i < e; i++) {
        const r = rows[i];
        let j = i - 1;
        while (j >= s && compare(rows[j], r) > 0) {
          rows[j + 1] = rows[j];
          j--;
        }
        rows[j + 1] = r;
      }
    } else {
      rows.subarray(s, e).sort(compare);
    }
  }
  return new ChildIndex(offsets, rows);
}

/** The default expand order of a child table's rows: the order keys (nulls lowest), then the child's key. */
export function childComparator(child: Table, order: readonly OrderKey[]): (a: number, b: number) => number {
  const keys: SortKey[] = order.map((o) => {
    const c = child.column(o.field);
    const numeric = c !== undefined && (c.kind === 'number' || c.kind === 'timestamp' || c.kind === 'date');
    return { values: numeric ? c.values : null, validity: numeric ? c.validity : null, descending: o.descending };
  });
  const key = child.keyColumn;
  const compare = (a: number, b: number): number => {
    for (const k of keys) {
      if (k.values === null || k.validity === null) continue;
      const na = !getBit(k.validity, a);
      const nb = !getBit(k.validity, b);
      let d: number;
      if (na || nb) d = na === nb ? 0 : na ? -1 : 1;
      else d = k.values[a] < k.values[b] ? -1 : k.values[a] > k.values[b] ? 1 : 0;
      if (d !== 0) return k.descending ? -d : d;
    }
    const ko = key.offsets;
    return compareUtf8(key.bytes, ko[a], ko[a + 1], key.bytes, ko[b], ko[b + 1]);
  };
  return compare;
}

const NO_ROWS = new Uint32Array(0);

/** Layers an overlay may stack before a change copies them into one (bounds the look-up chain). */
const MAX_LAYERS = 8;
/** Listings a flattening merges between check points (in the pass that finds where each comes from). */
const FLATTEN_STEP = 512;
/**
 * Listings whose children a flattening copies between check points: a listing's list is read from
 * wherever its layer keeps it (a cache miss or more), so 512 of them held the event loop 0.3 ms and
 * more among queries at 100k listings.
 */
const FLATTEN_COPY_STEP = 64;

/**
 * The lists of some listings' children as typed arrays, outside the JS heap: the listings
 * ascending in `parents`, the children of parents[i] at rows[offsets[i], offsets[i + 1]). A
 * generation's layers live for several changes, long enough to survive the young generation's
 * collections: as Maps of small arrays they were promoted and brought the old generation's
 * mark-compacts (BENCHMARKS.md "Live: children lists and a change's records out of the old generation").
 */
export class ListLayer {
  constructor(
    readonly parents: Int32Array,
    readonly offsets: Uint32Array,
    readonly rows: Uint32Array,
  ) {}

  /** A layer of `lists` (listing row -> its children). */
  static of(lists: ReadonlyMap<number, ArrayLike<number>>): ListLayer {
    const parents = Int32Array.from(lists.keys()).sort();
    const offsets = new Uint32Array(parents.length + 1);
    parents.forEach((p, i) => (offsets[i + 1] = offsets[i] + lists.get(p)!.length));
    const rows = new Uint32Array(offsets[parents.length]);
    parents.forEach((p, i) => rows.set(lists.get(p)!, offsets[i]));
    return new ListLayer(parents, offsets, rows);
  }

  /** The index of `parent` in `parents`, or -1. */
  find(parent: number): number {
    const i = lowerBound(this.parents, parent);
    return i < this.parents.length && this.parents[i] === parent ? i : -1;
  }

  listAt(i: number): Uint32Array {
    return this.rows.subarray(this.offsets[i], this.offsets[i + 1]);
  }

  get byteLength(): number {
    return this.parents.byteLength + this.offsets.byteLength + this.rows.byteLength;
  }
}

/** One layer of `older` and `newer` (a listing in both keeps newer's list), in steps (FLATTEN_STEP, FLATTEN_COPY_STEP). */
function* mergeLayerSteps(older: ListLayer, newer: ListLayer): Steps<ListLayer> {
  const a = older.parents;
  const b = newer.parents;
  // where each listing of the merged layer comes from: newer (1) or older (0), at which index
  const fromNewer = new Uint8Array(a.length + b.length);
  const at = new Int32Array(a.length + b.length);
  let n = 0;
  let rows = 0;
  for (let i = 0, j = 0; i < a.length || j < b.length; n++) {
    if (j < b.length && (i === a.length || b[j] <= a[i])) {
      if (i < a.length && a[i] === b[j]) i++;
      fromNewer[n] = 1;
      at[n] = j;
      rows += newer.offsets[j + 1] - newer.offsets[j++];
    } else {
      at[n] = i;
      rows += older.offsets[i + 1] - older.offsets[i++];
    }
    if ((n & (FLATTEN_STEP - 1)) === FLATTEN_STEP - 1) yield;
  }
  const out = new ListLayer(new Int32Array(n), new Uint32Array(n + 1), new Uint32Array(rows));
  for (let k = 0; k < n; k++) {
    const from = fromNewer[k] === 1 ? newer : older;
    out.parents[k] = from.parents[at[k]];
    let o = out.offsets[k];
    for (let r = from.offsets[at[k]], e = from.offsets[at[k] + 1]; r < e; r++) out.rows[o++] = from.rows[r];
    out.offsets[k + 1] = o;
    if ((k & (FLATTEN_COPY_STEP - 1)) === FLATTEN_COPY_STEP - 1) yield;
  }
  return out;
}

/**
 * One generation's children of a child resource: the loaded grouping (over the listings loaded
 * with it) plus the lists of the listings whose children changed since, each already in the
 * default order and holding live children only (DESIGN.md, "Change"). A listing in neither has no
 * children. Immutable. A change makes a new overlay holding only the lists it changed, on top of
 * the previous one (so a change costs its own listings, not every listing changed before it);
 * every MAX_LAYERS layers, the lists are merged into one layer. Dead listings may keep stale lists
 * in lower layers: nothing asks for a dead listing's children.
 */
export class ChildOverlay implements Children {
  readonly depth: number;

  constructor(
    readonly base: ChildIndex,
    /** The lists of the listings whose children changed (or that replaced a version) in this layer. */
    readonly changed: ListLayer,
    /** The overlay this one was made on, or null. */
    readonly below: ChildOverlay | null = null,
  ) {
    this.depth = below === null ? 1 : below.depth + 1;
  }

  /** An overlay of `changed` on top of `below` (flattened when the stack is deep). */
  static over(below: Children, changed: ReadonlyMap<number, Uint32Array>): ChildOverlay {
    return runNow(ChildOverlay.overSteps(below, changed));
  }

  /**
   * `over` in steps: a check point every FLATTEN_STEP listings a flattening merges (the flattened
   * layer holds every listing whose children changed since the load: thousands after a while).
   */
  static *overSteps(below: Children, changed: ReadonlyMap<number, Uint32Array>): Steps<ChildOverlay> {
    const layer = ListLayer.of(changed);
    if (below instanceof ChildIndex) return new ChildOverlay(below, layer);
    const overlay = below as ChildOverlay;
    if (overlay.depth < MAX_LAYERS) return new ChildOverlay(overlay.base, layer, overlay);
    // newest first, so that the small layers merge into each other before the large bottom one
    let all = layer;
    for (let l: ChildOverlay | null = overlay; l !== null; l = l.below) all = yield* mergeLayerSteps(l.changed, all);
    return new ChildOverlay(overlay.base, all);
  }

  childrenOf(parentRow: number): Uint32Array {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- walks the overlay's layers, this one first
    for (let layer: ChildOverlay | null = this; layer !== null; layer = layer.below) {
      const i = layer.changed.find(parentRow);
      if (i >= 0) return layer.changed.listAt(i);
    }
    return parentRow + 1 < this.base.offsets.length ? this.base.childrenOf(parentRow) : NO_ROWS;
  }

  count(parentRow: number): number {
    return this.childrenOf(parentRow).length;
  }

  /** The same grouping as one CSR index over `parentCount` listings (snapshots). */
  toIndex(parentCount: number): ChildIndex {
    if (this.changed.parents.length === 0 && this.below === null && this.base.offsets.length === parentCount + 1) return this.base;
    const offsets = new Uint32Array(parentCount + 1);
    for (let p = 0; p < parentCount; p++) offsets[p + 1] = offsets[p] + this.count(p);
    const rows = new Uint32Array(offsets[parentCount]);
    for (let p = 0; p < parentCount; p++) rows.set(this.childrenOf(p), offsets[p]);
    return new ChildIndex(offsets, rows);
  }

  get byteLength(): number {
    let n = this.base.byteLength;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- walks the overlay's layers, this one first
    for (let layer: ChildOverlay | null = this; layer !== null; layer = layer.below) n += layer.changed.byteLength;
    return n;
  }
}
