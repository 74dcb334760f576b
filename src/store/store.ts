/**
 * A loaded data set: the six tables of records, the Lookup table derived from them and the EntityEvent log, each listing's children, the derived fields, the load
 * report, and the accounts and MLS profiles as parsed JSON (the service interprets them).
 */
import type { ChildResourceName, ResourceName } from '../schema/types.js';
import type { Children } from './children.js';
import type { DaysOnMarketColumn, PointColumn, TimestampColumn } from './columns.js';
import type { DataErrorInfo } from './errors.js';
import type { LocalFieldInfo } from './ingest.js';
import type { Table } from './table.js';

export interface ResourceLoadReport {
  /** The file the records came from, or null (in-memory records, or no file). */
  readonly file: string | null;
  /**
   * True when a data directory had no file for the resource, which is then empty (only Property
   * is required; a data set without Member.jsonl has no Member records). False for in-memory records.
   */
  readonly absent: boolean;
  /** Records loaded. */
  readonly records: number;
  /** Records skipped (skip mode). */
  readonly skipped: number;
  /** Input values of derived fields (e.g. DaysOnMarket) the loader ignored, by field. */
  readonly ignoredFields: Readonly<Record<string, number>>;
}

export interface LoadReport {
  readonly resources: Readonly<Record<ResourceName, ResourceLoadReport>>;
  readonly skipped: {
    readonly total: number;
    readonly byCode: Readonly<Record<string, number>>;
    /** The first skipped records (at most 100), with file, line, field and reason. */
    readonly samples: readonly DataErrorInfo[];
  };
  /** Fields the schema does not declare, with the type inferred for them. */
  readonly localFields: readonly LocalFieldInfo[];
  /** Bytes of the data files read (compressed bytes for .gz). */
  readonly bytesRead: number;
  /** Whether Media was loaded in a worker thread beside Property (LoadDirectoryOptions.parallel). */
  readonly parallel: boolean;
}

export interface DerivedFields {
  readonly location: PointColumn;
  readonly rawLocation: PointColumn;
  readonly originalEntryTimestamp: TimestampColumn;
  readonly daysOnMarketReferenceTimestamp: TimestampColumn;
  readonly daysOnMarket: DaysOnMarketColumn;
}

export class Store {
  readonly derived: DerivedFields;

  constructor(
    private readonly tables: Readonly<Record<ResourceName, Table>>,
    /** Children of each listing, by Property row. */
    readonly children: Readonly<Record<ChildResourceName, Children>>,
    readonly report: LoadReport,
    /** accounts.json as parsed (shape checked), or null when the data set has none. */
    readonly accounts: unknown,
    /** mls_profiles.json as parsed (shape checked), or null. */
    readonly profiles: unknown,
    /** The engine's clock, epoch ms. */
    readonly now: () => number,
  ) {
    const p = tables.Property;
    this.derived = {
      location: p.columnOf('Location', 'point')!,
      rawLocation: p.columnOf('RawLocation', 'point')!,
      originalEntryTimestamp: p.columnOf('service_OriginalEntryTimestamp', 'timestamp')!,
      daysOnMarketReferenceTimestamp: p.columnOf('service_DaysOnMarketReferenceTimestamp', 'timestamp')!,
      daysOnMarket: p.columnOf('DaysOnMarket', 'daysOnMarket')!,
    };
  }

  get Property(): Table {
    return this.tables.Property;
  }
  get Media(): Table {
    return this.tables.Media;
  }
  get OpenHouse(): Table {
    return this.tables.OpenHouse;
  }
  get PropertyChange(): Table {
    return this.tables.PropertyChange;
  }
  get Member(): Table {
    return this.tables.Member;
  }
  get Office(): Table {
    return this.tables.Office;
  }
  /** The Lookup resource (src/store/lookups.ts): every lookup value of the other tables, and the standard values of their lookups. */
  get Lookup(): Table {
    return this.tables.Lookup;
  }

  /** The EntityEvent log (one event per record loaded, upserted or removed), in sequence order. */
  get EntityEvent(): Table {
    return this.tables.EntityEvent;
  }

  table(resource: ResourceName): Table {
    return this.tables[resource];
  }

  /** DaysOnMarket of a listing row at `nowMs` (the store's clock when omitted). */
  daysOnMarket(row: number, nowMs: number = this.now()): number | null {
    return this.derived.daysOnMarket.get(row, nowMs);
  }

  /** Bytes held by columns, key indexes and child indexes. */
  get byteLength(): number {
    let n = 0;
    for (const t of Object.values(this.tables)) n += t.byteLength;
    for (const c of Object.values(this.children)) n += c.byteLength;
    return n;
  }
}
