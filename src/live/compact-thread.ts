/**
 * Compaction on a worker thread (DESIGN.md, "Compaction"): the steps of compact.ts run there
 * whole, and what they allocate (the search fields' tokens, the EntityEvent log's maps, a key index
 * per table, about 2 GB at 100k listings with Media) is collected in the worker's heap, not in the
 * one the queries run in. A generation's tables go over without a copy: their column arrays are
 * views of SharedArrayBuffers (src/store/append/growable.ts), and so are the compacted tables'
 * arrays that come back, with the room after them the next change appends into; the other arrays
 * made there (key indexes, child groupings, postings, term dictionaries, KD-trees) come back as
 * copies in shared buffers too (`sharedCopy`). An array of a plain ArrayBuffer (a loaded table's, before its first compaction) is copied
 * as the job is posted.
 *
 * What stays on the event loop: finding each table's live rows in key order (`compactInputSteps`,
 * in steps), posting the job, taking the result (objects around arrays) and carrying the access
 * structures over (compactor.ts). A thread is started per compaction and ended after it, its heap
 * with it; one that cannot start or fails leaves the compaction to the event loop (`null`).
 */
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData, type Worker } from 'node:worker_threads';
import { POINT_FIELDS, type PointField } from '../access/access.js';
import { PointIndex, type PointIndexState } from '../geo/point-index.js';
import { CHILD_RESOURCES, RESOURCE_NAMES, type ChildResourceName, type ResourceName } from '../schema/types.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../schema/search-fields.js';
import type { FieldIndex } from '../search/postings.js';
import { adoptImpacts, makeImpacts, type MadeImpacts } from '../search/ranked.js';
import { TermDictionary } from '../search/terms.js';
import { bufferOf } from '../store/append/growable.js';
import type { ByteIndexState } from '../store/byte-index.js';
import { ChildIndex } from '../store/children.js';
import { Store } from '../store/store.js';
import type { Table } from '../store/table.js';
import { packTable, unpackTable, type PackedTable } from '../store/transfer.js';
import { runNow } from '../util/steps.js';
import { startWorker } from '../util/worker.js';
import { compactTablesSteps, type CompactedFrom, type CompactInput } from './compact.js';

const COMPACT_WORKER = 'reso-engine:compaction';

/**
 * Listings from which a compaction runs on a worker thread: below, it takes less than the thread
 * costs to start (a new V8 isolate and the modules: 100-300 ms of the other core).
 */
export const COMPACT_THREAD_MIN_ROWS = 16_384;

/** A CompactInput with its tables packed. */
interface CompactJob extends Omit<CompactInput, 'tables'> {
  readonly tables: Readonly<Record<ResourceName, PackedTable>>;
  /** Per search field, the terms whose impact orders the old index had (`termsWithImpactOrders`): made for the new one too. */
  readonly hotTerms: Readonly<Record<SearchFieldName, readonly string[]>>;
}

interface PackedFieldIndex {
  readonly rowCount: number;
  readonly address: boolean;
  readonly terms: { readonly bytes: Uint8Array; readonly offsets: Uint32Array; readonly index: ByteIndexState };
  readonly offsets: Uint32Array;
  readonly rows: Uint32Array;
  readonly tfs: Uint16Array;
  readonly lengths: Uint32Array;
  readonly avgLength: number;
}

interface CompactDone {
  readonly tables: Readonly<Record<ResourceName, PackedTable>>;
  readonly children: Readonly<Record<ChildResourceName, { readonly offsets: Uint32Array; readonly rows: Uint32Array }>>;
  readonly search: Readonly<Record<SearchFieldName, PackedFieldIndex>>;
  readonly points: Readonly<Record<PointField, PointIndexState>>;
  readonly rows: Readonly<Record<ResourceName, Uint32Array>>;
  readonly impacts: Readonly<Record<SearchFieldName, MadeImpacts>>;
}

type CompactReply = { readonly done: CompactDone } | { readonly failed: string };

/**
 * Compacts `input` (of `store`, the generation's) on a new worker thread: the compacted data with
 * its KD-trees, or null when no thread could start or the thread failed (the caller compacts on
 * its own thread instead). Rejects when the job could not be posted or its result not taken (a
 * defect), the thread ended either way.
 */
