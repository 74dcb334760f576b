/**
 * The worker side of the parallel loader: loads the child resources' files (Media, about two
 * thirds of a data set's bytes, then OpenHouse and PropertyChange) into segments with their
 * parent links kept as text, while the main thread loads Property, Member and Office and builds
 * the listings' indexes; then, given Property's keys and the other resources' event rows by the
 * main thread, links the segments to their listings and writes the initial EntityEvent log (19M
 * events at 1M listings, mostly Media's), and transfers the segments' buffers back. See load.ts.
 */
import { readFileSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { EVENT_SOURCED, type ChildResourceName, type EventSourcedName } from '../schema/types.js';
import { ByteIndex, type ByteIndexState } from './byte-index.js';
import { hashBytes } from './bytes.js';
import type { DataErrorInfo } from './errors.js';
import { eventLogTable, type EventRows } from './event-log.js';
import { parentLinks } from './link.js';
import { TableBuilder, type LocalFieldInfo } from './ingest.js';
import { SkipLog } from './record.js';
import { readRecords, type FileFormat } from './read.js';
import type { Table } from './table.js';
import { packTable, type PackedTable } from './transfer.js';

export const WORKER_KIND = 'reso-engine:load-child';

/** One timed step of a load (diagnostics: the load bench prints them). */
export interface LoadPhase {
  /** The thread that ran it. */
  readonly thread: 'main' | 'worker';
  readonly name: string;
  readonly wallMs: number;
  /** CPU time of the thread (Linux; NaN elsewhere): with other processes busy, wall time overstates the work. */
  readonly cpuMs: number;
}

/** This thread's CPU time in ms, from /proc/thread-self/stat (utime + stime in clock ticks), or NaN. */
function threadCpuMs(): number {
  try {
    const stat = readFileSync('/proc/thread-self/stat', 'latin1');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

/** Times consecutive phases of one thread; inert without a sink. */
export class PhaseClock {
  private wall = performance.now();
  private cpu: number;

  constructor(
    private readonly thread: LoadPhase['thread'],
    private readonly sink: ((phase: LoadPhase) => void) | undefined,
  ) {
    this.cpu = sink === undefined ? 0 : threadCpuMs();
  }

  /** Ends the current phase as `name` and starts the next. */
  lap(name: string): void {
    if (this.sink === undefined) return;
    const wall = performance.now();
    const cpu = threadCpuMs();
    this.sink({ thread: this.thread, name, wallMs: wall - this.wall, cpuMs: cpu - this.cpu });
    this.wall = wall;
    this.cpu = cpu;
  }
}

/** One child resource's data file. */
export interface ChildFile {
  readonly resource: ChildResourceName;
  readonly file: string;
  readonly label: string;
  readonly format: FileFormat;
  readonly gzip: boolean;
  readonly bytesTotal: number;
}

export interface ChildJob {
  readonly kind: typeof WORKER_KIND;
  /** Loaded in this order; the first that fails ends the list (the main thread loads it and the rest). */
  readonly files: readonly ChildFile[];
  readonly skipBadRecords: boolean;
  readonly fastPath: boolean | undefined;
  /** Report phase timings in the done message. */
  readonly timed: boolean;
  /** Wait for a ListingsMessage, then link the segments and write the event log. */
  readonly events: boolean;
}

/** What the main thread sends once Property and its other files are loaded (null: it will not need the log). */
export interface ListingsMessage {
  readonly type: 'listings';
  readonly listings: {
    /** Property's key column and key index, to link the children's rows. */
    readonly keys: { readonly bytes: Uint8Array; readonly offsets: Uint32Array };
    readonly keyIndex: ByteIndexState;
    /** The event rows of every event-sourced resource the main thread loaded. */
    readonly events: EventRows[];
  } | null;
}

/** A child's links to its listings as the worker resolved them (see parentLinks). */
export type WorkerLinks = { readonly parentRow: Int32Array; readonly unlinked: Array<[number, string]> | null } | 'absent' | 'failed';

/** One child file the worker loaded cleanly. */
export interface ChildSegment {
  readonly resource: ChildResourceName;
  readonly table: PackedTable;
  readonly skipped: number;
  readonly skipLog: { readonly total: number; readonly byCode: Record<string, number>; readonly samples: DataErrorInfo[] };
  readonly localFields: LocalFieldInfo[];
  readonly ignoredFields: Record<string, number>;
  readonly bytesRead: number;
  /** null when the main thread sent no listings. */
  readonly links: WorkerLinks | null;
}

export interface ChildDone {
  readonly type: 'done';
  /** The files loaded, in the job's order (a prefix of it). */
  readonly segments: ChildSegment[];
  readonly phases: LoadPhase[];
  /** The EntityEvent log (null: not written, the main thread writes it). */
  readonly events: { readonly table: PackedTable; readonly ignoredFields: Record<string, number> } | null;
}

export type ChildMessage =
  | { readonly type: 'progress'; readonly resource: ChildResourceName; readonly bytesRead: number; readonly records: number }
  | ChildDone
  | { readonly type: 'failed'; readonly reason: string };

const isEventSourced = (r: ChildResourceName): r is ChildResourceName & EventSourcedName => (EVENT_SOURCED as readonly string[]).includes(r);

interface Loaded {
  readonly file: ChildFile;
  readonly table: Table;
  readonly builder: TableBuilder;
  readonly skipLog: SkipLog;
  readonly bytesRead: number;
}

/** Loads one file into a segment with its parent link kept as text; null on any error. */
async function loadChild(job: ChildJob, f: ChildFile, clock: PhaseClock, post: (m: ChildMessage) => void): Promise<Loaded | null> {
  const skipLog = new SkipLog();
  // No duplicate check per record: a duplicate key fails `finish`, and the main thread then loads the file the checked way.
  const b = new TableBuilder(f.resource, {
    skipBadRecords: job.skipBadRecords,
    skipLog,
    now: () => 0,
    deferParent: true,
    fastPath: job.fastPath,
    canonicalKeyIndex: true,
    deferKeyIndex: true,
  });
  b.file = f.label;
  let bytesRead = 0;
  let reserved = f.gzip;
  try {
    await readRecords(
      f.file,
      {
        format: f.format,
        gzip: f.gzip,
        label: f.label,
        onChunk: (n) => {
          bytesRead = n;
          if (!reserved && b.rowCount >= 256) {
            reserved = true;
            b.reserve(Math.ceil((f.bytesTotal / n) * b.rowCount * 1.02));
          }
          post({ type: 'progress', resource: f.resource, bytesRead: n, records: b.rowCount });
        },
      },
      (src, s, e, line) => b.addBytes(src, s, e, line),
    );
    clock.lap(`${f.resource} read`);
    const table = b.finish();
    clock.lap(`${f.resource} finish`);
    return { file: f, table, builder: b, skipLog, bytesRead };
  } catch {
    // The main thread loads the file again the sequential way, which reports the error in order.
    return null;
  }
}

async function run(job: ChildJob, listings: Promise<ListingsMessage['listings']>, post: (m: ChildMessage, transfer?: ArrayBuffer[]) => void): Promise<void> {
  const phases: LoadPhase[] = [];
  const clock = new PhaseClock('worker', job.timed ? (p) => phases.push(p) : undefined);
  const loaded: Loaded[] = [];
  for (const f of job.files) {
    const one = await loadChild(job, f, clock, post);
    if (one === null) break;
    loaded.push(one);
  }
  const links = new Map<ChildResourceName, WorkerLinks>();
  let events: ChildDone['events'] = null;
  const transfer: ArrayBuffer[] = [];
  const given = job.events && loaded.length > 0 ? await listings : null;
  clock.lap('(wait for the listings)');
  if (given !== null) {
    const keys = { bytes: Buffer.from(given.keys.bytes.buffer, given.keys.bytes.byteOffset, given.keys.bytes.length), offsets: given.keys.offsets };
    const index = ByteIndex.fromState(keys, given.keyIndex);
    const own = new Map<EventSourcedName, EventRows>();
    const property = given.events.find((r) => r.resource === 'Property')!;
    for (const { file, table } of loaded) {
      const found = parentLinks(table, (bytes, s, e) => index.find(bytes, s, e, hashBytes(bytes, s, e)));
      links.set(
        file.resource,
        found === null
          ? 'failed'
          : found === 'absent'
            ? 'absent'
            : { parentRow: found.parentRow, unlinked: found.unlinked === null ? null : [...found.unlinked] },
      );
      if (found !== null && isEventSourced(file.resource)) {
        own.set(file.resource, {
          resource: file.resource,
          rowCount: table.rowCount,
          keys: { bytes: table.keyColumn.bytes, offsets: table.keyColumn.offsets },
          sourceRows: found === 'absent' ? null : found.parentRow,
          sources: found === 'absent' ? null : property.sources,
        });
      }
      clock.lap(`${file.resource} link`);
    }
    // the log when every event-sourced resource's rows are at hand (a child that failed to link is loaded again)
    const rows = EVENT_SOURCED.map((r) => own.get(r) ?? given.events.find((e) => e.resource === r));
    if (rows.every((r) => r !== undefined)) {
      const packedLog = packTable(eventLogTable(rows, () => 0));
      events = { table: packedLog.packed, ignoredFields: {} };
      transfer.push(...packedLog.transfer);
      clock.lap('EntityEvent');
    }
  }
  const segments: ChildSegment[] = [];
  for (const { file, table, builder, skipLog, bytesRead } of loaded) {
    const link = links.get(file.resource) ?? null;
    if (typeof link === 'object' && link !== null) transfer.push(link.parentRow.buffer as ArrayBuffer);
    const { packed, transfer: buffers } = packTable(table);
    transfer.push(...buffers);
    segments.push({
      resource: file.resource,
      table: packed,
      skipped: builder.skipped,
      skipLog: { total: skipLog.total, byCode: skipLog.byCode, samples: skipLog.samples },
      localFields: builder.localFields(),
      ignoredFields: builder.ignoredFields(),
      bytesRead,
      links: link,
    });
  }
  clock.lap('pack');
  post({ type: 'done', segments, phases, events }, [...new Set(transfer)]);
}

const job = workerData as ChildJob | null;
if (parentPort !== null && job?.kind === WORKER_KIND) {
  const port = parentPort;
  const listings = new Promise<ListingsMessage['listings']>((resolve) => port.once('message', (m: ListingsMessage) => resolve(m.listings)));
  run(job, listings, (m, transfer) => port.postMessage(m, transfer ?? [])).catch((err: unknown) => {
    port.postMessage({ type: 'failed', reason: String(err) } satisfies ChildMessage);
  });
}
