/**
 * Loading a data directory into the column store: listings per second and the bytes the store
 * retains per listing (V8 heap plus array buffers, measured around a forced GC), beside the JSON
 * bytes per listing of the files. Two loads: the default one (Media in a worker thread beside
 * Property) for speed, with the listings' search and point indexes as `Engine.open({ data })`
 * builds them (while the worker parses Media), and a one-thread load of the store alone for speed
 * and memory (buffers a worker allocated and transferred are not counted in this thread's
 * `arrayBuffers`). The default load logs its phases: wall and CPU time per thread, since other
 * processes on a shared machine stretch wall time. Baseline (at 100k and below): a naive store
 * that keeps every record as a parsed JavaScript object (readline + JSON.parse).
 *
 * Data: bench/.cache/bench-<size>/ (generated on first use, see data.ts). RESO_BENCH_DATA may name
 * an existing data directory; it is used for the size equal to its number of listings.
 */
import { createReadStream, existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { buildStoreIndexes, StoreAccess, type StoreIndexes } from '../src/access/access.js';
import { RESOURCE_NAMES } from '../src/schema/types.js';
import { loadDataDirectory } from '../src/store/load.js';
import type { LoadPhase } from '../src/store/load-worker.js';
import type { Store } from '../src/store/store.js';
import { benchDataset } from './data.js';
import type { BenchFile, BenchOptions, BenchRow } from './lib.js';

const FILES = RESOURCE_NAMES.map((r) => `${r}.jsonl`);

async function countLines(file: string): Promise<number> {
  let n = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) {
    const b = chunk as Buffer;
    for (let i = b.indexOf(10); i >= 0; i = b.indexOf(10, i + 1)) n++;
  }
  return n;
}

async function dataFor(size: number, log: (line: string) => void): Promise<string> {
  const given = process.env.RESO_BENCH_DATA;
  if (given && existsSync(path.join(given, 'Property.jsonl'))) {
    const listings = await countLines(path.join(given, 'Property.jsonl'));
    if (listings === size) {
      log(`using RESO_BENCH_DATA=${given} (${listings.toLocaleString('en-US')} listings)`);
      return given;
    }
  }
  return benchDataset(size, log);
}

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (!collect) throw new Error('the load bench needs --expose-gc (bench/run.ts passes it)');
  collect();
  collect();
}

function retained(): { heap: number; arrayBuffers: number } {
  gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, arrayBuffers: m.arrayBuffers };
}

/** Bytes of the store that are indexes (key hash tables, child groupings) rather than columns. */
function indexBytes(store: Store): number {
  let n = 0;
  for (const r of RESOURCE_NAMES) {
    const t = store.table(r);
    n += t.byteLength - t.columns.reduce((sum, c) => sum + c.byteLength, 0);
  }
  for (const c of Object.values(store.children)) n += c.byteLength;
  return n;
}

