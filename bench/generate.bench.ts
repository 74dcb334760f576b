/** Data generator throughput: listings (with all their children) built and serialized per second. */
import { generateListings } from '../src/generate/dataset.js';
import type { BenchFile } from './lib.js';

const bench: BenchFile = {
  name: 'generate',
  async run(options) {
    const n = options.quick ? 5_000 : 50_000;
    options.log(`generating ${n} listings in memory`);
    const started = performance.now();
    let bytes = 0;
    for (const l of generateListings({ listings: n, seed: 'bench' })) {
      bytes += JSON.stringify(l.property).length;
      for (const m of l.media) bytes += JSON.stringify(m).length;
      for (const o of l.openHouses) bytes += JSON.stringify(o).length;
      for (const c of l.changes) bytes += JSON.stringify(c).length;
    }
    const seconds = (performance.now() - started) / 1000;
    return [{ bench: 'generate', task: `${n} listings`, metrics: { listingsPerSec: n / seconds, mbPerSec: bytes / 1e6 / seconds } }];
  },
};
export default bench;
