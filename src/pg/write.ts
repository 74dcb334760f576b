/**
 * Changes on PostgreSQL (DESIGN.md, "PostgreSQL backend"): upserts and removals over several
 * resources as ONE transaction, with the in-memory change writer's semantics (src/live/change.ts,
 * DESIGN.md "Change" and "EntityEvent") and its own code wherever it can serve:
 *
 * - Records (values or JSON Lines bytes, the last version of each key) are read by the loader's
 *   batch path (`readBatch` of src/live/upsert-input.ts, in chunks of CHUNK_RECORDS with the record
 *   or line numbers of the whole operation), so a bad record is the same DataError, and nothing is
 *   written: the transaction rolls back. A batch's fit to its table (SchemaMismatch, new fields)
 *   is `schema-fit.ts`'s; a new field is added with ALTER TABLE in the same transaction and the
 *   schema in `#meta` grows with it.
 * - A child's listing is resolved by the loader against a Property table of the listing keys the
 *   chunk names that PostgreSQL has (live, or removed: those `#first` remembers), so the error and
 *   its record number are the loader's; a removed one is the change writer's MissingParent.
 * - A replacing listing's service_OriginalEntryTimestamp and DaysOnMarket reference are
 *   `keepFirstEntry`'s, from the first version's ModificationTimestamp kept in `#first` (the
 *   in-memory writer keeps it in memory and in snapshots).
 * - A listing's search tokens are the in-memory index's (`searchTokenSources`, address
 *   normalization applied); `#terms` df changes by the distinct terms of the old and new
 *   versions, `#search` n and total_length by the listings and their token counts.
 * - EntityEvent: one event per record written, in the order the in-memory writer logs them
 *   (a removed listing's Media and OpenHouse after it, in their default order, the ones this
 *   change added last), numbered after the log's newest, through `eventRecord`.
 * - Lookup: the rows `newLookupRecords` finds in the change's batches that the table lacks.
 * - `#meta` `generation`: one more per change that changed something (the summary's generation).
 *
 * Writers are serialized by a transaction-level advisory lock per PostgreSQL schema, taken before
 * anything is read, so two engines or processes writing one database keep `#terms` exact; the
 * transaction runs READ COMMITTED, so after the lock every statement sees the writes committed
 * before it. Readers see the data before the change or after it, never between. Every value is a
 * bind parameter; rows go as one text array per column through unnest (one statement per chunk
 * and table, never one per record).
 */
import type pg from 'pg';
import { QueryError } from '../errors.js';
import { checkOperations, CHUNK_RECORDS, keepFirstEntry, type ChangeOperation, type ChangeSummary } from '../live/change.js';
import { readBatch, upsertInputSteps, type UpsertInput } from '../live/upsert-input.js';
import { CATALOG } from '../schema/catalog.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../schema/search-fields.js';
import { TableSchema } from '../schema/table-schema.js';
import {
  CHILD_RESOURCES,
  EVENT_SOURCED,
  RESOURCE_NAMES,
  type ChildResourceName,
  type EventSourcedName,
  type FieldDef,
  type RecordResourceName,
  type ResourceName,
} from '../schema/types.js';
import { searchTokenSources } from '../search/indexes.js';
import { normalizeAddressToken } from '../search/tokenize.js';
import { loadBatch } from '../store/append/batch.js';
import { addedFields, fittingColumn, withFields } from '../store/append/schema-fit.js';
import type { ParentKeyColumn } from '../store/columns.js';
import { DataError } from '../store/errors.js';
import { eventRecord, sourceOf, type EventOf } from '../store/events.js';
import { newLookupRecords, type LookupRecord } from '../store/lookups.js';
import { Table } from '../store/table.js';
import { runNow } from '../util/steps.js';
import { transaction } from './connect.js';
import { arrayText, encodeFeedText, encodeField, fieldColumns, hasFeedText } from './encode.js';
import {
  castType,
  column,
  fieldColumnDefinitions,
  isColumnName,
  isStored,
  lengthColumn,
  schemaToJson,
  textColumn,
  tokensColumn,
  type Layout,
} from './layout.js';
import { tooLarge } from './load.js';
import { readMeta, readSchemas, writeMeta } from './migrate.js';
import { addColumns, distributionRecord } from './distribution.js';

type Schemas = Readonly<Record<ResourceName, TableSchema>>;

/** The `#meta` key of the change counter. */
const GENERATION_KEY = 'generation';

/**
 * Applies the operations (checked as `checkOperations` checks them) to the database as one
 * transaction and returns the change's summary and the table schemas after it. `_known` is the
 * caller's copy of the schemas: the database's, read under the writers' lock, are the ones
 * used, since another engine on the same database may have added fields since.
 */
