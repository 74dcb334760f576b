/**
 * Runs one peer of the comparison in this process, so its memory figures are its own:
 *
 *   node --expose-gc --import tsx bench/compare/child.ts --peer NAME --dir DATA [--families Q1,Q2|none] [--quick]
 *
 * Writes one JSON line per event to stdout: `{"event":"loaded",...}` once the peer has loaded,
 * then `{"event":"done",...}` with every family's answer and timing. Progress goes to stderr.
 * bench/compare.bench.ts spawns it and enforces the load timeout.
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { FAMILY_IDS, familiesOf, type Answer, type FamilyId } from './families.js';
import type { PeerFactory } from './peer.js';
import { timeTasks } from '../lib.js';

export interface LoadReport {
  readonly event: 'loaded';
  readonly peer: string;
  readonly loads: string;
  readonly loadMs: number;
  /** Growth across the load, after a full GC, in MB: resident set, JS heap, ArrayBuffers, other external. */
  readonly rssMB: number;
  readonly heapMB: number;
  readonly arrayBuffersMB: number;
  readonly externalMB: number;
}

export type FamilyReport =
  | {
      readonly status: 'ok';
      readonly answer: Answer;
      readonly firstMs: number;
      readonly medianMs: number;
      readonly p95Ms: number;
      readonly samples: number;
      readonly plan?: string;
    }
  | { readonly status: 'n/a'; readonly reason: string }
  | { readonly status: 'error'; readonly message: string };

export interface DoneReport {
  readonly event: 'done';
  readonly families: Partial<Record<FamilyId, FamilyReport>>;
}

/** Runs at least 30 timed samples after warm-up; a peer slower than `budgetMs` per family gets fewer, never under 5. */
const MIN_SAMPLES = 30;

function argValue(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function time(fn: () => unknown, firstMs: number, quick: boolean): Promise<{ medianMs: number; p95Ms: number; samples: number }> {
  // A peer that needs seconds per call would take minutes for 30 samples: bound each family's
  // timing to ~20 s (5 s with --quick), but never fewer than 5 samples. The report shows the count.
  const budgetMs = quick ? 5_000 : 20_000;
  const iterations = Math.max(5, Math.min(MIN_SAMPLES, Math.floor(budgetMs / Math.max(firstMs, 1e-3))));
  const [row] = await timeTasks('compare', [['family', fn]], { sizes: [], quick, only: [], peers: [], log: () => {} }, iterations);
  if (row.medianMs === undefined || row.p95Ms === undefined || row.samples === undefined) throw new Error(`timing failed: ${row.note ?? 'no samples'}`);
  return { medianMs: row.medianMs, p95Ms: row.p95Ms, samples: row.samples };
}

function memory(): NodeJS.MemoryUsage {
  global.gc?.();
  global.gc?.();
  return process.memoryUsage();
}

async function main(): Promise<void> {
  const peerName = argValue('--peer');
  const dir = argValue('--dir');
  if (!peerName || !dir) throw new Error('usage: child.ts --peer NAME --dir DATA [--families Q1,Q2|none] [--quick]');
  const only = argValue('--families');
  const wanted: FamilyId[] = only === 'none' ? [] : only ? (only.split(',') as FamilyId[]) : [...FAMILY_IDS];
  const quick = process.argv.includes('--quick');
  const log = (line: string): void => void process.stderr.write(`    ${line}\n`);
  const emit = (event: LoadReport | DoneReport): void => void process.stdout.write(`${JSON.stringify(event)}\n`);

  const here = path.dirname(fileURLToPath(import.meta.url));
  const mod = (await import(pathToFileURL(path.join(here, 'peers', `${peerName}.ts`)).href)) as { default: PeerFactory };
  const peer = mod.default();
  const families = familiesOf(dir);

  await peer.setup?.();
  const before = memory();
  const t0 = performance.now();
  await peer.load(dir, log);
  const loadMs = performance.now() - t0;
  const after = memory();
  const mb = (k: keyof NodeJS.MemoryUsage): number => (after[k] - before[k]) / 1e6;
  emit({
    event: 'loaded',
    peer: peer.name,
    loads: peer.loads,
    loadMs,
    rssMB: mb('rss'),
    heapMB: mb('heapUsed'),
    arrayBuffersMB: mb('arrayBuffers'),
    externalMB: mb('external') - mb('arrayBuffers'),
  });
  log(`${peer.name}: loaded in ${(loadMs / 1000).toFixed(1)} s, +${mb('rss').toFixed(0)} MB resident`);

  const reports: Partial<Record<FamilyId, FamilyReport>> = {};
  for (const id of wanted) {
    try {
      const run = peer.prepare(id, families.params[id], families);
      if (typeof run === 'string') {
        reports[id] = { status: 'n/a', reason: run };
        continue;
      }
      const t = performance.now();
      const answer = await run();
      const firstMs = performance.now() - t;
      const timing = await time(run, firstMs, quick);
      reports[id] = { status: 'ok', answer, firstMs, ...timing, ...(peer.explain ? { plan: peer.explain(families, id) } : {}) };
      log(`${id}: median ${timing.medianMs.toPrecision(3)} ms over ${timing.samples} runs (first ${firstMs.toPrecision(3)} ms)`);
    } catch (err) {
      reports[id] = { status: 'error', message: err instanceof Error ? err.message : String(err) };
      log(`${id}: error ${(err as Error).message}`);
    }
  }
  emit({ event: 'done', families: reports });
  await peer.teardown?.();
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
