/**
 * What a query waits for while changes apply (BENCHMARKS.md "Live: the first query on a new
 * generation, and the first after a compaction"): the live bench's schedule (each comparison
 * family due every 5x its idle median, at least 2 ms) on the cached bench engine of a size, idle
 * and then under a 100-listing change every 200 ms, the queries arriving from a thread as requests
 * reach a server (bench/arrivals.ts), with each query's latency split into its wait (from its
 * arrival to its start) and its service time, the service time of the first run of
 * a family on a new generation against its later runs, and the holds of the event loop by
 * anything but the queries (from a turn's resume to the next `setImmediate`), by length.
 *
 *   npx tsx --expose-gc bench/live-waits.ts <listings> [compact]   (e.g. 100000)
 *
 * STEP_MS sets the change's step budget (default: the engine's). Each window also reports V8's
 * garbage-collection pauses by kind (minor: scavenges; major: mark-compacts), which a query due
 * during one waits for like any other hold. With PROF=1 the stream window runs under V8's CPU
 * profiler, and the samples taken while a query waited more than WAIT_MS ms (default 1) are split
 * by what ran: the collector, other queries, the change, the rest. Each window also reports the
 * share of all its queries that waited more than 0.05 to 1 ms, and the run the families whose
 * latency p95 under the stream stayed within 2x of idle, and splits the queries that waited more
 * than 0.05 ms by what overlapped their wait (a hold by other work, a collection pause, the query
 * before still running: BENCHMARKS.md "Live: steps of 0.025 ms").
 *
 * With OFFLOOP=1 the stream applies to a second engine on a writer thread
 * (`bench/live-waits-writer.ts`), opened from the same snapshot and brought to the same point, while
 * the queried engine stays as it is: the queries then wait only for what a writer off the event
 * loop would leave them (its thread's share of the cores and memory), with publishing free: the
 * bound such a writer could reach (BENCHMARKS.md "Live: a writer off the event loop, measured as a
 * bound"). Not with `compact`.
 *
 * With SPLIT=1 the stream applies on the event loop as usual, but the queries read a second engine
 * in the same thread, opened from the same snapshot and brought to the same point, that no change
 * touches: what the change's work on the loop costs the queries, apart from what a new generation
 * costs them (its first runs, the records of its new rows, its structures grown). Not with
 * `compact`.
 *
 * With `compact`, sixteen 1,000-listing changes and a compaction come first, so the stream runs on
 * a compacted generation, as the live bench's second stream does. Needs the engine snapshot the
 * live bench caches (bench/.cache/bench-<size>-engine-*.snapshot).
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine } from '../src/engine.js';
import { Session } from 'node:inspector/promises';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { setStepBudgetMs } from '../src/util/steps.js';
import { startWorker } from '../src/util/worker.js';
import { FAMILY_IDS, familiesOf } from './compare/families.js';
import { Arrivals } from './arrivals.js';
import { Feed, quantile, scheduleSlots } from './live.bench.js';

if (process.env.STEP_MS !== undefined) setStepBudgetMs(Number(process.env.STEP_MS));
const size = Number(process.argv[2] ?? 100_000);
const compacted = process.argv[3] === 'compact';
const offLoop = process.env.OFFLOOP === '1';
const split = process.env.SPLIT === '1';
if ((offLoop || split) && compacted) throw new Error('OFFLOOP=1 and SPLIT=1 measure an uncompacted generation only');
const WINDOW_MS = 6_000;
/** With PROF=1: the waits the profile's samples are looked at in (ms). */
const WAIT_MS = Number(process.env.WAIT_MS ?? 1);
const cache = path.join(path.dirname(fileURLToPath(import.meta.url)), '.cache');
const snapshot = readdirSync(cache).find((f) => f.startsWith(`bench-${size}-engine-`) && f.endsWith('.snapshot'));
if (snapshot === undefined) throw new Error(`no cached engine snapshot of ${size} listings: run the live bench at that size first`);
const open = (): Promise<Engine> =>
  Engine.open({
    snapshot: path.join(cache, snapshot),
    now: () => new Date('2025-06-01T00:00:00Z'),
    resultCache: false,
    compactFraction: false,
  });
