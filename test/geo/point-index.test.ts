import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/generate/prng.js';
import { EARTH_RADIUS_M, haversineMeters } from '../../src/geo/distance.js';
import { PointIndex } from '../../src/geo/point-index.js';

/** Brute force, written independently: haversine from its textbook form. */
function bruteWithin(
  lon: Float64Array,
  lat: Float64Array,
  has: (r: number) => boolean,
  qLon: number,
  qLat: number,
  meters: number,
  accept?: (r: number) => boolean,
): number[] {
  const out: number[] = [];
  const toRad = (d: number): number => (d * Math.PI) / 180;
  for (let r = 0; r < lon.length; r++) {
    if (!has(r) || (accept && !accept(r))) continue;
    const dLat = toRad(lat[r] - qLat);
    const dLon = toRad(lon[r] - qLon);
    const a = Math.sin(dLat / 2) ** 2 + Math.cos(toRad(qLat)) * Math.cos(toRad(lat[r])) * Math.sin(dLon / 2) ** 2;
    const d = 2 * 6371008.8 * Math.atan2(Math.sqrt(a), Math.sqrt(1 - a));
    if (d <= meters) out.push(r);
  }
  return out;
}

describe('haversine', () => {
  it('uses the contract radius', () => {
    expect(EARTH_RADIUS_M).toBe(6371008.8);
    // a quarter of a great circle
    expect(haversineMeters(0, 0, 90, 0)).toBeCloseTo((Math.PI / 2) * 6371008.8, 6);
    expect(haversineMeters(-122.3321, 47.6062, -122.3321, 47.6062)).toBe(0);
    // Seattle to Bellevue, about 9.8 km
    expect(haversineMeters(-122.3321, 47.6062, -122.2015, 47.6101)).toBeGreaterThan(9700);
    expect(haversineMeters(-122.3321, 47.6062, -122.2015, 47.6101)).toBeLessThan(9900);
  });
});

describe('PointIndex.within agrees with brute force', () => {
  const rng = new Rng('geo');
  const n = 20000;
  const lon = new Float64Array(n);
  const lat = new Float64Array(n);
  const missing = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    // clustered around a few metros, a band across the antimeridian, and some anywhere
    const c = i % 4;
    if (c === 0) {
      lon[i] = -122.33 + rng.range(-0.3, 0.3);
      lat[i] = 47.6 + rng.range(-0.3, 0.3);
    }
    // valid longitudes on both sides of the antimeridian (the store nulls anything outside ±180)
    else if (c === 1) {
      lon[i] = rng.chance(0.5) ? 180 - rng.range(0, 0.15) : -180 + rng.range(0, 0.15);
      lat[i] = -16 + rng.range(-0.1, 0.1);
    } else if (c === 2) {
      lon[i] = -87.63 + rng.range(-0.2, 0.2);
      lat[i] = 41.88 + rng.range(-0.2, 0.2);
    } else {
      lon[i] = rng.range(-180, 180);
      lat[i] = rng.range(-89, 89);
    }
    missing[i] = rng.chance(0.05) ? 1 : 0;
  }
  const has = (r: number): boolean => missing[r] === 0;
  const index = new PointIndex(lon, lat, has);

  it('for many centres and radii, exactly', () => {
    const q = new Rng('queries');
    let nonEmpty = 0;
    for (let i = 0; i < 200; i++) {
      const src = q.int(0, n - 1);
      const qLon = lon[src] + q.range(-0.05, 0.05);
      const qLat = lat[src] + q.range(-0.05, 0.05);
      const meters = q.pick([0, 50, 500, 2000, 10000, 50000, 300000]);
      const got = [...index.within(qLon, qLat, meters)];
      const want = bruteWithin(lon, lat, has, qLon, qLat, meters);
      expect(got, `${qLon},${qLat} ${meters}`).toEqual(want);
      // the planner's count: exact, though it tests only the points along the circle's edge
      expect(index.count(qLon, qLat, meters), `count ${qLon},${qLat} ${meters}`).toBe(want.length);
      if (want.length) nonEmpty++;
    }
    expect(nonEmpty).toBeGreaterThan(100);
  });

  it('across the antimeridian', () => {
    const got = [...index.within(-179.99, -16, 20000)];
    expect(got).toEqual(bruteWithin(lon, lat, has, -179.99, -16, 20000));
    expect([...index.within(179.995, -16.05, 9000)]).toEqual(bruteWithin(lon, lat, has, 179.995, -16.05, 9000));
    expect(got.some((r) => lon[r] > 0) && got.some((r) => lon[r] < 0)).toBe(true);
  });

  it('pushes the predicate into the walk and leaves rows without a point out', () => {
    const accept = (r: number): boolean => r % 3 === 0;
    const got = [...index.within(-122.33, 47.6, 15000, accept)];
    expect(got).toEqual(bruteWithin(lon, lat, has, -122.33, 47.6, 15000, accept));
    expect(got.length).toBeGreaterThan(100);
    expect(got.every((r) => missing[r] === 0)).toBe(true);
  });

  it('a point exactly at the radius is inside (le)', () => {
    const one = new PointIndex(Float64Array.of(0.01), Float64Array.of(0), () => true);
    const d = haversineMeters(0, 0, 0.01, 0);
    expect([...one.within(0, 0, d)]).toEqual([0]);
    expect([...one.within(0, 0, d * (1 - 1e-12))]).toEqual([]);
  });

  it('near a pole the box covers every longitude', () => {
    const lons = Float64Array.from([0, 90, 180, -90, -179.5, 45]);
    const lats = Float64Array.from([89.9, 89.95, 89.9, 89.99, 89.8, 80]);
    const polar = new PointIndex(lons, lats, () => true);
    expect([...polar.within(10, 89.95, 30000)]).toEqual(bruteWithin(lons, lats, () => true, 10, 89.95, 30000));
    expect([...polar.within(10, 89.95, 30000)].length).toBe(5);
  });

  it('an empty index answers nothing', () => {
    const empty = new PointIndex(new Float64Array(3), new Float64Array(3), () => false);
    expect(empty.size).toBe(0);
    expect([...empty.within(0, 0, 1e7)]).toEqual([]);
  });
});

