import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EARTH_RADIUS_M, haversineMeters } from '../../src/geo/distance.js';
import { PointView, type PointChange } from '../../src/geo/live-points.js';
import { PointIndex } from '../../src/geo/point-index.js';

/** A row's point as [lon, lat], or null for a row without one. */
type Pt = readonly [number, number] | null;

/** An append-only point column: rows are written once, arrays grow by doubling (older changes keep the old arrays). */
class Column {
  lon = new Float64Array(8);
  lat = new Float64Array(8);
  present = new Uint8Array(8);
  rows = 0;

  constructor(points: readonly Pt[] = []) {
    this.write(points);
  }

  /** A column holding this one's first `rows` rows (for a second line of generations). */
  prefix(rows: number): Column {
    const copy = new Column();
    copy.lon = this.lon.slice();
    copy.lat = this.lat.slice();
    copy.present = this.present.slice();
    copy.rows = rows;
    return copy;
  }

  has(): (row: number) => boolean {
    const present = this.present;
    return (row) => present[row] === 1;
  }

  /** The change that appends `points`, with exact-length views of the new generation's coordinates. */
  append(points: readonly Pt[]): PointChange {
    const from = this.rows;
    this.write(points);
    return { from, to: this.rows, lon: this.lon.subarray(0, this.rows), lat: this.lat.subarray(0, this.rows), has: this.has() };
  }

  private write(points: readonly Pt[]): void {
    let cap = this.lon.length;
    while (cap < this.rows + points.length) cap *= 2;
    if (cap > this.lon.length) {
      const grow = <T extends Float64Array | Uint8Array>(a: T, b: T): T => (b.set(a), b);
      this.lon = grow(this.lon, new Float64Array(cap));
      this.lat = grow(this.lat, new Float64Array(cap));
      this.present = grow(this.present, new Uint8Array(cap));
    }
    for (const p of points) {
      if (p) [this.lon[this.rows], this.lat[this.rows], this.present[this.rows]] = [p[0], p[1], 1];
      this.rows++;
    }
  }

  index(): PointIndex {
    return new PointIndex(this.lon.subarray(0, this.rows), this.lat.subarray(0, this.rows), this.has());
  }
}

/** Brute force over every row below `rowCount` with a point: the contract's distance, 2R·asin(√h) ≤ METERS. */
function brute(col: Column, rowCount: number, lon: number, lat: number, meters: number, accept?: (row: number) => boolean): number[] {
  const out: number[] = [];
  for (let row = 0; row < rowCount; row++) {
    if (col.present[row] && haversineMeters(lon, lat, col.lon[row], col.lat[row]) <= meters && (!accept || accept(row))) out.push(row);
  }
  return out;
}

const between = (min: number, max: number): fc.Arbitrary<number> => fc.double({ min, max, noNaN: true });
/** Places: a metro, both sides of the antimeridian, both polar caps (up to the pole itself), anywhere. */
const place: fc.Arbitrary<readonly [number, number]> = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(between(-122.63, -122.03), between(47.3, 47.9)) },
  { weight: 2, arbitrary: fc.tuple(fc.oneof(between(179.7, 180), between(-180, -179.7)), between(-16.3, -15.7)) },
  { weight: 1, arbitrary: fc.tuple(between(-180, 180), between(89, 90)) },
  { weight: 1, arbitrary: fc.tuple(between(-180, 180), between(-90, -89)) },
  { weight: 1, arbitrary: fc.tuple(between(-180, 180), between(-90, 90)) },
);
const point: fc.Arbitrary<Pt> = fc.oneof({ weight: 9, arbitrary: place }, { weight: 1, arbitrary: fc.constant(null) });
/** One change: a single row (or none), or a bulk batch. */
const change = fc.oneof(fc.array(point, { maxLength: 2 }), fc.array(point, { minLength: 20, maxLength: 200 }));

const ACCEPTS: ReadonlyArray<((row: number) => boolean) | undefined> = [
  undefined,
  (row) => row % 3 === 0,
  (row) => Math.imul(row, 2654435761) >>> 29 !== 0, // a scattered set of dead rows
  () => false,
];
interface Query {
  /** Centre: a place, or the point of a row (picked among the target view's rows). */
  readonly centre: readonly [number, number] | { readonly row: number };
  /** Radius: meters, or the distance to a row's point times a factor (the radius's edge). */
  readonly radius: number | { readonly row: number; readonly factor: number };
  readonly accept: number;
  /** Which view of the line asks (mod the number of views). */
  readonly view: number;
}
const query: fc.Arbitrary<Query> = fc.record({
  centre: fc.oneof(place, fc.record({ row: fc.nat() })),
  radius: fc.oneof(
    fc.constantFrom(0, 1, 250, 5_000, 60_000, 1_000_000, 1e7, Math.PI * EARTH_RADIUS_M, 2.5e7, Infinity),
    between(0, 3e6),
    fc.record({ row: fc.nat(), factor: fc.constantFrom(1, 1 - 1e-12, 1 + 1e-12, 1 - 1e-15, 1 + 1e-15) }),
  ),
  accept: fc.nat(ACCEPTS.length - 1),
  view: fc.nat(),
});

