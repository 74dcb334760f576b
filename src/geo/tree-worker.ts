/**
 * A KD-tree built on a worker thread: compaction's trees (about 20 ms each at 100k listings, 200 ms
 * at 1M, one step that cannot be cut) are built here while the event loop goes on answering
 * queries. The points go over and the tree comes back as transferred buffers, not copied.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { startWorker } from '../util/worker.js';
import { buildTree, type BuiltTree } from './point-index.js';

const TREE_WORKER = 'reso-engine:kd-tree';

interface TreeJob {
  readonly kind: typeof TREE_WORKER;
  readonly coords: Float64Array;
}

/**
 * `buildTree(coords)` on a worker thread. `coords` is handed over (its buffer is detached here).
 * Resolves null when no worker could build it (a thread could not start, or failed): the caller
 * builds it on this thread instead.
 */
export function buildTreeOffThread(coords: Float64Array): Promise<BuiltTree | null> {
  return new Promise((resolve) => {
    let worker;
    try {
      const job: TreeJob = { kind: TREE_WORKER, coords };
      worker = startWorker(import.meta.url, 'tree-worker', { workerData: job, transferList: [coords.buffer as ArrayBuffer] });
    } catch {
      return resolve(null);
    }
    worker.unref(); // a build in flight does not keep the process alive
    worker.once('message', (built: BuiltTree) => resolve(built));
    worker.once('error', () => resolve(null));
    worker.once('exit', () => resolve(null)); // after a message: already resolved
  });
}

const job = workerData as TreeJob | null;
if (parentPort !== null && job?.kind === TREE_WORKER) {
  const built = buildTree(job.coords);
  parentPort.postMessage(built, [built.tree, built.cosAt.buffer as ArrayBuffer]);
}
