/**
 * One resource's rows as an immutable column segment: dense row ids 0..rowCount-1 in load order,
 * typed column access by field name, the key index, and records rebuilt on demand in the schema's
 * stable field order. Upserts and removals make a new Table over longer views of the same arrays
 * (src/store/append/table-appender.ts) with a dead-row bitmap beside it (DESIGN.md, "Change"); a
 * Table itself never changes.
 */
import type { TableSchema } from '../schema/table-schema.js';
import type { ResourceName } from '../schema/types.js';
import type { ByteIndex } from './byte-index.js';
import { hashBytes } from './bytes.js';
import { Utf8TextColumn, type Column, type ColumnKind, type JsonValue } from './columns.js';

export type ColumnOfKind<K extends ColumnKind> = Extract<Column, { kind: K }>;

export class Table {
  private readonly byName: ReadonlyMap<string, Column>;
  /** Record builders per field list ('' for every field), compiled on first use. */
  private readonly builders = new Map<string, RecordBuilder>();
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
    const key = fields === undefined ? '' : fields.join('\u0000');
    let build = this.builders.get(key);
    if (build === undefined) {
      build = compileRecord(
        this.schema.fields.map((f) => f.name),
        this.columns,
        fields,
      );
      if (this.builders.size >= MAX_BUILDERS) this.builders.clear();
      this.builders.set(key, build);
    }
    return build(this.columns, row, nowMs ?? this.clock());
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

type RecordBuilder = (columns: readonly Column[], row: number, nowMs: number) => Record<string, JsonValue>;

/** Field lists beyond this many distinct `$select`s start the cache afresh. */
const MAX_BUILDERS = 256;

/**
 * A record builder for a field list, compiled to one object literal: every property is created
 * with the object, in order, and every column read is its own call site, so each stays
 * monomorphic. Measured on 69 Property fields: 6.5 µs per record against 15 µs for a loop over the
 * columns (the loop's one `c.json(row)` site sees every column class). Names are embedded as JSON
 * string literals; `__proto__` goes in computed form so that it is an own property, not the
 * prototype.
 */
function compileRecord(names: readonly string[], columns: readonly Column[], fields: readonly string[] | undefined): RecordBuilder {
  const wanted = fields === undefined ? null : new Set(fields);
  const parts: string[] = [];
  const prop = (name: string): string => (name === '__proto__' ? `[${JSON.stringify(name)}]` : JSON.stringify(name));
  names.forEach((name, i) => {
    if (wanted !== null && !wanted.has(name)) return;
    // a collection is never null in a record (CSDL: it exists and may be empty): an absent one is []
    const kind = columns[i].kind;
    parts.push(`${prop(name)}: c[${i}].${kind === 'daysOnMarket' ? 'get(row, now)' : kind === 'collection' ? 'get(row) ?? []' : 'json(row)'}`);
  });
  const known = new Set(names);
  for (const f of new Set(fields ?? [])) if (!known.has(f)) parts.push(`${prop(f)}: null`);
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- field names enter only as JSON string literals (DESIGN.md, 'Records')
  return new Function('c', 'row', 'now', `return {\n${parts.join(',\n')}\n};`) as RecordBuilder;
}
