/**
 * Compaction (DESIGN.md, "Change"): a generation's live rows rewritten into fresh tables (dead
 * rows dropped, rows in key order) with fresh indexes (child groupings, search postings, KD-trees),
 * as the base of the next generation. Columns are gathered array by array — no record is rebuilt
 * or re-read, so every value, written timestamp style and derived field (a replaced listing's
 * service_OriginalEntryTimestamp included) stays exactly as it was. Arrays two columns share (the
 * Location/RawLocation coordinates and Latitude/Longitude, DaysOnMarket and its reference
 * timestamps) stay shared.
 *
 * The work is a generator of steps (a slice of a table's column, one child grouping, a slice of a
 * search field's postings, the points of a KD-tree gathered). While the engine serves, it runs
 * whole on a worker thread from COMPACT_THREAD_MIN_ROWS listings (compact-thread.ts: the live rows
 * of each table are found here first, `compactInputSteps`, and the rest there,
 * `compactTablesSteps`), else between queries here, yielding in between; the KD-trees, which
 * kdbush builds in one go, are built after the steps (`withTreesNow`). A compaction for a snapshot
 * runs at once (`compactNow`).
 */
import { PointIndex, pointInputSteps, type PointInput } from '../geo/point-index.js';
import { POINT_FIELDS, type PointField } from '../access/access.js';
import { runNow, type Steps } from '../util/steps.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../schema/search-fields.js';
import type { FieldIndex } from '../search/postings.js';
import { searchIndexOfTableSteps } from '../search/indexes.js';
import { TableAccess, type StoreIndexes, type StoreAccess } from '../access/access.js';
import { CATALOG, ENTITY_EVENT_TIME } from '../schema/catalog.js';
import { CHILD_RESOURCES, RESOURCE_NAMES, ROSTER_RESOURCES, isResourceName, type ChildResourceName, type ResourceName } from '../schema/types.js';
import { getBit, newBitmap, popcount32, setBit, wordsFor } from '../util/bits.js';
import { RoomArena, sharedArray, type ArrayMaker } from '../store/append/growable.js';
import { ByteIndex } from '../store/byte-index.js';
import { hashBytes } from '../store/bytes.js';
import { buildChildIndexSteps, type ChildIndex } from '../store/children.js';
import {
  BooleanColumn,
  CollectionColumn,
  DateColumn,
  DaysOnMarketColumn,
  DictionaryColumn,
  NumberColumn,
  ParentKeyColumn,
  PointColumn,
  TimestampColumn,
  Utf8TextColumn,
  type Column,
} from '../store/columns.js';
import { Store } from '../store/store.js';
import { Table } from '../store/table.js';

/** A compacted data set: the store and the indexes built over it. */
export interface Compacted {
  readonly store: Store;
  readonly indexes: StoreIndexes;
}

/** A compaction's result, with the row each compacted row was in the generation compacted (per table, ascending). */
export interface CompactedFrom extends Compacted {
  readonly rows: Readonly<Record<ResourceName, Uint32Array>>;
}

/** What compaction's steps make: all of a compaction's result but the KD-trees, and the points each is to be built over. */
export interface CompactedParts {
  readonly store: Store;
  readonly search: Record<SearchFieldName, FieldIndex>;
  readonly rows: Readonly<Record<ResourceName, Uint32Array>>;
  readonly points: Readonly<Record<PointField, PointInput>>;
}

/** Rows a compaction keeps of each table but the EntityEvent log: the live rows, in key order. */
export type LiveRows = Readonly<Record<Exclude<ResourceName, 'EntityEvent'>, Uint32Array>>;

/** The room made for a compacted search field's index (from the generation compacted). */
export interface SearchRoom {
  /** (term, row) pairs per listing. */
  readonly pairsPerRow: number;
  readonly terms: number;
  /** UTF-8 bytes of the terms. */
  readonly bytes: number;
}