export function compactOnThread(
  store: Store,
  input: CompactInput,
  hotTerms: Readonly<Record<SearchFieldName, readonly string[]>>,
): Promise<CompactedFrom | null> {
  let worker: Worker;
  try {
    worker = startWorker(import.meta.url, 'compact-thread', { workerData: { kind: COMPACT_WORKER } });
  } catch {
    return Promise.resolve(null);
  }
  worker.unref(); // a compaction under way does not keep the process alive
  return new Promise<CompactedFrom | null>((resolve, reject) => {
    const end = (): void => void worker.terminate();
    // a thread that failed is a defect, not bad input: said, and the compaction runs on the event loop
    const failed = (reason: string): void => {
      process.emitWarning(`reso-engine: the compaction's worker thread failed (${reason}); compacting on the event loop instead`);
      resolve(null);
    };
    worker.once('message', (reply: CompactReply) => {
      try {
        if ('done' in reply) resolve(compactedOf(store, input, reply.done));
        else failed(reply.failed);
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      } finally {
        end();
      }
    });
    worker.once('error', (e: unknown) => {
      failed(e instanceof Error ? e.message : String(e));
      end();
    });
    worker.once('exit', () => resolve(null));
    try {
      const tables = {} as Record<ResourceName, PackedTable>;
      // without their key indexes (compaction looks no key up in the tables it reads but Property's, as `newestOfDead`)
      for (const r of RESOURCE_NAMES) tables[r] = packTable(input.tables[r], { keyIndex: false }).packed;
      const { live, newestOfDead, room, arenaBytes, retention } = input;
      // the generation's arrays stay in use here: shared ones go over as they are, the others are copied
      worker.postMessage({ tables, live, newestOfDead, room, arenaBytes, retention, hotTerms } satisfies CompactJob);
    } catch (e) {
      end();
      reject(e instanceof Error ? e : new Error(String(e)));
    }
  });
}

/** The compacted data the thread made, its objects made here around its arrays (the old tables' clocks, the old store's report and configuration). */
function compactedOf(store: Store, input: CompactInput, done: CompactDone): CompactedFrom {
  // a compacted column's dictionary is the compacted one's: it stayed here
  const tables = unpackTables(done.tables, (r) => input.tables[r].clock, input.tables);
  const children = {} as Record<ChildResourceName, ChildIndex>;
  for (const r of CHILD_RESOURCES) children[r] = new ChildIndex(done.children[r].offsets, done.children[r].rows);
  const search = {} as Record<SearchFieldName, FieldIndex>;
  for (const f of SEARCH_FIELDS) {
    const x = done.search[f];
    const terms = TermDictionary.fromState(bufferOf(x.terms.bytes), x.terms.offsets, x.terms.index);
    search[f] = { rowCount: x.rowCount, address: x.address, terms, offsets: x.offsets, rows: x.rows, tfs: x.tfs, lengths: x.lengths, avgLength: x.avgLength };
    adoptImpacts(search[f], done.impacts[f]);
  }
  const points = {} as Record<PointField, PointIndex>;
  for (const f of POINT_FIELDS) {
    const c = tables.Property.columnOf(f, 'point')!;
    points[f] = new PointIndex(c.lon, c.lat, done.points[f]);
  }
  const compacted = new Store(tables, children, store.report, store.accounts, store.profiles, store.now);
  return { store: compacted, indexes: { search, points }, rows: done.rows };
}

/**
 * Tables packed by `packTable`, each with its clock (and the dictionaries left behind, from
 * `dictionariesOf`'s tables); Property first, which the child tables' links point into.
 */
function unpackTables(
  packed: Readonly<Record<ResourceName, PackedTable>>,
  clockOf: (resource: ResourceName) => () => number,
  dictionariesOf: Readonly<Record<ResourceName, Table>> | null,
): Record<ResourceName, Table> {
  const tables = {} as Record<ResourceName, Table>;
  const one = (r: ResourceName, parent: Table | null): Table => unpackTable(packed[r], clockOf(r), parent, dictionariesOf?.[r] ?? null);
  tables.Property = one('Property', null);
  for (const r of RESOURCE_NAMES) if (r !== 'Property') tables[r] = one(r, (CHILD_RESOURCES as readonly string[]).includes(r) ? tables.Property : null);
  return tables;
}

