/**
 * Appending rows to a table without disturbing the tables already handed out: the first brick of
 * DESIGN.md "Change". A `TableAppender` owns, for one table, a growable backing array behind
 * every column; each `append(batch)` writes the batch's rows beyond the last generation's rows
 * and returns a NEW `Table` (a *generation*) whose columns are new column objects holding
 * exact-length views of the backing arrays. An older generation keeps its views, and nothing it
 * can see is ever written again:
 *
 * - values, offsets, codes and bytes are written only past the older views' ends; a backing
 *   array that runs out of room is replaced by a larger copy (capacity doubles), and the older
 *   generations keep the old array. The loaded segment's own arrays are never written: the first
 *   append copies them (with 1/8 headroom), since they may be views into a shared buffer.
 * - validity and value bitmaps share their last word with the older view; only bits above the
 *   older row count change there, which that generation never reads.
 * - dictionaries, style tables, the timestamp exception map and the unlinked-parent map are
 *   copied when an append adds to them, so each generation holds its own (an older column's
 *   `dictionary.length` and lazily computed `ranks` stay what they were; a new column object
 *   computes its ranks afresh).
 * - Location/RawLocation keep sharing the Latitude/Longitude arrays, and DaysOnMarket the
 *   service_DaysOnMarketReferenceTimestamp arrays: each generation's derived columns are built
 *   on the very view objects of its Latitude/Longitude/reference columns.
 *
 * The key index of a generation (`GenerationKeyIndex`) is the loaded segment's index, untouched,
 * plus one delta hash table over the appended rows shared by every generation: a slot holds the
 * NEWEST row of a key and `prev[row - first]` chains each appended row to the older row of the
 * same key (an appended row or a base row), so an upsert's new row wins in the newest generation
 * while an older generation walks the chain below its row count and finds its own version.
 * Lookups stay allocation-free; the delta is sized by the appended rows, so the base index (18M
 * entries for Media at 1M listings) is neither copied nor rehashed.
 *
 * A batch is a Table built by the loader from the batch's records (`loadRecords` or `loadBatch`)
 * for the same resource. Its columns are converted into the table's storage kinds (a dictionary
 * the batch's loader made text, a local string field whose batch values looked like dates, a
 * field the batch lacks: all nulls). A batch field with values that the table does not have, or
 * whose type the table's field cannot hold, is rejected with a `DataError` coded
 * `SchemaMismatch` before anything is written; a child whose listing the given Property table
 * lacks is rejected as `MissingParent`, also before anything is written.
 *
 * The engine's ChangeWriter (src/live/change.ts) drives it. Appended generations must not be packed for another thread
 * (transfer.ts transfers, i.e. detaches, buffers the other generations share).
 */
import { QueryError } from '../errors.js';
import { CATALOG } from '../schema/catalog.js';
import { TableSchema } from '../schema/table-schema.js';
import type { FieldDef, ParentLink, ResourceName } from '../schema/types.js';
import { clearBit, getBit, setBit } from '../util/bits.js';
import { ByteIndex, type ByteIndexState } from './byte-index.js';
import { hashBytes, writeUtf8 } from './bytes.js';
import {
  BooleanColumn, CollectionColumn, DateColumn, DaysOnMarketColumn, DictionaryColumn, NumberColumn, ParentKeyColumn,
  PointColumn, TimestampColumn, Utf8TextColumn, type Column, type TextColumn,
} from './columns.js';
import { DataError } from './errors.js';
import { TableBuilder } from './ingest.js';
import { SkipLog } from './record.js';
import { Table } from './table.js';
import { CANONICAL_STYLE } from './temporal.js';

export interface AppendOptions {
  /**
   * Child tables (Media, OpenHouse, PropertyChange): the Property generation the children link
   * to, normally the one the same change produced. Each batch row's listing key is resolved
   * against it (an upserted listing: its newest row), and the new generation reads its parents'
   * keys from it. Required for a table with a parent link; never older than the last one given.
   */
  readonly parent?: Table;
}

export interface BatchOptions {
  /**
   * Child resources: the Property table to link to as the records are read (rows of it end up in
   * the batch's link column, and `append` with the same `parent` takes them as they are). Without
   * it the link is kept as text and resolved by `append`.
   */
  readonly parent?: Table;
  /** The clock for the batch's DaysOnMarket (the appended generations use the table's clock). */
  readonly now?: () => number;
}

/** Batches loaded by `loadBatch` against a parent: batch -> that Property table. */
const linkedTo = new WeakMap<Table, Table>();

/**
 * Loads one resource's batch records into a Table for `TableAppender.append` (errors as the
 * loader reports them: DataError with the record number). A child batch needs no Property
 * records: its listing keys are resolved against `options.parent`, or later by `append`.
 */
export function loadBatch(resource: ResourceName, records: readonly unknown[], options: BatchOptions = {}): Table {
  const child = CATALOG[resource].parent !== null;
  const b = new TableBuilder(resource, {
    skipBadRecords: false,
    skipLog: new SkipLog(),
    now: options.now ?? (() => Date.now()),
    parent: child ? options.parent : undefined,
    deferParent: child && options.parent === undefined,
  });
  for (let i = 0; i < records.length; i++) b.addValue(records[i], i + 1);
  const table = b.finish();
  if (child && options.parent !== undefined) linkedTo.set(table, options.parent);
  return table;
}

function schemaMismatch(resource: ResourceName, field: string | null, reason: string): DataError {
  return new DataError({ code: 'SchemaMismatch', file: `${resource} batch`, line: 0, field, reason });
}