/** What a compaction reads of a generation: its tables, what it keeps of them, and the room to make. */
export interface CompactInput {
  /** Every table of the generation (on a worker thread, without their key indexes: `newestOfDead` stands in). */
  readonly tables: Readonly<Record<ResourceName, Table>>;
  readonly live: LiveRows;
  /** Per Property row: of a dead row, the newest row with its key (-1 when none); -1 for a live row. */
  readonly newestOfDead: Int32Array;
  readonly room: Readonly<Record<SearchFieldName, SearchRoom>>;
  /** The size of the buffers the compacted tables' arrays are carved from (`RoomArena`). */
  readonly arenaBytes: number;
  readonly retention: LogRetention;
}

/** What a compaction makes but the Store around its tables and the KD-trees. */
export interface CompactedTables {
  readonly tables: Readonly<Record<ResourceName, Table>>;
  readonly children: Readonly<Record<ChildResourceName, ChildIndex>>;
  readonly search: Record<SearchFieldName, FieldIndex>;
  readonly rows: Readonly<Record<ResourceName, Uint32Array>>;
  readonly points: Readonly<Record<PointField, PointInput>>;
}

/**
 * The steps of compacting `store` (one generation; `access` gives its dead rows and key orders).
 * Run every step (each does a bounded piece of work); the generator's return value is the result,
 * but for the KD-trees (`withTreesNow`).
 */
export function* compactSteps(store: Store, access: StoreAccess, retention: LogRetention): Steps<CompactedParts> {
  return partsOf(store, yield* compactTablesSteps(yield* compactInputSteps(store, access, retention)));
}

/** The compacted tables of `store` in a Store (with its load report, configuration and clock). */
export function partsOf(store: Store, t: CompactedTables): CompactedParts {
  return { store: new Store(t.tables, t.children, store.report, store.accounts, store.profiles, store.now), search: t.search, rows: t.rows, points: t.points };
}

/** What a compaction of `store` reads (the live rows of each table found in steps), for `compactTablesSteps` here or on a worker thread. */
export function* compactInputSteps(store: Store, access: StoreAccess, retention: LogRetention): Steps<CompactInput> {
  const tables = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, store.table(r)])) as Record<ResourceName, Table>;
  const live = {} as Record<Exclude<ResourceName, 'EntityEvent'>, Uint32Array>;
  for (const r of RESOURCE_NAMES) {
    if (r === 'EntityEvent') continue;
    const t = access.of(tables[r]);
    const order = yield* t.keyOrderSteps();
    const out = sharedArray(Uint32Array, order.length); // read where it is by a compaction's worker thread
    let n = 0;
    const c = order.cursor();
    yield* slices(order.length, (s, e) => {
      for (let i = s; i < e; i++) {
        const row = c.next();
        if (!t.isDead(row)) out[n++] = row;
      }
    });
    live[r] = out.subarray(0, n);
  }
  // the newest version of each replaced listing, which its children's links go to
  const property = access.of(tables.Property);
  const keys = tables.Property.keyColumn;
  const newestOfDead = sharedArray(Int32Array, tables.Property.rowCount).fill(-1);
  yield* slices(
    newestOfDead.length,
    (s, e) => {
      for (let row = s; row < e; row++) {
        if (property.isDead(row)) newestOfDead[row] = tables.Property.rowOfKeyBytes(keys.bytes, keys.offsets[row], keys.offsets[row + 1]);
      }
    },
    CALL_STEP_ROWS,
  );
  const room = {} as Record<SearchFieldName, SearchRoom>;
  for (const f of SEARCH_FIELDS) {
    // room for the pairs from the base index's pairs per row, and for the terms from its terms plus
    // those the changes since added (nothing is copied to grow, nor rehashed, in one of the steps)
    const was = access.base.search[f];
    const terms = Math.ceil(access.search[f].termCount * PAIR_ROOM);
    room[f] = {
      pairsPerRow: (was.rows.length / Math.max(1, was.rowCount)) * PAIR_ROOM,
      terms,
      bytes: Math.ceil((was.terms.bytes.length / Math.max(1, was.terms.size)) * terms) + 64,
    };
  }
  return { tables, live, newestOfDead, room, arenaBytes: arenaBytes(store, access), retention };
}

