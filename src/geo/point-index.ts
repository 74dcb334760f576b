/**
 * A static KD-tree (kdbush) over one point column for `geo.distance(point, POINT) le METERS`.
 *
 * A query walks the tree over the circle's bounding box (split at the antimeridian, all
 * longitudes near a pole) and tests each point where it lies in the tree's own coordinate array,
 * so the walk reads memory in order: the haversine's `h` with the cosine of each point's latitude
 * precomputed per tree position, compared with the radius's `h`; only points within a hair of
 * the circle's edge compute the full distance, so the answer is exactly the contract's
 * 2R·asin(√h) ≤ METERS. Then the rest of the filter (pushed in, never a post-filter of a truncated
 * list). geokdbush's `around` answers "nearest first" through a priority queue with an object per
 * point, which a radius filter does not need (DESIGN.md, "Geo", has the measurements).
 */
import KDBush from 'kdbush';
import { haversineMeters, EARTH_RADIUS_M } from './distance.js';

const RAD = Math.PI / 180;
const DEG = 180 / Math.PI;
/** Relative band around the circle's edge in which the exact distance decides. */
const EDGE = 1e-9;

/** cos(latitude) as the exact test reads it (`PointIndex` keeps it per tree position). */
export function cosLat(lat: number): number {
  return Math.cos(lat * RAD);
}

/**
 * The circle of one `geo.distance(point, POINT(lon lat)) le METERS` query: its bounding boxes and
 * the exact point test, shared by every index over points (`PointIndex`, `PointView`) so that
 * they all answer alike to the bit.
 */
export class Circle {
  private readonly cosQ: number;
  /** Points with a haversine `h` above this are out; below `hEdge` in; between, the exact distance decides. */
  private readonly hOut: number;
  private readonly hEdge: number;

  private constructor(
    readonly lon: number,
    readonly lat: number,
    readonly meters: number,
  ) {
    this.cosQ = cosLat(lat);
    const half = Math.min(Math.PI, meters / EARTH_RADIUS_M) / 2;
    const hLimit = half >= Math.PI / 2 ? 1 : Math.sin(half) ** 2;
    this.hOut = hLimit * (1 + EDGE);
    this.hEdge = hLimit * (1 - EDGE);
  }

  /** The circle, or undefined when `meters` is negative or NaN (no point is that close). */
  static around(lon: number, lat: number, meters: number): Circle | undefined {
    return meters >= 0 ? new Circle(lon, lat, meters) : undefined;
  }

  /**
   * Calls `box` with boxes that together hold every point of the circle, each longitude once:
   * latitude ± the angular radius; longitude ± asin(sin r / cos lat) (the widest span, at the
   * latitude nearest a pole), split in two at the antimeridian; every longitude when the circle
   * reaches a pole.
   */
  boxes(box: (minX: number, minY: number, maxX: number, maxY: number) => void): void {
    const { lon, lat } = this;
    // Angular radius, with a hair of slack so rounding never drops a point the haversine keeps.
    const angle = Math.min(Math.PI, this.meters / EARTH_RADIUS_M) * (1 + 1e-9) + 1e-12;
    const dLat = angle * DEG;
    const minLat = lat - dLat;
    const maxLat = lat + dLat;
    if (minLat <= -90 || maxLat >= 90 || angle >= Math.PI / 2) {
      box(-180, Math.max(-90, minLat), 180, Math.min(90, maxLat));
      return;
    }
    const dLon = Math.asin(Math.min(1, Math.sin(angle) / Math.cos(lat * RAD))) * DEG;
    const west = lon - dLon;
    const east = lon + dLon;
    if (dLon >= 180) box(-180, minLat, 180, maxLat);
    else {
      box(Math.max(-180, west), minLat, Math.min(180, east), maxLat);
      if (west < -180) box(west + 360, minLat, 180, maxLat);
      if (east > 180) box(-180, minLat, east - 360, maxLat);
    }
  }

  /**
   * Whether the point (x, y), with `cosY` = `cosLat(y)`, is within the radius: the haversine's
   * h = sin²(Δφ/2) + cos φ₁ cos φ₂ sin²(Δλ/2) against the radius's sin²(r/2), and within a hair
   * of the edge the contract's 2R·asin(√h) ≤ METERS itself. (The point must lie in one of the
   * boxes: the caller tests that.)
   */
  holds(x: number, y: number, cosY: number): boolean {
    const s1 = Math.sin(((y - this.lat) * RAD) / 2);
    const s2 = Math.sin(((x - this.lon) * RAD) / 2);
    const h = s1 * s1 + this.cosQ * cosY * s2 * s2;
    if (h > this.hOut) return false;
    return !(h >= this.hEdge && haversineMeters(this.lon, this.lat, x, y) > this.meters);
  }
}

/** A built index's own arrays (snapshots store them; `PointIndex.fromState` adopts them as they are). */
export interface PointIndexState {
  /** kdbush's buffer (header, ids, coordinates): `KDBush.from` reads it back. */
  readonly tree: ArrayBuffer;
  readonly rowOf: Uint32Array;
  readonly cosAt: Float64Array;
}

