/**
 * Applying a change (upserts and removals, possibly over several resources) to one generation of
 * the data and producing the next one, without rebuilding what did not change (DESIGN.md,
 * "Change"). The previous generation is never written: queries running on it, and nextLinks that
 * pinned it, keep reading exactly what they read before.
 *
 * Steps, in order; the work between two `await`s is one chunk of records or one structure, so a
 * large change never holds the event loop for long (queries keep running on the published
 * generation meanwhile):
 * 1. Each operation in the order given. An upsert reads its records (values, or JSON Lines bytes
 *    read straight from the bytes: upsert-input.ts) into a batch Table (the loader's own rules
 *    and errors) in chunks of CHUNK_RECORDS and appends each chunk to the
 *    table (`TableAppender`: new rows after the newest, older tables untouched); the row a key
 *    had before becomes dead. A removal marks the key's row dead. A listing that is replaced
 *    hands its children to its new row; a removed listing's children die with it. A replaced
 *    listing keeps service_OriginalEntryTimestamp of the version loaded first (SERVICE.md §2).
 * 2. The children lists of the listings whose children changed, each in the default order.
 * 3. Each table's access structures carried over (sorted permutations merged, bitsets grown).
 * 4. The next search views (exact BM25 statistics of the live listings) and point views.
 * The caller then publishes the new generation by swapping one pointer. Any error before that
 * rolls every table back to the previous generation (nothing of the change is visible, ever).
 */
import { QueryError } from '../errors.js';
import { Pacer, runYielding, type Steps } from '../util/steps.js';
import { type PointView } from '../geo/live-points.js';
import type { Generation } from '../access/generation.js';
export type { Generation };
import { liveParentRow, parentLinkOf } from './visibility.js';
import { POINT_FIELDS, type PointField, type TableAccess, StoreAccess } from '../access/access.js';
import { CATALOG } from '../schema/catalog.js';
import {
  CHILD_RESOURCES,
  EVENT_SOURCED,
  RECORD_RESOURCES,
  RESOURCE_NAMES,
  type ChildResourceName,
  type EventSourcedName,
  type RecordResourceName,
  type ResourceName,
} from '../schema/types.js';
import { eventRecord, nextSequence, sourceOf, type EventOf } from '../store/events.js';
import { type SearchView } from '../search/live.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../schema/search-fields.js';
import { searchTermSource } from '../search/indexes.js';
import type { TermLookup } from '../search/postings.js';
import { BatchReader, loadBatch } from '../store/append/batch.js';
import { renumbered, renumberedSteps, upsertInputSteps } from './upsert-input.js';
import { TableAppender } from '../store/append/table-appender.js';
import { clearBit, getBit, newBitmap, setBit } from '../util/bits.js';
import { ChildOverlay, ListLayer, childComparator, type ChildIndex, type Children } from '../store/children.js';
import { type ParentKeyColumn } from '../store/columns.js';
import { DataError } from '../store/errors.js';
import { newLookupRecordSteps } from '../store/lookups.js';
import { Store } from '../store/store.js';
import type { Table } from '../store/table.js';
import { DAY_MS } from '../store/temporal.js';

/** Records read and appended per step at most (the change writer sizes its chunks to the step budget below this). */
export const CHUNK_RECORDS = 512;

/** Words of a dead bitmap copied between two check points (64 KB). */
const DEAD_COPY_WORDS = 1 << 14;

/**
 * One operation of a change: records to upsert, as values or as JSON Lines bytes (one JSON object
 * per line, blank lines skipped: what a feed or a request body brings, read in steps without
 * parsing it whole; see upsert-input.ts), or keys to remove.
 */
export type ChangeOperation =
  | { readonly resource: RecordResourceName; readonly upsert: readonly unknown[] }
  | { readonly resource: RecordResourceName; readonly upsertLines: Uint8Array }
  | { readonly resource: RecordResourceName; readonly remove: readonly string[] };

export interface ChangeSummary {
  /** The generation the change produced (ids only grow), or the previous one when nothing changed. */
  readonly generation: number;
  /** Records upserted (new or replacing a record with the same key; each record of the lists, a key given twice counted twice). */
  readonly upserted: number;
  /** Records removed by key (children removed with their listing are not counted). */
  readonly removed: number;
  /** Keys asked to be removed that no live record has. */
  readonly notFound: number;
}

