/**
 * The geo operators: `geo.distance(F, point) le r` as an access path (the KD-tree walk of the
 * generation's point view, with the rest of the filter pushed in as its predicate) and as a
 * residual test. A residual is tested point by point (the same exact haversine the KD-tree
 * applies) while few rows ask, as in an ordered walk that stops at its page; past
 * GEO_DIRECT_TESTS rows the whole circle is collected once from the KD-tree into a bitset.
 */
import type { Generation } from '../access/generation.js';
import type { PointField } from '../access/access.js';
import { EARTH_RADIUS_M, haversineMeters } from '../geo/distance.js';
import type { GeoNode } from '../plan/plan.js';
import type { Table } from '../store/table.js';
import { getBit, newBitmap, setBit } from '../util/bits.js';

/** Residual geo.distance tests done point by point before the circle is collected. */
export const GEO_DIRECT_TESTS = 65_536;

/** Rows within the circle that `accept` allows (all when absent), ascending. */
export function collectGeo(gen: Generation, node: GeoNode, accept?: (row: number) => boolean): Uint32Array {
  return gen.access.points[node.field.name as PointField].within(node.lon, node.lat, node.meters, accept);
}

/** A row test for one geo.distance conjunct, made per query (it counts its own point tests). */
export function geoResidual(gen: Generation, table: Table, node: GeoNode): (row: number) => boolean {
  const { validity, lat, lon } = table.columnOf(node.field.name, 'point')!;
  // A great-circle distance is at least the latitude difference (as an arc): most rows fail
  // this before any trigonometry.
  const latSpan = (((node.meters / EARTH_RADIUS_M) * 180) / Math.PI) * (1 + 1e-9) + 1e-9;
  let left = GEO_DIRECT_TESTS;
  let bits: Uint32Array | null = null;
  return (row) => {
    if (bits === null && left-- > 0) {
      if (!getBit(validity, row) || Math.abs(lat[row] - node.lat) > latSpan) return false;
      return haversineMeters(node.lon, node.lat, lon[row], lat[row]) <= node.meters;
    }
    if (bits === null) {
      bits = newBitmap(table.rowCount);
      for (const r of collectGeo(gen, node)) setBit(bits, r);
    }
    return getBit(bits, row);
  };
}
