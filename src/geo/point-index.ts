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
import { runNow, type Steps } from '../util/steps.js';
import { Uint32List } from '../util/uint32-list.js';

/** Rows gathered between two check points of `pointInputSteps`. */
const GATHER_STEP_ROWS = 65_536;

const RAD = Math.PI / 180;
const DEG = 180 / Math.PI;
/** Relative band around the circle's edge in which the exact distance decides. */
const EDGE = 1e-9;

/**
 * Half-angles (radians) up to which `Circle.holds` reads sin from its series (about 570 km of
 * latitude or longitude difference), and the relative band around the radius's `h` inside which
 * the series does not decide: far wider than the series' error, so a point it decides is decided
 * as `Math.sin` would decide it.
 */
const SERIES_MAX = 0.045;
const SERIES_BAND = 1e-8;

/** sin a by its series to a⁵, for |a| < SERIES_MAX (the rest is under a⁷/5040: a relative 3e-12). */
function sinSeries(a: number): number {
  const q = a * a;
  return a * (1 - (q / 6) * (1 - q / 20));
}

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
  /** Points whose series `h` is above this are out, below `hSeriesIn` in (see `holds`). */
  private readonly hSeriesOut: number;
  private readonly hSeriesIn: number;
  /** A rectangle whose corners' `h` are below this lies inside (see `covers`). */
  private readonly hCovered: number;

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
    this.hSeriesOut = hLimit * (1 + SERIES_BAND);
    this.hSeriesIn = hLimit * (1 - SERIES_BAND);
    this.hCovered = hLimit * (1 - 10 * SERIES_BAND);
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
   * Whether every point of the rectangle [x0, x1] × [y0, y1] is within the radius, with a margin
   * that makes `holds` true for each of them. Within SERIES_MAX of the centre, h grows with the
   * longitude difference and is convex in the latitude (its second derivative ½cos Δφ − cos φ₀
   * sin²(Δλ/2) cos φ stays above 0.49), so its largest value on the rectangle is at a corner.
   */
  covers(x0: number, y0: number, x1: number, y1: number): boolean {
    const c0 = cosLat(y0);
    const c1 = cosLat(y1);
    return this.cornerIn(x0, y0, c0) && this.cornerIn(x1, y0, c0) && this.cornerIn(x0, y1, c1) && this.cornerIn(x1, y1, c1);
  }

  /** Whether a corner's `h` (by the series, as in `holds`) is below `hCovered`. */
  private cornerIn(x: number, y: number, cosY: number): boolean {
    const a1 = ((y - this.lat) * RAD) / 2;
    const a2 = ((x - this.lon) * RAD) / 2;
    if (!(a1 < SERIES_MAX && a1 > -SERIES_MAX && a2 < SERIES_MAX && a2 > -SERIES_MAX)) return false;
    const t1 = sinSeries(a1);
    const t2 = sinSeries(a2);
    return t1 * t1 + this.cosQ * cosY * t2 * t2 < this.hCovered;
  }

  /**
   * Whether the point (x, y), with `cosY` = `cosLat(y)`, is within the radius: the haversine's
   * h = sin²(Δφ/2) + cos φ₁ cos φ₂ sin²(Δλ/2) against the radius's sin²(r/2), and within a hair
   * of the edge the contract's 2R·asin(√h) ≤ METERS itself. (The point must lie in one of the
   * boxes: the caller tests that.)
   */
  holds(x: number, y: number, cosY: number): boolean {
    const a1 = ((y - this.lat) * RAD) / 2;
    const a2 = ((x - this.lon) * RAD) / 2;
    if (a1 < SERIES_MAX && a1 > -SERIES_MAX && a2 < SERIES_MAX && a2 > -SERIES_MAX) {
      // sin a by its series to a⁵ (the rest is under a⁷/5040, a relative 3e-12 here): two
      // multiplications instead of two Math.sin for nearly every point of a small circle. Only
      // a point whose h falls within SERIES_BAND of the limit goes on to the test below, so the
      // answer is the same to the bit.
      const t1 = sinSeries(a1);
      const t2 = sinSeries(a2);
      const h = t1 * t1 + this.cosQ * cosY * t2 * t2;
      if (h > this.hSeriesOut) return false;
      if (h < this.hSeriesIn) return true;
    }
    const s1 = Math.sin(a1);
    const s2 = Math.sin(a2);
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

/** What a tree is built over: the rows that have a point, and their coordinates (lon, lat interleaved). */
export interface PointInput {
  readonly rowOf: Uint32Array;
  readonly coords: Float64Array;
}

/** A tree built over a PointInput's coordinates: kdbush's buffer and cos(latitude) per tree position. */
interface BuiltTree {
  readonly tree: ArrayBuffer;
  readonly cosAt: Float64Array;
}

/** The rows among [0, lon.length) where `has(row)`, and their coordinates, in steps of GATHER_STEP_ROWS rows. */
export function* pointInputSteps(lon: Float64Array, lat: Float64Array, has: (row: number) => boolean): Steps<PointInput> {
  let n = 0;
  for (let row = 0; row < lon.length; row++) {
    if (has(row)) n++;
    if (row % GATHER_STEP_ROWS === GATHER_STEP_ROWS - 1) yield;
  }
  const rowOf = new Uint32Array(n);
  const coords = new Float64Array(2 * n);
  for (let row = 0, i = 0; row < lon.length; row++) {
    if (has(row)) {
      rowOf[i] = row;
      coords[2 * i] = lon[row];
      coords[2 * i + 1] = lat[row];
      i++;
    }
    if (row % GATHER_STEP_ROWS === GATHER_STEP_ROWS - 1) yield;
  }
  return { rowOf, coords };
}

/** kdbush's tree over the points (lon, lat interleaved), item i the i-th point, and the cosines of their latitudes in tree order. */
function buildTree(coords: Float64Array): BuiltTree {
  const n = coords.length >>> 1;
  const tree = new KDBush(Math.max(1, n));
  for (let i = 0; i < n; i++) tree.add(coords[2 * i], coords[2 * i + 1]);
  if (n === 0) tree.add(0, 0); // kdbush needs one item; rowOf keeps it unreachable
  tree.finish();
  const cosAt = new Float64Array(tree.ids.length);
  for (let i = 0; i < cosAt.length; i++) cosAt[i] = cosLat(tree.coords[2 * i + 1]);
  return { tree: tree.data as ArrayBuffer, cosAt };
}

export class PointIndex {
  private readonly tree: KDBush;
  /** KD-tree item -> row id (only rows with a point are in the tree). */
  private readonly rowOf: Uint32Array;
  /** cos(latitude) per tree position (the order of tree.coords). */
  private readonly cosAt: Float64Array;
  /** The rows buffer walks write into, reused by every query (null while a walk holds it). */
  private scratch: Uint32List | null = null;

  /**
   * `lon`/`lat` per row; rows where `has(row)` is false have no point and are left out. Given a
   * state instead (`fromState`, or a tree built elsewhere: `PointIndex.stateOf`), the index adopts
   * it without building anything.
   */
  constructor(
    readonly lon: Float64Array,
    readonly lat: Float64Array,
    has: ((row: number) => boolean) | PointIndexState,
  ) {
    const state = typeof has === 'function' ? PointIndex.stateOf(runNow(pointInputSteps(lon, lat, has))) : has;
    this.tree = KDBush.from(state.tree);
    this.rowOf = state.rowOf;
    this.cosAt = state.cosAt;
  }

  /** The state of an index over `input`, its tree built now. */
  static stateOf(input: PointInput): PointIndexState {
    const built = buildTree(input.coords);
    return { tree: built.tree, rowOf: input.rowOf, cosAt: built.cosAt };
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
    const { ids } = this.tree;
    const { rowOf } = this;
    // `accept` may query this index again (a second circle in the filter): that walk gets its own buffer
    const found = this.scratch ?? new Uint32List(1024);
    this.scratch = null;
    found.length = 0;
    const add = (row: number): void => {
      if (!accept || accept(row)) found.push(row);
    };
    try {
      this.visit(
        circle,
        (left, right) => {
          for (let i = left; i <= right; i++) add(rowOf[ids[i]]);
        },
        (i) => add(rowOf[ids[i]]),
      );
      return ascendingRows(found.array, found.length);
    } finally {
      this.scratch = found;
    }
  }

  /**
   * The points within `meters` of (lon, lat), counted without collecting them: subtrees inside
   * the circle are counted whole, so only the points of the subtrees along its edge are tested
   * (about the square root of the points in it). What the planner weighs a circle by.
   */
  count(lon: number, lat: number, meters: number): number {
    const circle = Circle.around(lon, lat, meters);
    if (this.rowOf.length === 0 || !circle) return 0;
    let n = 0;
    this.visit(
      circle,
      (left, right) => (n += right - left + 1),
      () => n++,
    );
    return n;
  }

  /**
   * kdbush's range walk over its sorted arrays, box by box of the circle, with each subtree's region (known from
   * the splits above it) carried down: a subtree inside the box and the circle goes to `whole`
   * (tree positions left..right) untested; of the other points the walk reaches, those in the box
   * and the circle go to `hit` (by tree position).
   */
  private visit(circle: Circle, whole: (left: number, right: number) => void, hit: (i: number) => void): void {
    circle.boxes((minX, minY, maxX, maxY) => this.visitBox(minX, minY, maxX, maxY, circle, whole, hit));
  }

  private visitBox(
    minX: number,
    minY: number,
    maxX: number,
    maxY: number,
    circle: Circle,
    whole: (left: number, right: number) => void,
    hit: (i: number) => void,
  ): void {
    const { ids, coords, nodeSize } = this.tree;
    const { cosAt } = this;
    const one = (i: number): void => {
      const x = coords[2 * i];
      const y = coords[2 * i + 1];
      if (x >= minX && x <= maxX && y >= minY && y <= maxY && circle.holds(x, y, cosAt[i])) hit(i);
    };
    // per subtree: left, right, axis, then its region x0, y0, x1, y1
    const stack: number[] = [0, ids.length - 1, 0, -Infinity, -Infinity, Infinity, Infinity];
    while (stack.length > 0) {
      const ry1 = stack.pop()!;
      const rx1 = stack.pop()!;
      const ry0 = stack.pop()!;
      const rx0 = stack.pop()!;
      const axis = stack.pop()!;
      const right = stack.pop()!;
      const left = stack.pop()!;
      if (left > right) continue;
      if (rx0 >= minX && rx1 <= maxX && ry0 >= minY && ry1 <= maxY && circle.covers(rx0, ry0, rx1, ry1)) {
        whole(left, right);
        continue;
      }
      if (right - left <= nodeSize) {
        for (let i = left; i <= right; i++) one(i);
        continue;
      }
      const m = (left + right) >> 1;
      one(m);
      const x = coords[2 * m];
      const y = coords[2 * m + 1];
      if (axis === 0) {
        if (minX <= x) stack.push(left, m - 1, 1, rx0, ry0, x, ry1);
        if (maxX >= x) stack.push(m + 1, right, 1, x, ry0, rx1, ry1);
      } else {
        if (minY <= y) stack.push(left, m - 1, 0, rx0, ry0, rx1, y);
        if (maxY >= y) stack.push(m + 1, right, 0, rx0, y, rx1, ry1);
      }
    }
  }
}

/**
 * The first `n` rows of `rows` (distinct, in tree order), ascending, as a new array: through a
 * bitset over their span when they are dense in it (no comparison sort: the 39k rows of a 5 km
 * circle at 1M listings take a tenth of a typed-array sort), else a typed-array sort.
 */
export function ascendingRows(rows: Uint32Array, n: number): Uint32Array {
  if (n < 256) return rows.slice(0, n).sort();
  let min = rows[0];
  let max = rows[0];
  for (let i = 1; i < n; i++) {
    const r = rows[i];
    if (r < min) min = r;
    else if (r > max) max = r;
  }
  const words = ((max - min) >>> 5) + 1;
  if (words > n * 4) return rows.slice(0, n).sort();
  const bits = new Uint32Array(words);
  for (let i = 0; i < n; i++) {
    const d = rows[i] - min;
    bits[d >>> 5] |= 1 << (d & 31);
  }
  const out = new Uint32Array(n);
  let k = 0;
  for (let w = 0; w < words; w++) {
    let word = bits[w];
    while (word !== 0) {
      out[k++] = min + ((w << 5) | (31 - Math.clz32(word & -word)));
      word &= word - 1;
    }
  }
  return out;
}