/**
 * Checks the operations' shape (before anything is read), throwing a QueryError `InvalidChange`
 * naming the operation; returns them typed.
 */
export function checkOperations(operations: unknown): ChangeOperation[] {
  if (!Array.isArray(operations))
    throw new QueryError('InvalidChange', 'A change is a list of operations: { resource, upsert: [records] } or { resource, remove: [keys] }.');
  return operations.map((op: unknown, i) => {
    const at = `operation ${i + 1}`;
    if (op === null || typeof op !== 'object')
      throw new QueryError('InvalidChange', `${at} is not an object: give { resource, upsert: [records] } or { resource, remove: [keys] }.`);
    const o = op as Record<string, unknown>;
    if (o.resource === 'Lookup') {
      throw new QueryError(
        'ReadOnlyResource',
        `${at}: Lookup cannot be changed: the engine derives its rows from the lookup values of the other resources; change those (${RECORD_RESOURCES.join(', ')}).`,
      );
    }
    if (o.resource === 'EntityEvent') {
      throw new QueryError('InvalidChange', `${at}: EntityEvent is written by the engine (one event per record a change writes), not by changes.`);
    }
    if (typeof o.resource !== 'string' || !(RECORD_RESOURCES as readonly string[]).includes(o.resource)) {
      throw new QueryError('UnknownResource', `${at}: no resource '${String(o.resource)}' to change; use ${RECORD_RESOURCES.join(', ')}.`);
    }
    const resource = o.resource as RecordResourceName;
    const has = (k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);
    if (Number(has('upsert')) + Number(has('upsertLines')) + Number(has('remove')) !== 1)
      throw new QueryError('InvalidChange', `${at}: give exactly one of upsert (records), upsertLines (JSON Lines bytes) or remove (keys).`);
    if (has('upsertLines')) {
      if (!(o.upsertLines instanceof Uint8Array))
        throw new QueryError('InvalidChange', `${at}: upsertLines must be bytes (a Uint8Array or Buffer) of ${resource} records, one JSON object per line.`);
      return { resource, upsertLines: o.upsertLines };
    }
    if (has('upsert')) {
      if (!Array.isArray(o.upsert)) throw new QueryError('InvalidChange', `${at}: upsert must be a list of ${resource} records.`);
      return { resource, upsert: o.upsert as unknown[] };
    }
    if (!Array.isArray(o.remove)) throw new QueryError('InvalidChange', `${at}: remove must be a list of ${CATALOG[resource].key} values.`);
    (o.remove as unknown[]).forEach((k, j) => {
      if (typeof k !== 'string' || k === '')
        throw new QueryError('InvalidChange', `${at}: remove item ${j + 1} is not a ${CATALOG[resource].key} (a non-empty string).`);
    });
    return { resource, remove: o.remove as string[] };
  });
}

/** The live children of one child resource while a change is applied: the lists it changes, over the generation's. */
class ChildLists {
  /** Lists this change set (dropped listings: null). */
  readonly lists = new Map<number, ArrayLike<number> | null>();
  readonly dirty = new Set<number>();

  /** The generation's grouping (a loaded ChildIndex as an overlay with no lists: it guards rows past its listings). */
  readonly before: ChildOverlay;

  constructor(before: Children) {
    this.before = before instanceof ChildOverlay ? before : new ChildOverlay(before as ChildIndex, ListLayer.of(new Map()));
  }

  of(parentRow: number): ArrayLike<number> {
    const list = this.lists.get(parentRow);
    if (list === null) return [];
    return list ?? this.before.childrenOf(parentRow);
  }

  add(parentRow: number, child: number): void {
    this.lists.set(parentRow, [...Array.from(this.of(parentRow)), child]);
    this.dirty.add(parentRow);
  }

  /** Marks a listing whose list holds a child that died. */
  touch(parentRow: number): void {
    this.dirty.add(parentRow);
  }

  move(from: number, to: number): void {
    const list = this.of(from);
    if (list.length > 0) this.lists.set(to, Array.from(list));
    this.lists.set(from, null);
    this.dirty.add(to);
  }

  drop(parentRow: number): void {
    this.lists.set(parentRow, null);
    this.dirty.delete(parentRow);
  }
}