/** The steps of a compaction over what `compactInputSteps` found: everything but the KD-trees, which are built over the points returned. */
export function* compactTablesSteps(input: CompactInput): Steps<CompactedTables> {
  const old = input.tables;
  const tables = {} as Record<ResourceName, Table>;
  const rows = { ...input.live } as Record<ResourceName, Uint32Array>;
  // the compacted tables' arrays out of a few large buffers (RoomArena), sized by the live share of each table's bytes
  const arena = new RoomArena(input.arenaBytes);
  // Property first: children link to its new rows.
  const oldProperty = old.Property;
  const propertyRows = rows.Property;
  tables.Property = yield* gatherTableSteps(oldProperty, propertyRows, null, arena);
  // Old Property row -> new row; a link to a replaced version goes to the live version's new row.
  const newRowOf = new Int32Array(oldProperty.rowCount).fill(-1);
  yield* slices(propertyRows.length, (s, e) => {
    for (let i = s; i < e; i++) newRowOf[propertyRows[i]] = i;
  });
  const parentMap = (p: number): number => {
    if (p < 0) return -1;
    if (newRowOf[p] >= 0) return newRowOf[p];
    const now = input.newestOfDead[p];
    return now >= 0 ? newRowOf[now] : -1;
  };
  for (const r of CHILD_RESOURCES) tables[r] = yield* gatherTableSteps(old[r], rows[r], { table: tables.Property, map: parentMap }, arena);
  // the roster, and Lookup (whose rows never die: gathered as they are)
  for (const r of [...ROSTER_RESOURCES, 'Lookup'] as const) tables[r] = yield* gatherTableSteps(old[r], rows[r], null, arena);
  // the EntityEvent log: the newest event of each record, in sequence order (DESIGN.md, "EntityEvent")
  rows.EntityEvent = yield* keptEventSteps(old.EntityEvent, tables, input.retention);
  tables.EntityEvent = yield* gatherTableSteps(old.EntityEvent, rows.EntityEvent, null, arena);
  const children = {} as Record<ChildResourceName, ChildIndex>;
  for (const r of CHILD_RESOURCES) {
    const def = CATALOG[r];
    children[r] = yield* buildChildIndexSteps(tables[r], tables.Property.rowCount, def.parent!.field, def.childOrder);
  }
  const p = tables.Property;
  const search = {} as Record<SearchFieldName, FieldIndex>;
  for (const f of SEARCH_FIELDS) {
    const room = input.room[f];
    search[f] = yield* searchIndexOfTableSteps(p, f, Math.ceil(room.pairsPerRow * p.rowCount), { terms: room.terms, bytes: room.bytes });
  }
  const points = {} as Record<PointField, PointInput>;
  for (const f of POINT_FIELDS) {
    const c = p.columnOf(f, 'point')!;
    points[f] = yield* pointInputSteps(c.lon, c.lat, (row) => getBit(c.validity, row));
  }
  return { tables, children, search, rows, points };
}

/** The compaction's result, its KD-trees built now. */
export function withTreesNow(parts: CompactedParts): CompactedFrom {
  const points = {} as Record<PointField, PointIndex>;
  for (const f of POINT_FIELDS) {
    const c = parts.store.Property.columnOf(f, 'point')!;
    points[f] = new PointIndex(c.lon, c.lat, PointIndex.stateOf(parts.points[f]));
  }
  return { store: parts.store, indexes: { search: parts.search, points }, rows: parts.rows };
}

/**
 * The access structures of the compacted tables, given every structure the generation compacted
 * had built for its own (TableAccess.compactedSteps), so that the first queries on the compacted
 * generation do not pay for sorting or counting again what the queries before it had.
 */
