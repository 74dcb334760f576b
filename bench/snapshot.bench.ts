/**
 * Engine snapshots: how long `Engine.open({ data })` takes (load the JSON Lines, derive, group
 * children, build the six search indexes and the two KD-trees), how long `engine.save(file)`
 * takes and how large the file is, and how long `Engine.open({ snapshot: file })` takes — in all,
 * then once more in its two halves: the container read (file.ts: allocate, read, CRC-32) and the
 * engine side (restoreEngine: checks and object construction). One engine at a time, with a GC
 * between, so a 1M run holds one data set in memory. The snapshot has just been written, so it is read from the
 * page cache (the JSON usually is too): figures are warm-cache ones.
 *
 * A handful of queries answered by the first engine must come back byte-identical from the
 * snapshot (the tests check that thoroughly; this only guards the figures).
 *
 * The snapshot goes to os.tmpdir() (RESO_SNAPSHOT_DIR moves it) and is deleted afterwards.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Engine } from '../src/engine.js';
import { readSnapshotFile } from '../src/snapshot/file.js';
import { restoreEngine } from '../src/snapshot/state.js';
import { benchDataset } from './data.js';
import type { BenchFile, BenchRow } from './lib.js';

const NOW = (): Date => new Date('2025-06-01T00:00:00Z');

const CHECKS = [
  "$filter=search.text(RawAddressSearchText,'Vista Street Houston 1')&$orderby=relevance desc&$top=10",
  "$filter=search.text(KeywordSearchText,'pool granite') and StandardStatus eq 'Active'&$orderby=relevance desc&$top=25&$count=true",
  "$filter=geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 5000 and StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=100",
  '$orderby=ListPrice desc&$top=20&$skip=1000&$expand=Media($top=3),OpenHouse,PropertyChange',
  '$apply=groupby((City),aggregate(ListPrice with median as Median,$count as N))',
];

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (!collect) throw new Error('the snapshot bench needs --expose-gc (bench/run.ts passes it)');
  collect();
  collect();
}

const seconds = (since: number): number => (performance.now() - since) / 1000;

const bench: BenchFile = {
  name: 'snapshot',
  async run(options) {
    const rows: BenchRow[] = [];
    const work = mkdtempSync(path.join(process.env.RESO_SNAPSHOT_DIR ?? os.tmpdir(), 'reso-snapshot-bench-'));
    try {
      for (const size of options.sizes) {
        const label = size.toLocaleString('en-US');
        const dir = benchDataset(size, options.log);
        const file = path.join(work, `bench-${size}.snapshot`);

        options.log(`${label}: Engine.open({ data })`);
        gc();
        let t = performance.now();
        let engine: Engine | null = await Engine.open({ data: dir, now: NOW });
        const jsonOpen = seconds(t);
        const answers = CHECKS.map((q) => JSON.stringify(engine!.query('Property', q)));

        options.log(`${label}: engine.save (after ${jsonOpen.toFixed(1)} s)`);
        t = performance.now();
        const { bytes } = engine.save(file);
        const save = seconds(t);
        engine = null;
        gc();

        options.log(`${label}: Engine.open({ snapshot }) (${(bytes / 1e9).toFixed(2)} GB, saved in ${save.toFixed(1)} s)`);
        t = performance.now();
        let restored: Engine | null = await Engine.open({ snapshot: file, now: NOW });
        const snapshotOpen = seconds(t);
        const same = CHECKS.every((q, i) => JSON.stringify(restored!.query('Property', q)) === answers[i]);
        if (!same) throw new Error(`${label}: the engine opened from the snapshot answers differently`);
        restored = null;
        gc();

        options.log(`${label}: the same open in its two halves`);
        t = performance.now();
        const contents = readSnapshotFile(file);
        const read = seconds(t);
        t = performance.now();
        restoreEngine(file, contents, () => NOW().getTime());
        const decode = seconds(t);
        gc();
        rmSync(file, { force: true });

        rows.push({
          bench: 'snapshot',
          task: `open from data vs save and open from a snapshot, ${label} listings`,
          metrics: {
            jsonOpenSeconds: jsonOpen,
            saveSeconds: save,
            snapshotOpenSeconds: snapshotOpen,
            containerReadSeconds: read,
            engineRestoreSeconds: decode,
            snapshotBytes: bytes,
            snapshotBytesPerListing: bytes / size,
            speedup: jsonOpen / snapshotOpen,
          },
          note: `${CHECKS.length} queries identical; warm page cache`,
        });
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    return rows;
  },
};
export default bench;