/** The first row of a column that holds a value, or -1 (a column of nulls is as good as none). */
function firstValue(column: Column, rows: number): number {
  for (let r = 0; r < rows; r++) if (!column.isNull(r)) return r;
  return -1;
}

const typeName = (f: FieldDef): string => (f.collection ? `Collection(${f.type})` : f.type);

/**
 * Whether the table's field can hold the batch's values: the same type, or (local fields, whose
 * batch type was inferred from the batch alone) a type the loader would have widened to the
 * table's: integers into Edm.Decimal, dates and timestamps into Edm.String (kept as written).
 */
function typeFits(base: FieldDef, batch: FieldDef): boolean {
  if (base.collection !== batch.collection) return false;
  if (base.type === batch.type) return true;
  if (base.origin !== 'local' || base.collection) return false;
  if (base.type === 'Edm.Decimal') return batch.type === 'Edm.Int64';
  if (base.type === 'Edm.String') return batch.type === 'Edm.Date' || batch.type === 'Edm.DateTimeOffset';
  return false;
}

// ---- backing arrays ----------------------------------------------------------------------------

type Elements = Float64Array | Uint32Array | Uint16Array | Int32Array;

const MIN_CAPACITY = 1024;
const MAX_BYTES = 0xffff_ffff;

/** Elements for `needed`: an array of ours doubles; the first copy of a loaded one gets 1/8 more. */
function capacity(owned: boolean, length: number, needed: number): number {
  return owned ? Math.max(needed, length * 2) : Math.max(needed + (needed >>> 3), MIN_CAPACITY);
}

/**
 * The array behind one column array of every generation. Elements [0, used) are final (older
 * views cover them); appends write beyond. An array the appender did not allocate (the loaded
 * segment's) is never written: the first `room` copies it.
 */
class Backing<T extends Elements> {
  private owned = false;
  constructor(public array: T) {}

  /** The array, with room for `needed` elements, the first `used` kept. */
  room(used: number, needed: number): T {
    if (this.owned && needed <= this.array.length) return this.array;
    return this.copy(used, needed, this.array.constructor as new (n: number) => T);
  }

  /** Codes past 65,535: the same elements in a Uint32Array of room for `needed`. */
  widen(this: Backing<Uint16Array | Uint32Array>, used: number, needed: number): void {
    if (this.array instanceof Uint16Array) this.copy(used, needed, Uint32Array);
  }

  private copy<U extends Elements>(used: number, needed: number, make: new (n: number) => U): U {
    const next = new make(capacity(this.owned, this.array.length, needed));
    next.set(this.array.subarray(0, used));
    (this as unknown as Backing<U>).array = next;
    this.owned = true;
    return next;
  }
}

/** A bitmap behind every generation's view: bits above a view's row count may change. */
class Bits {
  private readonly words: Backing<Uint32Array>;
  constructor(bitmap: Uint32Array) {
    this.words = new Backing(bitmap);
  }

  room(used: number, needed: number): void {
    this.words.room((used + 31) >>> 5, (needed + 31) >>> 5);
  }

  /** Bits [at, at + m) from src[0, m) (every bit written, so nothing stale survives). */
  copy(src: Uint32Array, m: number, at: number): void {
    const w = this.words.array;
    for (let r = 0; r < m; r++) {
      if (getBit(src, r)) setBit(w, at + r);
      else clearBit(w, at + r);
    }
  }

  clear(at: number, m: number): void {
    const w = this.words.array;
    for (let r = 0; r < m; r++) clearBit(w, at + r);
  }

  put(row: number, on: boolean): void {
    if (on) setBit(this.words.array, row);
    else clearBit(this.words.array, row);
  }

  view(n: number): Uint32Array {
    return this.words.array.subarray(0, (n + 31) >>> 5);
  }
}

/** Text bytes: as Backing, for a Buffer. */
class ByteBacking {
  private owned = false;
  constructor(public bytes: Buffer) {}

  room(used: number, needed: number): Buffer {
    if (this.owned && needed <= this.bytes.length) return this.bytes;
    if (needed > MAX_BYTES) throw new QueryError('DataTooLarge', 'A text column holds more than 4 GiB of text.');
    const next = Buffer.allocUnsafeSlow(Math.min(MAX_BYTES, capacity(this.owned, this.bytes.length, needed)));
    this.bytes.copy(next, 0, 0, used);
    this.bytes = next;
    this.owned = true;
    return next;
  }
}

// ---- column parts --------------------------------------------------------------------------------

interface Batch {
  readonly resource: ResourceName;
  readonly table: Table;
  readonly rows: number;
  readonly parent: Table | undefined;
}

/** Writes the batch's rows as rows n..n+m-1; cannot fail (everything was checked before). */
type Write = (n: number) => void;

/** One column of the table across its generations. */
abstract class Part {
  private built: Column | null = null;
  private builtRows = -1;

  constructor(readonly field: string) {}

  /**
   * Checks that the batch's column (null: the batch has no values for the field) can go into this
   * one, throwing before anything is written, and returns the write.
   */
  abstract prepare(src: Column | null, batch: Batch): Write;

  /** The column of the generation of n rows (built once, so dependent columns share its views). */
  column(n: number): Column {
    if (this.builtRows !== n) {
      this.built = this.build(n);
      this.builtRows = n;
    }
    return this.built!;
  }

  protected abstract build(n: number): Column;

  /**
   * Makes room in the backing arrays for m rows after the first n, as the write of an append of m
   * rows would (the first time: copying the loaded segment's arrays), writing nothing: a caller
   * can then spread the copies over several steps.
   */
  reserve(_n: number, _m: number): void {}