describe('dense circles: subtrees inside the circle are taken whole', () => {
  // 60k points in a 0.2° square: a 10 km circle holds tens of thousands, most in whole subtrees
  const rng = new Rng('dense');
  const n = 60000;
  const lon = new Float64Array(n);
  const lat = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    lon[i] = -122.33 + rng.range(-0.1, 0.1);
    lat[i] = 47.6 + rng.range(-0.1, 0.1);
  }
  const index = new PointIndex(lon, lat, () => true);

  it('within, count and a predicate agree with brute force, also a hair around the edge', () => {
    const q = new Rng('dense-queries');
    for (let i = 0; i < 30; i++) {
      const qLon = -122.33 + q.range(-0.05, 0.05);
      const qLat = 47.6 + q.range(-0.05, 0.05);
      // a radius that puts one point exactly on the edge
      const edge = haversineMeters(qLon, qLat, lon[i], lat[i]);
      for (const meters of [q.pick([100, 1000, 3000, 6000, 12000, 40000]), edge, edge * (1 - 1e-12)]) {
        // at the edge the contract's formula itself decides (2R·asin(√h), distance.ts)
        const want: number[] = [];
        for (let r = 0; r < n; r++) if (haversineMeters(qLon, qLat, lon[r], lat[r]) <= meters) want.push(r);
        expect([...index.within(qLon, qLat, meters)], `${qLon},${qLat} ${meters}`).toEqual(want);
        expect(index.count(qLon, qLat, meters)).toBe(want.length);
        const odd = (r: number): boolean => r % 2 === 1;
        expect([...index.within(qLon, qLat, meters, odd)]).toEqual(want.filter(odd));
      }
    }
  });

  it('a predicate that queries the same index again gets its own answer', () => {
    const inner = index.within(-122.33, 47.6, 2000);
    const innerSet = new Set(inner);
    let nested = 0;
    const got = index.within(-122.33, 47.6, 3000, (r) => {
      nested++;
      return nested % 100 === 0 ? index.within(-122.33, 47.6, 2000).length === inner.length && innerSet.has(r) : innerSet.has(r);
    });
    expect([...got]).toEqual([...inner]);
  });
});