const engine = await open();
/** The engine the queries read: the changed one, or with SPLIT=1 one no change touches. */
const queried = split ? await open() : engine;
const feed = new Feed(size);
const families = familiesOf(path.join(cache, `bench-${size}`));
const mix = FAMILY_IDS.map((id) => ({ id, odata: families.odata[id] }));

// Holds of the event loop: from a turn's resume to the next setImmediate, those not ending a query's turn.
const holds: number[] = [];
/** When each hold started (performance.now()), beside `holds`. */
const holdStarts: number[] = [];
let resumed = 0;
let resumedByQuery = false;
let tracking = false;
const original = globalThis.setImmediate;
globalThis.setImmediate = ((fn: (...args: unknown[]) => void, ...args: unknown[]) => {
  if (tracking && !resumedByQuery) {
    holdStarts.push(resumed);
    holds.push(performance.now() - resumed);
  }
  return original(() => {
    resumed = performance.now();
    resumedByQuery = false;
    fn(...args);
  });
}) as typeof setImmediate;
// a change's first step after the stream's sleep starts from a timer
const originalTimeout = globalThis.setTimeout;
globalThis.setTimeout = ((fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) =>
  originalTimeout(() => {
    resumed = performance.now();
    resumedByQuery = false;
    fn(...args);
  }, ms)) as typeof setTimeout;
// Garbage-collection pauses (start, duration, kind), from V8's performance entries.
const pauses: Array<{ start: number; ms: number; kind: number }> = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) pauses.push({ start: e.startTime, ms: e.duration, kind: (e as unknown as { detail: { kind: number } }).detail.kind });
}).observe({ entryTypes: ['gc'] });
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const collect = (): void => (globalThis as { gc?: () => void }).gc?.();

const slots = scheduleSlots(queried, mix);
await engine.apply(feed.change(1000).operations);
for (const c of feed.changes(3, 100)) await engine.apply(c.operations);
if (split) {
  const same = new Feed(size);
  await queried.apply(same.change(1000).operations);
  for (const c of same.changes(3, 100)) await queried.apply(c.operations);
}
const writer = offLoop ? startWorker(import.meta.url, 'live-waits-writer', { workerData: { snapshot: path.join(cache, snapshot), size } }) : null;
if (writer) await new Promise((resolve) => writer.once('message', resolve));
if (compacted) {
  for (const c of feed.changes(16, 1000)) await engine.apply(c.operations);
  await engine.compact();
}

interface Run {
  readonly family: number;
  readonly wait: number;
  readonly service: number;
  readonly first: boolean;
  /** When it arrived, or was due when the loop asked for it late (performance.now()): its wait starts here. */
  readonly due: number;
}

const arrivals = new Arrivals();

/** The window measure() ran last (performance.now() times). */
let window = { start: 0, end: 0 };

async function measure(streaming: boolean): Promise<Run[]> {
  collect();
  let stopped = false;
  const stream = !streaming
    ? Promise.resolve()
    : writer
      ? new Promise<void>((resolve) =>
          writer.once('message', (done: { changes: number; median: number }) => {
            console.log(`writer thread: ${done.changes} changes, median ${done.median.toFixed(1)} ms`);
            resolve();
          }),
        )
      : (async () => {
          for (const c of feed.changes(Math.ceil(WINDOW_MS / 200) + 5, 100)) {
            if (stopped) break;
            const start = performance.now();
            await engine.apply(c.operations);
            const wait = 200 - (performance.now() - start);
            if (wait > 0 && !stopped) await sleep(wait);
          }
        })();
  if (streaming) writer?.postMessage(WINDOW_MS);
  const runs: Run[] = [];
  const lastGeneration = new Map<number, number>();
  holds.length = 0;
  holdStarts.length = 0;
  tracking = true;
  // holds count from here (the last turn's resume may be long past: the collection, the sleep above)
  resumed = performance.now();
  resumedByQuery = true;
  let due = performance.now() + 1;
  const end = due + WINDOW_MS;
  window = { start: due, end };
  for (let i = 0; due < end; i = (i + 1) % mix.length) {
    const from = (await arrivals.at(due)).start;
    const start = performance.now();
    const first = lastGeneration.get(i) !== queried.generation;
    lastGeneration.set(i, queried.generation);
    queried.query('Property', mix[i].odata);
    runs.push({ family: i, wait: start - from, service: performance.now() - start, first, due: from });
    resumed = performance.now(); // what runs next is not the query's
    resumedByQuery = true;
    due += slots[i];
  }
  tracking = false;
  stopped = true;
  await stream;
  await sleep(20); // the garbage-collection entries of the window are delivered
  return runs;
}

