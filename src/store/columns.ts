/**
 * The frozen columns of a table segment, one class per storage kind. Every column answers
 * `isNull(row)` and `json(row)` (the record's JSON value); the typed arrays are public so that
 * filter, sort and aggregate loops read them directly and allocate nothing.
 *
 * | kind          | Edm types                          | storage                                                |
 * |---------------|------------------------------------|--------------------------------------------------------|
 * | number        | Int16/32/64, Decimal, Double       | values Float64Array + validity bitmap                  |
 * | date          | Date                               | days since epoch in Float64Array + validity            |
 * | timestamp     | DateTimeOffset                     | epoch ms in Float64Array + validity (+ written style)  |
 * | boolean       | Boolean                            | value bitmap + validity bitmap                         |
 * | dictionary    | String (low cardinality, lookups)  | codes Uint16Array/Uint32Array, code 0 = null           |
 * | text          | String (free text, keys)           | UTF-8 bytes + offsets + validity; or a parent's key    |
 * | collection    | Collection(Edm.String)             | offsets (rows + 1) + element codes + dictionary        |
 * | point         | GeographyPoint                     | lat, lon Float64Array + validity                       |
 * | daysOnMarket  | Int64 computed at query time       | reference instant (epoch ms) + validity                |
 */
import { getBit } from '../util/bits.js';
import { decodeUtf8 } from './bytes.js';
import { CANONICAL_STYLE, DAY_MS, formatDate, formatTimestamp } from './temporal.js';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export interface GeoJsonPoint {
  readonly type: 'Point';
  /** [longitude, latitude] */
  readonly coordinates: [number, number];
}

export type Column =
  NumberColumn | DateColumn | TimestampColumn | BooleanColumn | DictionaryColumn | TextColumn | CollectionColumn | PointColumn | DaysOnMarketColumn;

export type ColumnKind = Column['kind'];

/** Typed arrays' bytes, for memory reports. */
function bytesOf(...arrays: Array<ArrayBufferView | null | undefined>): number {
  let n = 0;
  for (const a of arrays) if (a) n += a.byteLength;
  return n;
}

export class NumberColumn {
  readonly kind = 'number' as const;
  constructor(
    readonly values: Float64Array,
    readonly validity: Uint32Array,
  ) {}
  isNull(row: number): boolean {
    return !getBit(this.validity, row);
  }
  get(row: number): number | null {
    return getBit(this.validity, row) ? this.values[row] : null;
  }
  json(row: number): JsonValue {
    return this.get(row);
  }
  get byteLength(): number {
    return bytesOf(this.values, this.validity);
  }
}

/** Edm.Date: whole days since 1970-01-01 (UTC). */
export class DateColumn {
  readonly kind = 'date' as const;
  constructor(
    readonly values: Float64Array,
    readonly validity: Uint32Array,
  ) {}
  isNull(row: number): boolean {
    return !getBit(this.validity, row);
  }
  /** Days since epoch, or null. */
  get(row: number): number | null {
    return getBit(this.validity, row) ? this.values[row] : null;
  }
  json(row: number): JsonValue {
    return getBit(this.validity, row) ? formatDate(this.values[row]) : null;
  }
  get byteLength(): number {
    return bytesOf(this.values, this.validity);
  }
}

/**
 * Edm.DateTimeOffset: epoch milliseconds. `styles` (null while every value was written in the
 * canonical `YYYY-MM-DDTHH:MM:SS.sssZ` form) holds per row an index into `styleTable` (see
 * temporal.ts); `exceptions` keeps the text of the rare values that style cannot reproduce
 * (fractions finer than milliseconds).
 */