export async function applyChanges(
  pool: pg.Pool,
  layout: Layout,
  _known: Schemas,
  operations: readonly ChangeOperation[],
  clock: () => number,
): Promise<{ summary: ChangeSummary; schemas: Schemas }> {
  const ops = checkOperations(operations);
  const lock = (db: pg.PoolClient): Promise<unknown> => db.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`reso-engine write ${layout.schema}`]);
  // A spread layout cannot add a column inside the change that needs it (a partitioned layout's
  // workers hold the change's own remote transactions open): the change stops and rolls back, the
  // columns are added in a transaction of their own, and the change runs again with them. Each
  // round adds at least one column, so this ends. Should the change then fail, the columns stay,
  // unused (the schema in `#meta` never got them); adding them again replaces them.
  const prepared = new Map<ResourceName, Set<string>>();
  for (;;) {
    try {
      return await transaction(
        pool,
        async (db) => {
          await lock(db);
          const { schemas } = await readSchemas(db, layout);
          const record = distributionRecord(await readMeta(db, layout, 'distribution'));
          const change = new PgChange(db, layout, schemas, clock, record.kind === 'single' ? null : prepared);
          for (const op of ops) await change.apply(op);
          return await change.finish();
        },
        { isolation: 'read committed' },
      );
    } catch (err) {
      // an index entry beyond a page (a search token of thousands of letters): refused as the load refuses it
      if (!(err instanceof NeedsColumns)) throw tooLarge(err) ?? err;
      const { resource, fields } = err;
      await transaction(pool, async (db) => {
        await lock(db);
        // a field another writer added meanwhile is in the schema now, with its values: never replaced
        const { schemas } = await readSchemas(db, layout);
        const missing = fields.filter((f) => schemas[resource].field(f.name) === undefined);
        const record = distributionRecord(await readMeta(db, layout, 'distribution'));
        if (missing.length > 0)
          await addColumns(
            db,
            layout,
            record,
            resource,
            missing.flatMap((f) => fieldColumnDefinitions(resource, f)),
          );
      });
      const names = prepared.get(resource) ?? new Set<string>();
      for (const f of fields) names.add(f.name);
      prepared.set(resource, names);
    }
  }
}

/** A change on a spread layout met fields its table lacks: they are added before it runs again (applyChanges). */
class NeedsColumns extends Error {
  constructor(
    readonly resource: ResourceName,
    readonly fields: readonly FieldDef[],
  ) {
    super(`${resource} needs columns ${fields.map((f) => f.name).join(', ')}`);
  }
}

/** A column an INSERT writes: its quoted name, the cast of its text, and its text per batch row (null: NULL). */
interface InsertColumn {
  readonly column: string;
  readonly cast: string;
  readonly text: (row: number) => string | null;
}

/** Per search field, a listing's tokens. */
type ListingTokens = Readonly<Record<SearchFieldName, readonly string[]>>;

/** Per search field, each batch row's tokens as the in-memory index takes them (address normalization applied). */
function tokensOfRows(batch: Table): ListingTokens[] {
  const sources = searchTokenSources(batch);
  const out: ListingTokens[] = [];
  for (let row = 0; row < batch.rowCount; row++) {
    const tokens = {} as Record<SearchFieldName, string[]>;
    for (const s of SEARCH_FIELDS) {
      const t: string[] = [];
      sources[s](row, t);
      tokens[s] = s === 'RawAddressSearchText' ? t.map(normalizeAddressToken) : t;
    }
    out.push(tokens);
  }
  return out;
}

/** The batch with only the fields the table's schema has (a batch field of nulls only is not one), for newLookupRecords. */
function restrictedTo(batch: Table, schema: TableSchema): Table {
  const fields = batch.schema.fields.filter((f) => schema.field(f.name) !== undefined);
  const view = new TableSchema(
    batch.resource,
    batch.schema.key,
    fields.filter((f) => f.origin !== 'local'),
    fields.filter((f) => f.origin === 'local'),
  );
  return new Table(
    batch.resource,
    view,
    view.fields.map((f) => batch.column(f.name)!),
    batch.keyIndex,
    batch.rowCount,
    batch.clock,
  );
}

/**
 * The columns of a table (its schema's stored fields) for the rows of a batch: the batch's own
 * encoding where it holds the field as the table's type; the batch's JSON value encoded as the
 * table's type where the table's type is wider (an integer into a local Edm.Decimal, a date or
 * timestamp into a local Edm.String, kept as written); NULL (an empty collection) where the batch
 * lacks the field, since an upsert replaces the whole record.
 */