/** Prints a window's figures; returns each family's latency p95. */
function report(label: string, runs: readonly Run[]): number[] {
  console.log(`\n${label}`);
  console.log('family | latency p95 | wait p95 | service p95 | service median, first run on a generation / later runs');
  const latencyP95 = mix.map((q, i) => {
    const mine = runs.filter((r) => r.family === i);
    const firsts = mine.filter((r) => r.first).map((r) => r.service);
    const later = mine.filter((r) => !r.first).map((r) => r.service);
    const latency = quantile(
      mine.map((r) => r.wait + r.service),
      0.95,
    );
    console.log(
      `${q.id} | ${latency.toFixed(3)} | ${quantile(
        mine.map((r) => r.wait),
        0.95,
      ).toFixed(3)} | ${quantile(
        mine.map((r) => r.service),
        0.95,
      ).toFixed(
        3,
      )} | ${firsts.length ? quantile(firsts, 0.5).toFixed(3) : '—'} / ${later.length ? quantile(later, 0.5).toFixed(3) : '—'} (${firsts.length} first runs)`,
    );
    return latency;
  });
  // over every family's queries: steadier from run to run than one family's p95
  const waited = [0.05, 0.1, 0.2, 0.5, 1].map((b) => `${((runs.filter((r) => r.wait > b).length / runs.length) * 100).toFixed(1)}%`);
  console.log(`queries (all ${runs.length}) waiting more than 0.05 / 0.1 / 0.2 / 0.5 / 1 ms: ${waited.join(' / ')}`);
  console.log(`  of those over 0.05 ms, what overlapped the wait: ${overlapped(runs, 0.05)}`);
  const bounds = [0.3, 0.5, 1, 2, 5, 10, 50];
  const over = holds.filter((h) => h >= bounds[0]);
  console.log(
    `holds of the event loop by other work ≥ 0.3 ms: ${over.length}, ${over.reduce((a, b) => a + b, 0).toFixed(0)} ms in all, max ${Math.max(0, ...holds).toFixed(1)} ms; ` +
      bounds.map((b, k) => `${b}-${bounds[k + 1] ?? '∞'} ms: ${over.filter((h) => h >= b && h < (bounds[k + 1] ?? Infinity)).length}`).join(', '),
  );
  const inWindow = pauses.filter((p) => p.start >= window.start && p.start < window.end);
  const kinds: Array<[string, number]> = [
    ['minor (scavenge)', constants.NODE_PERFORMANCE_GC_MINOR],
    ['major (mark-compact)', constants.NODE_PERFORMANCE_GC_MAJOR],
    ['incremental marking', constants.NODE_PERFORMANCE_GC_INCREMENTAL],
  ];
  console.log(
    'garbage-collection pauses: ' +
      kinds
        .map(([name, kind]) => {
          const ms = inWindow
            .filter((p) => p.kind === kind)
            .map((p) => p.ms)
            .sort((a, b) => a - b);
          return ms.length === 0
            ? `${name} none`
            : `${name} ${ms.length}, ${ms.reduce((a, b) => a + b, 0).toFixed(0)} ms in all, median ${quantile(ms, 0.5).toFixed(2)}, max ${ms[ms.length - 1].toFixed(1)} ms`;
        })
        .join('; '),
  );
  return latencyP95;
}