export function* carriedAccessSteps(access: StoreAccess, compacted: CompactedFrom): Steps<Map<Table, TableAccess>> {
  const out = new Map<Table, TableAccess>();
  for (const r of RESOURCE_NAMES) {
    const table = compacted.store.table(r);
    const next = new TableAccess(table);
    yield* access.of(access.store.table(r)).compactedSteps(next, compacted.rows[r]);
    out.set(table, next);
  }
  return out;
}

/** Runs compaction to the end at once (snapshots of a changed engine). */
export function compactNow(store: Store, access: StoreAccess, retention: LogRetention): Compacted {
  return withTreesNow(runNow(compactSteps(store, access, retention)));
}

/** Default EngineOpenOptions.eventRetentionMs: a week. */
export const EVENT_RETENTION_MS = 7 * 24 * 3600 * 1000;

/** What compaction keeps of the EntityEvent log. */
export interface LogRetention {
  /** How long the event of a removed record is kept after it was written, ms. */
  readonly retentionMs: number;
  /** The engine clock's now, epoch ms. */
  readonly nowMs: number;
}

/**
 * The EntityEvent rows a compaction keeps, ascending (sequence order): the newest event of each
 * record; of a record that is gone (its newest event is its removal, or the removal of its
 * listing), only while that event is younger than the retention window; and always the log's last
 * event, which the next sequence number follows (so no number is given twice). `tables` holds the
 * compacted record tables (live rows only). The log never has dead rows.
 */
function* keptEventSteps(log: Table, tables: Readonly<Record<ResourceName, Table>>, retention: LogRetention): Steps<Uint32Array> {
  const n = log.rowCount;
  if (n === 0) return new Uint32Array(0);
  const names = log.column('ResourceName')!;
  const keys = log.column('ResourceRecordKey')!;
  const written = log.columnOf(ENTITY_EVENT_TIME, 'timestamp');
  // The newest event of each record: of a record still there, by its row in the compacted table
  // (an array per table); of one that is gone, by resource and key in maps sharded by the key's
  // hash. A single Map holds at most 2^24 entries, and a 1M-listing data set logs 19M records.
  const there = new Map<ResourceName, Int32Array>();
  const gone: Array<Map<string, number>> = Array.from({ length: GONE_SHARDS }, () => new Map<string, number>());
  // a record's key looked up by its bytes in the log, a string made only for the records that are
  // gone (one per row, 1.9M at 100k listings: a 100k compaction made 63-64 scavenges with them, 55-58
  // without, and took 3.5-3.6 s against 3.1-3.4)
  const keyBytes = keys instanceof Utf8TextColumn ? keys : null;
  for (let row = 0; row < n; row++) {
    const resource = String(names.json(row, 0));
    const table = isResourceName(resource) ? tables[resource] : undefined;
    const at =
      table === undefined
        ? -1
        : keyBytes !== null
          ? table.rowOfKeyBytes(keyBytes.bytes, keyBytes.offsets[row], keyBytes.offsets[row + 1])
          : table.rowOfKey(String(keys.json(row, 0)));
    if (at >= 0) {
      let newest = there.get(resource as ResourceName);
      if (newest === undefined) there.set(resource as ResourceName, (newest = new Int32Array(table!.rowCount)));
      newest[at] = row + 1; // 0: no event
    } else {
      const key = String(keys.json(row, 0));
      gone[shardOf(key)].set(`${resource}\u0000${key}`, row);
    }
    if (row % EVENT_STEP_ROWS === EVENT_STEP_ROWS - 1) yield;
  }
  const keep = newBitmap(n);
  setBit(keep, n - 1);
  for (const newest of there.values())
    yield* slices(newest.length, (s, e) => {
      for (let i = s; i < e; i++) {
        if (newest[i] > 0) setBit(keep, newest[i] - 1);
      }
    });
  let seen = 0;
  for (const shard of gone) {
    for (const row of shard.values()) {
      const at = written !== undefined && getBit(written.validity, row) ? written.values[row] : -Infinity;
      if (retention.nowMs - at <= retention.retentionMs) setBit(keep, row);
      if (++seen % EVENT_STEP_ROWS === 0) yield;
    }
  }
  let kept = 0;
  yield* slices(keep.length, (s, e) => {
    for (let w = s; w < e; w++) kept += popcount32(keep[w]);
  });
  const rows = new Uint32Array(kept);
  let k = 0;
  yield* slices(n, (s, e) => {
    for (let row = s; row < e; row++) {
      if (getBit(keep, row)) rows[k++] = row;
    }
  });
  return rows;
}

