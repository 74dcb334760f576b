/**
 * The kdbush peer: what a user writes for "listings near a point, filtered, by price" with a
 * KD-tree library and plain arrays, geokdbush-style: a kdbush tree over every listing's Location,
 * the circle's bounding box walked with kdbush's own `range`, each candidate tested by the
 * predicate first (StandardStatus, a code compare) and then by the exact haversine (the contract's
 * sphere), the survivors sorted by ListPrice descending (nulls last), ties by ListingKey, and the
 * first `top` kept. geokdbush's `around` does the same walk nearest-first through a priority queue
 * (an object per point), which a radius-then-sort query does not need; geokdbush is not a
 * dependency, so its radius walk is written here on kdbush's API.
 *
 * Only Q4 is a question a KD-tree answers; Q6 needs BM25 as well and every other family has no
 * geo condition, so they are reported n/a.
 */
import KDBush from 'kdbush';
import { EARTH_RADIUS_M } from '../../../src/geo/distance.js';
import { distanceMeters, forEachListing, locationOf, type Answer, type FamilyId, type FamilyParams } from '../families.js';
import type { Peer } from '../peer.js';

const DEG = 180 / Math.PI;

class KdbushPeer implements Peer {
  readonly name = 'kdbush 4 radius walk + predicate, then sort';
  readonly loads = 'Property only (Location, StandardStatus, ListPrice, ListingKey)';
  private tree!: KDBush;
  private lat!: Float64Array;
  private lon!: Float64Array;
  /** kdbush item -> listing index. */
  private listingOf!: Uint32Array;
  private keys: string[] = [];
  /** ListPrice per listing, NaN for none. */
  private price!: Float64Array;
  /** StandardStatus per listing as a code into `statuses` (0: none). */
  private status!: Uint8Array;
  private readonly statuses: Array<string | null> = [null];

  async load(dir: string): Promise<void> {
    const lat: number[] = [];
    const lon: number[] = [];
    const listingOf: number[] = [];
    const price: number[] = [];
    const status: number[] = [];
    const codes = new Map<string, number>();
    await forEachListing(dir, (r, i) => {
      this.keys.push(r.ListingKey as string);
      price.push(typeof r.ListPrice === 'number' ? r.ListPrice : NaN);
      const s = typeof r.StandardStatus === 'string' ? r.StandardStatus : null;
      let code = s === null ? 0 : codes.get(s);
      if (code === undefined) {
        code = this.statuses.length;
        codes.set(s!, code);
        this.statuses.push(s);
      }
      status.push(code);
      const point = locationOf(r);
      if (point) {
        lat.push(point.lat);
        lon.push(point.lon);
        listingOf.push(i);
      }
    });
    this.lat = Float64Array.from(lat);
    this.lon = Float64Array.from(lon);
    this.listingOf = Uint32Array.from(listingOf);
    this.price = Float64Array.from(price);
    this.status = Uint8Array.from(status);
    this.tree = new KDBush(Math.max(1, lat.length));
    for (let i = 0; i < lat.length; i++) this.tree.add(lon[i], lat[i]);
    if (lat.length === 0) this.tree.add(0, 0);
    this.tree.finish();
  }

  prepare<F extends FamilyId>(family: F, params: FamilyParams[F]): (() => Answer) | string {
    if (family !== 'Q4') return family === 'Q6' ? 'a KD-tree has no text search (BM25)' : 'a KD-tree answers geo families only';
    const q = params as FamilyParams['Q4'];
    const wanted = this.statuses.indexOf(q.status);
    return () => ({ kind: 'keys', keys: this.nearby(q.lon, q.lat, q.radiusM, (row) => this.status[row] === wanted, q.top) });
  }

  /** The first `top` listings within `meters` that `accept` allows, by ListPrice desc (nulls last), then key. */
  private nearby(lon: number, lat: number, meters: number, accept: (row: number) => boolean, top: number): string[] {
    // geokdbush's bounding box of a circle (a hair wider so rounding never drops a point)
    const angle = (meters / EARTH_RADIUS_M) * (1 + 1e-9);
    const dLat = angle * DEG;
    const dLon = Math.asin(Math.min(1, Math.sin(angle) / Math.cos((Math.abs(lat) + dLat) / DEG))) * DEG;
    const hits: number[] = [];
    for (const item of this.tree.range(lon - dLon, lat - dLat, lon + dLon, lat + dLat)) {
      const row = this.listingOf[item];
      if (accept(row) && distanceMeters({ lat: this.lat[item], lon: this.lon[item] }, { lat, lon }) <= meters) hits.push(row);
    }
    const { price, keys } = this;
    hits.sort((a, b) => {
      const pa = price[a];
      const pb = price[b];
      const na = pa !== pa;
      const nb = pb !== pb;
      if (na !== nb) return na ? 1 : -1;
      if (!na && pa !== pb) return pb - pa;
      return keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : 0;
    });
    return hits.slice(0, top).map((row) => keys[row]);
  }

  explain(): string {
    return "kdbush range over the circle's bounding box, status then haversine per candidate, sort by price";
  }
}

export default (): Peer => new KdbushPeer();
