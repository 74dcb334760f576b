/**
 * A static KD-tree (kdbush) over one point column for `geo.distance(point, POINT) le METERS`.
 * The circle's bounding box (split at the antimeridian, widened to all longitudes near a pole) is
 * a kdbush range query; each hit is then checked with the contract's haversine and the rest of
 * the filter. geokdbush's `around` answers the same question through a distance-ordered priority
 * queue with an object per point, which a radius filter does not need: measured on the 100k
 * bench data (5 km around Seattle, about 1,800 hits) it took ~15 ms against well under 1 ms here
 * (DESIGN.md, "Geo"). Rows come back ascending for the bitset executor.
 */
import KDBush from 'kdbush';
import { haversineMeters, EARTH_RADIUS_M } from './distance.js';

const DEG = 180 / Math.PI;

export class PointIndex {
  private readonly tree: KDBush;
  /** KD-tree item -> row id (only rows with a point are in the tree). */
  private readonly rowOf: Uint32Array;

  /** `lon`/`lat` per row; rows where `has(row)` is false have no point and are left out. */
  constructor(readonly lon: Float64Array, readonly lat: Float64Array, has: (row: number) => boolean) {
    const rows: number[] = [];
    for (let row = 0; row < lon.length; row++) if (has(row)) rows.push(row);
    this.rowOf = Uint32Array.from(rows);
    this.tree = new KDBush(Math.max(1, rows.length));
    for (const row of rows) this.tree.add(lon[row], lat[row]);
    if (rows.length === 0) this.tree.add(0, 0); // kdbush needs one item; rowOf keeps it unreachable
    this.tree.finish();
  }

  get size(): number {
    return this.rowOf.length;
  }

  /** Rows within `meters` of (lon, lat) that `accept` allows, ascending. */
  within(lon: number, lat: number, meters: number, accept?: (row: number) => boolean): Uint32Array {
    if (this.rowOf.length === 0 || !(meters >= 0)) return new Uint32Array(0);
    // Angular radius, with a hair of slack so rounding never drops a point the haversine keeps.
    const angle = Math.min(Math.PI, meters / EARTH_RADIUS_M) * (1 + 1e-9) + 1e-12;
    const dLat = angle * DEG;
    const minLat = lat - dLat;
    const maxLat = lat + dLat;
    const boxes: Array<[number, number, number, number]> = [];
    if (minLat <= -90 || maxLat >= 90 || angle >= Math.PI / 2) {
      boxes.push([-180, Math.max(-90, minLat), 180, Math.min(90, maxLat)]);
    } else {
      // the widest longitude span of the circle, at the latitude nearest a pole
      const dLon = Math.asin(Math.min(1, Math.sin(angle) / Math.cos(lat / DEG))) * DEG;
      const west = lon - dLon;
      const east = lon + dLon;
      if (dLon >= 180) boxes.push([-180, minLat, 180, maxLat]);
      else {
        boxes.push([Math.max(-180, west), minLat, Math.min(180, east), maxLat]);
        if (west < -180) boxes.push([west + 360, minLat, 180, maxLat]);
        if (east > 180) boxes.push([-180, minLat, east - 360, maxLat]);
      }
    }
    const out: number[] = [];
    for (const [x0, y0, x1, y1] of boxes) {
      for (const item of this.tree.range(x0, y0, x1, y1)) {
        const row = this.rowOf[item];
        if (haversineMeters(lon, lat, this.lon[row], this.lat[row]) <= meters && (!accept || accept(row))) out.push(row);
      }
    }
    return Uint32Array.from(out).sort();
  }
}
