/**
 * The derived fields of SERVICE.md §2, computed once per Property segment from its columns
 * (DaysOnMarket is computed at query time from the stored reference instant):
 *
 * - RawLocation: (Latitude, Longitude) when both are present and in range (|lat| <= 90,
 *   |lon| <= 180), 0,0 included; else null.
 * - Location: RawLocation, except null for 0,0.
 * - service_OriginalEntryTimestamp: OriginalEntryTimestamp when present; else the earliest of
 *   ListingContractDate (00:00 UTC of that day) and ModificationTimestamp, whichever are present.
 * - service_DaysOnMarketReferenceTimestamp: OnMarketTimestamp when present (the latest version's,
 *   so a relisting restarts the count), else service_OriginalEntryTimestamp.
 * - DaysOnMarket: floor((now - reference) / 1 day), never below 0; null without a reference.
 */
import { getBit, newBitmap, setBit } from '../util/bits.js';
import { type DateColumn, DaysOnMarketColumn, type NumberColumn, PointColumn, TimestampColumn, type Column } from './columns.js';
import { DAY_MS } from './temporal.js';

export interface DerivedListingColumns {
  readonly DaysOnMarket: DaysOnMarketColumn;
  readonly Location: PointColumn;
  readonly RawLocation: PointColumn;
  readonly service_DaysOnMarketReferenceTimestamp: TimestampColumn;
  readonly service_OriginalEntryTimestamp: TimestampColumn;
}

function numeric<T extends Column['kind']>(
  columns: ReadonlyMap<string, Column>,
  name: string,
  kind: T,
): { values: Float64Array; validity: Uint32Array } | null {
  const c = columns.get(name);
  if (c === undefined || c.kind !== kind) return null;
  return c as unknown as NumberColumn | DateColumn | TimestampColumn;
}

export function deriveListingFields(columns: ReadonlyMap<string, Column>, n: number): DerivedListingColumns {
  const lat = numeric(columns, 'Latitude', 'number');
  const lon = numeric(columns, 'Longitude', 'number');
  const latValues = lat?.values ?? new Float64Array(n);
  const lonValues = lon?.values ?? new Float64Array(n);
  const raw = newBitmap(n);
  const clean = newBitmap(n);
  if (lat && lon) {
    for (let row = 0; row < n; row++) {
      if (!getBit(lat.validity, row) || !getBit(lon.validity, row)) continue;
      const y = latValues[row];
      const x = lonValues[row];
      if (y < -90 || y > 90 || x < -180 || x > 180) continue;
      setBit(raw, row);
      if (y !== 0 || x !== 0) setBit(clean, row);
    }
  }

  const entry = numeric(columns, 'OriginalEntryTimestamp', 'timestamp');
  const contract = numeric(columns, 'ListingContractDate', 'date');
  const modified = numeric(columns, 'ModificationTimestamp', 'timestamp');
  const onMarket = numeric(columns, 'OnMarketTimestamp', 'timestamp');
  const original = new Float64Array(n);
  const originalValid = newBitmap(n);
  const reference = new Float64Array(n);
  const referenceValid = newBitmap(n);
  for (let row = 0; row < n; row++) {
    let t = NaN;
    if (entry && getBit(entry.validity, row)) {
      t = entry.values[row];
    } else {
      if (contract && getBit(contract.validity, row)) t = contract.values[row] * DAY_MS;
      if (modified && getBit(modified.validity, row) && !(modified.values[row] >= t)) t = modified.values[row];
    }
    if (t === t) {
      original[row] = t;
      setBit(originalValid, row);
    }
    if (onMarket && getBit(onMarket.validity, row)) {
      reference[row] = onMarket.values[row];
      setBit(referenceValid, row);
    } else if (t === t) {
      reference[row] = t;
      setBit(referenceValid, row);
    }
  }

  return {
    RawLocation: new PointColumn(latValues, lonValues, raw),
    Location: new PointColumn(latValues, lonValues, clean),
    service_OriginalEntryTimestamp: new TimestampColumn(original, originalValid, null, [], null),
    service_DaysOnMarketReferenceTimestamp: new TimestampColumn(reference, referenceValid, null, [], null),
    DaysOnMarket: new DaysOnMarketColumn(reference, referenceValid),
  };
}