/** The worker's side: one job, then the thread is ended. */
function compactJob(job: CompactJob): CompactDone {
  const clock = (): number => job.retention.nowMs;
  const input: CompactInput = { ...job, tables: unpackTables(job.tables, () => clock, null) };
  const t = runNow(compactTablesSteps(input));
  const tables = {} as Record<ResourceName, PackedTable>;
  for (const r of RESOURCE_NAMES) tables[r] = packTable(t.tables[r], { dictionaries: false }).packed;
  const children = {} as Record<ChildResourceName, { offsets: Uint32Array; rows: Uint32Array }>;
  for (const r of CHILD_RESOURCES) children[r] = { offsets: t.children[r].offsets, rows: t.children[r].rows };
  const search = {} as Record<SearchFieldName, PackedFieldIndex>;
  const impacts = {} as Record<SearchFieldName, MadeImpacts>;
  for (const f of SEARCH_FIELDS) {
    const x = t.search[f];
    // the impact orders queries had made on the old index, made here for the new one (a sort of a
    // common term's postings held the loop for milliseconds on the first search after a compaction)
    impacts[f] = makeImpacts(x, job.hotTerms[f]);
    search[f] = {
      rowCount: x.rowCount,
      address: x.address,
      terms: { bytes: x.terms.bytes, offsets: x.terms.offsets, index: x.terms.indexState },
      offsets: x.offsets,
      rows: x.rows,
      tfs: x.tfs,
      lengths: x.lengths,
      avgLength: x.avgLength,
    };
  }
  const points = {} as Record<PointField, PointIndexState>;
  for (const f of POINT_FIELDS) points[f] = PointIndex.stateOf(t.points[f]);
  return sharedCopy({ tables, children, search, points, rows: t.rows, impacts });
}

/**
 * `value` with every array of a plain ArrayBuffer (of more than a Buffer pool's bytes) replaced by
 * the same view of a copy of its buffer in a SharedArrayBuffer (one copy per buffer, so views that
 * shared a buffer still do), through plain objects and arrays; views of shared buffers stay as they
 * are. Why: V8 counts a plain ArrayBuffer's bytes against the heap they arrive in ("external
 * memory"), and the 94 MB a compaction at 100k listings handed over (key indexes, child groupings,
 * postings, term dictionaries, KD-trees) started a mark-compact on the event loop for that memory's
 * sake as the result was taken, in marking steps of up to 8 ms, after which V8 kept the heap's limit
 * tight (BENCHMARKS.md "Live: a compaction's result in shared memory"); a shared buffer's bytes are
 * counted against no heap, as the tables' arrays already are.
 */
function sharedCopy<T>(value: T, copies = new Map<ArrayBuffer, SharedArrayBuffer>()): T {
  const shared = (b: ArrayBuffer): SharedArrayBuffer => {
    let copy = copies.get(b);
    if (copy === undefined) {
      copy = new SharedArrayBuffer(b.byteLength);
      new Uint8Array(copy).set(new Uint8Array(b));
      copies.set(b, copy);
    }
    return copy;
  };
  const worth = (b: ArrayBufferLike): b is ArrayBuffer => b instanceof ArrayBuffer && b.byteLength > Buffer.poolSize;
  if (value instanceof ArrayBuffer) return (worth(value) ? shared(value) : value) as T;
  if (ArrayBuffer.isView(value)) {
    if (!worth(value.buffer)) return value;
    // a Buffer arrives as a Uint8Array whatever it was sent as
    const View = (Buffer.isBuffer(value) ? Uint8Array : value.constructor) as new (buffer: ArrayBufferLike, offset: number, length: number) => T;
    const unit = value instanceof DataView ? 1 : (value as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
    return new View(shared(value.buffer), value.byteOffset, value.byteLength / unit);
  }
  if (Array.isArray(value)) return value.map((v: unknown) => sharedCopy(v, copies)) as T;
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = sharedCopy(v, copies);
    return out as T;
  }
  return value;
}

/**
 * Lowers this thread's scheduling priority to the least (Linux: a thread's own nice value, by its
 * id from /proc/thread-self), so that on a machine with few cores the event loop's thread is run
 * first whenever it has work; elsewhere nothing changes.
 */
function yieldToEventLoop(): void {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, 19);
  } catch {
    // not Linux, or not allowed: the thread runs at the process's priority
  }
}

const port = parentPort;
if (port !== null && (workerData as { kind?: string } | null)?.kind === COMPACT_WORKER) {
  yieldToEventLoop();
  port.once('message', (job: CompactJob) => {
    let reply: CompactReply;
    try {
      reply = { done: compactJob(job) };
    } catch (e) {
      reply = { failed: e instanceof Error ? e.message : String(e) };
    }
    port.postMessage(reply);
  });
}