function insertColumns(schema: TableSchema, batch: Table): InsertColumn[] {
  const own = new Map<string, InsertColumn[]>();
  for (const c of fieldColumns(batch)) {
    const list = own.get(c.field.name) ?? [];
    list.push(c);
    own.set(c.field.name, list);
  }
  const out: InsertColumn[] = [];
  for (const f of schema.fields) {
    if (!isStored(f)) continue;
    const def = batch.schema.field(f.name);
    const mine = own.get(f.name);
    if (mine !== undefined && def !== undefined && def.type === f.type && def.collection === f.collection) {
      out.push(...mine);
      continue;
    }
    out.push({ column: column(f), cast: castType(f), text: (row) => encodeField(f, batch.value(row, f.name)) });
    if (hasFeedText(f)) out.push({ column: textColumn(f), cast: 'text', text: (row) => encodeFeedText(f, batch.value(row, f.name)) });
  }
  return out;
}

/** Epoch ms of a timestamptz column, exact (extract gives numeric; the instants are whole milliseconds). */
const epochMs = (expression: string): string => `(extract(epoch from ${expression}) * 1000)::float8`;

/** A stored field's column on alias `t`, or NULL of `type` when the table's schema has no such field. */
function columnOr(schema: TableSchema, field: string, type: string, alias = 't'): string {
  const f = schema.field(field);
  return f === undefined || !isStored(f) ? `NULL::${type}` : `${alias}.${column(f)}`;
}

/** Net df change per search field and term, and the change of N and of the total token length. */
class TermDeltas {
  readonly df = new Map<SearchFieldName, Map<string, number>>(SEARCH_FIELDS.map((s) => [s, new Map()]));
  listings = 0;
  readonly lengths = new Map<SearchFieldName, number>(SEARCH_FIELDS.map((s) => [s, 0]));

  /** Adds (sign 1) or takes away (sign -1) one listing's tokens. */
  add(tokens: ListingTokens, sign: 1 | -1): void {
    for (const s of SEARCH_FIELDS) {
      const terms = this.df.get(s)!;
      for (const t of new Set(tokens[s])) terms.set(t, (terms.get(t) ?? 0) + sign);
      this.lengths.set(s, this.lengths.get(s)! + sign * tokens[s].length);
    }
  }
}

/** Kept records [at, at + size) of an upsert: one statement's rows. */
interface Chunk {
  readonly input: UpsertInput;
  readonly at: number;
  readonly size: number;
}

/** The children of one listing in the in-memory writer's list order (see `cascadeOrder`). */
interface ChildRow {
  readonly key: string;
  readonly listing: string;
}

/** One change in one transaction: the operations applied in order, then the Lookup rows, events, statistics and metadata. */
class PgChange {
  private readonly schemas: Record<ResourceName, TableSchema>;
  private readonly before: Schemas;
  private schemasChanged = false;
  private upserted = 0;
  private removed = 0;
  private notFound = 0;
  private changed = false;
  private readonly events: EventOf[] = [];
  private readonly lookups = new Map<string, LookupRecord>();
  private readonly terms = new TermDeltas();
  /**
   * Per child resource, the children this change linked to a listing, in the order it did (a
   * child linked again moves last): the in-memory writer appends them to their listing's list,
   * after the children the listing had, so a removed listing's events name them last.
   */
  private readonly linked = new Map<ChildResourceName, Map<string, number>>(CHILD_RESOURCES.map((c) => [c, new Map()]));
  private linkedCount = 0;
  private readonly empty = new Map<ResourceName, Table>();

  constructor(
    private readonly db: pg.PoolClient,
    private readonly layout: Layout,
    schemas: Schemas,
    private readonly clock: () => number,
    /**
     * On a layout spread over servers, the columns added for this change so far, per resource (new
     * columns are added outside the change: applyChanges); null on a single node.
     */
    private readonly prepared: ReadonlyMap<ResourceName, ReadonlySet<string>> | null,
  ) {
    this.schemas = { ...schemas };
    this.before = schemas;
  }

  async apply(op: ChangeOperation): Promise<void> {
    const r = op.resource;
    if ('remove' in op) {
      if (r === 'Property') await this.removeListings(op.remove);
      else if (r === 'Member' || r === 'Office') await this.removeRecords(r, op.remove, (schema) => columnOr(schema, 'OriginatingSystemName', 'text', 'd'));
      else await this.removeChildren(r, op.remove);
      return;
    }
    const input = runNow(upsertInputSteps(op));
    this.upserted += input.given;
    for (let at = 0; at < input.count; at += CHUNK_RECORDS) {
      const chunk: Chunk = { input, at, size: Math.min(CHUNK_RECORDS, input.count - at) };
      if (r === 'Property') await this.upsertListings(chunk);
      else if (r === 'Member' || r === 'Office') await this.upsertRoster(r, chunk);
      else await this.upsertChildren(r, chunk);
    }
  }

  // ---- upserts -------------------------------------------------------------------------------

