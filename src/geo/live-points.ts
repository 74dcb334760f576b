/**
 * One generation's view of a point column whose rows are appended (DESIGN.md, "Change"): the
 * base rows through the static `PointIndex` (a kdbush tree, never rebuilt for a change) and the
 * appended rows through an rbush tree shared by every view of the line of generations. A view
 * ignores the tree's items at or past its row count, so an older view answers exactly as it did
 * when it was made, however many newer views have added to the tree since.
 *
 * Both trees answer through the same `Circle` (its bounding boxes and its exact point test), so a
 * point counts the same whether it is a base row or an appended one.
 */
import RBush from 'rbush';
import { Circle, cosLat, type PointIndex } from './point-index.js';
import { runNow, type Steps } from '../util/steps.js';

/** Points inserted into the appended tree between two check points of `nextSteps` (an insert is 5-10 µs between queries' work). */
const INSERT_CHECK_POINTS = 4;

/** What one change appends to a point column. */
export interface PointChange {
  /** Rows appended by this change: [from, to); from = the previous view's rowCount. */
  readonly from: number;
  readonly to: number;
  /** Coordinates per row of the new generation (views covering at least [0, to)); rows with has(row) false have no point. */
  readonly lon: Float64Array;
  readonly lat: Float64Array;
  readonly has: (row: number) => boolean;
}

/** An appended point as the rbush tree holds it. */
interface Item {
  readonly minX: number;
  readonly minY: number;
  readonly maxX: number;
  readonly maxY: number;
  readonly row: number;
}

type RTree = RBush<Item>;

/** The appended points of a line of generations: one tree, its items in row order. */
class Appended {
  /** The row count of the newest view over this tree (the only view it may be extended from in place). */
  rows: number;
  constructor(
    readonly tree: RTree,
    readonly items: Item[],
    rows: number,
  ) {
    this.rows = rows;
  }

  /** A tree bulk-loaded with `items` (rbush's `load` into an empty tree: its best-built tree). */
  static load(items: Item[], rows: number): Appended {
    const tree = new RBush<Item>();
    tree.load(items);
    return new Appended(tree, items, rows);
  }
}

export class PointView {
  private constructor(
    private readonly base: PointIndex,
    /** Base rows at or past this are not in the line (the base was built over a longer array). */
    private readonly baseRows: number,
    private readonly tail: Appended,
    readonly rowCount: number,
    /** Appended points held (items[0, appended) of the tail, those below rowCount). */
    readonly appended: number,
  ) {}

  /** Generation 0: the rows [0, rowCount) of `base`, no appended points. */
  static of(base: PointIndex, rowCount: number): PointView {
    if (!Number.isInteger(rowCount) || rowCount < 0 || rowCount > base.lon.length) {
      throw new RangeError(`row count ${rowCount} outside the base index's 0..${base.lon.length} rows`);
    }
    return new PointView(base, rowCount, Appended.load([], rowCount), rowCount, 0);
  }

  /**
   * The view of the generation `change` makes; this view answers exactly as before. Costs
   * O(k log(k)) for the k points the change appends: a change that at least doubles the
   * appended points bulk-loads them all into a new tree (k ≥ the points held, so still O(k log k);
   * rbush's `load` into a non-empty tree would graft a separate tree in, which its README warns
   * makes queries slower for scattered points), a smaller one inserts its points one by one. A
   * second change made from the same view (a batch abandoned and retried) cannot extend the tree
   * a newer view already extended, so it starts a new tree holding this view's appended points.
   */
  next(change: PointChange): PointView {
    return runNow(this.nextSteps(change));
  }

  /** `next` as steps: a check point every INSERT_CHECK_POINTS points inserted one by one. */
  *nextSteps(change: PointChange): Steps<PointView> {
    const { from, to, lon, lat, has } = change;
    if (from !== this.rowCount) throw new RangeError(`a change from row ${from} to a view of ${this.rowCount} rows`);
    if (!Number.isInteger(to) || to < from) throw new RangeError(`a change of rows [${from}, ${to})`);
    if (lon.length < to || lat.length < to) throw new RangeError(`coordinates for ${Math.min(lon.length, lat.length)} rows, a change up to row ${to}`);
    const added: Item[] = [];
    for (let row = from; row < to; row++) {
      if (!has(row)) continue;
      const x = lon[row];
      const y = lat[row];
      added.push({ minX: x, minY: y, maxX: x, maxY: y, row });
    }
    yield;
    let tail = this.tail;
    if (tail.rows !== this.rowCount || added.length >= this.appended) {
      tail = Appended.load(tail.items.slice(0, this.appended).concat(added), to);
    } else {
      for (let i = 0; i < added.length; i++) {
        // an older view ignores items at or past its row count, so one reading meanwhile is unmoved
        tail.tree.insert(added[i]);
        tail.items.push(added[i]);
        if (i % INSERT_CHECK_POINTS === INSERT_CHECK_POINTS - 1) yield;
      }
      tail.rows = to;
    }
    return new PointView(this.base, this.baseRows, tail, to, this.appended + added.length);
  }

  /**
   * An upper bound of the rows within `meters` of (lon, lat): the base tree's points in the
   * circle's bounding boxes (`PointIndex.count`) and the appended points in them. Dead rows are
   * counted too (the planner weighs paths by it; the caller filters them).
   */
  count(lon: number, lat: number, meters: number): number {
    let n = this.base.count(lon, lat, meters);
    const circle = Circle.around(lon, lat, meters);
    if (this.appended === 0 || !circle) return n;
    circle.boxes((minX, minY, maxX, maxY) => {
      for (const { row } of this.tail.tree.search({ minX, minY, maxX, maxY })) if (row < this.rowCount) n++;
    });
    return n;
  }

  /**
   * Rows within `meters` of (lon, lat) that `accept` allows, ascending, all below rowCount: the
   * base rows (ascending from the KD-tree) and then the appended rows found, sorted (every
   * appended row is past every base row). Dead rows are the caller's business (its `accept`
   * filters them).
   */
  within(lon: number, lat: number, meters: number, accept?: (row: number) => boolean): Uint32Array {
    const { baseRows, rowCount, tail } = this;
    const cut = baseRows < this.base.lon.length;
    const base = this.base.within(lon, lat, meters, cut ? (row) => row < baseRows && (!accept || accept(row)) : accept);
    const circle = Circle.around(lon, lat, meters);
    if (this.appended === 0 || !circle) return base;
    const found: number[] = [];
    circle.boxes((minX, minY, maxX, maxY) => {
      for (const { minX: x, minY: y, row } of tail.tree.search({ minX, minY, maxX, maxY })) {
        if (row < rowCount && circle.holds(x, y, cosLat(y)) && (!accept || accept(row))) found.push(row);
      }
    });
    if (found.length === 0) return base;
    const out = new Uint32Array(base.length + found.length);
    out.set(base);
    out.set(Uint32Array.from(found).sort(), base.length);
    return out;
  }
}