/** The `n`-th row with a point below `rowCount` (cyclically), or undefined when there is none. */
function pointRow(col: Column, rowCount: number, n: number): number | undefined {
  for (let k = 0; k < rowCount; k++) {
    const row = (n + k) % rowCount;
    if (col.present[row]) return row;
  }
  return undefined;
}

/** The query's centre, radius and filter in a view of `rowCount` rows of `col`. */
function resolve(col: Column, rowCount: number, q: Query): [number, number, number, ((row: number) => boolean) | undefined] {
  let [lon, lat] = 'row' in q.centre ? [0, 0] : q.centre;
  if ('row' in q.centre) {
    const row = pointRow(col, rowCount, q.centre.row);
    if (row !== undefined) [lon, lat] = [col.lon[row], col.lat[row]];
  }
  let meters = typeof q.radius === 'number' ? q.radius : 1000;
  if (typeof q.radius !== 'number') {
    const row = pointRow(col, rowCount, q.radius.row);
    if (row !== undefined) meters = haversineMeters(lon, lat, col.lon[row], col.lat[row]) * q.radius.factor;
  }
  return [lon, lat, meters, ACCEPTS[q.accept]];
}

/** Asks `view` the query, checks the answer against brute force over `col` and returns it. */
function ask(view: PointView, col: Column, q: Query): number[] {
  const [lon, lat, meters, accept] = resolve(col, view.rowCount, q);
  const got = [...view.within(lon, lat, meters, accept)];
  expect(got, `${lon},${lat} ${meters} in ${view.rowCount} rows`).toEqual(brute(col, view.rowCount, lon, lat, meters, accept));
  return got;
}

/** A line of views: generation 0 over `col`'s rows, then one view per change. */
function line(first: PointView, col: Column, changes: readonly (readonly Pt[])[]): PointView[] {
  const views = [first];
  for (const points of changes) views.push(views[views.length - 1].next(col.append(points)));
  return views;
}

describe('PointView.within agrees with brute force', () => {
  it('after random appends (single rows and bulk), for every generation, old ones included', () => {
    fc.assert(
      fc.property(
        fc.array(point, { maxLength: 300 }),
        fc.array(change, { minLength: 1, maxLength: 25 }),
        fc.array(query, { minLength: 4, maxLength: 16 }),
        (basePoints, changes, queries) => {
          const col = new Column(basePoints);
          const views = [PointView.of(col.index(), col.rows)];
          const answers = new Map<Query, number[]>();
          const askAt = (at: number): void => {
            for (const q of queries) if (q.view % (changes.length + 1) === at) answers.set(q, ask(views[at], col, q));
          };
          askAt(0);
          for (const points of changes) {
            views.push(views[views.length - 1].next(col.append(points)));
            askAt(views.length - 1);
          }
          const newest = views[views.length - 1];
          for (const q of queries) ask(newest, col, q);
          let held = 0;
          for (let row = basePoints.length; row < col.rows; row++) held += col.present[row];
          expect(newest.appended).toBe(held);
          expect(newest.rowCount).toBe(col.rows);
          // every view answers as it did when it was made, after all the newer ones
          for (const q of queries) {
            const view = views[q.view % views.length];
            const [lon, lat, meters, accept] = resolve(col, view.rowCount, q);
            expect([...view.within(lon, lat, meters, accept)]).toEqual(answers.get(q));
          }
        },
      ),
      { seed: 20260425, numRuns: 120 },
    );
  });

  it('a second line made from an older view leaves the first line as it was', () => {
    fc.assert(
      fc.property(
        fc.array(point, { maxLength: 100 }),
        fc.array(change, { minLength: 2, maxLength: 12 }),
        fc.array(change, { minLength: 1, maxLength: 6 }),
        fc.nat(),
        fc.array(query, { minLength: 4, maxLength: 12 }),
        (basePoints, changes, forkChanges, at, queries) => {
          const col = new Column(basePoints);
          const views = line(PointView.of(col.index(), col.rows), col, changes);
          const before = views.map((v) => queries.map((q) => ask(v, col, q)));
          const from = views[at % views.length];
          const other = col.prefix(from.rowCount);
          const fork = line(from, other, forkChanges);
          for (const v of fork) for (const q of queries) ask(v, other, q);
          // the first line goes on growing from its newest view, unaffected by the fork
          views.push(...line(views[views.length - 1], col, forkChanges).slice(1));
          views.forEach((v, i) => queries.forEach((q, j) => (i < before.length ? expect(ask(v, col, q)).toEqual(before[i][j]) : ask(v, col, q))));
        },
      ),
      { seed: 4326, numRuns: 60 },
    );
  });
});