/**
 * A change's operations, held by the writer only until its first step has read them: the records
 * are the bulk of what a change holds in the JS heap, and held until the change is published they
 * outlived two of the young generation's collections and were promoted (hundreds of KB a change,
 * for the old generation's collector to mark and sweep). A caller that keeps the records itself
 * keeps them alive regardless.
 */
interface PendingChange {
  operations: readonly ChangeOperation[] | null;
}

/**
 * Applies changes to generations, one change at a time (a change waits for the one before it).
 * Owns the appenders of the four tables, created at the first change.
 */
export class ChangeWriter {
  private appenders: Record<ResourceName, TableAppender> | null = null;
  /** ModificationTimestamp of the first version loaded, for listings replaced since (NaN: it had none). */
  private readonly firstModified = new Map<string, number>();
  /** firstModified entries a change made, with what they were before it (undone when it fails). */
  private undo = new Map<string, number | undefined>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly clock: () => number,
    /** A new generation id (ids only grow, across changes and compactions). */
    private readonly newId: () => number,
    /** First versions' ModificationTimestamps remembered before (a snapshot's). */
    firstVersions?: ReadonlyMap<string, number>,
  ) {
    if (firstVersions !== undefined) for (const [k, v] of firstVersions) this.firstModified.set(k, v);
  }

  /** Forgets the appenders: the next change starts from the tables of the generation it changes (after a compaction). */
  rebase(): void {
    this.appenders = null;
  }

  /** Runs `task` when every change and task asked for before it is done; later ones wait for it. */
  exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(task);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Applies the change to `current()` (read when the change starts) and hands the result to
   * `publish`, after running `prepare`'s steps on it (the pages warmed: src/live/warm.ts; they must
   * not throw).
   */
  apply(
    operations: readonly ChangeOperation[],
    current: () => Generation,
    publish: (g: Generation) => void,
    prepare?: (next: Generation) => Steps<void>,
  ): Promise<ChangeSummary> {
    const change: PendingChange = { operations };
    return this.exclusive(() => this.run(change, current(), publish, prepare));
  }

  private async run(
    change: PendingChange,
    g0: Generation,
    publish: (g: Generation) => void,
    prepare: ((next: Generation) => Steps<void>) | undefined,
  ): Promise<ChangeSummary> {
    const store0 = g0.store;
    const appenders = (this.appenders ??= Object.fromEntries(RESOURCE_NAMES.map((r) => [r, new TableAppender(store0.table(r))])) as Record<
      ResourceName,
      TableAppender
    >);
    for (const r of RESOURCE_NAMES) {
      if (appenders[r].table !== store0.table(r)) throw new Error(`the ${r} appender is not at the generation being changed`);
    }
    // the event loop gets a turn at the change's check points once the work since the last has used the step budget
    const pacer = new Pacer();
    const rollbacks = RESOURCE_NAMES.map((r) => appenders[r].checkpoint());
    this.undo = new Map();
    try {
      const next = await this.build(change, g0, appenders, pacer);
      if (next.generation !== null) {
        if (prepare !== undefined) await runYielding(prepare(next.generation), pacer);
        publish(next.generation);
      }
      return next.summary;
    } catch (e) {
      for (const rollback of rollbacks) rollback();
      for (const [key, was] of this.undo) {
        if (was === undefined) this.firstModified.delete(key);
        else this.firstModified.set(key, was);
      }
      throw e;
    } finally {
      this.undo = new Map();
    }
  }

  /**
   * The ModificationTimestamp of the first version of a listing the engine loaded (NaN: it had
   * none), remembered the first time the listing is replaced or removed (after that, compaction
   * drops the row it came from).
   */
  private firstModifiedOf(table: Table, key: string, older: number): number {
    let first = this.firstModified.get(key);
    if (first === undefined && older >= 0) {
      const modified = table.columnOf('ModificationTimestamp', 'timestamp');
      first = modified && getBit(modified.validity, older) ? modified.values[older] : NaN;
      if (!this.undo.has(key)) this.undo.set(key, undefined);
      this.firstModified.set(key, first);
    }
    return first ?? NaN;
  }

  /** The first versions' ModificationTimestamps remembered so far (snapshots keep them). */
  get firstVersions(): ReadonlyMap<string, number> {
    return this.firstModified;
  }

  private async build(
    change: PendingChange,
    g0: Generation,
    appenders: Record<ResourceName, TableAppender>,
    pacer: Pacer,
  ): Promise<{ generation: Generation | null; summary: ChangeSummary }> {
    const store0 = g0.store;
    const tables = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, store0.table(r)])) as Record<ResourceName, Table>;
    const access0 = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, g0.access.of(store0.table(r))])) as Record<ResourceName, TableAccess>;
    const killed = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, new Set<number>()])) as Record<ResourceName, Set<number>>;
    const children = Object.fromEntries(CHILD_RESOURCES.map((r) => [r, new ChildLists(store0.children[r])])) as Record<ChildResourceName, ChildLists>;
    const isDead = (r: ResourceName, row: number): boolean => killed[r].has(row) || access0[r].isDead(row);
    let upserted = 0;
    let removed = 0;
    let notFound = 0;
    // EntityEvent: one per record this change writes, in the order written (DESIGN.md, "EntityEvent")
    const events: EventOf[] = [];
    const sourced = (r: ResourceName): r is EventSourcedName => (EVENT_SOURCED as readonly string[]).includes(r);
    /** The source of a row of `r` in the change's tables (a child's: its live listing's). */
    const sourceNow = (r: ResourceName, row: number): string | null =>
      sourceOf(tables[r], row, tables.Property, CATALOG[r].parent === null ? null : currentParent(r as ChildResourceName, row));

    /** The live row of the listing a child's link points at (it may point at an older version), or -1. */
    const listingDead = (row: number): boolean => isDead('Property', row);
    const currentParent = (r: ChildResourceName, child: number): number => {
      const link = parentLinkOf(tables[r]);
      return link === null ? -1 : liveParentRow(tables.Property, link, child, listingDead);
    };
    const kill = (r: ResourceName, row: number, cascade = false): void => {
      killed[r].add(row);
      if (r === 'Property') {
        // a listing added again later is still the record first loaded (SERVICE.md §2)
        this.firstModifiedOf(tables.Property, tables.Property.keyOf(row), row);
        const source = sourceNow('Property', row);
        for (const c of CHILD_RESOURCES) {
          for (const child of Array.from(children[c].of(row))) {
            if (isDead(c, child)) continue;
            killed[c].add(child);
            // children removed with their listing are events of their own (a replica learns of each)
            if (cascade && sourced(c)) events.push({ resource: c, key: tables[c].keyOf(child), source });
          }
          children[c].drop(row);
        }
      } else if (r !== 'Member' && r !== 'Office' && r !== 'EntityEvent' && r !== 'Lookup') {
        const p = currentParent(r, row);
        if (p >= 0) children[r].touch(p);
      }
      // a Member or Office is no one's parent: removing it leaves the listings naming it as they are
    };

    // 1. each operation in its own call, so that its records are dropped once read (see PendingChange)
    const applyOperation = async (op: ChangeOperation): Promise<void> => {
      await pacer.check();
      const r = op.resource;
      if ('remove' in op) {
        for (const key of op.remove) {
          const row = tables[r].rowOfKey(key);
          if (row < 0 || isDead(r, row)) notFound++;
          else {
            if (sourced(r)) events.push({ resource: r, key, source: sourceNow(r, row) });
            kill(r, row, true);
            removed++;
          }
        }
        return;
      }
      const def = CATALOG[r];
      const input = await runYielding(upsertInputSteps(op, def.key), pacer);
      upserted += input.given;
      await runYielding(appenders[r].reserveSteps(input.count), pacer);
      for (let at = 0; at < input.count; at += CHUNK_RECORDS) {
        // records read one at a time with check points between; reading the batch's columns and
        // appending them is the chunk's one step that grows with the table's field count
        const size = Math.min(CHUNK_RECORDS, input.count - at);
        const reader = await runYielding(
          BatchReader.steps(r, { parent: def.parent ? tables.Property : undefined, now: this.clock, label: input.label }),
          pacer,
        );
        const line = (l: number): number => input.number(at + l - 1);
        for (let i = 0; i < size; i++) {
          renumbered(() => input.read(reader, at + i, i + 1), line);
          if (pacer.due()) await pacer.turn();
        }
        const batch = await runYielding(renumberedSteps(reader.finishSteps(), line), pacer);
        const before = tables[r];
        const after = await runYielding(appenders[r].appendSteps(batch, def.parent ? { parent: tables.Property } : {}), pacer);
        tables[r] = after;
        // The version each new row replaces: the key's row before this chunk, or an earlier row of
        // the same key in this chunk (the later version wins).
        const inChunk = new Map<string, number>();
        for (let row = before.rowCount; row < after.rowCount; row++) {
          if (pacer.due()) await pacer.turn();
          const key = after.keyOf(row);
          const old = inChunk.get(key) ?? before.rowOfKey(key);
          inChunk.set(key, row);
          if (sourced(r)) {
            const p = CATALOG[r].parent === null ? null : (after.column(def.parent!.field) as ParentKeyColumn).parentRow[row];
            events.push({ resource: r, key, source: sourceOf(after, row, tables.Property, p) });
          }
          if (r === 'Property') {
            if (old >= 0 || this.firstModified.has(key)) this.keepFirstEntry(after, key, old, row);
            if (old >= 0 && !isDead(r, old)) {
              killed[r].add(old);
              for (const c of CHILD_RESOURCES) children[c].move(old, row);
            }
            continue;
          }
          if (old >= 0 && !isDead(r, old)) kill(r, old);
          if (r === 'Member' || r === 'Office') continue;
          const c = r;
          const link = after.column(def.parent!.field) as ParentKeyColumn;
          const p = link.parentRow[row];
          if (p >= 0 && isDead('Property', p)) {
            throw new DataError({
              code: 'MissingParent',
              file: input.label,
              line: input.number(at + row - before.rowCount),
              field: def.parent!.field,
              reason: `${def.parent!.field} '${link.get(row)}' names a listing that was removed`,
            });
          }
          if (p >= 0) children[c].add(p, row);
        }
        await pacer.check();
      }
    };
    for (let i = 0; change.operations !== null && i < change.operations.length; i++) await applyOperation(change.operations[i]);
    change.operations = null;

    // the Lookup rows of values (and lookups) the new rows bring, in this same generation
    const lookups = await runYielding(
      newLookupRecordSteps(
        (r) => tables[r],
        (r) => store0.table(r),
        (key) => tables.Lookup.rowOfKey(key) >= 0,
      ),
      pacer,
    );
    if (lookups.length > 0) {
      await runYielding(appenders.Lookup.reserveSteps(lookups.length), pacer);
      tables.Lookup = appenders.Lookup.append(loadBatch('Lookup', lookups, { now: this.clock }), {});
    }
    // the events, appended to the log in the same generation as the change
    if (events.length > 0) {
      // room first, in steps: the log's arrays are copied when they are not the appender's own yet
      // (after a load or a compaction), 1.9M rows at 100k
      await runYielding(appenders.EntityEvent.reserveSteps(events.length), pacer);
      let sequence = nextSequence(tables.EntityEvent);
      const writtenAt = this.clock();
      for (let at = 0; at < events.length; at += CHUNK_RECORDS) {
        const reader = await runYielding(BatchReader.steps('EntityEvent', { now: this.clock }), pacer);
        const end = Math.min(events.length, at + CHUNK_RECORDS);
        for (let i = at; i < end; i++) {
          reader.add(eventRecord(sequence++, events[i], writtenAt), i - at + 1);
          if (pacer.due()) await pacer.turn();
        }
        const batch = await runYielding(reader.finishSteps(), pacer);
        tables.EntityEvent = await runYielding(appenders.EntityEvent.appendSteps(batch), pacer);
        await pacer.check();
      }
    }

    if (RESOURCE_NAMES.every((r) => killed[r].size === 0 && tables[r] === store0.table(r))) {
      return { generation: null, summary: { generation: g0.id, upserted, removed, notFound } };
    }

    // 2. children lists of the listings whose children changed
    const grouped = {} as Record<ChildResourceName, ChildOverlay>;
    for (const c of CHILD_RESOURCES) {
      const lists = children[c];
      const compare = childComparator(tables[c], CATALOG[c].childOrder);
      const changed = new Map<number, Uint32Array>();
      for (const p of lists.dirty) {
        if (isDead('Property', p)) continue;
        const live = Array.from(lists.of(p)).filter((row) => !isDead(c, row));
        changed.set(p, Uint32Array.from(live).sort(compare));
        if (pacer.due()) await pacer.turn();
      }
      grouped[c] = await runYielding(ChildOverlay.overSteps(lists.before, changed), pacer);
    }

    // dead bitmaps of the new generation
    const dead = {} as Record<ResourceName, Uint32Array | null>;
    for (const r of RESOURCE_NAMES) {
      const was = access0[r].dead;
      if (was === null && killed[r].size === 0) {
        dead[r] = null;
        continue;
      }
      const bits = newBitmap(tables[r].rowCount);
      // the older dead rows copied in slices (Media's bitmap is 2 MB at 1M listings), then the killed ones
      if (was !== null) {
        const words = Math.min(was.length, bits.length);
        for (let at = 0; at < words; at += DEAD_COPY_WORDS) {
          bits.set(was.subarray(at, Math.min(words, at + DEAD_COPY_WORDS)), at);
          await pacer.check();
        }
      }
      for (const row of killed[r]) setBit(bits, row);
      dead[r] = bits;
      await pacer.check();
    }

    // 3. access structures carried over
    const accesses = new Map<Table, TableAccess>();
    for (const r of RESOURCE_NAMES) {
      if (tables[r] === store0.table(r) && killed[r].size === 0) {
        accesses.set(tables[r], access0[r]); // unchanged: the same structures serve
        continue;
      }
      const { access, steps } = access0[r].next(tables[r], dead[r]);
      accesses.set(tables[r], access);
      await runYielding(steps, pacer);
    }

    // 4. search and point views of the new Property generation: last, since they extend structures
    // shared with later generations (a view must extend the newest one), so nothing may fail after
    const property = tables.Property;
    const from = store0.Property.rowCount;
    const to = property.rowCount;
    const propertyDead = dead.Property ?? newBitmap(to);
    const removedRows = Uint32Array.from(killed.Property);
    await pacer.check();
    const search = {} as Record<SearchFieldName, SearchView>;
    for (const f of SEARCH_FIELDS) {
      const termsOf = (lookup: TermLookup) => searchTermSource(property, f, lookup, true);
      const change = { from, to, dead: propertyDead, removed: removedRows, termsOf };
      search[f] = await runYielding(g0.access.search[f].nextSteps(change), pacer);
    }
    const points = {} as Record<PointField, PointView>;
    for (const f of POINT_FIELDS) {
      const c = property.columnOf(f, 'point')!;
      points[f] = await runYielding(g0.access.points[f].nextSteps({ from, to, lon: c.lon, lat: c.lat, has: (row) => getBit(c.validity, row) }), pacer);
    }

    const store = new Store(tables, grouped, store0.report, store0.accounts, store0.profiles, store0.now);
    const access = new StoreAccess(store, { search, points, base: g0.access.base }, accesses);
    const id = this.newId();
    return { generation: { id, store, access }, summary: { generation: id, upserted, removed, notFound } };
  }

  /** Writes the derived first-entry fields of a replacing version (keepFirstEntry) with the first version's ModificationTimestamp. */
  private keepFirstEntry(table: Table, key: string, older: number, row: number): void {
    keepFirstEntry(table, row, this.firstModifiedOf(table, key, older));
  }
}

