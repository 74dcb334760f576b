/**
 * TableAppender, and the design of src/store/append/ as a whole. Appending rows to a table without disturbing the tables already handed out: the first brick of
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
 * The key index of a generation is the loaded segment's, untouched, plus one delta over the
 * appended rows shared by every generation (key-delta.ts).
 *
 * A batch is a Table built by the loader from the batch's records (`loadRecords` or `loadBatch`)
 * for the same resource. Its columns are converted into the table's storage kinds (a dictionary
 * the batch's loader made text, a local string field whose batch values looked like dates, a
 * field the batch lacks: all nulls). A batch field with values that the table does not have, or
 * whose type the table's field cannot hold, is rejected with a `DataError` coded
 * `SchemaMismatch` before anything is written; a child whose listing the given Property table
 * lacks is rejected as `MissingParent`, also before anything is written.
 *
 * The engine's ChangeWriter (src/live/change.ts) drives it. Appended generations must not be
 * packed for another thread (transfer.ts transfers, i.e. detaches, buffers the other generations
 * share).
 *
 * The folder: batch.ts (loadBatch), schema-fit.ts (the checks before anything is written),
 * growable.ts (the backing arrays), parts/ (one column across generations, by storage kind),
 * key-delta.ts (the generations' key index) and this file, which ties them together.
 */
import { CATALOG } from '../../schema/catalog.js';
import type { TableSchema } from '../../schema/table-schema.js';
import type { ResourceName } from '../../schema/types.js';
import type { ByteIndex } from '../byte-index.js';
import { ParentKeyColumn, type Column, type DaysOnMarketColumn, type Utf8TextColumn } from '../columns.js';
import { Table, TableLineage } from '../table.js';
import { runNow, type Steps } from '../../util/steps.js';
import { GenerationKeyIndex, KeyDelta } from './key-delta.js';
import { DaysOnMarketPart, PointPart } from './parts/derived.js';
import { LinkPart } from './parts/link.js';
import { NumberPart, TimestampPart } from './parts/number.js';
import type { Batch, Part, Write } from './parts/part.js';
import { nullColumn, partOf } from './parts/part-of.js';
import { addedFields, fittingColumn, schemaMismatch, withFields } from './schema-fit.js';

export interface AppendOptions {
  /**
   * Child tables (Media, OpenHouse, PropertyChange): the Property generation the children link
   * to, normally the one the same change produced. Each batch row's listing key is resolved
   * against it (an upserted listing: its newest row), and the new generation reads its parents'
   * keys from it. Required for a table with a parent link; never older than the last one given.
   */
  readonly parent?: Table;
}

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
  /** Whether the next table starts a lineage of its own rather than continuing `current`'s (after a roll-back). */
  private freshLineage = false;

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
   * Steps that make room for `m` more rows in every column (reserve), with a check point after
   * each column and within a column's copy: an upsert runs them, with event-loop turns between,
   * before its first append, so the first append after a load (which copies every column of the
   * loaded segment) or a doubling does not copy them all at once.
   */
  *reserveSteps(m: number): Steps<void> {
    const n = this.current.rowCount;
    for (const part of this.parts) {
      yield* part.reserve(n, m);
      yield;
    }
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
    const added = addedFields(this.schemaNow, batch, m);
    if (added.length === 0) return;
    const n = this.current.rowCount;
    const byName = new Map(this.schemaNow.fields.map((f, i) => [f.name, this.parts[i]]));
    for (const f of added) byName.set(f.name, partOf(f.name, nullColumn(batch.column(f.name)!.kind, n)));
    this.schemaNow = withFields(this.schemaNow, added);
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
      // the rows past the checkpoint are written again with other values: nothing kept for the
      // tables made since may be read as theirs
      this.freshLineage = true;
    };
  }

  /**
   * Appends the batch's rows after the newest generation's and returns the new generation. A key
   * the table already has is an upsert: the new generation's `rowOfKey` finds the new row, every
   * older generation still its own. Throws before writing anything when the batch does not fit
   * (SchemaMismatch, MissingParent).
   */
  append(batch: Table, options: AppendOptions = {}): Table {
    return runNow(this.appendSteps(batch, options));
  }

  /**
   * `append` as steps, with a check point after every few columns prepared and written (a batch
   * of a table with hundreds of fields takes a while). Nothing is visible before the new
   * generation is returned; every check that can refuse the batch runs before the first write.
   */
  *appendSteps(batch: Table, options: AppendOptions = {}): Steps<Table> {
    const resource = this.resource;
    if (batch.resource !== resource) throw schemaMismatch(resource, null, `a ${batch.resource} batch cannot be appended to ${resource}`);
    const m = batch.rowCount;
    if (m === 0) return this.current;
    const restore = { schemaNow: this.schemaNow, parts: this.parts, keyAt: this.keyAt };
    this.addFields(batch, m);
    const ctx: Batch = { resource, table: batch, rows: m, parent: options.parent };
    const writes: Write[] = [];
    try {
      for (let i = 0; i < this.parts.length; i++) {
        writes.push(this.parts[i].prepare(fittingColumn(resource, this.schema.fields[i], batch, m), ctx));
        if (i % APPEND_CHECK_COLUMNS === APPEND_CHECK_COLUMNS - 1) yield;
      }
    } catch (e) {
      Object.assign(this, restore); // nothing was written: the fields added for this batch go too
      throw e;
    }
    const n = this.current.rowCount;
    const total = n + m;
    for (const w of writes) {
      if (w.reserveSteps === undefined) continue;
      yield* w.reserveSteps(n);
      yield;
    }
    for (let i = 0; i < writes.length; i++) {
      writes[i](n);
      if (i % APPEND_CHECK_COLUMNS === APPEND_CHECK_COLUMNS - 1) yield;
    }
    // the new generation's column objects (a derived column builds over its sources' views)
    const columns: Column[] = [];
    for (let i = 0; i < this.parts.length; i++) {
      columns.push(this.parts[i].column(total));
      if (i % COLUMN_CHECK === COLUMN_CHECK - 1) yield;
    }
    yield;
    const keys = columns[this.keyAt] as Utf8TextColumn;
    yield* this.delta.insertSteps(keys, n, total, this.baseIndex);
    const lineage = this.lineageFor(columns);
    this.current = new Table(resource, this.schemaNow, columns, new GenerationKeyIndex(this.baseIndex, this.delta, keys, total), total, this.clock, lineage);
    return this.current;
  }

  /**
   * The lineage of the next table: `current`'s when its rows read the same in the next one (the
   * same schema, so the same fields in the same order), else a new one (fields added, or a
   * roll-back since). Record builders are compiled per column kind, so the kinds are checked too,
   * though appending keeps each column's kind (codes widen, values convert to the column's kind).
   */
  private lineageFor(columns: readonly Column[]): TableLineage {
    const { current } = this;
    const same =
      !this.freshLineage &&
      this.schemaNow === current.schema &&
      columns.length === current.columns.length &&
      columns.every((c, i) => c.kind === current.columns[i].kind);
    this.freshLineage = false;
    return same ? current.lineage : new TableLineage();
  }
}

/** Columns prepared or written between two check points of appendSteps. */
const APPEND_CHECK_COLUMNS = 1;

/** New generation's column objects made between two check points of appendSteps. */
const COLUMN_CHECK = 16;