  /** Saves the state appends change beyond the arrays; the function returned restores it. */
  checkpoint(): () => void {
    return () => {
      this.built = null;
      this.builtRows = -1;
    };
  }

  protected cannotHold(batch: Batch, kind: string, src: Column): DataError {
    return schemaMismatch(batch.resource, this.field, `the table stores ${this.field} as ${kind}; the batch's ${src.kind} values cannot be converted`);
  }
}

/** number and date columns. */
class NumberPart extends Part {
  private readonly numbers: Backing<Float64Array>;
  private readonly validity: Bits;
  readonly baseValues: Float64Array;

  constructor(field: string, private readonly kind: 'number' | 'date', base: NumberColumn | DateColumn) {
    super(field);
    this.baseValues = base.values;
    this.numbers = new Backing(base.values);
    this.validity = new Bits(base.validity);
  }

  override reserve(n: number, m: number): void {
    this.numbers.room(n, n + m);
    this.validity.room(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== this.kind) throw this.cannotHold(batch, this.kind, src);
    const m = batch.rows;
    return (n) => {
      const values = this.numbers.room(n, n + m);
      this.validity.room(n, n + m);
      if (src === null) {
        values.fill(0, n, n + m);
        this.validity.clear(n, m);
      } else {
        const s = src as NumberColumn | DateColumn;
        values.set(s.values.subarray(0, m), n);
        this.validity.copy(s.validity, m, n);
      }
    };
  }

  values(n: number): Float64Array {
    return (this.column(n) as NumberColumn | DateColumn).values;
  }

  protected build(n: number): Column {
    const values = this.numbers.array.subarray(0, n);
    return this.kind === 'number' ? new NumberColumn(values, this.validity.view(n)) : new DateColumn(values, this.validity.view(n));
  }
}

class TimestampPart extends Part {
  private readonly values: Backing<Float64Array>;
  private readonly validity: Bits;
  private styles: Backing<Uint16Array> | null;
  private styleTable: readonly number[];
  private exceptions: ReadonlyMap<number, string> | null;
  readonly baseValues: Float64Array;
  readonly baseValidity: Uint32Array;

  constructor(field: string, base: TimestampColumn) {
    super(field);
    this.baseValues = base.values;
    this.baseValidity = base.validity;
    this.values = new Backing(base.values);
    this.validity = new Bits(base.validity);
    this.styles = base.styles === null ? null : new Backing(base.styles);
    this.styleTable = base.styleTable;
    this.exceptions = base.exceptions;
  }

  override reserve(n: number, m: number): void {
    this.values.room(n, n + m);
    this.validity.room(n, n + m);
    this.styles?.room(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== 'timestamp') throw this.cannotHold(batch, 'timestamp', src);
    const m = batch.rows;
    // The batch's style codes in this column's style table (extended by a copy when needed).
    let table = this.styleTable;
    let remap: Uint16Array | null = null;
    if (src !== null && src.styles !== null) {
      const codes = new Map<number, number>();
      const extended = table.length === 0 ? [CANONICAL_STYLE] : table.slice();
      extended.forEach((style, code) => codes.set(style, code));
      remap = new Uint16Array(src.styleTable.length);
      src.styleTable.forEach((style, i) => {
        let code = codes.get(style);
        if (code === undefined) {
          code = extended.length;
          extended.push(style);
          codes.set(style, code);
        }
        remap![i] = code;
      });
      if (extended.length > 0x10000) throw new QueryError('DataTooLarge', 'A timestamp column holds more than 65,535 distinct written styles.');
      if (extended.length !== table.length) table = extended;
    }
    return (n) => {
      const values = this.values.room(n, n + m);
      this.validity.room(n, n + m);
      if (remap !== null && this.styles === null) this.styles = new Backing(new Uint16Array(0)); // older rows: code 0, canonical
      const styles = this.styles?.room(n, n + m) ?? null;
      if (src === null) {
        values.fill(0, n, n + m);
        this.validity.clear(n, m);
        styles?.fill(0, n, n + m);
        return;
      }
      const s = src as TimestampColumn;
      values.set(s.values.subarray(0, m), n);
      this.validity.copy(s.validity, m, n);
      if (styles !== null) {
        if (remap === null || s.styles === null) styles.fill(0, n, n + m);
        else for (let r = 0; r < m; r++) styles[n + r] = remap[s.styles[r]];
      }
      this.styleTable = table;
      if (s.exceptions !== null && s.exceptions.size > 0) {
        const exceptions = new Map(this.exceptions ?? []);
        for (const [row, text] of s.exceptions) if (row < m) exceptions.set(n + row, text);
        this.exceptions = exceptions;
      }
    };
  }

  override checkpoint(): () => void {
    const restore = super.checkpoint();
    const { styles, styleTable, exceptions } = this;
    return () => {
      restore();
      Object.assign(this, { styles, styleTable, exceptions });
    };
  }

  protected build(n: number): Column {
    const styles = this.styles === null ? null : this.styles.array.subarray(0, n);
    return new TimestampColumn(this.values.array.subarray(0, n), this.validity.view(n), styles, this.styleTable, this.exceptions);
  }
}

class BooleanPart extends Part {
  private readonly bits: Bits;
  private readonly validity: Bits;

  constructor(field: string, base: BooleanColumn) {
    super(field);
    this.bits = new Bits(base.bits);
    this.validity = new Bits(base.validity);
  }

