/**
 * Live updates (the live-data issue): upsert throughput, query latency while a stream of changes
 * is applied in the same process, and snapshot save and load, on the cached data set of each size.
 *
 * - **Engine**: opened from a snapshot cached beside the data set
 *   (bench/.cache/bench-<size>-engine-<crc of src/>.snapshot); the first run at a size (or after
 *   any change under src/) opens the data, saves that snapshot and opens it again. Saving the
 *   unchanged engine and opening the snapshot are timed either way.
 * - **Feed**: realistic MLS changes, generated before they are timed (the generator's own
 *   listings, src/generate): 85% replace an existing listing (the whole record, as feeds send it)
 *   with a price cut, a status change or edited remarks and a new ModificationTimestamp, 10% are
 *   new listings with their Media, 5% remove a listing (its children go with it). One change per
 *   batch: `engine.apply([Property upserts, Media upserts, Property removals])`. A "listing change"
 *   is one of those; "records" counts Media too. A stream's changes are held as JSON text (outside
 *   the JS heap) and each is parsed as it is taken, as a service parses a change when it arrives
 *   (`Feed.stream`; the parse is not in the time per change).
 * - **Query latency**: the comparison's families Q1–Q10 (bench/compare/families.ts: search, geo,
 *   ordered walks, $skip, counts, $apply, a key lookup) issued round-robin on a fixed schedule,
 *   each given a slot of 5× its idle median (at least 2 ms), so idle queries seldom queue behind
 *   each other. Each arrives from a thread that sleeps until it is due and posts it to the event
 *   loop, as a request reaches a server (bench/arrivals.ts): the loop sleeps while it has nothing to
 *   do. Latency is from the query's arrival to its answer, so it includes any time the query waited
 *   for the event loop (a change holding it); the service time (start of `engine.query` to its
 *   return) is kept apart. The engine's result cache is off, as in the comparison: idle, it would
 *   answer the repeated queries without running them. Measured idle on the loaded engine, then per
 *   update stream (changes applied back to back, or at a fixed rate, in the same event loop) in
 *   alternating idle and streaming windows, so both see the same data and the same background
 *   load; how late the arrivals thread woke (p99) tells whether the OS held the process back.
 * - **Throughput**: changes of 100, 1,000 and 10,000 listings applied back to back with no
 *   queries; time per change, listings/s and records/s, the longest event-loop block
 *   (perf_hooks monitorEventLoopDelay), and the memory retained per 100k listing changes (after a
 *   full GC).
 * - **Save after changes**: `engine.save` compacts first (re-reads every live record), timed once,
 *   unless the machine lacks the memory the compaction needs (RESO_LIVE_SAVE=1 forces it).
 *
 * Writes bench/results/live-latest.md (tables) besides the rows bench/run.ts collects.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { crc32 } from 'node:zlib';
import { Engine } from '../src/engine.js';
import { DEFAULT_REFERENCE } from '../src/generate/dataset.js';
import { GeneratorContext, type JsonRecord } from '../src/generate/listing.js';
import { Rng } from '../src/generate/prng.js';
import { REMARK_PHRASES } from '../src/generate/tables.js';
import type { ChangeOperation } from '../src/live/change.js';
import { Arrivals } from './arrivals.js';
import { FAMILY_IDS, familiesOf, type FamilyId } from './compare/families.js';
import { BENCH_SEED, benchDataset } from './data.js';
import { gitCommit, type BenchFile, type BenchOptions, type BenchRow } from './lib.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const NOW = (): Date => new Date('2025-06-01T00:00:00Z');
const seconds = (since: number): number => (performance.now() - since) / 1000;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Memory and statistics

interface Memory {
  rss: number;
  heap: number;
  arrayBuffers: number;
}

/** Memory after a full collection (the bench runs with --expose-gc). */
function settledMemory(): Memory {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (!collect) throw new Error('the live bench needs --expose-gc (bench/run.ts passes it)');
  collect();
  collect();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed, arrayBuffers: m.arrayBuffers };
}

/**
 * The idle p95 a stream's p95 is held against: the lower of the loaded engine's and of the idle
 * windows between the stream's, so that an idle window that caught an automatic compaction (which
 * the stream started) cannot make the stream look fast.
 */
function idleP95(loaded: { latency: readonly number[] }, between: { latency: readonly number[] }): number {
  return Math.min(quantile(loaded.latency, 0.95), quantile(between.latency, 0.95));
}

