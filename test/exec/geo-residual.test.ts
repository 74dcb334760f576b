/**
 * geo.distance as a residual condition (an ordered walk over ListPrice tests each visited row's
 * point directly, with a latitude-band shortcut) must agree with the KD-tree source and with a
 * brute-force haversine, including points a hair inside and outside the radius, near a pole, across
 * the antimeridian, and rows without a point.
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import { EARTH_RADIUS_M, haversineMeters } from '../../src/geo/distance.js';

/** A point at `meters` from (lon, lat) along a bearing, by the spherical destination formula. */
function destination(lon: number, lat: number, meters: number, bearingDeg: number): [number, number] {
  const rad = Math.PI / 180;
  const d = meters / EARTH_RADIUS_M;
  const b = bearingDeg * rad;
  const p1 = lat * rad;
  const l1 = lon * rad;
  const p2 = Math.asin(Math.sin(p1) * Math.cos(d) + Math.cos(p1) * Math.sin(d) * Math.cos(b));
  const l2 = l1 + Math.atan2(Math.sin(b) * Math.sin(d) * Math.cos(p1), Math.cos(d) - Math.sin(p1) * Math.sin(p2));
  return [((l2 / rad + 540) % 360) - 180, p2 / rad];
}

const CENTRES: Array<[number, number]> = [
  [-122.3321, 47.6062],
  [179.99, 10],
  [-179.995, -33],
  [12, 89.97],
  [0.5, 0.5],
];
const RADIUS = 5000;

function recordsAround(lon: number, lat: number): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  let n = 0;
  for (let bearing = 0; bearing < 360; bearing += 7.5) {
    for (const meters of [0, 10, RADIUS * 0.5, RADIUS - 1e-6, RADIUS, RADIUS + 1e-6, RADIUS * 1.0001, RADIUS * 3, 2_000_000]) {
      const [plon, plat] = destination(lon, lat, meters, bearing);
      out.push({
        ListingKey: `K${String(n).padStart(5, '0')}`,
        ListPrice: (n * 7919) % 1000,
        Latitude: plat,
        Longitude: plon,
        StandardStatus: n % 3 === 0 ? 'Pending' : 'Active',
      });
      n++;
    }
  }
  out.push({ ListingKey: 'Knull', ListPrice: 999, StandardStatus: 'Active' });
  return out;
}

describe('geo.distance as a residual of an ordered walk', () => {
  for (const [lon, lat] of CENTRES) {
    it(`agrees with brute force around (${lon} ${lat})`, async () => {
      const records = recordsAround(lon, lat);
      const engine = await Engine.open({ data: { Property: records } });
      const geo = `geo.distance(Location, geography'POINT(${lon} ${lat})') le ${RADIUS}`;
      const expected = records
        .filter(
          (r) => typeof r.Latitude === 'number' && r.StandardStatus === 'Active' && haversineMeters(lon, lat, r.Longitude as number, r.Latitude) <= RADIUS,
        )
        .sort((a, b) => (b.ListPrice as number) - (a.ListPrice as number) || ((a.ListingKey as string) < (b.ListingKey as string) ? -1 : 1))
        .map((r) => r.ListingKey);
      expect(expected.length).toBeGreaterThan(10);
      const walked = engine.query('Property', `$filter=${geo} and StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=1000&$select=ListingKey`);
      expect(engine.explain('Property', `$filter=${geo} and StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=1000`)).toMatch(/ordered walk/);
      expect(walked.value.map((r) => r.ListingKey)).toEqual(expected);
      // the KD-tree source (no ordered walk: a count) gives the same set
      const counted = engine.query('Property', `$filter=${geo} and StandardStatus eq 'Active'&$count=true&$top=0`);
      expect(counted['@odata.count']).toBe(expected.length);
    });
  }
});