  private async upsertListings(chunk: Chunk): Promise<void> {
    const batch = readBatch(chunk.input, 'Property', chunk.at, chunk.size, { now: this.clock });
    await this.admit('Property', batch);
    const schema = this.schemas.Property;
    const keys = Array.from({ length: batch.rowCount }, (_, row) => batch.keyOf(row));
    const old = await this.listingsNow(keys);
    const { rows: firstRows } = await this.db.query<{ key: string; modified: number | null }>(
      `SELECT key, modified FROM ${this.layout.first} WHERE key = ANY($1::text[])`,
      [keys],
    );
    const firsts = new Map(firstRows.map((f) => [f.key, f.modified]));
    const remembered: Array<[string, number | null]> = [];
    const tokens = tokensOfRows(batch);
    for (let row = 0; row < batch.rowCount; row++) {
      const key = keys[row];
      this.events.push({ resource: 'Property', key, source: sourceOf(batch, row, batch, null) });
      const was = old.get(key);
      let first = firsts.get(key);
      if (was !== undefined || first !== undefined) {
        // replaced, or added again: the derived entry fields keep the first version's (SERVICE.md §2)
        if (first === undefined) {
          first = was!.modified;
          remembered.push([key, first]);
        }
        keepFirstEntry(batch, row, first ?? NaN);
      }
      if (was !== undefined) this.terms.add(was.tokens, -1);
      else this.terms.listings++;
      this.terms.add(tokens[row], 1);
    }
    const columns = insertColumns(schema, batch);
    for (const s of SEARCH_FIELDS) {
      columns.push(
        { column: tokensColumn(s), cast: 'text[]', text: (row) => arrayText(tokens[row][s], `Property '${keys[row]}' search field ${s}`) },
        { column: lengthColumn(s), cast: 'integer', text: (row) => String(tokens[row][s].length) },
      );
    }
    await this.upsertRows('Property', columns, batch.rowCount);
    await this.remember(remembered);
    this.changed = true;
  }

  private async upsertRoster(r: 'Member' | 'Office', chunk: Chunk): Promise<void> {
    const batch = readBatch(chunk.input, r, chunk.at, chunk.size, { now: this.clock });
    await this.admit(r, batch);
    for (let row = 0; row < batch.rowCount; row++) this.events.push({ resource: r, key: batch.keyOf(row), source: sourceOf(batch, row, batch, null) });
    await this.upsertRows(r, insertColumns(this.schemas[r], batch), batch.rowCount);
    this.changed = true;
  }

  private async upsertChildren(r: ChildResourceName, chunk: Chunk): Promise<void> {
    const link = CATALOG[r].parent!;
    // the listings the chunk names that the database has: live ones (with their source) and removed ones
    const named = new Set<string>();
    for (let k = chunk.at; k < chunk.at + chunk.size; k++) {
      const rec = chunk.input.value(k);
      const v = rec !== null && typeof rec === 'object' ? (rec as Record<string, unknown>)[link.field] : undefined;
      if (typeof v === 'string') named.add(v);
    }
    const live = await this.listingSources([...named]);
    const { rows: removedRows } = await this.db.query<{ key: string }>(`SELECT key FROM ${this.layout.first} WHERE key = ANY($1::text[])`, [
      [...named].filter((k) => !live.has(k)),
    ]);
    const removed = new Set(removedRows.map((x) => x.key));
    const parent = loadBatch(
      'Property',
      [...live.keys(), ...removed].map((k) => ({ ListingKey: k })),
      { now: this.clock },
    );
    const batch = readBatch(chunk.input, r, chunk.at, chunk.size, { parent, now: this.clock });
    await this.admit(r, batch);
    const parentRow = (batch.column(link.field) as ParentKeyColumn).parentRow;
    const linked = this.linked.get(r)!;
    for (let row = 0; row < batch.rowCount; row++) {
      const key = batch.keyOf(row);
      const p = parentRow[row];
      const listing = p >= 0 ? parent.keyOf(p) : null;
      if ((EVENT_SOURCED as readonly string[]).includes(r)) {
        this.events.push({ resource: r as EventSourcedName, key, source: listing === null ? null : (live.get(listing) ?? null) });
      }
      if (listing !== null && removed.has(listing)) {
        throw new DataError({
          code: 'MissingParent',
          file: chunk.input.label,
          line: chunk.input.number(chunk.at + row),
          field: link.field,
          reason: `${link.field} '${listing}' names a listing that was removed`,
        });
      }
      linked.delete(key);
      if (listing !== null) linked.set(key, this.linkedCount++);
    }
    await this.upsertRows(r, insertColumns(this.schemas[r], batch), batch.rowCount);
    this.changed = true;
  }

  /** A batch of records: fitted to its table, and the Lookup rows it brings collected. */
  private async admit(r: RecordResourceName, batch: Table): Promise<void> {
    await this.fit(r, batch);
    const view = restrictedTo(batch, this.schemas[r]);
    const found = newLookupRecords(
      (x) => (x === r ? view : this.emptyTable(x)),
      (x) => (x === r ? { rowCount: 0, schema: this.before[r] } : this.emptyTable(x)),
      () => false,
    );
    for (const l of found) {
      const was = this.lookups.get(l.LookupKey);
      if (was === undefined || earlier(l.ModificationTimestamp, was.ModificationTimestamp)) this.lookups.set(l.LookupKey, l);
    }
  }