/** Nearest-rank quantile of unsorted samples. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return NaN;
  const sorted = Float64Array.from(samples).sort();
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

const ms = (x: number): string => (!Number.isFinite(x) ? '—' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toFixed(3));
const count = (x: number): string => Math.round(x).toLocaleString('en-US');
const mb = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(0)} MB`;

// ---------------------------------------------------------------------------------------------
// The engine, from a cached snapshot when there is one

/** A checksum of every source file under src/: a snapshot written by other code is not reused. */
function sourceHash(): string {
  const root = path.join(here, '..', 'src');
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts')) files.push(p);
    }
  };
  walk(root);
  let crc = 0;
  for (const f of files.sort()) crc = crc32(readFileSync(f), crc32(path.relative(root, f), crc));
  return crc.toString(16).padStart(8, '0');
}

interface Opened {
  engine: Engine;
  /** Engine.open({ data }) when the snapshot had to be made first. */
  jsonOpenSeconds?: number;
  saveSeconds: number;
  snapshotOpenSeconds: number;
  snapshotBytes: number;
}

async function openEngine(size: number, dir: string, work: string, log: (line: string) => void): Promise<Opened> {
  const label = size.toLocaleString('en-US');
  const prefix = `${path.basename(dir)}-engine-`;
  const cached = path.join(path.dirname(dir), `${prefix}${sourceHash()}.snapshot`);
  let jsonOpenSeconds: number | undefined;
  let saveSeconds: number;
  let snapshotBytes: number;
  if (!existsSync(cached)) {
    for (const f of readdirSync(path.dirname(dir)))
      if (f.startsWith(prefix) && f.endsWith('.snapshot')) rmSync(path.join(path.dirname(dir), f), { force: true });
    log(`${label}: no snapshot for this source yet: Engine.open({ data }), then save it to ${path.relative(process.cwd(), cached)}`);
    settledMemory();
    let t = performance.now();
    let fresh: Engine | null = await Engine.open({ data: dir, now: NOW });
    jsonOpenSeconds = seconds(t);
    log(`${label}: opened from data in ${jsonOpenSeconds.toFixed(1)} s; saving`);
    t = performance.now();
    snapshotBytes = fresh.save(cached).bytes;
    saveSeconds = seconds(t);
    // eslint-disable-next-line no-useless-assignment -- drops the reference so the GC can free it before the next engine opens
    fresh = null; // one engine in memory at a time
  } else {
    snapshotBytes = statSync(cached).size;
    saveSeconds = NaN;
  }
  settledMemory();
  log(`${label}: Engine.open({ snapshot }) (${(snapshotBytes / 1e9).toFixed(2)} GB)`);
  const t = performance.now();
  // the result cache off: the idle windows repeat the same queries, which it would answer without
  // executing them, while every change drops it, so the ratio would set execution under a stream
  // against cache hits idle
  const engine = await Engine.open({ snapshot: cached, now: NOW, resultCache: false });
  const snapshotOpenSeconds = seconds(t);
  if (Number.isNaN(saveSeconds)) {
    // The snapshot was cached: time the save of the unchanged engine into the work directory.
    log(`${label}: opened in ${snapshotOpenSeconds.toFixed(1)} s; saving it unchanged`);
    const file = path.join(work, 'unchanged.snapshot');
    const s = performance.now();
    snapshotBytes = engine.save(file).bytes;
    saveSeconds = seconds(s);
    rmSync(file, { force: true });
  }
  return { engine, jsonOpenSeconds, saveSeconds, snapshotOpenSeconds, snapshotBytes };
}

// ---------------------------------------------------------------------------------------------
// The feed

interface Change {
  readonly operations: ChangeOperation[];
  /** Listing changes: replacements + new listings + removals. */
  readonly listings: number;
  /** Every record in the change: listings upserted, Media upserted, keys removed. */
  readonly records: number;
}

/** A change of a stream: its operations as the feed's text gives them when taken. */
interface StreamedChange extends Omit<Change, 'operations'> {
  take(): ChangeOperation[];
}

const NEXT_STATUS: Readonly<Record<string, string>> = {
  Active: 'Pending',
  'Active Under Contract': 'Pending',
  Pending: 'Closed',
  'Coming Soon': 'Active',
};

/** MLS-feed changes over a data set generated with `seed` (deterministic; exported for scripts that profile the change path). */
export class Feed {
  private readonly ctx: GeneratorContext;
  private readonly rng: Rng;
  private readonly removed = new Set<number>();
  private nextNew: number;
  private stamp = Date.parse(DEFAULT_REFERENCE) - 6 * 3_600_000;

