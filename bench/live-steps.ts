/**
 * How long a change holds the event loop, step by step (BENCHMARKS.md "Live updates in
 * time-budgeted steps"): patches setImmediate, applies MLS-feed changes to the cached bench engine
 * of a size, and records each hold from a turn's resume to the next setImmediate, in wall time and
 * in process CPU time, attributed to the code that asked for the turn. With COMPACT=1 it times one
 * `engine.compact()` after the changes instead; with AFTER_COMPACT=1 the changes after sixteen
 * 1,000-listing changes and a compaction; with FIRST=1 the first change after opening the snapshot
 * (the 1,000-listing change the others apply before measuring, which copies the loaded arrays).
 *
 *   npx tsx bench/live-steps.ts <listings> <listings per change> <changes>   (e.g. 100000 100 20)
 *
 * Needs the engine snapshot the live bench caches (bench/.cache/bench-<size>-engine-*.snapshot).
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine } from '../src/engine.js';
import { Feed } from './live.bench.js';

const size = Number(process.argv[2] ?? 100_000);
const batch = Number(process.argv[3] ?? 100);
const n = Number(process.argv[4] ?? 20);
const cache = path.join(path.dirname(fileURLToPath(import.meta.url)), '.cache');
const snapshot = readdirSync(cache).find((f) => f.startsWith(`bench-${size}-engine-`) && f.endsWith('.snapshot'));
if (snapshot === undefined) throw new Error(`no cached engine snapshot of ${size} listings: run the live bench at that size first`);
const engine = await Engine.open({ snapshot: path.join(cache, snapshot), now: () => new Date('2025-06-01T00:00:00Z'), compactFraction: false });
const feed = new Feed(size);
const first = feed.change(1000);
if (process.env.FIRST !== '1') {
  await engine.apply(first.operations);
  for (const c of feed.changes(5, batch)) await engine.apply(c.operations);
}

const cpuMs = (since: NodeJS.CpuUsage): number => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1000;
};
const wall: number[] = [];
const cpu: number[] = [];
const sites = new Map<string, { holds: number; maxCpu: number; over: number }>();
let recording = false;
let resumed = performance.now();
let cpuAt = process.cpuUsage();
const original = globalThis.setImmediate;
globalThis.setImmediate = ((fn: (...args: unknown[]) => void, ...args: unknown[]) => {
  if (recording) {
    const c = cpuMs(cpuAt);
    wall.push(performance.now() - resumed);
    cpu.push(c);
    const site = (new Error().stack ?? '')
      .split('\n')
      .slice(2, 8)
      .map((l) =>
        l
          .trim()
          .replace(/^at /, '')
          .replace(/\(.*\/(src|bench)\//, '($1/'),
      )
      .filter((l) => !l.includes('util/steps.ts') && !l.startsWith('new Promise'))
      .slice(0, 2)
      .join(' < ');
    const s = sites.get(site) ?? { holds: 0, maxCpu: 0, over: 0 };
    s.holds++;
    s.maxCpu = Math.max(s.maxCpu, c);
    if (c > 3) s.over++;
    sites.set(site, s);
  }
  return original(() => {
    resumed = performance.now();
    cpuAt = process.cpuUsage();
    fn(...args);
  });
}) as typeof setImmediate;

const changes = feed.changes(n, batch);
const start = (): void => {
  recording = true;
  resumed = performance.now();
  cpuAt = process.cpuUsage();
};
const t0 = performance.now();
if (process.env.FIRST === '1') {
  start();
  await engine.apply(first.operations);
} else if (process.env.AFTER_COMPACT === '1') {
  for (const c of feed.changes(16, 1000)) await engine.apply(c.operations);
  await engine.compact();
  start();
  for (const c of changes) await engine.apply(c.operations);
} else if (process.env.COMPACT === '1') {
  for (const c of changes) await engine.apply(c.operations);
  start();
  await engine.compact();
} else {
  start();
  for (const c of changes) await engine.apply(c.operations);
}
recording = false;
const q = (a: number[], p: number): string => a[Math.min(a.length - 1, Math.floor(p * a.length))].toFixed(2);
wall.sort((a, b) => a - b);
cpu.sort((a, b) => a - b);
const what =
  process.env.FIRST === '1'
    ? 'the first change after opening, 1000'
    : process.env.COMPACT === '1'
      ? `a compaction after ${n}`
      : process.env.AFTER_COMPACT === '1'
        ? `after a compaction, ${n}`
        : String(n);
console.log(`${size} listings, ${what} changes of ${batch}: ${(performance.now() - t0).toFixed(0)} ms`);
console.log(
  `holds ${wall.length}; wall ms p50 ${q(wall, 0.5)} p99 ${q(wall, 0.99)} max ${q(wall, 1)}; CPU ms p50 ${q(cpu, 0.5)} p90 ${q(cpu, 0.9)} p99 ${q(cpu, 0.99)} max ${q(cpu, 1)}, over 5 ms ${cpu.filter((x) => x > 5).length}`,
);
for (const [site, s] of [...sites].sort((a, b) => b[1].over - a[1].over).slice(0, 8))
  console.log(`  ${s.over} of ${s.holds} holds over 3 ms CPU (max ${s.maxCpu.toFixed(1)}): ${site}`);
