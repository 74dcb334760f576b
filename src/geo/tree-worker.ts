/**
 * KD-trees built on a worker thread: compaction's trees (about 20 ms each at 100k listings, 200 ms
 * at 1M, one call to kdbush that cannot be cut into steps) are built there while the event loop
 * goes on answering queries. The points go over and each tree comes back as transferred buffers,
 * not copied. A `TreeThread` is started ahead of the trees it is to build, so that its start-up
 * (a new V8 isolate and the modules: 100-300 ms of the other core) overlaps the work before them.
 */
import { parentPort, workerData, type Worker } from 'node:worker_threads';
import { startWorker } from '../util/worker.js';
import { buildTree, type BuiltTree } from './point-index.js';

const TREE_WORKER = 'reso-engine:kd-trees';

interface TreeJob {
  readonly id: number;
  readonly coords: Float64Array;
}

interface TreeDone {
  readonly id: number;
  readonly built: BuiltTree;
}

/** A worker thread that builds KD-trees, one job after another, until closed. */
export class TreeThread {
  private readonly worker: Worker | null;
  private readonly waiting = new Map<number, (built: BuiltTree | null) => void>();
  private jobs = 0;
  private failed = false;

  constructor() {
    let worker: Worker | null;
    try {
      worker = startWorker(import.meta.url, 'tree-worker', { workerData: { kind: TREE_WORKER } });
      worker.unref(); // a thread kept for builds does not keep the process alive
      worker.on('message', ({ id, built }: TreeDone) => this.settle(id, built));
      worker.on('error', () => this.fail());
      worker.on('exit', () => this.fail());
    } catch {
      worker = null;
      this.failed = true;
    }
    this.worker = worker;
  }

  /**
   * `buildTree(coords)` on the thread. `coords` is handed over (its buffer is detached here).
   * Resolves null when the thread could not build it (it could not start, or failed): the caller
   * builds the tree on its own thread instead.
   */
  build(coords: Float64Array): Promise<BuiltTree | null> {
    if (this.failed || this.worker === null) return Promise.resolve(null);
    const id = this.jobs++;
    const job: TreeJob = { id, coords };
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.worker!.postMessage(job, [coords.buffer as ArrayBuffer]);
    });
  }

  /** Stops the thread; a build not finished resolves null. */
  close(): void {
    this.failed = true;
    void this.worker?.terminate();
    this.fail();
  }

  private settle(id: number, built: BuiltTree | null): void {
    this.waiting.get(id)?.(built);
    this.waiting.delete(id);
  }

  private fail(): void {
    this.failed = true;
    for (const id of [...this.waiting.keys()]) this.settle(id, null);
  }
}

const port = parentPort;
if (port !== null && (workerData as { kind?: string } | null)?.kind === TREE_WORKER) {
  port.on('message', ({ id, coords }: TreeJob) => {
    const built = buildTree(coords);
    const done: TreeDone = { id, built };
    port.postMessage(done, [built.tree, built.cosAt.buffer as ArrayBuffer]);
  });
}