  constructor(
    private readonly size: number,
    seed = BENCH_SEED,
  ) {
    this.ctx = new GeneratorContext(seed, Date.parse(DEFAULT_REFERENCE), size);
    this.rng = new Rng(`${seed}:live-feed`);
    this.nextNew = size;
  }

  /** One change of `n` listing changes, each listing at most once. */
  change(n: number): Change {
    const listings: JsonRecord[] = [];
    const media: JsonRecord[] = [];
    const removals: string[] = [];
    const touched = new Set<number>();
    const existing = (): number => {
      for (;;) {
        const i = this.rng.int(0, this.size - 1);
        if (!touched.has(i) && !this.removed.has(i)) {
          touched.add(i);
          return i;
        }
      }
    };
    for (let k = 0; k < n; k++) {
      const r = this.rng.next();
      const when = new Date((this.stamp += 50)).toISOString();
      if (r < 0.1) {
        const g = this.ctx.listing(this.nextNew++);
        listings.push({ ...g.property, ModificationTimestamp: when });
        media.push(...g.media);
      } else if (r < 0.15) {
        const i = existing();
        this.removed.add(i);
        removals.push(`P${String(i + 1).padStart(9, '0')}`);
      } else {
        const p: JsonRecord = { ...this.ctx.listing(existing()).property, ModificationTimestamp: when };
        const kind = this.rng.next();
        if (kind < 0.5 && typeof p.ListPrice === 'number') p.ListPrice = Math.round((p.ListPrice * this.rng.range(0.9, 0.99)) / 100) * 100;
        else if (kind < 0.8) {
          const status = NEXT_STATUS[p.StandardStatus as string] ?? 'Active';
          p.StandardStatus = status;
          p.MlsStatus = status;
          p.StatusChangeTimestamp = when;
          if (status === 'Closed') {
            p.ClosePrice = p.ListPrice;
            p.CloseDate = when.slice(0, 10);
          }
        } else p.PublicRemarks = `${String(p.PublicRemarks ?? '')} ${this.rng.pick(REMARK_PHRASES)}`.trim();
        listings.push(p);
      }
    }
    const operations: ChangeOperation[] = [
      { resource: 'Property', upsert: listings },
      { resource: 'Media', upsert: media },
      { resource: 'Property', remove: removals },
    ];
    return { operations, listings: n, records: listings.length + media.length + removals.length };
  }

  changes(batches: number, n: number): Change[] {
    return Array.from({ length: batches }, () => this.change(n));
  }

  /**
   * `changes` held as the text a feed sends (Buffers, outside the JS heap), handed to the engine
   * when it is applied (`take`): a stream's changes made beforehand as objects would sit in the heap
   * the queries run in (about 500 MB for the 1,000-listing stream at 100k) and make every
   * mark-compact mark them, which a service taking each change as it arrives never does.
   *
   * Each upsert goes as JSON Lines bytes (`upsertLines`), which the engine reads in steps straight
   * from the bytes. With `RESO_BENCH_FEED=json` the change is one JSON text parsed whole on the
   * event loop when taken, its records handed over as values (how the bench fed the engine before:
   * BENCHMARKS.md "Live: a change's records read from its bytes in steps").
   */
  stream(batches: number, n: number): Iterator<StreamedChange> {
    const whole = process.env.RESO_BENCH_FEED === 'json';
    const packed = Array.from({ length: batches }, () => {
      const c = this.change(n);
      if (whole) {
        const json = Buffer.from(JSON.stringify(c.operations));
        return { take: () => JSON.parse(json.toString('utf8')) as ChangeOperation[], listings: c.listings, records: c.records };
      }
      const operations: ChangeOperation[] = c.operations.map((op) =>
        'upsert' in op ? { resource: op.resource, upsertLines: Buffer.from(op.upsert.map((r) => JSON.stringify(r)).join('\n')) } : op,
      );
      return { take: () => operations, listings: c.listings, records: c.records };
    });
    return packed.values();
  }
}

// ---------------------------------------------------------------------------------------------
// Query latency on a fixed schedule

interface Query {
  readonly id: FamilyId;
  readonly odata: string;
}

interface Latencies {
  latency: number[];
  service: number[];
}

/**
 * Issues the queries round-robin, query i due `slots[i]` ms after the one before it, for
 * `durationMs`; each arrives from the arrivals thread as a request reaches a server (the event
 * loop sleeps until then, or runs whatever else it has: a change's steps) and is timed from its
 * arrival (waiting for the event loop included) and, apart, from when it started.
 */
