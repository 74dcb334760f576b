/**
 * A static KD-tree (kdbush) over one point column, searched with geokdbush for
 * `geo.distance(point, POINT) le METERS`. The rest of the filter is pushed into geokdbush's
 * predicate, so no candidate list is truncated before filtering; each hit is then confirmed with
 * our own haversine (the contract's radius), and rows come back ascending for the bitset executor.
 */
import KDBush from 'kdbush';
import { around } from 'geokdbush';
import { haversineMeters, EARTH_RADIUS_M } from './distance.js';

/** geokdbush measures on a 6,371 km sphere; scale the radius so both speak the same angle. */
const GEOKDBUSH_RADIUS_KM = 6371;
/** A hair of slack so floating-point rounding in geokdbush never drops a point we accept. */
const SLACK = 1 + 1e-9;

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
    const km = ((meters / EARTH_RADIUS_M) * GEOKDBUSH_RADIUS_KM * SLACK);
    const rowOf = this.rowOf;
    const hits = around(this.tree, lon, lat, Infinity, km, (item) => {
      const row = rowOf[item];
      return haversineMeters(lon, lat, this.lon[row], this.lat[row]) <= meters && (!accept || accept(row));
    });
    const out = new Uint32Array(hits.length);
    for (let i = 0; i < hits.length; i++) out[i] = rowOf[hits[i]];
    return out.sort();
  }
}
