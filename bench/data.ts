/**
 * Benchmark data sets: generated once per (seed, size) into bench/.cache/<seed>-<size>/ and reused
 * by every later run (the directory is complete only once Property.jsonl exists, since the
 * generator renames its files into place at the end). RESO_BENCH_CACHE moves the cache directory.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine, type EngineOpenOptions } from '../src/engine.js';
import { generateDataset } from '../src/generate/dataset.js';

export const BENCH_SEED = 'bench';

export function benchDataset(size: number, log: (line: string) => void, seed = BENCH_SEED): string {
  const cache = process.env.RESO_BENCH_CACHE ?? path.join(path.dirname(fileURLToPath(import.meta.url)), '.cache');
  const dir = path.join(cache, `${seed}-${size}`);
  if (existsSync(path.join(dir, 'Property.jsonl'))) return dir;
  log(`generating ${size.toLocaleString('en-US')} listings into ${path.relative(process.cwd(), dir)} (cached for later runs)`);
  let last = -1;
  generateDataset({
    listings: size,
    seed,
    outDir: dir,
    onProgress: (done, total) => {
      const pct = Math.floor((done / total) * 10) * 10;
      if (pct !== last) log(`  ${pct}%`);
      last = pct;
    },
  });
  return dir;
}

/** The bench data set of `size` listings loaded into an engine at the bench clock, with its label ('100k'); `options` as Engine.open takes them. */
export async function loadedBenchEngine(
  size: number,
  log: (line: string) => void,
  options: Pick<EngineOpenOptions, 'resultCache'> = {},
): Promise<{ engine: Engine; label: string }> {
  const dir = benchDataset(size, log);
  log(`loading ${size.toLocaleString('en-US')} listings`);
  const engine = await Engine.open({ data: dir, now: () => new Date('2025-06-01T00:00:00Z'), ...options });
  return { engine, label: `${size / 1000}k` };
}