export class TimestampColumn {
  readonly kind = 'timestamp' as const;
  constructor(
    readonly values: Float64Array,
    readonly validity: Uint32Array,
    readonly styles: Uint16Array | null,
    readonly styleTable: readonly number[],
    readonly exceptions: ReadonlyMap<number, string> | null,
  ) {}
  isNull(row: number): boolean {
    return !getBit(this.validity, row);
  }
  /** Epoch ms, or null. */
  get(row: number): number | null {
    return getBit(this.validity, row) ? this.values[row] : null;
  }
  /** The timestamp as the feed wrote it. */
  text(row: number): string | null {
    if (!getBit(this.validity, row)) return null;
    const style = this.styles === null ? CANONICAL_STYLE : this.styleTable[this.styles[row]];
    if (this.exceptions !== null) {
      const text = this.exceptions.get(row);
      if (text !== undefined) return text;
    }
    return formatTimestamp(this.values[row], style);
  }
  json(row: number): JsonValue {
    return this.text(row);
  }
  get byteLength(): number {
    return bytesOf(this.values, this.validity, this.styles);
  }
}

export class BooleanColumn {
  readonly kind = 'boolean' as const;
  constructor(
    readonly bits: Uint32Array,
    readonly validity: Uint32Array,
  ) {}
  isNull(row: number): boolean {
    return !getBit(this.validity, row);
  }
  get(row: number): boolean | null {
    return getBit(this.validity, row) ? getBit(this.bits, row) : null;
  }
  json(row: number): JsonValue {
    return this.get(row);
  }
  get byteLength(): number {
    return bytesOf(this.bits, this.validity);
  }
}

/**
 * Ranks of dictionary entries in ordinal string order, null first, so that `$orderby` and range
 * filters compare integers, not strings.
 */
export function ordinalRanks(values: ReadonlyArray<string | null>): Uint32Array {
  const order = values.map((_, i) => i);
  order.sort((a, b) => {
    const x = values[a];
    const y = values[b];
    if (x === y) return 0;
    if (x === null) return -1;
    if (y === null) return 1;
    return x < y ? -1 : 1;
  });
  const ranks = new Uint32Array(values.length);
  for (let r = 0; r < order.length; r++) ranks[order[r]] = r;
  return ranks;
}

/** Low-cardinality strings: `dictionary[codes[row]]`; code 0 is null. */
export class DictionaryColumn {
  readonly kind = 'dictionary' as const;
  private rankCache: Uint32Array | null = null;
  constructor(
    readonly codes: Uint16Array | Uint32Array,
    /** dictionary[0] is null; the other entries in first-seen order. */
    readonly dictionary: ReadonlyArray<string | null>,
  ) {}
  isNull(row: number): boolean {
    return this.codes[row] === 0;
  }
  get(row: number): string | null {
    return this.dictionary[this.codes[row]];
  }
  json(row: number): JsonValue {
    return this.dictionary[this.codes[row]];
  }
  /** code -> rank in ordinal order (null first). */
  get ranks(): Uint32Array {
    return (this.rankCache ??= ordinalRanks(this.dictionary));
  }
  get byteLength(): number {
    return bytesOf(this.codes);
  }
}

/** Free text and identifiers. */
export interface TextColumn {
  readonly kind: 'text';
  isNull(row: number): boolean;
  get(row: number): string | null;
  json(row: number): JsonValue;
  readonly byteLength: number;
}

/** Text stored once as UTF-8: row r is bytes[offsets[r], offsets[r + 1]) when valid. */
export class Utf8TextColumn implements TextColumn {
  readonly kind = 'text' as const;
  constructor(
    readonly bytes: Buffer,
    readonly offsets: Uint32Array,
    readonly validity: Uint32Array,
  ) {}
  isNull(row: number): boolean {
    return !getBit(this.validity, row);
  }
  get(row: number): string | null {
    return getBit(this.validity, row) ? decodeUtf8(this.bytes, this.offsets[row], this.offsets[row + 1]) : null;
  }
  json(row: number): JsonValue {
    return this.get(row);
  }
  get byteLength(): number {
    return bytesOf(this.bytes, this.offsets, this.validity);
  }
}

/**
 * A child's link to its listing (Media.ResourceRecordKey, OpenHouse.ListingKey,
 * PropertyChange.ListingKey): the parent's row, whose ListingKey is the value, so the key text is
 * not stored again per child. Values that link to no listing (Media of another resource) are
 * kept in `unlinked`.
 */