async function measureQueries(
  engine: Engine,
  arrivals: Arrivals,
  mix: readonly Query[],
  slots: readonly number[],
  durationMs: number,
  late: Lateness,
): Promise<Latencies[]> {
  const out = mix.map(() => ({ latency: [] as number[], service: [] as number[] }));
  let due = performance.now() + 1;
  const end = due + durationMs;
  for (let i = 0; due < end; i = (i + 1) % mix.length) {
    const arrival = await arrivals.at(due);
    const start = performance.now();
    engine.query('Property', mix[i].odata);
    const done = performance.now();
    out[i].latency.push(done - arrival.start);
    out[i].service.push(done - start);
    if (arrival.lateness > 0) late.push(arrival.lateness);
    due += slots[i];
  }
  return out;
}

/**
 * How late the arrivals thread posted the queries it slept for (ms after due), over some windows:
 * the kernel's timer slack on a quiet machine (p99 0.1-0.3 ms on this one), more when the OS ran other
 * processes instead (a shared machine), whose latencies then include that wait too.
 */
type Lateness = number[];

/** Event-loop delay (ms) over several runs: the longest, and the worst run's p99. */
interface LoopDelay {
  max: number;
  p99: number;
}

async function loopDelay<T>(into: LoopDelay, run: () => Promise<T>): Promise<T> {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  try {
    return await run();
  } finally {
    delay.disable();
    into.max = Math.max(into.max, delay.max / 1e6);
    into.p99 = Math.max(into.p99, delay.percentile(99) / 1e6);
  }
}

interface StreamConfig {
  readonly name: string;
  /** Listing changes per change. */
  readonly batch: number;
  /** A change starts every periodMs (0: back to back; a change longer than the period is followed at once). */
  readonly periodMs: number;
}

interface StreamStats {
  generations: number;
  /** Automatic compactions that finished during the stream's idle windows, and during its stream windows. */
  compactionsIdle: number;
  compactionsStreaming: number;
  changes: number;
  listings: number;
  records: number;
  applyMs: number[];
  seconds: number;
  ranOut: boolean;
}

