/**
 * The writer thread of `bench/live-waits.ts` with OFFLOOP=1: a second engine, opened from the same
 * snapshot, brought to the same point as the queried one (a 1,000-listing change and three
 * 100-listing changes), that applies the stream (a 100-listing change every 200 ms for as long as
 * the window asks) when the main thread posts the window's length, and posts back the number of
 * changes and their median time. What the queries on the main thread then wait for is what a
 * writer off the event loop would leave them, publishing included at no cost.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Engine } from '../src/engine.js';
import { Feed, quantile } from './live.bench.js';

const { snapshot, size } = workerData as { snapshot: string; size: number };
const engine = await Engine.open({ snapshot, now: () => new Date('2025-06-01T00:00:00Z'), resultCache: false, compactFraction: false });
const feed = new Feed(size);
await engine.apply(feed.change(1000).operations);
for (const c of feed.changes(3, 100)) await engine.apply(c.operations);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const port = parentPort!;
port.on('message', (windowMs: number) => {
  void (async () => {
    const times: number[] = [];
    const end = performance.now() + windowMs;
    for (const c of feed.changes(Math.ceil(windowMs / 200) + 5, 100)) {
      if (performance.now() >= end) break;
      const start = performance.now();
      await engine.apply(c.operations);
      times.push(performance.now() - start);
      const wait = 200 - (performance.now() - start);
      if (wait > 0) await sleep(wait);
    }
    port.postMessage({ changes: times.length, median: quantile(times, 0.5) });
  })();
});
port.postMessage('ready');