  /** A table of the resource with no rows (and no field but its key). */
  private emptyTable(r: ResourceName): Table {
    let t = this.empty.get(r);
    if (t === undefined) {
      t = loadBatch(r, [], { now: this.clock });
      this.empty.set(r, t);
    }
    return t;
  }

  /**
   * Checks that a batch fits its table (schema-fit.ts, as the in-memory appender does) and adds
   * the fields it brings: ALTER TABLE in this transaction, and the schema grows.
   */
  private async fit(r: ResourceName, batch: Table): Promise<void> {
    const m = batch.rowCount;
    if (m === 0) return;
    const added = addedFields(this.schemas[r], batch, m);
    const schema = withFields(this.schemas[r], added);
    for (const f of schema.fields) fittingColumn(r, f, batch, m);
    if (added.length === 0) return;
    for (const f of added) {
      if (!isColumnName(f.name)) {
        throw new QueryError(
          'PgUnsupportedValue',
          `${r} field ${JSON.stringify(f.name)} cannot be a column of the PostgreSQL layout (a name of letters, digits and _, at most 56 characters, is needed); the in-memory engine takes it, PostgreSQL cannot store it.`,
        );
      }
    }
    const definitions = added.flatMap((f) => fieldColumnDefinitions(r, f));
    if (this.prepared !== null) {
      const missing = added.filter((f) => this.prepared!.get(r)?.has(f.name) !== true);
      if (missing.length > 0) throw new NeedsColumns(r, missing);
    } else if (definitions.length > 0) await this.db.query(`ALTER TABLE ${this.layout.table(r)} ${definitions.map((d) => `ADD COLUMN ${d}`).join(', ')}`);
    this.schemas[r] = schema;
    this.schemasChanged = true;
  }

  /**
   * Writes `rows` batch rows, replacing the records of their keys: the old rows are deleted, the
   * new ones inserted (one text array per column, through unnest). Not INSERT ... ON CONFLICT: a
   * partitioned table with foreign partitions has no unique index to conflict on, and a Citus child
   * table's key is unique only with its listing key.
   */
  private async upsertRows(r: ResourceName, columns: readonly InsertColumn[], rows: number): Promise<void> {
    if (rows === 0) return;
    const key = column({ name: this.schemas[r].key });
    const values = columns.map((c) => Array.from({ length: rows }, (_, row) => c.text(row)));
    const names = columns.map((c) => c.column);
    const aliases = columns.map((_, i) => `c${i}`);
    const keys = values[names.indexOf(key)];
    await this.db.query(`DELETE FROM ${this.layout.table(r)} WHERE ${key} = ANY($1::text[])`, [keys]);
    await this.db.query(
      `INSERT INTO ${this.layout.table(r)} (${names.join(', ')})
       SELECT ${columns.map((c, i) => `u.${aliases[i]}::${c.cast}`).join(', ')}
       FROM unnest(${columns.map((_, i) => `$${i + 1}::text[]`).join(', ')}) AS u(${aliases.join(', ')})`,
      values,
    );
  }

  /** The live listings of these keys: the first version's candidate ModificationTimestamp and the tokens each holds now. */
  private async listingsNow(keys: readonly string[]): Promise<Map<string, { modified: number | null; tokens: ListingTokens }>> {
    const schema = this.schemas.Property;
    const modified = schema.field('ModificationTimestamp') === undefined ? 'NULL::float8' : epochMs(`t.${column({ name: 'ModificationTimestamp' })}`);
    const { rows } = await this.db.query<Record<string, unknown>>(
      `SELECT t.${column({ name: schema.key })} AS key, ${modified} AS modified, ${SEARCH_FIELDS.map((s, i) => `t.${tokensColumn(s)} AS t${i}`).join(', ')}
       FROM ${this.layout.table('Property')} t WHERE t.${column({ name: schema.key })} = ANY($1::text[])`,
      [keys],
    );
    return new Map(rows.map((row) => [row.key as string, { modified: row.modified as number | null, tokens: tokensOfRow(row) }]));
  }

  /** The live listings of these keys, each with its OriginatingSystemName (null: none). */
  private async listingSources(keys: readonly string[]): Promise<Map<string, string | null>> {
    const schema = this.schemas.Property;
    const { rows } = await this.db.query<{ key: string; source: string | null }>(
      `SELECT t.${column({ name: schema.key })} AS key, ${columnOr(schema, 'OriginatingSystemName', 'text')} AS source
       FROM ${this.layout.table('Property')} t WHERE t.${column({ name: schema.key })} = ANY($1::text[])`,
      [keys],
    );
    return new Map(rows.map((row) => [row.key, row.source]));
  }