export class PointIndex {
  private readonly tree: KDBush;
  /** KD-tree item -> row id (only rows with a point are in the tree). */
  private readonly rowOf: Uint32Array;
  /** cos(latitude) per tree position (the order of tree.coords). */
  private readonly cosAt: Float64Array;
  private readonly stack: number[] = [];

  /**
   * `lon`/`lat` per row; rows where `has(row)` is false have no point and are left out. Given a
   * state instead (`fromState`), the index adopts it without building anything.
   */
  constructor(
    readonly lon: Float64Array,
    readonly lat: Float64Array,
    has: ((row: number) => boolean) | PointIndexState,
  ) {
    if (typeof has !== 'function') {
      this.tree = KDBush.from(has.tree);
      this.rowOf = has.rowOf;
      this.cosAt = has.cosAt;
      return;
    }
    const rows: number[] = [];
    for (let row = 0; row < lon.length; row++) if (has(row)) rows.push(row);
    this.rowOf = Uint32Array.from(rows);
    this.tree = new KDBush(Math.max(1, rows.length));
    for (const row of rows) this.tree.add(lon[row], lat[row]);
    if (rows.length === 0) this.tree.add(0, 0); // kdbush needs one item; rowOf keeps it unreachable
    this.tree.finish();
    const { coords } = this.tree;
    this.cosAt = new Float64Array(this.tree.ids.length);
    for (let i = 0; i < this.cosAt.length; i++) this.cosAt[i] = cosLat(coords[2 * i + 1]);
  }

  /**
   * The index over `lon`/`lat` from the `state` of one built over the same coordinates, adopted
   * as it is (nothing rebuilt). Throws an Error saying what does not fit when the arrays could
   * not come from such an index (sizes, ids or rows out of range), so that a bad state fails here
   * and never in a query.
   */
  static fromState(lon: Float64Array, lat: Float64Array, state: PointIndexState): PointIndex {
    const index = new PointIndex(lon, lat, state);
    const { ids, coords, numItems } = index.tree;
    const { rowOf, cosAt } = state;
    if (lon.length !== lat.length) throw new Error(`${lon.length} longitudes but ${lat.length} latitudes`);
    if (!(coords instanceof Float64Array)) throw new Error('the tree does not hold Float64 coordinates');
    if (numItems !== Math.max(1, rowOf.length)) throw new Error(`the tree holds ${numItems} points for ${rowOf.length} rows`);
    if (cosAt.length !== numItems) throw new Error(`${cosAt.length} cosines for ${numItems} points`);
    for (let i = 0; i < ids.length; i++) if (ids[i] >= numItems) throw new Error(`tree id ${ids[i]} out of range`);
    for (let i = 0; i < rowOf.length; i++) if (rowOf[i] >= lon.length) throw new Error(`row ${rowOf[i]} out of range`);
    return index;
  }

  /** The arrays that make up the index (no copies). */
  get state(): PointIndexState {
    return { tree: this.tree.data as ArrayBuffer, rowOf: this.rowOf, cosAt: this.cosAt };
  }

  get size(): number {
    return this.rowOf.length;
  }

  /** Rows within `meters` of (lon, lat) that `accept` allows, ascending. */
  within(lon: number, lat: number, meters: number, accept?: (row: number) => boolean): Uint32Array {
    const circle = Circle.around(lon, lat, meters);
    if (this.rowOf.length === 0 || !circle) return new Uint32Array(0);
    const out: number[] = [];
    circle.boxes((x0, y0, x1, y1) => this.walk(x0, y0, x1, y1, circle, accept, out));
    return Uint32Array.from(out).sort();
  }

  /** kdbush's range walk over its sorted arrays, testing each point in place. */
  private walk(minX: number, minY: number, maxX: number, maxY: number, circle: Circle, accept: ((row: number) => boolean) | undefined, out: number[]): void {
    const { ids, coords, nodeSize } = this.tree;
    const { rowOf, cosAt, stack } = this;
    const test = (i: number): void => {
      const x = coords[2 * i];
      const y = coords[2 * i + 1];
      if (x < minX || x > maxX || y < minY || y > maxY || !circle.holds(x, y, cosAt[i])) return;
      const row = rowOf[ids[i]];
      if (!accept || accept(row)) out.push(row);
    };
    stack.length = 0;
    stack.push(0, ids.length - 1, 0);
    while (stack.length > 0) {
      const axis = stack.pop()!;
      const right = stack.pop()!;
      const left = stack.pop()!;
      if (right - left <= nodeSize) {
        for (let i = left; i <= right; i++) test(i);
        continue;
      }
      const m = (left + right) >> 1;
      test(m);
      const x = coords[2 * m];
      const y = coords[2 * m + 1];
      if (axis === 0 ? minX <= x : minY <= y) stack.push(left, m - 1, 1 - axis);
      if (axis === 0 ? maxX >= x : maxY >= y) stack.push(m + 1, right, 1 - axis);
    }
  }
}
