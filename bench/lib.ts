/**
 * Shared plumbing for `npm run bench`: every `bench/<operation>.bench.ts` default-exports a
 * BenchFile; bench/run.ts runs each in its own child process so memory figures stay clean, and
 * collects the rows into JSON and a markdown table.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Bench } from 'tinybench';

/** The short hash of the checked-out commit, for reports. */
export function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: path.dirname(fileURLToPath(import.meta.url)), encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

export interface BenchOptions {
  /** Data set sizes to run, e.g. [100_000, 1_000_000]; a bench that has no size ignores it. */
  readonly sizes: readonly number[];
  /** Reduced iteration counts (used by `--quick`). */
  readonly quick: boolean;
  /** The `--only` values (bench names or, for the comparison, family ids such as Q4 or L). */
  readonly only: readonly string[];
  /** The comparison's peers (`--peers sqlite,orama`); empty for all. */
  readonly peers: readonly string[];
  /** Seconds a comparison peer may take to load before it is reported as not finished. */
  readonly loadTimeoutS?: number;
  /** Progress output for a terminal (stderr), never part of the results. */
  readonly log: (line: string) => void;
}

export interface BenchRow {
  readonly bench: string;
  readonly task: string;
  /** Operations per second (median of samples). */
  readonly opsPerSec?: number;
  readonly medianMs?: number;
  readonly p95Ms?: number;
  readonly samples?: number;
  /** Any other measured figure, with its unit in the name (e.g. `listingsPerSec`, `heapBytesPerListing`). */
  readonly metrics?: Readonly<Record<string, number>>;
  readonly note?: string;
}

export interface BenchFile {
  readonly name: string;
  run(options: BenchOptions): Promise<BenchRow[]>;
}

/** Runs tinybench tasks and turns their latency statistics into rows. */
export async function timeTasks(
  bench: string,
  tasks: ReadonlyArray<readonly [name: string, fn: () => unknown]>,
  options: BenchOptions,
  /** Minimum samples per task (tinybench `iterations`); lower it for tasks that take seconds. */
  iterations = 64,
): Promise<BenchRow[]> {
  const b = new Bench({
    name: bench,
    retainSamples: true,
    time: options.quick ? 200 : 1000,
    iterations,
    warmupTime: options.quick ? 50 : 200,
    warmupIterations: Math.min(iterations, 5),
  });
  for (const [name, fn] of tasks) b.add(name, fn);
  await b.run();
  const rows: BenchRow[] = [];
  for (const task of b.tasks) {
    const r = task.result;
    if (r.state !== 'completed') {
      rows.push({ bench, task: task.name, note: `task ${r.state}` });
      continue;
    }
    rows.push({
      bench,
      task: task.name,
      opsPerSec: r.throughput.p50,
      medianMs: r.latency.p50,
      p95Ms: percentile(r.latency.samples ?? [], 0.95),
      samples: r.latency.samplesCount,
    });
  }
  return rows;
}

function percentile(samples: readonly number[], p: number): number | undefined {
  if (samples.length === 0) return undefined;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
}