export class ParentKeyColumn implements TextColumn {
  readonly kind = 'text' as const;
  constructor(
    /** Parent (Property) row per child row, -1 when the child has no parent listing. */
    readonly parentRow: Int32Array,
    private readonly parentKeys: TextColumn,
    readonly unlinked: ReadonlyMap<number, string> | null,
  ) {}
  isNull(row: number): boolean {
    return this.parentRow[row] < 0 && (this.unlinked === null || !this.unlinked.has(row));
  }
  get(row: number): string | null {
    const p = this.parentRow[row];
    if (p >= 0) return this.parentKeys.get(p);
    return this.unlinked?.get(row) ?? null;
  }
  json(row: number): JsonValue {
    return this.get(row);
  }
  get byteLength(): number {
    return bytesOf(this.parentRow);
  }
}

/** Collection(Edm.String): row r holds dictionary[codes[i]] for i in [offsets[r], offsets[r + 1]). */
export class CollectionColumn {
  readonly kind = 'collection' as const;
  private rankCache: Uint32Array | null = null;
  constructor(
    readonly offsets: Uint32Array,
    readonly codes: Uint16Array | Uint32Array,
    readonly dictionary: readonly string[],
    readonly validity: Uint32Array,
  ) {}
  isNull(row: number): boolean {
    return !getBit(this.validity, row);
  }
  get(row: number): string[] | null {
    if (!getBit(this.validity, row)) return null;
    const out: string[] = [];
    for (let i = this.offsets[row]; i < this.offsets[row + 1]; i++) out.push(this.dictionary[this.codes[i]]);
    return out;
  }
  /** null when absent (as stored); records show an absent collection as `[]` (Table.record). */
  json(row: number): JsonValue {
    return this.get(row);
  }
  get ranks(): Uint32Array {
    return (this.rankCache ??= ordinalRanks(this.dictionary));
  }
  get byteLength(): number {
    return bytesOf(this.offsets, this.codes, this.validity);
  }
}

/** Edm.GeographyPoint as two coordinate columns (shared with Latitude/Longitude when derived). */
export class PointColumn {
  readonly kind = 'point' as const;
  constructor(
    readonly lat: Float64Array,
    readonly lon: Float64Array,
    readonly validity: Uint32Array,
  ) {}
  isNull(row: number): boolean {
    return !getBit(this.validity, row);
  }
  get(row: number): GeoJsonPoint | null {
    return getBit(this.validity, row) ? { type: 'Point', coordinates: [this.lon[row], this.lat[row]] } : null;
  }
  json(row: number): JsonValue {
    return this.get(row) as JsonValue;
  }
  /** Only the validity bitmap is this column's own; the coordinates belong to Latitude/Longitude. */
  get byteLength(): number {
    return bytesOf(this.validity);
  }
}

/**
 * DaysOnMarket (SERVICE.md §2): whole days, floor, never below 0, from the reference instant to
 * the clock's `now`; computed when asked, never stored.
 */
export class DaysOnMarketColumn {
  readonly kind = 'daysOnMarket' as const;
  constructor(
    /** service_DaysOnMarketReferenceTimestamp, epoch ms. */
    readonly reference: Float64Array,
    readonly validity: Uint32Array,
  ) {}
  isNull(row: number): boolean {
    return !getBit(this.validity, row);
  }
  get(row: number, nowMs: number): number | null {
    return getBit(this.validity, row) ? daysOnMarket(this.reference[row], nowMs) : null;
  }
  json(row: number, nowMs: number): JsonValue {
    return this.get(row, nowMs);
  }
  get byteLength(): number {
    return 0;
  }
}

/** Whole days from `referenceMs` to `nowMs`, rounded down, never below 0. */
export function daysOnMarket(referenceMs: number, nowMs: number): number {
  return nowMs <= referenceMs ? 0 : Math.floor((nowMs - referenceMs) / DAY_MS);
}
