/**
 * Parts of derived columns that share arrays with stored ones: Location/RawLocation (the
 * Latitude/Longitude values) and DaysOnMarket (service_DaysOnMarketReferenceTimestamp's values and
 * validity). Shared arrays are written by the part that owns them; each generation's derived
 * column is built on that part's views of the same generation.
 */
import type { Steps } from '../../../util/steps.js';
import { DaysOnMarketColumn, PointColumn, type Column, type TimestampColumn } from '../../columns.js';
import { Backing, Bits } from '../growable.js';
import type { NumberPart, TimestampPart } from './number.js';
import { Part, type Batch, type Write } from './part.js';

/** Location / RawLocation: coordinates shared with Latitude/Longitude when the loaded segment shared them. */
export class PointPart extends Part {
  private readonly lat: NumberPart | Backing<Float64Array>;
  private readonly lon: NumberPart | Backing<Float64Array>;
  private readonly validity: Bits;

  constructor(field: string, base: PointColumn, owners: readonly NumberPart[]) {
    super(field);
    this.lat = owners.find((p) => p.baseValues === base.lat) ?? new Backing(base.lat);
    this.lon = owners.find((p) => p.baseValues === base.lon) ?? new Backing(base.lon);
    this.validity = new Bits(base.validity);
  }

  override *reserve(n: number, m: number): Steps<void> {
    for (const own of [this.lat, this.lon]) if (own instanceof Backing) yield* own.roomSteps(n, n + m);
    yield* this.validity.roomSteps(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== 'point') throw this.cannotHold(batch, 'point', src);
    const m = batch.rows;
    return (n) => {
      // Shared coordinates are written by their Latitude/Longitude part.
      for (const [own, values] of [
        [this.lat, src?.lat],
        [this.lon, src?.lon],
      ] as const) {
        if (!(own instanceof Backing)) continue;
        const a = own.room(n, n + m);
        if (values === undefined) a.fill(0, n, n + m);
        else a.set(values.subarray(0, m), n);
      }
      this.validity.room(n, n + m);
      if (src === null) this.validity.clear(n, m);
      else this.validity.copy(src.validity, m, n);
    };
  }

  protected build(n: number): Column {
    const coords = (c: NumberPart | Backing<Float64Array>): Float64Array => (c instanceof Backing ? c.array.subarray(0, n) : c.values(n));
    return new PointColumn(coords(this.lat), coords(this.lon), this.validity.view(n));
  }
}

/** DaysOnMarket: its reference instants are service_DaysOnMarketReferenceTimestamp's arrays. */
export class DaysOnMarketPart extends Part {
  private readonly owner: TimestampPart | null;
  private readonly reference: Backing<Float64Array>;
  private readonly validity: Bits;

  constructor(field: string, base: DaysOnMarketColumn, owners: readonly TimestampPart[]) {
    super(field);
    this.owner = owners.find((p) => p.baseValues === base.reference && p.baseValidity === base.validity) ?? null;
    this.reference = new Backing(base.reference);
    this.validity = new Bits(base.validity);
  }

  override *reserve(n: number, m: number): Steps<void> {
    if (this.owner !== null) return;
    yield* this.reference.roomSteps(n, n + m);
    yield* this.validity.roomSteps(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== 'daysOnMarket') throw this.cannotHold(batch, 'daysOnMarket', src);
    const m = batch.rows;
    return (n) => {
      if (this.owner !== null) return;
      const a = this.reference.room(n, n + m);
      this.validity.room(n, n + m);
      if (src === null) {
        a.fill(0, n, n + m);
        this.validity.clear(n, m);
      } else {
        const s = src;
        a.set(s.reference.subarray(0, m), n);
        this.validity.copy(s.validity, m, n);
      }
    };
  }

  protected build(n: number): Column {
    if (this.owner !== null) {
      const reference = this.owner.column(n) as TimestampColumn;
      return new DaysOnMarketColumn(reference.values, reference.validity);
    }
    return new DaysOnMarketColumn(this.reference.array.subarray(0, n), this.validity.view(n));
  }
}
