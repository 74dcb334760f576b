/**
 * One resource's rows as an immutable column segment: dense row ids 0..rowCount-1 in load order,
 * typed column access by field name, the key index, and records built on demand in the schema's
 * stable field order (those of rows read again kept and copied: record-cache.ts). Upserts and removals make a new Table over longer views of the same arrays
 * (src/store/append/table-appender.ts) with a dead-row bitmap beside it (DESIGN.md, "Change"); a
 * Table itself never changes.
 *
 * Tables made one from another by appending rows share a `TableLineage`: every row a table of a
 * lineage has reads the same in all of them (rows never change; the schema, its field order and
 * every column's kind are the same), so what is derived from a row alone (kept records here, the
 * service's record texts) is kept per lineage and serves every generation, not only the table it
 * was first made for.
 */
import type { TableSchema } from '../schema/table-schema.js';
import type { ResourceName } from '../schema/types.js';
import type { ByteIndex } from './byte-index.js';
import { hashBytes } from './bytes.js';
import { Utf8TextColumn, type Column, type ColumnKind, type JsonValue } from './columns.js';
import { recordCache, RecordShape } from './record-cache.js';

export type ColumnOfKind<K extends ColumnKind> = Extract<Column, { kind: K }>;

/**
 * The identity of tables whose rows read the same (see the file comment), and what is kept for
 * their rows: record builders and kept records per field list ('' for every field), made on first
 * use (record-cache.ts).
 */
export class TableLineage {
  readonly shapes = new Map<string, RecordShape>();
}

export class Table {
  private readonly byName: ReadonlyMap<string, Column>;
  readonly keyColumn: Utf8TextColumn;

  constructor(
    readonly resource: ResourceName,
    readonly schema: TableSchema,
    /** Aligned with schema.fields. */
    readonly columns: readonly Column[],
    /** @internal The key index (transfer.ts moves it between threads). */
    readonly keyIndex: ByteIndex,
    readonly rowCount: number,
    /** The engine's clock (epoch ms), for DaysOnMarket when no `now` is passed. */
    readonly clock: () => number,
    /** Shared only with tables whose rows below this one's rowCount read the same (an appender's next table). */
    readonly lineage: TableLineage = new TableLineage(),
  ) {
    this.byName = new Map(schema.fields.map((f, i) => [f.name, columns[i]]));
    const key = this.byName.get(schema.key);
    if (!(key instanceof Utf8TextColumn)) throw new Error(`${resource}: key column must be text`);
    this.keyColumn = key;
  }

  /** The column of a field of the schema, or undefined. */
  column(field: string): Column | undefined {
    return this.byName.get(field);
  }

  /** The column of a field when it has the given storage kind, else undefined. */
  columnOf<K extends ColumnKind>(field: string, kind: K): ColumnOfKind<K> | undefined {
    const c = this.byName.get(field);
    return c !== undefined && c.kind === kind ? (c as ColumnOfKind<K>) : undefined;
  }

  /** A field's JSON value in a row; null when absent or when the schema has no such field. */
  value(row: number, field: string, nowMs?: number): JsonValue {
    const c = this.byName.get(field);
    if (c === undefined) return null;
    return c.kind === 'daysOnMarket' ? c.get(row, nowMs ?? this.clock()) : c.json(row);
  }

  /**
   * The record of a row: every schema field, or the given ones, in schema order (fields the
   * schema lacks come last, as null), each with its JSON value, null when absent (a collection:
   * `[]`, never null).
   */
  record(row: number, fields?: readonly string[], nowMs?: number): Record<string, JsonValue> {
    return this.shapeOf(fields).record(this.columns, row, nowMs ?? this.clock(), recordCache);
  }

  /** Keeps the record `record(row, fields)` would build, so that its next read copies it (record-cache.ts); whether it built one. */
  keepRecord(row: number, fields: readonly string[] | undefined, nowMs: number): boolean {
    return this.shapeOf(fields).keep(this.columns, row, nowMs, recordCache);
  }

  /** The record of a row built afresh, as `record` gives it, without reading or keeping a kept record (tests compare the two). */
  builtRecord(row: number, fields?: readonly string[], nowMs?: number): Record<string, JsonValue> {
    return this.shapeOf(fields).built(this.columns, row, nowMs ?? this.clock());
  }

  private shapeOf(fields: readonly string[] | undefined): RecordShape {
    const key = fields === undefined ? '' : fields.join('\u0000');
    const { shapes } = this.lineage;
    let shape = shapes.get(key);
    if (shape === undefined) {
      shape = new RecordShape(
        this.schema.fields.map((f) => f.name),
        this.columns,
        fields,
      );
      if (shapes.size >= MAX_SHAPES) shapes.clear();
      shapes.set(key, shape);
    }
    return shape;
  }

  /** The same segment with one column replaced (the loader resolving a child's parent link). */
  withColumn(field: string, column: Column): Table {
    const i = this.schema.indexOf(field);
    if (i < 0) throw new Error(`${this.resource} has no field ${field}`);
    const columns = this.columns.slice();
    columns[i] = column;
    return new Table(this.resource, this.schema, columns, this.keyIndex, this.rowCount, this.clock);
  }

  /** The row of a key, or -1. */
  rowOfKey(key: string): number {
    return this.keyIndex.findString(key);
  }

  /** The row whose key is the UTF-8 bytes src[s, e), or -1. */
  rowOfKeyBytes(src: Uint8Array, s: number, e: number): number {
    return this.keyIndex.find(src, s, e, hashBytes(src, s, e));
  }

  keyOf(row: number): string {
    return this.keyColumn.get(row)!;
  }

  /** Bytes held by the columns and the key index (shared coordinate arrays counted once). */
  get byteLength(): number {
    const seen = new Set<ArrayBufferLike>();
    let n = this.keyIndex.byteLength;
    for (const c of this.columns) {
      if (c.kind === 'point') continue;
      n += c.byteLength;
      if ('values' in c) seen.add(c.values.buffer);
    }
    for (const c of this.columns) {
      if (c.kind !== 'point') continue;
      n += c.validity.byteLength;
      for (const a of [c.lat, c.lon]) {
        if (!seen.has(a.buffer)) {
          seen.add(a.buffer);
          n += a.byteLength;
        }
      }
    }
    return n;
  }
}

/** Field lists beyond this many distinct `$select`s start afresh. */
const MAX_SHAPES = 256;