/**
 * service_OriginalEntryTimestamp of a replacing version (SERVICE.md §2): its own
 * OriginalEntryTimestamp when it has one, else the earliest of its ListingContractDate (start of
 * that day, UTC) and `first`, the ModificationTimestamp of the first version loaded (NaN: none);
 * the DaysOnMarket reference follows when the version has no OnMarketTimestamp. The loader
 * computed both from this version alone; the row is not published yet, so it is written in place
 * (the change writer's appended row, or a PostgreSQL write's batch row).
 */
export function keepFirstEntry(table: Table, row: number, first: number): void {
  const ts = (f: string) => table.columnOf(f, 'timestamp');
  const entry = ts('OriginalEntryTimestamp');
  if (entry && getBit(entry.validity, row)) return;
  const contract = table.columnOf('ListingContractDate', 'date');
  let t = first;
  if (contract && getBit(contract.validity, row)) {
    const day = contract.values[row] * DAY_MS;
    if (!(t <= day)) t = day;
  }
  const original = ts('service_OriginalEntryTimestamp')!;
  const reference = ts('service_DaysOnMarketReferenceTimestamp')!;
  const onMarket = ts('OnMarketTimestamp');
  const put = (c: { values: Float64Array; validity: Uint32Array }): void => {
    if (t === t) {
      c.values[row] = t;
      setBit(c.validity, row);
    } else clearBit(c.validity, row);
  };
  put(original);
  if (!(onMarket && getBit(onMarket.validity, row))) put(reference);
}