/** Maps of gone records' newest events (a power of two): each stays far under a Map's 2^24 entries. */
const GONE_SHARDS = 64;

/** A record key's shard among GONE_SHARDS (FNV-1a over its UTF-16 code units). */
function shardOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h >>> 0) & (GONE_SHARDS - 1);
}

interface ParentLinkMap {
  /** The compacted Property table. */
  readonly table: Table;
  /** Old Property row -> new row, or -1. */
  readonly map: (oldRow: number) => number;
}

/** Rows of one array gathered (an element copied per row) between two check points (the runner gives the loop a turn once the step budget is used). */
const GATHER_STEP_ROWS = 1 << 12;

/** Rows between two check points where each costs a call (a key hashed and indexed, a map read, a parent row looked up). */
const CALL_STEP_ROWS = 256;

/** Elements (bytes of text, codes of a collection) copied between two check points, in runs of consecutive rows. */
const COPY_STEP_ELEMENTS = 1 << 16;

/** The room made for a compacted search field's (term, row) pairs and terms, over what the generation before predicts. */
const PAIR_ROOM = 1.125;

/** Runs shorter than this are copied element by element. */
const SHORT_RUN_ELEMENTS = 64;

/** Events whose record is looked up (a key index probed per row) between two check points. */
const EVENT_STEP_ROWS = 64;

/**
 * run(s, e) over [0, n) in slices of `stepRows`, yielding between them: the slice's loop is the
 * caller's, one call per slice (a callback per row, as before, was a call per element gathered:
 * a compaction at 100k took 4.2-4.7 s with it, 3.9-4.4 s without).
 */
function* slices(n: number, run: (s: number, e: number) => void, stepRows = GATHER_STEP_ROWS): Steps<void> {
  for (let a = 0; a < n; a += stepRows) {
    const b = Math.min(n, a + stepRows);
    run(a, b);
    if (b < n) yield;
  }
}

/**
 * The table of `rows` of `table`, in that order (column by column; shared arrays stay shared), as
 * steps: it yields after each column and every GATHER_STEP_ROWS keys indexed. Its arrays are made
 * with room (`withRoom`), which the first change's appender adopts instead of copying them, out of
 * `arena`'s buffers (each on its own by default).
 */