  /** Remembers the first version's ModificationTimestamp of listings replaced or removed for the first time. */
  private async remember(entries: ReadonlyArray<readonly [string, number | null]>): Promise<void> {
    if (entries.length === 0) return;
    await this.db.query(`INSERT INTO ${this.layout.first} (key, modified) SELECT * FROM unnest($1::text[], $2::float8[]) ON CONFLICT (key) DO NOTHING`, [
      entries.map((e) => e[0]),
      entries.map((e) => (e[1] === null || Number.isNaN(e[1]) ? null : e[1])),
    ]);
  }

  // ---- removals ------------------------------------------------------------------------------

  /**
   * Removes records by key (`source`: the select expression of a deleted row's source over alias
   * `d`), counting each key as removed the first time a live record has it, else as not found;
   * `after` runs for each removed key, after its event.
   */
  private async removeRecords(
    r: RecordResourceName,
    keys: readonly string[],
    source: (schema: TableSchema) => string,
    extra = '',
    after?: (key: string, row: Record<string, unknown>) => void,
    values: readonly unknown[] = [],
    /** Turns what `source` selected into each row's source, before the events are made. */
    resolve?: (rows: Array<Record<string, unknown>>) => Promise<void>,
  ): Promise<void> {
    const schema = this.schemas[r];
    const key = column({ name: schema.key });
    const { rows } = await this.db.query<Record<string, unknown>>(
      `WITH d AS (DELETE FROM ${this.layout.table(r)} t WHERE t.${key} = ANY($1::text[]) RETURNING t.*)
       SELECT d.${key} AS key, ${source(schema)} AS source${extra} FROM d`,
      [[...new Set(keys)], ...values],
    );
    await resolve?.(rows);
    const found = new Map(rows.map((row) => [row.key as string, row]));
    const done = new Set<string>();
    for (const k of keys) {
      const row = found.get(k);
      if (row === undefined || done.has(k)) {
        this.notFound++;
        continue;
      }
      done.add(k);
      this.removed++;
      this.changed = true;
      if ((EVENT_SOURCED as readonly string[]).includes(r)) this.events.push({ resource: r as EventSourcedName, key: k, source: row.source as string | null });
      after?.(k, row);
    }
  }

  /**
   * Removes children; each one's event carries its listing's OriginatingSystemName, read after the
   * DELETE by the listing keys it returned (not a subquery per deleted row: on Citus the deleted
   * rows are an intermediate result, which a correlated subquery on Property cannot read).
   */
  private async removeChildren(r: ChildResourceName, keys: readonly string[]): Promise<void> {
    const on = this.linkCondition(r, 'd');
    const link = on === null ? () => 'NULL::text' : () => (on.when === '' ? on.link : `(CASE WHEN true${on.when} THEN ${on.link} END)`);
    const sources = async (rows: ReadonlyArray<Record<string, unknown>>): Promise<void> => {
      const links = [...new Set(rows.map((row) => row.source).filter((l): l is string => typeof l === 'string'))];
      const of = links.length === 0 ? new Map<string, string | null>() : await this.listingSources(links);
      for (const row of rows) row.source = typeof row.source === 'string' ? (of.get(row.source) ?? null) : null;
    };
    await this.removeRecords(r, keys, link, '', (k) => this.linked.get(r)!.delete(k), on?.values ?? [], sources);
  }

  /**
   * How a child row (alias) names its listing: the link column, and the condition under which it
   * is a link at all (Media: ResourceName 'Property'), as SQL with the condition's value bound as
   * $2; null when the table's schema lacks them (no row of it has a listing).
   */
  private linkCondition(r: ChildResourceName, alias: string): { link: string; when: string; values: unknown[] } | null {
    const link = CATALOG[r].parent!;
    const schema = this.schemas[r];
    if (schema.field(link.field) === undefined) return null;
    if (link.when === null) return { link: `${alias}.${column({ name: link.field })}`, when: '', values: [] };
    if (schema.field(link.when.field) === undefined) return null;
    return { link: `${alias}.${column({ name: link.field })}`, when: ` AND ${alias}.${column({ name: link.when.field })} = $2`, values: [link.when.equals] };
  }

