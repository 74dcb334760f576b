/**
 * The worker side of the parallel loader: loads one child resource's file (Media, about two
 * thirds of a data set's bytes) into a segment with its parent link kept as text, while the main
 * thread loads Property; then transfers the segment's buffers back. See load.ts.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { ChildResourceName } from '../schema/types.js';
import { DataError, type DataErrorInfo } from './errors.js';
import { TableBuilder, type LocalFieldInfo } from './ingest.js';
import { SkipLog } from './record.js';
import { readRecords, type FileFormat } from './read.js';
import { packTable, type PackedTable } from './transfer.js';

export const WORKER_KIND = 'reso-engine:load-child';

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
}

export interface ChildDone {
  readonly type: 'done';
  readonly table: PackedTable;
  readonly skipped: number;
  readonly skipLog: { readonly total: number; readonly byCode: Record<string, number>; readonly samples: DataErrorInfo[] };
  readonly localFields: LocalFieldInfo[];
  readonly ignoredFields: Record<string, number>;
  readonly bytesRead: number;
}

export type ChildMessage =
  { readonly type: 'progress'; readonly bytesRead: number; readonly records: number } | ChildDone | { readonly type: 'failed'; readonly reason: string };

async function run(job: ChildJob, post: (m: ChildMessage, transfer?: ArrayBuffer[]) => void): Promise<void> {
  const skipLog = new SkipLog();
  const b = new TableBuilder(job.resource, { skipBadRecords: job.skipBadRecords, skipLog, now: () => 0, deferParent: true, fastPath: job.fastPath });
  b.file = job.label;
  let bytesRead = 0;
  let reserved = job.gzip;
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
  } catch (err) {
    // The main thread loads the file again the sequential way, which reports the error in order.
    post({ type: 'failed', reason: err instanceof DataError ? err.message : String(err) });
    return;
  }
  const table = b.finish();
  const { packed, transfer } = packTable(table);
  post(
    {
      type: 'done',
      table: packed,
      skipped: b.skipped,
      skipLog: { total: skipLog.total, byCode: skipLog.byCode, samples: skipLog.samples },
      localFields: b.localFields(),
      ignoredFields: b.ignoredFields(),
      bytesRead,
    },
    transfer,
  );
}

const job = workerData as ChildJob | null;
if (parentPort !== null && job?.kind === WORKER_KIND) {
  const port = parentPort;
  run(job, (m, transfer) => port.postMessage(m, transfer ?? [])).catch((err: unknown) => {
    port.postMessage({ type: 'failed', reason: String(err) } satisfies ChildMessage);
  });
}