  override reserve(n: number, m: number): void {
    this.bits.room(n, n + m);
    this.validity.room(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== 'boolean') throw this.cannotHold(batch, 'boolean', src);
    const m = batch.rows;
    return (n) => {
      this.bits.room(n, n + m);
      this.validity.room(n, n + m);
      if (src === null) {
        this.bits.clear(n, m);
        this.validity.clear(n, m);
      } else {
        const s = src as BooleanColumn;
        this.bits.copy(s.bits, m, n);
        this.validity.copy(s.validity, m, n);
      }
    };
  }

  protected build(n: number): Column {
    return new BooleanColumn(this.bits.view(n), this.validity.view(n));
  }
}

/** A batch column's values as strings, for a table column that stores strings; null when it has none. */
function stringsOf(src: Column): ((row: number) => string | null) | null {
  switch (src.kind) {
    case 'dictionary':
    case 'text':
      return (row) => src.get(row);
    case 'date':
      return (row) => src.json(row) as string | null;
    case 'timestamp':
      return (row) => src.text(row);
    default:
      return null;
  }
}

/**
 * Codes of a dictionary (dictionary and collection columns): the current generation's entries,
 * a string -> code map built at the first append, and new entries added to a copy of the entries
 * (the published generations keep theirs).
 */
class Codes {
  private codeOf: Map<string, number> | null = null;
  private added: Array<string | null> | null = null;

  constructor(
    public entries: ReadonlyArray<string | null>,
    /** The code of entries[0] (dictionary columns: 0 is null and entries start at 1). */
    private readonly from: number,
  ) {}

  code(value: string): number {
    const map = (this.codeOf ??= this.mapOf());
    let code = map.get(value);
    if (code === undefined) {
      this.added ??= this.entries.slice();
      code = this.added.length;
      this.added.push(value);
      map.set(value, code);
    }
    return code;
  }

  /** Codes of the batch's dictionary, looked up as its rows use them: remap[batchCode], -1 until seen. */
  remapper(dictionary: ReadonlyArray<string | null>): (code: number) => number {
    const remap = new Int32Array(dictionary.length).fill(-1);
    return (b) => {
      let c = remap[b];
      if (c < 0) c = remap[b] = this.code(dictionary[b]!);
      return c;
    };
  }

  /** Ends an append: the entries with its additions (a new array when there were any). */
  publish(): number {
    if (this.added !== null) {
      this.entries = this.added;
      this.added = null;
    }
    return this.entries.length;
  }

  private mapOf(): Map<string, number> {
    const map = new Map<string, number>();
    for (let i = this.from; i < this.entries.length; i++) map.set(this.entries[i]!, i);
    return map;
  }
}

class DictionaryPart extends Part {
  private readonly codes: Backing<Uint16Array | Uint32Array>;
  private readonly dict: Codes;

  constructor(field: string, base: DictionaryColumn) {
    super(field);
    this.codes = new Backing<Uint16Array | Uint32Array>(base.codes);
    this.dict = new Codes(base.dictionary, 1);
  }

  override reserve(n: number, m: number): void {
    this.codes.room(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    const strings = src === null || src.kind === 'dictionary' ? null : stringsOf(src);
    if (src !== null && src.kind !== 'dictionary' && strings === null) throw this.cannotHold(batch, 'strings', src);
    const m = batch.rows;
    return (n) => {
      const out = new Uint32Array(m);
      if (src !== null && src.kind === 'dictionary') {
        const code = this.dict.remapper(src.dictionary);
        for (let r = 0; r < m; r++) {
          const b = src.codes[r];
          out[r] = b === 0 ? 0 : code(b);
        }
      } else if (strings !== null) {
        for (let r = 0; r < m; r++) {
          const s = strings(r);
          out[r] = s === null ? 0 : this.dict.code(s);
        }
      }
      if (this.dict.publish() - 1 > 0xffff) this.codes.widen(n, n + m);
      this.codes.room(n, n + m).set(out, n);
    };
  }

  protected build(n: number): Column {
    return new DictionaryColumn(this.codes.array.subarray(0, n), this.dict.entries);
  }
}

class CollectionPart extends Part {
  private readonly offsets: Backing<Uint32Array>;
  private readonly codes: Backing<Uint16Array | Uint32Array>;
  private readonly validity: Bits;
  private readonly dict: Codes;

  constructor(field: string, base: CollectionColumn) {
    super(field);
    this.offsets = new Backing(base.offsets);
    this.codes = new Backing<Uint16Array | Uint32Array>(base.codes);
    this.validity = new Bits(base.validity);
    this.dict = new Codes(base.dictionary, 0);
  }

  override reserve(n: number, m: number): void {
    const at = this.offsets.room(n + 1, n + m + 1)[n];
    this.validity.room(n, n + m);
    this.codes.room(at, at);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== 'collection') throw this.cannotHold(batch, 'collection', src);
    const m = batch.rows;
    return (n) => {
      const offsets = this.offsets.room(n + 1, n + m + 1);
      this.validity.room(n, n + m);
      const at = offsets[n];
      if (src === null) {
        offsets.fill(at, n + 1, n + m + 1);
        this.validity.clear(n, m);
        return;
      }
      const s = src as CollectionColumn;
      const o0 = s.offsets[0];
      const count = s.offsets[m] - o0;
      const out = new Uint32Array(count);
      const code = this.dict.remapper(s.dictionary);
      for (let i = 0; i < count; i++) out[i] = code(s.codes[o0 + i]);
      if (this.dict.publish() - 1 > 0xffff) this.codes.widen(at, at + count);
      this.codes.room(at, at + count).set(out, at);
      for (let r = 0; r < m; r++) offsets[n + 1 + r] = at + s.offsets[r + 1] - o0;
      this.validity.copy(s.validity, m, n);
    };
  }