export function* gatherTableSteps(table: Table, rows: Uint32Array, parent: ParentLinkMap | null, arena = new RoomArena(0)): Steps<Table> {
  const n = rows.length;
  const f64 = new Map<Float64Array, Float64Array>();
  const bitmaps = new Map<Uint32Array, Uint32Array>();
  function* values(a: Float64Array): Steps<Float64Array> {
    let out = f64.get(a);
    if (!out) {
      const into = (out = arena.withRoom(Float64Array, n));
      yield* slices(n, (s, e) => {
        for (let i = s; i < e; i++) into[i] = a[rows[i]];
      });
      f64.set(a, out);
    }
    return out;
  }
  function* bits(a: Uint32Array): Steps<Uint32Array> {
    let out = bitmaps.get(a);
    if (!out) {
      const into = (out = arena.withRoom(Uint32Array, wordsFor(n)));
      yield* slices(n, (s, e) => {
        for (let i = s; i < e; i++) {
          if (getBit(a, rows[i])) setBit(into, i);
        }
      });
      bitmaps.set(a, out);
    }
    return out;
  }
  /** A sparse row -> value map, re-keyed by the new rows. */
  function* sparse<V>(m: ReadonlyMap<number, V> | null): Steps<Map<number, V> | null> {
    if (m === null || m.size === 0) return null;
    const out = new Map<number, V>();
    yield* slices(
      n,
      (s, e) => {
        for (let i = s; i < e; i++) {
          const v = m.get(rows[i]);
          if (v !== undefined) out.set(i, v);
        }
      },
      CALL_STEP_ROWS,
    );
    return out.size > 0 ? out : null;
  }
  /** Offsets of the gathered rows' runs [offsets[row], offsets[row + 1]) of `from`. */
  function* offsetsOf(from: Uint32Array): Steps<Uint32Array> {
    const offsets = arena.withRoom(Uint32Array, n + 1);
    yield* slices(n, (s, e) => {
      for (let i = s; i < e; i++) offsets[i + 1] = offsets[i] + from[rows[i] + 1] - from[rows[i]];
    });
    return offsets;
  }
  /**
   * Each gathered row's run [fromOffsets[row], fromOffsets[row + 1]) of a variable-length
   * column's elements `from` copied to [to[i], to[i + 1]) of `into`: once per run of consecutive
   * old rows (loaded rows gather in runs), a short run element by element (a typed-array copy
   * costs a view of its own), with a check point every COPY_STEP_ELEMENTS elements or
   * CALL_STEP_ROWS runs.
   */
  function* runsOf<A extends Uint8Array | Uint16Array | Uint32Array>(from: A, fromOffsets: Uint32Array, into: A, to: Uint32Array): Steps<void> {
    let work = 0;
    for (let i = 0; i < n;) {
      let j = i + 1;
      while (j < n && rows[j] === rows[j - 1] + 1 && to[j] - to[i] < COPY_STEP_ELEMENTS) j++;
      const start = fromOffsets[rows[i]];
      const end = fromOffsets[rows[j - 1] + 1];
      if (end - start < SHORT_RUN_ELEMENTS) for (let e = start, at = to[i]; e < end; e++, at++) into[at] = from[e];
      else into.set(from.subarray(start, end), to[i]);
      work += (end - start) / COPY_STEP_ELEMENTS + 1 / CALL_STEP_ROWS;
      i = j;
      if (work >= 1) {
        work = 0;
        yield;
      }
    }
  }
  function* codesOf(codes: Uint16Array | Uint32Array): Steps<Uint16Array | Uint32Array> {
    const out = arena.withRoom<Uint16Array | Uint32Array>(codes.constructor as ArrayMaker<Uint16Array | Uint32Array>, n);
    yield* slices(n, (s, e) => {
      for (let i = s; i < e; i++) out[i] = codes[rows[i]];
    });
    return out;
  }
  function* column(c: Column): Steps<Column> {
    switch (c.kind) {
      case 'number':
        return new NumberColumn(yield* values(c.values), yield* bits(c.validity));
      case 'date':
        return new DateColumn(yield* values(c.values), yield* bits(c.validity));
      case 'timestamp': {
        let styles: Uint16Array | null = null;
        if (c.styles !== null) {
          const from = c.styles;
          const into = (styles = arena.withRoom(Uint16Array, n));
          yield* slices(n, (s, e) => {
            for (let i = s; i < e; i++) into[i] = from[rows[i]];
          });
        }
        return new TimestampColumn(yield* values(c.values), yield* bits(c.validity), styles, c.styleTable, yield* sparse(c.exceptions));
      }
      case 'boolean':
        return new BooleanColumn(yield* bits(c.bits), yield* bits(c.validity));
      case 'dictionary':
        return new DictionaryColumn(yield* codesOf(c.codes), c.dictionary);
      case 'collection': {
        const offsets = yield* offsetsOf(c.offsets);
        const codes = arena.withRoom<Uint16Array | Uint32Array>(c.codes.constructor as ArrayMaker<Uint16Array | Uint32Array>, offsets[n]);
        yield* runsOf(c.codes, c.offsets, codes, offsets);
        return new CollectionColumn(offsets, codes, c.dictionary, yield* bits(c.validity));
      }
      case 'text': {
        if (c instanceof ParentKeyColumn) {
          if (parent === null) throw new Error(`${table.resource}: a parent link without the compacted Property table`);
          const parentRow = arena.withRoom(Int32Array, n);
          yield* slices(
            n,
            (s, e) => {
              for (let i = s; i < e; i++) parentRow[i] = parent.map(c.parentRow[rows[i]]);
            },
            CALL_STEP_ROWS,
          );
          return new ParentKeyColumn(parentRow, parent.table.keyColumn, yield* sparse(c.unlinked));
        }
        const t = c as Utf8TextColumn;
        const offsets = yield* offsetsOf(t.offsets);
        const bytes = arena.bytesWithRoom(offsets[n]);
        yield* runsOf<Uint8Array>(t.bytes, t.offsets, bytes, offsets);
        return new Utf8TextColumn(bytes, offsets, yield* bits(t.validity));
      }
      case 'point':
        return new PointColumn(yield* values(c.lat), yield* values(c.lon), yield* bits(c.validity));
      case 'daysOnMarket':
        return new DaysOnMarketColumn(yield* values(c.reference), yield* bits(c.validity));
    }
  }
  // Columns that own arrays first, so that derived columns find them gathered already.
  const all: Array<Column | null> = table.columns.map(() => null);
  for (const derived of [false, true]) {
    for (let i = 0; i < all.length; i++) {
      const c = table.columns[i];
      if ((c.kind === 'point' || c.kind === 'daysOnMarket') !== derived) continue;
      all[i] = yield* column(c);
      yield;
    }
  }
  const keys = all[table.schema.indexOf(table.schema.key)] as Utf8TextColumn;
  const index = new ByteIndex(keys, n);
  for (let row = 0; row < n; row++) {
    index.add(row, hashBytes(keys.bytes, keys.offsets[row], keys.offsets[row + 1]));
    if (row % CALL_STEP_ROWS === CALL_STEP_ROWS - 1) yield;
  }
  return new Table(table.resource, table.schema, all as Column[], index, n, table.clock);
}