  /**
   * Removes listings with their children: each listing's event, then its Media's and OpenHouse's
   * (children removed with their listing are events of their own), the statistics without its
   * tokens, and its first version remembered.
   */
  private async removeListings(keys: readonly string[]): Promise<void> {
    const unique = [...new Set(keys)];
    const cascaded = new Map<string, EventOf[]>();
    for (const c of CHILD_RESOURCES) {
      for (const child of await this.deleteChildrenOf(c, unique)) {
        this.linked.get(c)!.delete(child.key);
        if (!(EVENT_SOURCED as readonly string[]).includes(c)) continue;
        const list = cascaded.get(child.listing) ?? [];
        list.push({ resource: c as EventSourcedName, key: child.key, source: null });
        cascaded.set(child.listing, list);
      }
    }
    const schema = this.schemas.Property;
    const modified = schema.field('ModificationTimestamp') === undefined ? 'NULL::float8' : epochMs(`d.${column({ name: 'ModificationTimestamp' })}`);
    const remembered: Array<[string, number | null]> = [];
    await this.removeRecords(
      'Property',
      keys,
      (s) => columnOr(s, 'OriginatingSystemName', 'text', 'd'),
      `, ${modified} AS modified, ${SEARCH_FIELDS.map((s, i) => `d.${tokensColumn(s)} AS t${i}`).join(', ')}`,
      (key, row) => {
        const source = row.source as string | null;
        for (const e of cascaded.get(key) ?? []) this.events.push({ ...e, source });
        this.terms.add(tokensOfRow(row), -1);
        this.terms.listings--;
        remembered.push([key, row.modified as number | null]);
      },
    );
    await this.remember(remembered);
  }

  /**
   * Deletes the children of these listings, returning them per listing in the in-memory writer's
   * list order: the ones the listing had before this change in the default order (the child
   * order keys, nulls lowest, then the key), then the ones this change linked to it, in that order.
   */
  private async deleteChildrenOf(c: ChildResourceName, listings: readonly string[]): Promise<ChildRow[]> {
    const on = this.linkCondition(c, 't');
    if (on === null || listings.length === 0) return [];
    const schema = this.schemas[c];
    const key = column({ name: schema.key });
    const order = CATALOG[c].childOrder
      .filter((o) => {
        const f = schema.field(o.field);
        return f !== undefined && comparedInChildOrder(f);
      })
      .map((o) => `d.${column({ name: o.field })} ${o.descending ? 'DESC NULLS LAST' : 'ASC NULLS FIRST'}`);
    const { rows } = await this.db.query<{ key: string; listing: string }>(
      `WITH d AS (DELETE FROM ${this.layout.table(c)} t WHERE ${on.link} = ANY($1::text[])${on.when} RETURNING t.*)
       SELECT d.${key} AS key, d.${column({ name: CATALOG[c].parent!.field })} AS listing FROM d
       ORDER BY d.${column({ name: CATALOG[c].parent!.field })}, ${[...order, `d.${key}`].join(', ')}`,
      [listings, ...on.values],
    );
    return cascadeOrder(rows, this.linked.get(c)!);
  }

  // ---- the end of the change -----------------------------------------------------------------

  /** Lookup rows, events, statistics and metadata; the summary and the schemas after the change. */
  async finish(): Promise<{ summary: ChangeSummary; schemas: Schemas }> {
    const generation = await this.generation();
    const counts = { upserted: this.upserted, removed: this.removed, notFound: this.notFound };
    if (!this.changed) return { summary: { generation, ...counts }, schemas: this.schemas };
    await this.writeLookups();
    await this.writeEvents();
    await this.writeStatistics();
    await writeMeta(this.db, this.layout, GENERATION_KEY, generation + 1);
    if (this.schemasChanged)
      await writeMeta(this.db, this.layout, 'schemas', Object.fromEntries(RESOURCE_NAMES.map((r) => [r, schemaToJson(this.schemas[r])])));
    return { summary: { generation: generation + 1, ...counts }, schemas: this.schemas };
  }

  /** The change counter in `#meta` (0 as loaded). */
  private async generation(): Promise<number> {
    const { rows } = await this.db.query<{ value: unknown }>(`SELECT value FROM ${this.layout.meta} WHERE key = $1`, [GENERATION_KEY]);
    const value = rows[0]?.value;
    return typeof value === 'number' ? value : 0;
  }

  private async writeLookups(): Promise<void> {
    // collected per batch, merged: a value's ModificationTimestamp is the earliest of the rows bringing it
    if (this.lookups.size === 0) return;
    const key = column({ name: this.schemas.Lookup.key });
    const { rows } = await this.db.query<{ key: string }>(`SELECT t.${key} AS key FROM ${this.layout.table('Lookup')} t WHERE t.${key} = ANY($1::text[])`, [
      [...this.lookups.keys()],
    ]);
    for (const row of rows) this.lookups.delete(row.key);
    const records = [...this.lookups.values()];
    for (let at = 0; at < records.length; at += CHUNK_RECORDS) {
      await this.insertBatch('Lookup', loadBatch('Lookup', records.slice(at, at + CHUNK_RECORDS), { now: this.clock }));
    }
  }

