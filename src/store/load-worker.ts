/**
 * The worker side of the parallel loader: loads one child resource's file (Media, about two
 * thirds of a data set's bytes) into a segment with its parent link kept as text, while the main
 * thread loads Property; then, given Property's keys and the other resources' event rows by the
 * main thread, links the segment to its listings and writes the initial EntityEvent log (19M
 * events at 1M listings, mostly Media's), and transfers both segments' buffers back. See load.ts.
 */
import { readFileSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { EVENT_SOURCED, type ChildResourceName } from '../schema/types.js';
import { ByteIndex, type ByteIndexState } from './byte-index.js';
import { hashBytes } from './bytes.js';
import { DataError, type DataErrorInfo } from './errors.js';
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

export interface ChildJob {
  readonly kind: typeof WORKER_KIND;
  readonly resource: ChildResourceName;
  readonly file: string;
  readonly label: string;
  readonly format: FileFormat;
  readonly gzip: boolean;
  readonly bytesTotal: number;
  readonly skipBadRecords: boolean;
  readonly fastPath: boolean | undefined;
  /** Report phase timings in the done message. */
  readonly timed: boolean;
  /** Wait for a ListingsMessage, then link the segment and write the event log. */
  readonly events: boolean;
}

/** What the main thread sends once Property and the other files are loaded (null: it will not need the log). */
export interface ListingsMessage {
  readonly type: 'listings';
  readonly listings: {
    /** Property's key column and key index, to link the child's rows. */
    readonly keys: { readonly bytes: Uint8Array; readonly offsets: Uint32Array };
    readonly keyIndex: ByteIndexState;
    /** The event rows of every other event-sourced resource. */
    readonly events: EventRows[];
  } | null;
}

/** The child's links to its listings as the worker resolved them (see parentLinks). */
export type WorkerLinks = { readonly parentRow: Int32Array; readonly unlinked: Array<[number, string]> | null } | 'absent' | 'failed';

export interface ChildDone {
  readonly type: 'done';
  readonly table: PackedTable;
  readonly skipped: number;
  readonly skipLog: { readonly total: number; readonly byCode: Record<string, number>; readonly samples: DataErrorInfo[] };
  readonly localFields: LocalFieldInfo[];
  readonly ignoredFields: Record<string, number>;
  readonly bytesRead: number;
  readonly phases: LoadPhase[];
  /** null when the main thread sent no listings. */
  readonly links: WorkerLinks | null;
  /** The EntityEvent log (null: not written, the main thread writes it). */
  readonly events: { readonly table: PackedTable; readonly ignoredFields: Record<string, number> } | null;
}

export type ChildMessage =
  { readonly type: 'progress'; readonly bytesRead: number; readonly records: number } | ChildDone | { readonly type: 'failed'; readonly reason: string };

async function run(job: ChildJob, listings: Promise<ListingsMessage['listings']>, post: (m: ChildMessage, transfer?: ArrayBuffer[]) => void): Promise<void> {
  const phases: LoadPhase[] = [];
  const clock = new PhaseClock('worker', job.timed ? (p) => phases.push(p) : undefined);
  const skipLog = new SkipLog();
  // No duplicate check per record: a duplicate key fails `finish`, and the main thread then loads the file the checked way.
  const b = new TableBuilder(job.resource, {
    skipBadRecords: job.skipBadRecords,
    skipLog,
    now: () => 0,
    deferParent: true,
    fastPath: job.fastPath,
    canonicalKeyIndex: true,
    deferKeyIndex: true,
  });
  b.file = job.label;
  let bytesRead = 0;
  let reserved = job.gzip;
  let table: Table;
  try {
    await readRecords(
      job.file,
      {
        format: job.format,
        gzip: job.gzip,
        label: job.label,
        onChunk: (n) => {
          bytesRead = n;
          if (!reserved && b.rowCount >= 256) {
            reserved = true;
            b.reserve(Math.ceil((job.bytesTotal / n) * b.rowCount * 1.02));
          }
          post({ type: 'progress', bytesRead: n, records: b.rowCount });
        },
      },
      (src, s, e, line) => b.addBytes(src, s, e, line),
    );
    clock.lap(`${job.resource} read`);
    table = b.finish();
    clock.lap(`${job.resource} finish`);
  } catch (err) {
    // The main thread loads the file again the sequential way, which reports the error in order.
    post({ type: 'failed', reason: err instanceof DataError ? err.message : String(err) });
    return;
  }
  let links: WorkerLinks | null = null;
  let events: ChildDone['events'] = null;
  const transfer: ArrayBuffer[] = [];
  const given = job.events ? await listings : null;
  clock.lap('(wait for the listings)');
  if (given !== null) {
    const keys = { bytes: Buffer.from(given.keys.bytes.buffer, given.keys.bytes.byteOffset, given.keys.bytes.length), offsets: given.keys.offsets };
    const index = ByteIndex.fromState(keys, given.keyIndex);
    const found = parentLinks(table, (bytes, s, e) => index.find(bytes, s, e, hashBytes(bytes, s, e)));
    links =
      found === null
        ? 'failed'
        : found === 'absent'
          ? 'absent'
          : { parentRow: found.parentRow, unlinked: found.unlinked === null ? null : [...found.unlinked] };
    clock.lap(`${job.resource} link`);
    if (found !== null) {
      const property = given.events.find((r) => r.resource === 'Property')!;
      const own: EventRows = {
        resource: job.resource as EventRows['resource'],
        rowCount: table.rowCount,
        keys: { bytes: table.keyColumn.bytes, offsets: table.keyColumn.offsets },
        sourceRows: found === 'absent' ? null : found.parentRow,
        sources: found === 'absent' ? null : property.sources,
      };
      const rows = EVENT_SOURCED.map((r) => (r === job.resource ? own : given.events.find((e) => e.resource === r)!));
      const packedLog = packTable(eventLogTable(rows, () => 0));
      events = { table: packedLog.packed, ignoredFields: {} };
      transfer.push(...packedLog.transfer);
      clock.lap('EntityEvent');
    }
    if (typeof links === 'object') transfer.push(links.parentRow.buffer as ArrayBuffer);
  }
  const { packed, transfer: buffers } = packTable(table);
  transfer.push(...buffers);
  clock.lap(`${job.resource} pack`);
  post(
    {
      type: 'done',
      table: packed,
      skipped: b.skipped,
      skipLog: { total: skipLog.total, byCode: skipLog.byCode, samples: skipLog.samples },
      localFields: b.localFields(),
      ignoredFields: b.ignoredFields(),
      bytesRead,
      phases,
      links,
      events,
    },
    [...new Set(transfer)],
  );
}

const job = workerData as ChildJob | null;
if (parentPort !== null && job?.kind === WORKER_KIND) {
  const port = parentPort;
  const listings = new Promise<ListingsMessage['listings']>((resolve) => port.once('message', (m: ListingsMessage) => resolve(m.listings)));
  run(job, listings, (m, transfer) => port.postMessage(m, transfer ?? [])).catch((err: unknown) => {
    port.postMessage({ type: 'failed', reason: String(err) } satisfies ChildMessage);
  });
}
