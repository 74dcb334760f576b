/**
 * Queries arriving on a schedule, as requests reach a server: a thread sleeps until a query is due
 * and posts it to the event loop, which runs it as soon as it is free (at once when idle, after
 * the step or the collection under way otherwise).
 *
 * The live bench first waited on the event loop itself, spinning on setImmediate for the last
 * 1.5 ms before each query (timers fire up to a millisecond late). Those turns allocated about
 * 400 MB/s, some 30 scavenges a second at 100k that a server waiting in the kernel does not make,
 * and a query due during one waited for it (BENCHMARKS.md "Live: queries that arrive, and a core
 * for the event loop"). Here the event loop sleeps while it has nothing to do.
 *
 * Times are this thread's performance.now(). A query arrives when the thread posts it: the thread
 * wakes 0.05-0.3 ms after the due time here (the kernel's timer slack), and that
 * lateness is the thread's, not the engine's, so a query is timed from its arrival. When the
 * event loop asks for a query only after it was due (the loop was busy), it arrives at once and is
 * timed from when it was due, so that the wait counts (it runs then without a round trip).
 */
import { Worker } from 'node:worker_threads';

/** The thread: one request at a time, a due time on the process's monotonic clock (ms); replies with when it posted. */
const THREAD = `
const { parentPort } = require('node:worker_threads');
const cell = new Int32Array(new SharedArrayBuffer(4));
const now = () => Number(process.hrtime.bigint()) / 1e6;
parentPort.on('message', (due) => {
  let slept = false;
  for (let left = due - now(); left > 0; left = due - now()) {
    Atomics.wait(cell, 0, 0, left);
    slept = true;
  }
  parentPort.postMessage({ at: now(), slept });
});
`;

/**
 * The process's monotonic clock (ms), which every thread shares, minus this thread's
 * performance.now(): from the reading of the shared clock bracketed most tightly by two of
 * performance.now() (a first call of either can take a millisecond, which would shift every
 * arrival by as much).
 */
function hrOffset(): number {
  let best = Infinity;
  let offset = 0;
  for (let i = 0; i < 32; i++) {
    const before = performance.now();
    const hr = Number(process.hrtime.bigint()) / 1e6;
    const after = performance.now();
    if (after - before < best) {
      best = after - before;
      offset = hr - (before + after) / 2;
    }
  }
  return offset;
}

export interface Arrival {
  /** When the query is timed from (performance.now()): its arrival, or its due time when the loop asked late. */
  readonly start: number;
  /** How late the thread posted a query it slept for (ms after due): the OS's doing (0 when the loop asked late). */
  readonly lateness: number;
}

export class Arrivals {
  private readonly thread = new Worker(THREAD, { eval: true });
  private readonly offset = hrOffset();
  private pending: ((reply: { at: number; slept: boolean }) => void) | null = null;

  constructor() {
    this.thread.on('message', (reply: { at: number; slept: boolean }) => {
      const resolve = this.pending;
      this.pending = null;
      resolve?.(reply);
    });
  }

  /** Resolves when the query due at `due` (performance.now()) has arrived and the event loop is free to run it. */
  async at(due: number): Promise<Arrival> {
    if (this.pending !== null) throw new Error('Arrivals.at: one query at a time');
    if (due <= performance.now()) return { start: due, lateness: 0 }; // the loop asks late: the query is there
    const reply = await new Promise<{ at: number; slept: boolean }>((resolve) => {
      this.pending = resolve;
      this.thread.postMessage(due + this.offset);
    });
    const at = reply.at - this.offset;
    return reply.slept ? { start: at, lateness: at - due } : { start: due, lateness: 0 };
  }

  /** Ends the thread. */
  close(): Promise<number> {
    return this.thread.terminate();
  }
}