describe('PointView', () => {
  it('a point exactly at the radius is inside (le), as a base row and as an appended one', () => {
    const col = new Column([[0.01, 0]]);
    const view = PointView.of(col.index(), 1).next(col.append([[0.01, 0]]));
    const d = haversineMeters(0, 0, 0.01, 0);
    expect([...view.within(0, 0, d)]).toEqual([0, 1]);
    expect([...view.within(0, 0, d * (1 - 1e-12))]).toEqual([]);
    expect([...view.within(0.01, 0, 0)]).toEqual([0, 1]);
    expect([...view.within(0, 0, -1)]).toEqual([]);
    expect([...view.within(0, 0, NaN)]).toEqual([]);
  });

  it('base and appended copies of the same points agree across the antimeridian and at both poles', () => {
    const pts: Pt[] = [
      [179.99, -16],
      [-179.99, -16],
      [180, -16.05],
      [-180, -15.95],
      [0, 90],
      [90, 89.9],
      [-179.5, 89.8],
      [10, -90],
      [-100, -89.95],
      [45, 80],
    ];
    const col = new Column(pts);
    let view = PointView.of(col.index(), pts.length).next(col.append(pts.slice(0, 5))); // the first five in one change
    for (const p of pts.slice(5)) view = view.next(col.append([p])); // the rest one by one
    const n = pts.length;
    const queries: [number, number, number][] = [
      [-179.995, -16, 5000],
      [-179.995, -16, 8000],
      [179.995, -16.02, 2000],
      [10, 89.95, 30000],
      [-60, -89.99, 12000],
      [0, 0, 2e7],
      [0, 89, 1],
    ];
    for (const [lon, lat, meters] of queries) {
      const got = [...view.within(lon, lat, meters)];
      expect(got).toEqual(brute(col, col.rows, lon, lat, meters));
      expect(got.filter((r) => r >= n).map((r) => r - n)).toEqual(got.filter((r) => r < n));
    }
    expect(view.within(-179.995, -16, 8000).length).toBe(8); // both sides of the antimeridian, twice
  });

  it('counts appended points, not rows, and extends past the base index only through changes', () => {
    const col = new Column([[1, 1], null, [2, 2]]);
    const v0 = PointView.of(col.index(), 3);
    const v1 = v0.next(col.append([null, null, [1, 1]]));
    const v2 = v1.next(col.append([]));
    expect([v0.appended, v1.appended, v2.appended]).toEqual([0, 1, 1]);
    expect([v0.rowCount, v1.rowCount, v2.rowCount]).toEqual([3, 6, 6]);
    expect([...v2.within(1, 1, 0)]).toEqual([0, 5]);
    expect([...v0.within(1, 1, 0)]).toEqual([0]);
  });

  it('generation 0 may cover a prefix of the base index', () => {
    const col = new Column([
      [5, 5],
      [5, 5],
      [5, 5],
    ]);
    const index = col.index();
    const v = PointView.of(index, 2);
    expect([...v.within(5, 5, 10)]).toEqual([0, 1]);
    const next = v.next({ from: 2, to: 3, lon: Float64Array.of(0, 0, 5), lat: Float64Array.of(0, 0, 5.00001), has: () => true });
    expect([...next.within(5, 5, 10)]).toEqual([0, 1, 2]);
    expect([...next.within(5, 5, 10, (r) => r !== 1)]).toEqual([0, 2]);
    expect(() => PointView.of(index, 4)).toThrow(RangeError);
  });

  it('rejects a change that does not follow the view', () => {
    const col = new Column([[0, 0]]);
    const v = PointView.of(col.index(), 1);
    const lon = new Float64Array(3);
    expect(() => v.next({ from: 0, to: 2, lon, lat: lon, has: () => true })).toThrow(RangeError);
    expect(() => v.next({ from: 1, to: 0, lon, lat: lon, has: () => true })).toThrow(RangeError);
    expect(() => v.next({ from: 1, to: 4, lon, lat: lon, has: () => true })).toThrow(RangeError);
  });
});