  protected build(n: number): Column {
    const offsets = this.offsets.array.subarray(0, n + 1);
    return new CollectionColumn(offsets, this.codes.array.subarray(0, offsets[n]), this.dict.entries as string[], this.validity.view(n));
  }
}

/** UTF-8 text (Utf8TextColumn), the key column among them. */
class TextPart extends Part {
  private readonly bytes: ByteBacking;
  private readonly offsets: Backing<Uint32Array>;
  private readonly validity: Bits;

  constructor(field: string, base: Utf8TextColumn) {
    super(field);
    this.bytes = new ByteBacking(base.bytes);
    this.offsets = new Backing(base.offsets);
    this.validity = new Bits(base.validity);
  }

  override reserve(n: number, m: number): void {
    const end = this.offsets.room(n + 1, n + m + 1)[n];
    this.validity.room(n, n + m);
    this.bytes.room(end, end);
  }

  prepare(src: Column | null, batch: Batch): Write {
    const m = batch.rows;
    if (src instanceof Utf8TextColumn) {
      const o0 = src.offsets[0];
      const size = src.offsets[m] - o0;
      return (n) => {
        const offsets = this.offsets.room(n + 1, n + m + 1);
        const end = offsets[n];
        const bytes = this.bytes.room(end, end + size);
        src.bytes.copy(bytes, end, o0, o0 + size);
        for (let r = 0; r < m; r++) offsets[n + 1 + r] = end + src.offsets[r + 1] - o0;
        this.validity.room(n, n + m);
        this.validity.copy(src.validity, m, n);
      };
    }
    const strings = src === null ? null : stringsOf(src);
    if (src !== null && strings === null) throw this.cannotHold(batch, 'text', src);
    return (n) => {
      const offsets = this.offsets.room(n + 1, n + m + 1);
      this.validity.room(n, n + m);
      let end = offsets[n];
      for (let r = 0; r < m; r++) {
        const s = strings === null ? null : strings(r);
        if (s !== null) end = writeUtf8(s, this.bytes.room(end, end + s.length * 3), end);
        this.validity.put(n + r, s !== null);
        offsets[n + 1 + r] = end;
      }
    };
  }

  protected build(n: number): Column {
    const offsets = this.offsets.array.subarray(0, n + 1);
    return new Utf8TextColumn(this.bytes.bytes.subarray(0, offsets[n]), offsets, this.validity.view(n));
  }
}

/** A child's link to its listing: Property rows, resolved against the Property table given. */
class LinkPart extends Part {
  private readonly parentRow: Backing<Int32Array>;
  private unlinked: ReadonlyMap<number, string> | null;
  private parentKeys: TextColumn | null = null;
  private parentRows = 0;

  constructor(field: string, base: ParentKeyColumn, private readonly link: ParentLink) {
    super(field);
    this.parentRow = new Backing(base.parentRow);
    this.unlinked = base.unlinked;
  }

  override reserve(n: number, m: number): void {
    this.parentRow.room(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    const parent = batch.parent;
    if (parent === undefined || parent.resource !== 'Property') {
      throw new Error(`appending ${batch.resource} needs the Property table its children link to (options.parent)`);
    }
    if (parent.rowCount < this.parentRows) throw new Error(`${batch.resource}: options.parent is older than the Property table given before`);
    const m = batch.rows;
    const rows = new Int32Array(m).fill(-1);
    const unlinked: Array<[number, string]> = [];
    if (src instanceof ParentKeyColumn) {
      if (linkedTo.get(batch.table) === parent) {
        rows.set(src.parentRow.subarray(0, m));
      } else {
        // Linked to the batch's own Property records: resolve their keys (children come grouped by listing).
        let last = -1;
        let lastRow = -1;
        for (let r = 0; r < m; r++) {
          const p = src.parentRow[r];
          if (p < 0) continue;
          if (p !== last) {
            last = p;
            lastRow = this.resolve(batch, parent, src.get(r)!, r);
          }
          rows[r] = lastRow;
        }
      }
      if (src.unlinked !== null) for (const [row, text] of src.unlinked) if (row < m) unlinked.push([row, text]);
    } else if (src !== null) {
      // Kept as text (loadBatch without a parent): resolve each linkable row's key here.
      const strings = stringsOf(src);
      if (strings === null) throw this.cannotHold(batch, 'text', src);
      const when = this.link.when;
      for (let r = 0; r < m; r++) {
        const linkable = when === null || batch.table.value(r, when.field) === when.equals;
        if (!linkable) {
          const text = strings(r);
          if (text !== null) unlinked.push([r, text]);
          continue;
        }
        if (src instanceof Utf8TextColumn && !src.isNull(r)) {
          const s = src.offsets[r];
          const e = src.offsets[r + 1];
          const p = parent.rowOfKeyBytes(src.bytes, s, e);
          rows[r] = p >= 0 ? p : this.resolve(batch, parent, src.get(r)!, r);
        } else {
          const text = strings(r);
          if (text === null) throw new DataError({ code: 'MissingParent', file: `${batch.resource} batch`, line: 0, field: this.field, reason: `batch row ${r + 1} has no ${this.field}` });
          rows[r] = this.resolve(batch, parent, text, r);
        }
      }
    }
    return (n) => {
      this.parentRow.room(n, n + m).set(rows, n);
      if (unlinked.length > 0) {
        const map = new Map(this.unlinked ?? []);
        for (const [row, text] of unlinked) map.set(n + row, text);
        this.unlinked = map;
      }
      this.parentKeys = parent.keyColumn;
      this.parentRows = parent.rowCount;
    };
  }

  override checkpoint(): () => void {
    const restore = super.checkpoint();
    const { unlinked, parentKeys, parentRows } = this;
    return () => {
      restore();
      Object.assign(this, { unlinked, parentKeys, parentRows });
    };
  }

  private resolve(batch: Batch, parent: Table, key: string, row: number): number {
    const p = parent.rowOfKey(key);
    if (p < 0) {
      throw new DataError({
        code: 'MissingParent', file: `${batch.resource} batch`, line: 0, field: this.field,
        reason: `${this.field} '${key}' (batch row ${row + 1}) matches no Property record`,
      });
    }
    return p;
  }

  protected build(n: number): Column {
    return new ParentKeyColumn(this.parentRow.array.subarray(0, n), this.parentKeys!, this.unlinked);
  }
}

/** Location / RawLocation: coordinates shared with Latitude/Longitude when the loaded segment shared them. */
class PointPart extends Part {
  private readonly lat: NumberPart | Backing<Float64Array>;
  private readonly lon: NumberPart | Backing<Float64Array>;
  private readonly validity: Bits;