console.log(`${size.toLocaleString('en-US')} listings${compacted ? ', compacted after sixteen 1,000-listing changes' : ''}; windows of ${WINDOW_MS / 1000} s`);
const idle = report('idle', await measure(false));
const profiler = process.env.PROF === '1' ? new Session() : null;
if (profiler) {
  profiler.connect();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.setSamplingInterval', { interval: 100 });
  await profiler.post('Profiler.start');
}
const streamed = await measure(true);
const ratios = report('under a 100-listing change every 200 ms', streamed).map((p95, i) => p95 / idle[i]);
console.log(
  `latency p95 under the stream / idle: ${mix.map((q, i) => `${q.id} ${ratios[i].toFixed(1)}x`).join(', ')} (${ratios.filter((r) => r <= 2).length} of ${mix.length} within 2x)`,
);
if (profiler) whileWaiting((await profiler.post('Profiler.stop')).profile, streamed);
await arrivals.close();
await writer?.terminate();

/**
 * The queries that waited more than `over` ms, by what overlapped their wait: a hold of the loop by
 * other work (under the stream, mostly a change's steps), a garbage-collection pause, both, the
 * query before still running (queued behind it), or none of these.
 */
function overlapped(runs: readonly Run[], over: number): string {
  const counts = new Map<string, number>();
  runs.forEach((r, j) => {
    if (r.wait <= over) return;
    const [from, to] = [r.due, r.due + r.wait];
    const pause = pauses.some((p) => p.start < to && p.start + p.ms > from);
    const hold = holdStarts.some((start, k) => start < to && start + holds[k] > from);
    const before = runs[j - 1];
    const queued = before !== undefined && before.due + before.wait + before.service > from;
    const kind = hold && pause ? 'a hold and a pause' : hold ? 'a hold by other work' : pause ? 'a pause' : queued ? 'the query before' : 'none of these';
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  });
  return [...counts].map(([kind, n]) => `${kind} ${n}`).join(', ') || 'none waited';
}

/** What ran while queries waited more than WAIT_MS: the profile's samples in those waits, by kind and by function. */
function whileWaiting(profile: { nodes: ProfileNode[]; samples?: number[]; timeDeltas?: number[]; startTime: number }, runs: readonly Run[]): void {
  const waits = runs
    .filter((r) => r.wait > WAIT_MS)
    .map((r) => [r.due, r.due + r.wait] as const)
    .sort((a, b) => a[0] - b[0]);
  const node = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const name = (n: ProfileNode): string => `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.split('/').slice(-2).join('/')}`;
  // the profiler's clock is the monotonic one performance.now() counts from timeOrigin on
  const offset = Number(process.hrtime.bigint()) / 1e6 - performance.now();
  const kinds = new Map<string, number>();
  const self = new Map<string, number>();
  let t = profile.startTime;
  let k = 0;
  let n = 0;
  const samples = profile.samples ?? [];
  for (let i = 0; i < samples.length; i++) {
    t += profile.timeDeltas?.[i] ?? 0;
    const at = t / 1000 - offset;
    while (k < waits.length && waits[k][1] < at) k++;
    if (k === waits.length || waits[k][0] > at) continue;
    n++;
    const stack: string[] = [];
    for (let id: number | undefined = samples[i]; id !== undefined; id = parent.get(id)) stack.push(name(node.get(id)!));
    // a change's steps resume from runYielding (their async callers are not on the stack)
    const changing = (f: string): boolean => f.includes('util/steps.ts') || f.includes('live/change.ts') || f.includes('live/compact');
    const kind = stack[0].startsWith('(garbage collector)')
      ? 'garbage collector'
      : stack.some((f) => f.startsWith('query src/engine.ts'))
        ? 'other queries'
        : stack.some(changing)
          ? 'the change'
          : 'the rest';
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    self.set(stack[0], (self.get(stack[0]) ?? 0) + 1);
  }
  const share = (x: number): string => `${((x / Math.max(1, n)) * 100).toFixed(0)}%`;
  console.log(
    `\nwhile queries waited more than ${WAIT_MS} ms (${waits.length} waits, ${n} samples): ${[...kinds].map(([kind, x]) => `${kind} ${share(x)}`).join(', ')}`,
  );
  console.log(
    `  most samples in: ${[...self]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([f, x]) => `${f} ${share(x)}`)
      .join(', ')}`,
  );
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