  private async writeEvents(): Promise<void> {
    if (this.events.length === 0) return;
    const schema = this.schemas.EntityEvent;
    const { rows } = await this.db.query<{ last: number | null }>(
      `SELECT max(${columnOr(schema, 'EntityEventSequence', 'bigint')})::float8 AS last FROM ${this.layout.table('EntityEvent')} t`,
    );
    let sequence = (rows[0]?.last ?? 0) + 1;
    const writtenAt = this.clock();
    for (let at = 0; at < this.events.length; at += CHUNK_RECORDS) {
      const records = this.events.slice(at, at + CHUNK_RECORDS).map((e) => eventRecord(sequence++, e, writtenAt));
      await this.insertBatch('EntityEvent', loadBatch('EntityEvent', records, { now: this.clock }));
    }
  }

  /** A batch the engine makes (Lookup, EntityEvent), fitted and written. */
  private async insertBatch(r: 'Lookup' | 'EntityEvent', batch: Table): Promise<void> {
    await this.fit(r, batch);
    await this.upsertRows(r, insertColumns(this.schemas[r], batch), batch.rowCount);
  }

  /**
   * `#terms` and `#search` by the change's net deltas: terms whose df falls to 0 go, the others
   * change; a delta the table cannot take (a df below 0, a term to lower that is not there) means
   * the statistics were not exact before, and fails the change rather than hide it.
   */
  private async writeStatistics(): Promise<void> {
    const fields: string[] = [];
    const terms: string[] = [];
    const deltas: number[] = [];
    for (const [s, map] of this.terms.df) {
      for (const [t, d] of map) {
        if (d === 0) continue;
        fields.push(s);
        terms.push(t);
        deltas.push(d);
      }
    }
    const table = this.layout.terms;
    const source = 'unnest($1::text[], $2::text[], $3::integer[]) AS d(field, term, delta)';
    const lowered = deltas.filter((d) => d < 0).length;
    const gone = await this.db.query(
      `DELETE FROM ${table} t USING ${source} WHERE d.delta < 0 AND t.field = d.field AND t.term = d.term AND t.df + d.delta = 0`,
      [fields, terms, deltas],
    );
    const less = await this.db.query(
      `UPDATE ${table} t SET df = t.df + d.delta FROM ${source} WHERE d.delta < 0 AND t.field = d.field AND t.term = d.term AND t.df + d.delta > 0`,
      [fields, terms, deltas],
    );
    if ((gone.rowCount ?? 0) + (less.rowCount ?? 0) !== lowered) {
      throw new Error(
        `the term statistics of ${this.layout.schema} are not those of its listings: ${lowered} terms to lower, ${(gone.rowCount ?? 0) + (less.rowCount ?? 0)} found`,
      );
    }
    await this.db.query(
      `INSERT INTO ${table} (field, term, df) SELECT d.field, d.term, d.delta FROM ${source} WHERE d.delta > 0
       ON CONFLICT (field, term) DO UPDATE SET df = ${table}.df + EXCLUDED.df`,
      [fields, terms, deltas],
    );
    await this.db.query(
      `UPDATE ${this.layout.search} s SET n = s.n + $2, total_length = s.total_length + d.delta
       FROM unnest($1::text[], $3::bigint[]) AS d(field, delta) WHERE s.field = d.field`,
      [SEARCH_FIELDS, this.terms.listings, SEARCH_FIELDS.map((s) => this.terms.lengths.get(s)!)],
    );
  }
}

/** Whether the in-memory child order compares a field (it compares numbers, dates and timestamps only). */
function comparedInChildOrder(f: FieldDef): boolean {
  return !f.collection && f.type !== 'Edm.String' && f.type !== 'Edm.Boolean' && f.type !== 'Edm.GeographyPoint';
}

/** Whether Lookup ModificationTimestamp `a` is earlier than `b` (null: none, later than any). */
function earlier(a: string | null, b: string | null): boolean {
  return a !== null && (b === null || Date.parse(a) < Date.parse(b));
}

/** A listing's tokens from a row selected with `t0`, `t1`, ... per search field. */
function tokensOfRow(row: Record<string, unknown>): ListingTokens {
  const out = {} as Record<SearchFieldName, readonly string[]>;
  SEARCH_FIELDS.forEach((s, i) => (out[s] = (row[`t${i}`] as string[] | null) ?? []));
  return out;
}

/**
 * Children grouped by listing (rows sorted by listing, then the default order) into the
 * in-memory writer's list order: per listing, the children it had before the change first, in
 * the default order, then the ones the change linked to it, in the order it did.
 */
function cascadeOrder(rows: readonly ChildRow[], linked: ReadonlyMap<string, number>): ChildRow[] {
  const out: ChildRow[] = [];
  let at = 0;
  while (at < rows.length) {
    let end = at;
    while (end < rows.length && rows[end].listing === rows[at].listing) end++;
    const group = rows.slice(at, end);
    out.push(...group.filter((c) => !linked.has(c.key)));
    out.push(...group.filter((c) => linked.has(c.key)).sort((a, b) => linked.get(a.key)! - linked.get(b.key)!));
    at = end;
  }
  return out;
}