/** Applies changes from `source` one after another until `stop()` (or the source runs out), in this event loop. */
function startStream(engine: Engine, source: Iterator<StreamedChange>, periodMs: number, stats: StreamStats): { stop: () => Promise<void> } {
  let stopped = false;
  const g0 = engine.generation;
  const t0 = performance.now();
  const run = (async () => {
    for (let next = source.next(); !next.done && !stopped; next = source.next()) {
      const change = next.value;
      const start = performance.now();
      await engine.apply(change.take());
      stats.applyMs.push(performance.now() - start);
      stats.changes++;
      stats.listings += change.listings;
      stats.records += change.records;
      const wait = periodMs - (performance.now() - start);
      if (wait > 0 && !stopped) await sleep(wait);
    }
    if (!stopped) stats.ranOut = true;
  })();
  return {
    stop: async () => {
      stopped = true;
      await run;
      stats.seconds += seconds(t0);
      stats.generations += engine.generation - g0;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The bench

interface ThroughputResult {
  batch: number;
  changes: number;
  listings: number;
  records: number;
  applyMs: number[];
  blockMaxMs: number;
}

interface StreamResult {
  readonly config: StreamConfig;
  /** Query latencies in the idle windows between the stream windows, and under the stream. */
  readonly idle: Latencies[];
  readonly lat: Latencies[];
  readonly stats: StreamStats;
  readonly delay: LoopDelay;
  /** The arrivals thread's lateness p99 (ms) in the idle and the stream windows (see Lateness). */
  readonly idleLate: number;
  readonly streamLate: number;
}

/** Idle and stream windows per stream (alternating). */
const WINDOWS = 3;
/** A query's slot in the schedule, in multiples of its idle median: idle, the loop is busy about 1/SLOT_FACTOR of the time. */
const SLOT_FACTOR = 5;

/**
 * Each query's slot in the schedule (ms): SLOT_FACTOR times its idle median, at least 2 ms, the
 * median taken warm (plans cached, sorted orders built: the first 10 of 40 runs left out).
 */
export function scheduleSlots(engine: Engine, queries: ReadonlyArray<{ readonly odata: string }>): number[] {
  return queries.map((q) => {
    const times: number[] = [];
    for (let k = 0; k < 40; k++) {
      const t = performance.now();
      engine.query('Property', q.odata);
      times.push(performance.now() - t);
    }
    return Math.max(2, SLOT_FACTOR * quantile(times.slice(10), 0.5));
  });
}

/** Bytes the OS could give this process now (MemAvailable), or os.freemem() where there is no /proc/meminfo. */
function availableMemory(): number {
  try {
    const m = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'));
    if (m) return Number(m[1]) * 1024;
  } catch {
    // not Linux
  }
  return os.freemem();
}

function appendLatencies(into: Latencies[], from: readonly Latencies[]): void {
  from.forEach((l, i) => {
    into[i].latency.push(...l.latency);
    into[i].service.push(...l.service);
  });
}

const bench: BenchFile = {
  name: 'live',
  async run(options: BenchOptions) {
    const rows: BenchRow[] = [];
    const markdown: string[] = [];
    const work = path.join(os.tmpdir(), `reso-live-bench-${process.pid}`);
    mkdirSync(work, { recursive: true });
    const phaseMs = options.quick ? 5_000 : 30_000;
    const streams: StreamConfig[] = [
      { name: '1,000-listing changes back to back', batch: 1000, periodMs: 0 },
      { name: 'a 100-listing change every 200 ms', batch: 100, periodMs: 200 },
    ];
    const throughputBatches: ReadonlyArray<readonly [batch: number, changes: number]> = options.quick
      ? [
          [100, 10],
          [1000, 4],
          [10_000, 1],
        ]
      : [
          [100, 50],
          [1000, 20],
          [10_000, 5],
        ];
    const arrivals = new Arrivals();
    try {
      for (const size of options.sizes) {
        const label = size.toLocaleString('en-US');
        const log = (line: string): void => options.log(`${label}: ${line}`);
        const dir = benchDataset(size, options.log);
        const opened = await openEngine(size, dir, work, options.log);
        const { engine } = opened;
        const feed = new Feed(size);
        const families = familiesOf(dir);
        const mix: Query[] = FAMILY_IDS.map((id) => ({ id, odata: families.odata[id] }));

        // Slots from the idle service time (warm: plans cached, sorted orders built).
        log('warming the queries');
        const slots = scheduleSlots(engine, mix);
        const round = slots.reduce((a, b) => a + b, 0);
        log(`schedule: ${mix.map((q, i) => `${q.id} ${ms(slots[i])}`).join(', ')} ms (${ms(round)} ms a round)`);

        const windowMs = phaseMs / WINDOWS;
        log(`idle query latency on the loaded engine (${(windowMs / 1000).toFixed(1)} s)`);
        settledMemory();
        const freshLate: Lateness = [];
        const fresh = await measureQueries(engine, arrivals, mix, slots, windowMs, freshLate);

        // The first change copies the loaded columns into growable arrays: timed on its own.
        log('first change after load (1,000 listing changes)');
        const first = feed.change(1000);
        const beforeFirst = settledMemory();
        let t = performance.now();
        await engine.apply(first.operations);
        const firstMs = performance.now() - t;
        const afterFirst = settledMemory();

        // Each stream: idle and stream windows alternate, so both see the same background load and data.
        const streamed: StreamResult[] = [];
        for (const config of streams) {
          // Enough changes for the stream windows, generated beforehand (their generation is not timed).
          const probe = feed.changes(2, config.batch);
          t = performance.now();
          for (const c of probe) await engine.apply(c.operations);
          const applyMs = (performance.now() - t) / probe.length;
          const needed = Math.ceil((phaseMs / Math.max(config.periodMs, applyMs)) * 1.5) + 2;
          log(`stream '${config.name}': ~${ms(applyMs)} ms a change; generating ${needed} changes`);
          const source = feed.stream(needed, config.batch);
          const idle = mix.map(() => ({ latency: [] as number[], service: [] as number[] }));
          const lat = mix.map(() => ({ latency: [] as number[], service: [] as number[] }));
          const stats: StreamStats = {
            generations: 0,
            compactionsIdle: 0,
            compactionsStreaming: 0,
            changes: 0,
            listings: 0,
            records: 0,
            applyMs: [],
            seconds: 0,
            ranOut: false,
          };
          const delay: LoopDelay = { max: 0, p99: 0 };
          const idleLate: Lateness = [];
          const streamLate: Lateness = [];
          for (let w = 0; w < WINDOWS; w++) {
            log(`stream '${config.name}': window ${w + 1} of ${WINDOWS}, idle then streaming (${(windowMs / 1000).toFixed(1)} s each)`);
            settledMemory();
            const c0 = engine.compactions.count;
            appendLatencies(idle, await measureQueries(engine, arrivals, mix, slots, windowMs, idleLate));
            const c1 = engine.compactions.count;
            settledMemory();
            let windowLat: Latencies[] = [];
            await loopDelay(delay, async () => {
              const stream = startStream(engine, source, config.periodMs, stats);
              windowLat = await measureQueries(engine, arrivals, mix, slots, windowMs, streamLate);
              appendLatencies(lat, windowLat);
              await stream.stop();
            });
            stats.compactionsIdle += c1 - c0;
            stats.compactionsStreaming += engine.compactions.count - c1;
            // each window on its own (the table pools them): whether the one a compaction fell in is the one that misses
            log(
              `stream '${config.name}': window ${w + 1}, ${engine.compactions.count - c1} compactions finished in it; p95 / the lower idle p95 so far: ` +
                mix.map((q, i) => `${q.id} ${(quantile(windowLat[i].latency, 0.95) / idleP95(fresh[i], idle[i])).toFixed(2)}`).join(', '),
            );
          }
          if (stats.ranOut) log(`stream '${config.name}': ran out of generated changes`);
          streamed.push({ config, idle, lat, stats, delay, idleLate: quantile(idleLate, 0.99), streamLate: quantile(streamLate, 0.99) });
          log(`stream '${config.name}': ${stats.generations} generations, ${count(stats.listings / stats.seconds)} listing changes/s`);
        }

        // Throughput: changes back to back, nothing else running.
        const throughput: ThroughputResult[] = [];
        const before = settledMemory();
        let throughputListings = 0;
        let throughputRecords = 0;
        for (const [batch, n] of throughputBatches) {
          log(`throughput: ${n} changes of ${batch.toLocaleString('en-US')} listings`);
          const changes = feed.changes(n, batch);
          const delay: LoopDelay = { max: 0, p99: 0 };
          const applyMs: number[] = [];
          await loopDelay(delay, async () => {
            for (const c of changes) {
              t = performance.now();
              await engine.apply(c.operations);
              applyMs.push(performance.now() - t);
            }
          });
          const listings = changes.reduce((a, c) => a + c.listings, 0);
          const records = changes.reduce((a, c) => a + c.records, 0);
          throughputListings += listings;
          throughputRecords += records;
          throughput.push({ batch, changes: n, listings, records, applyMs, blockMaxMs: delay.max });
        }
        const after = settledMemory();
        const per100k = (k: keyof Memory): number => ((after[k] - before[k]) / throughputListings) * 100_000;

        // A save after changes compacts first: fresh copies of every live column and rebuilt
        // indexes, about as large as the typed arrays held now. Not attempted when the machine
        // could not give that much (RESO_LIVE_SAVE=1 forces it).
        const generations = engine.generation;
        const held = settledMemory();
        const rssBeforeSave = held.rss;
        const compactionBytes = 1.25 * held.arrayBuffers;
        let saved: { seconds: number; bytes: number; peakRss: number } | null = null;
        if (process.env.RESO_LIVE_SAVE === '1' || compactionBytes < availableMemory()) {
          log('save after changes (compacts first)');
          const changedFile = path.join(work, 'changed.snapshot');
          t = performance.now();
          const bytes = engine.save(changedFile).bytes;
          saved = { seconds: seconds(t), bytes, peakRss: process.resourceUsage().maxRSS * 1024 };
          rmSync(changedFile, { force: true });
        } else
          log(`save after changes skipped: it would need about ${mb(compactionBytes)} more, ${mb(availableMemory())} available (RESO_LIVE_SAVE=1 forces it)`);

        // ---- rows
        const row = (task: string, r: Omit<BenchRow, 'bench' | 'task'>): void => void rows.push({ bench: 'live', task: `${task}, ${label} listings`, ...r });
        const latencyRow = (task: string, l: Latencies, metrics: Record<string, number> = {}): void =>
          row(task, {
            medianMs: quantile(l.latency, 0.5),
            p95Ms: quantile(l.latency, 0.95),
            samples: l.latency.length,
            metrics: { serviceP95Ms: quantile(l.service, 0.95), ...metrics },
          });
        row('snapshot save (unchanged engine)', { metrics: { seconds: opened.saveSeconds, bytes: opened.snapshotBytes } });
        row('snapshot open (Engine.open({ snapshot }))', {
          metrics: { seconds: opened.snapshotOpenSeconds },
          note: opened.jsonOpenSeconds !== undefined ? `snapshot made first (Engine.open({ data }) ${opened.jsonOpenSeconds.toFixed(1)} s)` : 'cached snapshot',
        });
        row(
          `snapshot save after ${generations} changes (compacts first)`,
          saved
            ? { metrics: { seconds: saved.seconds, bytes: saved.bytes, rssBeforeBytes: rssBeforeSave, peakRssBytes: saved.peakRss } }
            : { note: `skipped: the compaction would need about ${mb(compactionBytes)} more than the resident ${mb(rssBeforeSave)}` },
        );
        row('first change after load (1,000 listings)', {
          medianMs: firstMs,
          metrics: {
            records: first.records,
            retainedArrayBufferBytes: afterFirst.arrayBuffers - beforeFirst.arrayBuffers,
            retainedRssBytes: afterFirst.rss - beforeFirst.rss,
          },
        });
        for (const r of throughput) {
          const total = r.applyMs.reduce((a, b) => a + b, 0) / 1000;
          row(`upsert ${r.batch.toLocaleString('en-US')}-listing changes`, {
            opsPerSec: r.listings / total,
            medianMs: quantile(r.applyMs, 0.5),
            p95Ms: quantile(r.applyMs, 0.95),
            samples: r.changes,
            metrics: { recordsPerSec: r.records / total, recordsPerChange: r.records / r.changes, longestBlockMs: r.blockMaxMs },
            note: 'opsPerSec = listing changes/s',
          });
        }
        row('memory retained per 100k listing changes', {
          metrics: {
            rssBytes: per100k('rss'),
            heapBytes: per100k('heap'),
            arrayBufferBytes: per100k('arrayBuffers'),
            listingChanges: throughputListings,
            records: throughputRecords,
          },
        });
        mix.forEach((q, i) => {
          latencyRow(`${q.id} idle on the loaded engine`, fresh[i], { slotMs: slots[i], arrivalLatenessP99Ms: quantile(freshLate, 0.99) });
          for (const s of streamed) {
            latencyRow(`${q.id} idle between windows of ${s.config.name}`, s.idle[i]);
            latencyRow(`${q.id} under ${s.config.name}`, s.lat[i], { p95RatioToIdle: quantile(s.lat[i].latency, 0.95) / idleP95(fresh[i], s.idle[i]) });
          }
        });
        for (const s of streamed) {
          row(`stream: ${s.config.name}`, {
            medianMs: quantile(s.stats.applyMs, 0.5),
            p95Ms: quantile(s.stats.applyMs, 0.95),
            samples: s.stats.changes,
            metrics: {
              generations: s.stats.generations,
              compactionsIdle: s.stats.compactionsIdle,
              compactionsStreaming: s.stats.compactionsStreaming,
              seconds: s.stats.seconds,
              listingChangesPerSec: s.stats.listings / s.stats.seconds,
              recordsPerSec: s.stats.records / s.stats.seconds,
              loopDelayMaxMs: s.delay.max,
              loopDelayP99Ms: s.delay.p99,
              idleArrivalLatenessP99Ms: s.idleLate,
              streamArrivalLatenessP99Ms: s.streamLate,
            },
            note: s.stats.ranOut ? 'ran out of generated changes' : undefined,
          });
        }

        // ---- markdown
        const cell = (l: Latencies): string =>
          `${ms(quantile(l.latency, 0.5))} / ${ms(quantile(l.latency, 0.95))} (service p95 ${ms(quantile(l.service, 0.95))})`;
        const md: string[] = [`### ${label} listings`, ''];
        md.push(
          '**Snapshot**',
          '',
          '| step | time | file |',
          '|---|---|---|',
          ...(opened.jsonOpenSeconds !== undefined
            ? [`| Engine.open({ data }) (to make the cached snapshot) | ${opened.jsonOpenSeconds.toFixed(1)} s | |`]
            : []),
          `| save, unchanged engine | ${opened.saveSeconds.toFixed(1)} s | ${(opened.snapshotBytes / 1e9).toFixed(2)} GB |`,
          `| Engine.open({ snapshot }) | ${opened.snapshotOpenSeconds.toFixed(1)} s | |`,
          saved
            ? `| save after ${generations} changes (compacts first; one synchronous call) | ${saved.seconds.toFixed(1)} s (resident ${mb(rssBeforeSave)} before, process peak ${mb(saved.peakRss)}) | ${(saved.bytes / 1e9).toFixed(2)} GB |`
            : `| save after ${generations} changes (compacts first) | skipped: the compaction would need about ${mb(compactionBytes)} more than the resident ${mb(rssBeforeSave)} | |`,
          '',
          '**Upsert throughput** (changes back to back, no queries)',
          '',
          '| listing changes per change | changes | records per change (with Media) | listing changes/s | records/s | ms per change (median / p95) | longest event-loop block |',
          '|---|---|---|---|---|---|---|',
          `| 1,000 (the first change after load) | 1 | ${count(first.records)} | ${count(1000 / (firstMs / 1000))} | ${count(first.records / (firstMs / 1000))} | ${ms(firstMs)} | |`,
          ...throughput.map((r) => {
            const total = r.applyMs.reduce((a, b) => a + b, 0) / 1000;
            return `| ${r.batch.toLocaleString('en-US')} | ${r.changes} | ${count(r.records / r.changes)} | ${count(r.listings / total)} | ${count(r.records / total)} | ${ms(quantile(r.applyMs, 0.5))} / ${ms(quantile(r.applyMs, 0.95))} ms | ${ms(r.blockMaxMs)} ms |`;
          }),
          '',
          `The first change retained ArrayBuffers ${mb(afterFirst.arrayBuffers - beforeFirst.arrayBuffers)} (resident ${mb(afterFirst.rss - beforeFirst.rss)}). ` +
            `Memory retained per 100k listing changes over the throughput runs (${count(throughputListings)} listing changes, ${count(throughputRecords)} records, after a full GC): resident ${mb(per100k('rss'))}, JS heap ${mb(per100k('heap'))}, ArrayBuffers ${mb(per100k('arrayBuffers'))}.`,
          '',
          `**Query latency** (ms from the query's arrival to the answer, p50 / p95; one query due every ${ms(round / mix.length)} ms on average, each slot ${SLOT_FACTOR}× its idle median, at least 2 ms; ` +
            `${WINDOWS} idle and ${WINDOWS} stream windows of ${(windowMs / 1000).toFixed(1)} s alternate per stream)`,
          '',
          `| query | idle, loaded engine | ${streamed.map((s) => `idle between | under ${s.config.name} | p95 / the lower idle p95`).join(' | ')} |`,
          `|---|---|${streamed.map(() => '---|---|---|').join('')}`,
          ...mix.map((q, i) => {
            const cells = streamed.map((s) => {
              const ratio = quantile(s.lat[i].latency, 0.95) / idleP95(fresh[i], s.idle[i]);
              return `${cell(s.idle[i])} | ${cell(s.lat[i])} | ${ratio.toFixed(1)}× ${ratio <= 2 ? '✓' : '✗'}`;
            });
            return `| ${q.id} | ${cell(fresh[i])} | ${cells.join(' | ')} |`;
          }),
          '',
          ...streamed.map(
            (s) =>
              `Under ${s.config.name}: ${s.stats.generations} generations published in ${s.stats.seconds.toFixed(1)} s of streaming (automatic compactions finished: ${s.stats.compactionsStreaming} in its stream windows, ${s.stats.compactionsIdle} in the idle windows between), ${count(s.stats.listings / s.stats.seconds)} listing changes/s (${count(s.stats.records / s.stats.seconds)} records/s), ` +
              `${ms(quantile(s.stats.applyMs, 0.5))} ms a change (p95 ${ms(quantile(s.stats.applyMs, 0.95))}); event-loop delay p99 ${ms(s.delay.p99)} ms (worst window), max ${ms(s.delay.max)} ms; ${s.lat.reduce((a, l) => a + l.latency.length, 0)} queries; arrivals thread late by p99 ${ms(s.idleLate)} ms idle, ${ms(s.streamLate)} ms streaming.${s.stats.ranOut ? ' (Ran out of generated changes.)' : ''}`,
          ),
        );
        markdown.push(md.join('\n'));
      }
    } finally {
      await arrivals.close();
      rmSync(work, { recursive: true, force: true });
    }
    const command = [
      'npm run bench --',
      ...options.sizes.map((n) => `--size ${n % 1_000_000 === 0 ? `${n / 1_000_000}m` : `${n / 1000}k`}`),
      '--only live',
      ...(options.quick ? ['--quick'] : []),
    ].join(' ');
    const header = `Produced by \`${command}\` on ${new Date().toISOString().slice(0, 10)} (commit ${gitCommit()}, Node ${process.version}, ${os.cpus().length}× ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB).`;
    const out = path.join(here, 'results', 'live-latest.md');
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, `${header}\n\n${markdown.join('\n\n')}\n`);
    options.log(`live tables written to ${path.relative(process.cwd(), out)}`);
    return rows;
  },
};

export default bench;