/**
 * The size of the buffers a compaction's arrays are carved from: the live share of every table's
 * column bytes with their room, at least 16 MB and at most 1 GB a buffer (a buffer is one
 * allocation, which V8 counts once).
 */
function arenaBytes(store: Store, access: StoreAccess): number {
  let bytes = 0;
  for (const r of RESOURCE_NAMES) {
    const t = store.table(r);
    if (t.rowCount === 0) continue;
    const live = (t.rowCount - access.of(t).deadCount) / t.rowCount;
    for (const c of t.columns) bytes += c.byteLength * live;
  }
  return Math.min(ARENA_MAX_BYTES, Math.max(ARENA_MIN_BYTES, Math.ceil(bytes * 1.125)));
}

const ARENA_MIN_BYTES = 16 << 20;
const ARENA_MAX_BYTES = 1 << 30;

/** Whether a generation carries enough dead and appended rows that compacting it pays. */
export function worthCompacting(store: Store, access: StoreAccess, baseRows: Readonly<Record<ResourceName, number>>, fraction: number): boolean {
  for (const r of RESOURCE_NAMES) {
    const t = store.table(r);
    const dead = access.of(t).deadCount;
    const appended = t.rowCount - baseRows[r];
    if (dead + appended > Math.max(1024, fraction * baseRows[r])) return true;
  }
  return false;
}