async function measureStore(dir: string, size: number, jsonBytes: number, parallel: boolean, options: BenchOptions): Promise<BenchRow> {
  const before = retained();
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  let lastLog = started;
  const phases: LoadPhase[] = [];
  let listingIndexes: StoreIndexes | undefined;
  const store = await loadDataDirectory(dir, {
    parallel,
    onProgress: (p) => {
      const now = performance.now();
      if (now - lastLog > 5000) {
        lastLog = now;
        options.log(`  ${p.file} ${Math.round((100 * p.bytesRead) / p.bytesTotal)}%`);
      }
    },
    // as Engine.open: the listings' indexes while the worker parses Media
    onListings: parallel ? (property) => (listingIndexes = buildStoreIndexes(property)) : undefined,
    onPhase: (p) => phases.push(p),
  });
  if (parallel) new StoreAccess(store, listingIndexes);
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  options.log(`  phases (${parallel ? 'Media in a worker, with indexes' : 'one thread, store only'}): wall / CPU of the thread, s`);
  for (const p of phases)
    options.log(`    ${p.thread.padEnd(6)} ${p.name.padEnd(26)} ${(p.wallMs / 1000).toFixed(2).padStart(7)} ${(p.cpuMs / 1000).toFixed(2).padStart(7)}`);
  options.log(`    total ${seconds.toFixed(1)} s wall, ${cpuSeconds.toFixed(1)} s CPU (all threads)`);
  const after = retained();
  const n = store.Property.rowCount;
  if (n !== size) throw new Error(`expected ${size} listings, loaded ${n}`);
  const heap = after.heap - before.heap;
  const buffers = after.arrayBuffers - before.arrayBuffers;
  const indexes = indexBytes(store);
  if (parallel) {
    return {
      bench: 'load',
      task: `column store and listing indexes (Engine.open), Media in a worker, ${size.toLocaleString('en-US')} listings`,
      metrics: { listingsPerSec: n / seconds, jsonMBPerSec: jsonBytes / 1e6 / seconds, seconds, cpuSeconds, storeBytesPerListing: store.byteLength / n },
      note: store.report.parallel ? 'Media loaded in a worker thread' : 'worker not used (fell back to one thread)',
    };
  }
  return {
    bench: 'load',
    task: `column store, one thread, ${size.toLocaleString('en-US')} listings`,
    metrics: {
      listingsPerSec: n / seconds,
      jsonMBPerSec: jsonBytes / 1e6 / seconds,
      seconds,
      cpuSeconds,
      jsonBytesPerListing: jsonBytes / n,
      heapBytesPerListing: heap / n,
      arrayBufferBytesPerListing: buffers / n,
      retainedBytesPerListing: (heap + buffers) / n,
      retainedExclIndexesPerListing: (heap + buffers - indexes) / n,
      indexBytesPerListing: indexes / n,
      mediaRows: store.Media.rowCount,
    },
    note: `retained/JSON = ${((heap + buffers) / jsonBytes).toFixed(2)}`,
  };
}

/** The naive store: every record a parsed object in an array. */
async function measureNaive(dir: string, size: number, jsonBytes: number): Promise<BenchRow> {
  const before = retained();
  const started = performance.now();
  const tables: unknown[][] = [];
  for (const f of FILES) {
    // a data set need not have every resource (the 100k one has no roster; nobody writes Lookup or EntityEvent)
    if (!existsSync(path.join(dir, f))) continue;
    const rows: unknown[] = [];
    const lines = createInterface({ input: createReadStream(path.join(dir, f)), crlfDelay: Infinity });
    for await (const line of lines) if (line !== '') rows.push(JSON.parse(line));
    tables.push(rows);
  }
  const seconds = (performance.now() - started) / 1000;
  const after = retained();
  const n = tables[0].length;
  const heap = after.heap - before.heap + after.arrayBuffers - before.arrayBuffers;
  return {
    bench: 'load',
    task: `baseline: JSON.parse objects, ${size.toLocaleString('en-US')} listings`,
    metrics: {
      listingsPerSec: n / seconds,
      jsonMBPerSec: jsonBytes / 1e6 / seconds,
      seconds,
      jsonBytesPerListing: jsonBytes / n,
      retainedBytesPerListing: heap / n,
    },
    note: `retained/JSON = ${(heap / jsonBytes).toFixed(2)}; kept ${tables.length} tables`,
  };
}

const bench: BenchFile = {
  name: 'load',
  async run(options) {
    const rows: BenchRow[] = [];
    for (const size of options.sizes) {
      const dir = await dataFor(size, options.log);
      const jsonBytes = FILES.reduce((sum, f) => sum + (existsSync(path.join(dir, f)) ? statSync(path.join(dir, f)).size : 0), 0);
      options.log(`loading ${size.toLocaleString('en-US')} listings (${(jsonBytes / 1e9).toFixed(2)} GB of JSON Lines)`);
      rows.push(await measureStore(dir, size, jsonBytes, true, options));
      options.log('again on one thread, for memory');
      rows.push(await measureStore(dir, size, jsonBytes, false, options));
      if (size <= 100_000) {
        options.log('baseline: JSON.parse into objects');
        rows.push(await measureNaive(dir, size, jsonBytes));
      }
    }
    return rows;
  },
};
export default bench;