  constructor(field: string, base: PointColumn, owners: readonly NumberPart[]) {
    super(field);
    this.lat = owners.find((p) => p.baseValues === base.lat) ?? new Backing(base.lat);
    this.lon = owners.find((p) => p.baseValues === base.lon) ?? new Backing(base.lon);
    this.validity = new Bits(base.validity);
  }

  override reserve(n: number, m: number): void {
    for (const own of [this.lat, this.lon]) if (own instanceof Backing) own.room(n, n + m);
    this.validity.room(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== 'point') throw this.cannotHold(batch, 'point', src);
    const m = batch.rows;
    return (n) => {
      // Shared coordinates are written by their Latitude/Longitude part.
      for (const [own, values] of [[this.lat, src?.lat], [this.lon, src?.lon]] as const) {
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
class DaysOnMarketPart extends Part {
  private readonly owner: TimestampPart | null;
  private readonly reference: Backing<Float64Array>;
  private readonly validity: Bits;

  constructor(field: string, base: DaysOnMarketColumn, owners: readonly TimestampPart[]) {
    super(field);
    this.owner = owners.find((p) => p.baseValues === base.reference && p.baseValidity === base.validity) ?? null;
    this.reference = new Backing(base.reference);
    this.validity = new Bits(base.validity);
  }

  override reserve(n: number, m: number): void {
    if (this.owner !== null) return;
    this.reference.room(n, n + m);
    this.validity.room(n, n + m);
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
        const s = src as DaysOnMarketColumn;
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

// ---- the key index -------------------------------------------------------------------------------

/**
 * The keys of the appended rows, shared by every generation of one table: open addressing with
 * linear probing as in ByteIndex (slot i: table[2i] = row + 1, table[2i + 1] = hash), a slot per
 * key holding its newest row, and prev[row - first] = the older row of the same key (a base row,
 * an appended row, or -1).
 */
class KeyDelta {
  table = new Int32Array(32);
  mask = 15;
  /** Keys in the delta. */
  size = 0;
  /** Of them, keys the base segment has too. */
  inBase = 0;
  readonly prev = new Backing(new Int32Array(0));

  constructor(
    /** The base segment's row count: appended rows start there. */
    readonly first: number,
  ) {}

  /** Adds rows [from, to) of the key column (its bytes final); `base` is the segment's own index. */
  insert(keys: Utf8TextColumn, from: number, to: number, base: ByteIndex): void {
    const prev = this.prev.room(from - this.first, to - this.first);
    const { bytes, offsets } = keys;
    for (let row = from; row < to; row++) {
      if ((this.size + 1) * 2 > this.table.length >>> 1) this.rehash(this.table.length);
      const s = offsets[row];
      const e = offsets[row + 1];
      const h = hashBytes(bytes, s, e);
      const hash = h | 0;
      const table = this.table;
      const mask = this.mask;
      for (let i = h & mask; ; i = (i + 1) & mask) {
        const entry = table[2 * i] - 1;
        if (entry < 0) {
          table[2 * i] = row + 1;
          table[2 * i + 1] = hash;
          this.size++;
          const older = base.find(bytes, s, e, h);
          if (older >= 0) this.inBase++;
          prev[row - this.first] = older;
          break;
        }
        if (table[2 * i + 1] === hash && bytes.compare(bytes, offsets[entry], offsets[entry + 1], s, e) === 0) {
          prev[row - this.first] = entry;
          table[2 * i] = row + 1;
          break;
        }
      }
    }
  }

  /**
   * Forgets the rows at or past `bound` (an append rolled back): each key's slot goes back to its
   * newest row below the bound, and keys whose every appended row is gone leave the table.
   */
  truncate(bound: number): void {
    const prev = this.prev.array;
    const old = this.table;
    this.table = new Int32Array(old.length);
    this.size = 0;
    this.inBase = 0;
    for (let j = 0; j < old.length; j += 2) {
      let row = old[j] - 1;
      if (row < 0) continue;
      while (row >= bound) row = prev[row - this.first];
      if (row < this.first) continue; // a base row or none: the base index answers
      let i = old[j + 1] & this.mask;
      while (this.table[2 * i] !== 0) i = (i + 1) & this.mask;
      this.table[2 * i] = row + 1;
      this.table[2 * i + 1] = old[j + 1];
      this.size++;
      let first = row;
      while (first >= this.first) first = prev[first - this.first];
      if (first >= 0) this.inBase++;
    }
  }

  private rehash(slots: number): void {
    const old = this.table;
    const table = new Int32Array(slots * 2);
    const mask = slots - 1;
    for (let j = 0; j < old.length; j += 2) {
      if (old[j] === 0) continue;
      let i = old[j + 1] & mask;
      while (table[2 * i] !== 0) i = (i + 1) & mask;
      table[2 * i] = old[j];
      table[2 * i + 1] = old[j + 1];
    }
    this.table = table;
    this.mask = mask;
  }
}

/**
 * The key index of one generation: the keys of its rows [0, bound), the newest row per key. The
 * shared delta first (walking a key's chain below the bound), then the base segment's index.
 * Read-only; lookups allocate nothing.
 */
export class GenerationKeyIndex extends ByteIndex {
  constructor(
    private readonly base: ByteIndex,
    private readonly delta: KeyDelta,
    /** This generation's key column (rows below the bound). */
    private readonly keys: Utf8TextColumn,
    private readonly bound: number,
  ) {
    super(keys);
    this.size = base.size + delta.size - delta.inBase;
  }

  override find(src: Uint8Array, s: number, e: number, h: number): number {
    const delta = this.delta;
    const table = delta.table;
    const mask = delta.mask;
    const prev = delta.prev.array;
    const first = delta.first;
    const bound = this.bound;
    const hash = h | 0;
    const len = e - s;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      let row = table[2 * i] - 1;
      if (row < 0) break;
      if (table[2 * i + 1] !== hash) continue;
      // Rows at or past the bound belong to newer generations (all appended: bound >= first).
      while (row >= bound) row = prev[row - first];
      if (row < 0) continue;
      const offsets = this.keys.offsets;
      const os = offsets[row];
      if (offsets[row + 1] - os !== len) continue;
      const bytes = this.keys.bytes;
      let j = 0;
      while (j < len && bytes[os + j] === src[s + j]) j++;
      if (j === len) return row;
    }
    return this.base.find(src, s, e, h);
  }

  override add(): void {
    throw new Error('a generation key index is read-only');
  }

  override reserve(): void {
    throw new Error('a generation key index is read-only');
  }

  override rebind(): void {
    throw new Error('a generation key index is read-only');
  }

  /** A plain index of this generation's keys (newest row per key), for snapshots. */
  override get state(): ByteIndexState {
    const plain = new ByteIndex(this.keys, this.size);
    const { bytes, offsets } = this.keys;
    for (let row = this.bound - 1; row >= 0; row--) {
      const s = offsets[row];
      const e = offsets[row + 1];
      const h = hashBytes(bytes, s, e);
      if (this.find(bytes, s, e, h) === row) plain.add(row, h);
    }
    return plain.state;
  }

  override get byteLength(): number {
    return this.base.byteLength + this.delta.table.byteLength + this.delta.prev.array.byteLength;
  }
}

/** The part of a stored (not derived, not link) column. */
function partOf(name: string, c: Column): Part {
  switch (c.kind) {
    case 'number':
    case 'date':
      return new NumberPart(name, c.kind, c);
    case 'timestamp':
      return new TimestampPart(name, c);
    case 'boolean':
      return new BooleanPart(name, c);
    case 'dictionary':
      return new DictionaryPart(name, c);
    case 'collection':
      return new CollectionPart(name, c);
    case 'text':
      if (c instanceof Utf8TextColumn) return new TextPart(name, c);
      break;
  }
  throw new Error(`${name}: cannot append to a ${c.kind} column of this class`);
}

/** A column of `n` nulls of a storage kind (a field a batch adds: older rows had no value). */
function nullColumn(kind: Column['kind'], n: number): Column {
  const none = (): Uint32Array => new Uint32Array((n + 31) >>> 5);
  switch (kind) {
    case 'number':
      return new NumberColumn(new Float64Array(n), none());
    case 'date':
      return new DateColumn(new Float64Array(n), none());
    case 'timestamp':
      return new TimestampColumn(new Float64Array(n), none(), null, [], null);
    case 'boolean':
      return new BooleanColumn(none(), none());
    case 'dictionary':
      return new DictionaryColumn(new Uint16Array(n), [null]);
    case 'collection':
      return new CollectionColumn(new Uint32Array(n + 1), new Uint16Array(0), [], none());
    case 'text':
      return new Utf8TextColumn(Buffer.alloc(0), new Uint32Array(n + 1), none());
    default:
      throw new Error(`no null column of kind ${kind}`);
  }
}

// ---- the appender --------------------------------------------------------------------------------

/**
 * Appends batches to one table, producing a new generation (Table) per batch; see the module
 * comment. `table` is the newest generation; every generation returned stays valid and unchanged.
 */
export class TableAppender {
  readonly resource: ResourceName;
  private schemaNow: TableSchema;
  private parts: Part[];
  private keyAt: number;
  private readonly baseIndex: ByteIndex;
  private readonly delta: KeyDelta;
  private readonly clock: () => number;
  private current: Table;

  constructor(base: Table) {
    this.resource = base.resource;
    this.schemaNow = base.schema;
    this.clock = base.clock;
    this.current = base;
    this.baseIndex = base.keyIndex;
    this.delta = new KeyDelta(base.rowCount);
    this.keyAt = base.schema.indexOf(base.schema.key);
    const link = CATALOG[base.resource].parent;
    const numbers: NumberPart[] = [];
    const timestamps: TimestampPart[] = [];
    const parts = base.schema.fields.map((f, i): Part | null => {
      const c = base.columns[i];
      if (c.kind === 'point' || c.kind === 'daysOnMarket') return null; // derived from other columns: below
      if (c instanceof ParentKeyColumn) {
        if (link !== null && link.field === f.name) return new LinkPart(f.name, c, link);
        throw new Error(`${base.resource}.${f.name}: cannot append to this text column`);
      }
      const p = partOf(f.name, c);
      if (p instanceof NumberPart) numbers.push(p);
      if (p instanceof TimestampPart) timestamps.push(p);
      return p;
    });
    this.parts = parts.map((p, i) => {
      if (p !== null) return p;
      const c = base.columns[i];
      const name = base.schema.fields[i].name;
      return c.kind === 'point' ? new PointPart(name, c, numbers) : new DaysOnMarketPart(name, c as DaysOnMarketColumn, timestamps);
    });
  }

  /** The newest generation. */
  get table(): Table {
    return this.current;
  }

  /**
   * One step per column that makes room for `m` more rows (reserve): an upsert runs them, with the
   * event loop yielded between, before its first append, so the first append after a load (which
   * copies every column of the loaded segment) or a doubling does not copy them all at once.
   */
  reserveSteps(m: number): Array<() => void> {
    const n = this.current.rowCount;
    return this.parts.map((part) => () => part.reserve(n, m));
  }

  /** The newest generation's schema (a batch may add fields). */
  get schema(): TableSchema {
    return this.schemaNow;
  }

  /**
   * Fields the batch carries values of that the table lacks: each becomes a new column (nulls in
   * every older row) and the schema gains it, ordered as the loader orders fields, as a data set
   * whose records carried it from the start would have it. Derived and link fields are never new.
   */
  private addFields(batch: Table, m: number): void {
    const added: FieldDef[] = [];
    for (const f of batch.schema.fields) {
      if (this.schemaNow.indexOf(f.name) >= 0) continue;
      const src = batch.column(f.name)!;
      if (firstValue(src, m) < 0) continue;
      if (src.kind === 'point' || src.kind === 'daysOnMarket' || src instanceof ParentKeyColumn) {
        throw schemaMismatch(this.resource, f.name, `the ${this.resource} table has no field ${f.name}, and it cannot be added by a batch`);
      }
      added.push(f);
    }
    if (added.length === 0) return;
    const n = this.current.rowCount;
    const byName = new Map(this.schemaNow.fields.map((f, i) => [f.name, this.parts[i]]));
    for (const f of added) byName.set(f.name, partOf(f.name, nullColumn(batch.column(f.name)!.kind, n)));
    const fields = [...this.schemaNow.fields, ...added];
    this.schemaNow = new TableSchema(this.resource, this.schemaNow.key, fields.filter((f) => f.origin !== 'local'), fields.filter((f) => f.origin === 'local'));
    this.parts = this.schemaNow.fields.map((f) => byName.get(f.name)!);
    this.keyAt = this.schemaNow.indexOf(this.schemaNow.key);
  }

  /**
   * Saves the appender's state; the function returned rolls every append made since back (a
   * change that failed part-way): the newest generation is the one of the checkpoint again, and
   * the rows written after it are overwritten by the next append. Generations handed out before
   * the checkpoint are untouched; ones handed out after it must be dropped.
   */
  checkpoint(): () => void {
    const table = this.current;
    const { schemaNow, parts: partList, keyAt } = this;
    const parts = partList.map((p) => p.checkpoint());
    return () => {
      for (const restore of parts) restore();
      Object.assign(this, { schemaNow, parts: partList, keyAt });
      this.delta.truncate(table.rowCount);
      this.current = table;
    };
  }

  /**
   * Appends the batch's rows after the newest generation's and returns the new generation. A key
   * the table already has is an upsert: the new generation's `rowOfKey` finds the new row, every
   * older generation still its own. Throws before writing anything when the batch does not fit
   * (SchemaMismatch, MissingParent).
   */
  append(batch: Table, options: AppendOptions = {}): Table {
    const resource = this.resource;
    if (batch.resource !== resource) throw schemaMismatch(resource, null, `a ${batch.resource} batch cannot be appended to ${resource}`);
    const m = batch.rowCount;
    if (m === 0) return this.current;
    const restore = { schemaNow: this.schemaNow, parts: this.parts, keyAt: this.keyAt };
    this.addFields(batch, m);
    try {
      return this.write(batch, m, options);
    } catch (e) {
      Object.assign(this, restore); // nothing was written: the fields added for this batch go too
      throw e;
    }
  }

  private write(batch: Table, m: number, options: AppendOptions): Table {
    const resource = this.resource;
    const ctx: Batch = { resource, table: batch, rows: m, parent: options.parent };
    const writes = this.parts.map((part, i) => {
      const def = this.schema.fields[i];
      const batchDef = batch.schema.field(def.name);
      const col = batchDef === undefined ? undefined : batch.column(def.name);
      let src: Column | null = null;
      if (col !== undefined) {
        const row = firstValue(col, m);
        if (row >= 0) {
          if (!typeFits(def, batchDef!)) {
            throw schemaMismatch(resource, def.name, `${def.name} is ${typeName(def)} in the ${resource} table; the batch's values are ${typeName(batchDef!)} (batch row ${row + 1})`);
          }
          src = col;
        }
      }
      return part.prepare(src, ctx);
    });
    const n = this.current.rowCount;
    const total = n + m;
    for (const write of writes) write(n);
    const columns = this.parts.map((p) => p.column(total));
    const keys = columns[this.keyAt] as Utf8TextColumn;
    this.delta.insert(keys, n, total, this.baseIndex);
    this.current = new Table(resource, this.schemaNow, columns, new GenerationKeyIndex(this.baseIndex, this.delta, keys, total), total, this.clock);
    return this.current;
  }
}
