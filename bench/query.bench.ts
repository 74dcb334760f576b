/**
 * The query families of the benchmark issue through `engine.query` (parse, bind, plan and execute
 * included; the engine's plan cache is on, as in a service that sees repeated queries), beside a
 * naive scan in the same run: test/exec/oracle.ts walking the parsed query over plain JSON records
 * (Array.filter/sort, brute-force haversine, textbook BM25), and a plain Map/sort for $apply. Each
 * engine answer is checked against the scan (same keys in the same order, same groups) and the
 * ratio scan / engine reported. Load + index build time and retained memory come first. Other
 * peers (SQLite, Orama, MiniSearch) are the benchmark issue's.
 */
import { closeSync, createReadStream, openSync, readSync } from 'node:fs';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { Engine } from '../src/engine.js';
import { parseQuery } from '../src/odata/parse-query.js';
import { NaiveEngine } from '../test/exec/oracle.js';
import { benchDataset } from './data.js';
import { timeTasks, type BenchFile, type BenchRow } from './lib.js';

const bench: BenchFile = {
  name: 'query',
  async run(options) {
    const rows: BenchRow[] = [];
    for (const size of options.sizes) {
      const dir = benchDataset(size, options.log);
      global.gc?.();
      const before = process.memoryUsage();
      const t0 = performance.now();
      const engine = await Engine.open({ data: dir, now: () => new Date('2025-06-01T00:00:00Z') });
      const loadMs = performance.now() - t0;
      global.gc?.();
      const after = process.memoryUsage();
      const label = `${size / 1000}k`;
      rows.push({
        bench: 'query',
        task: `L: load + build indexes ${label}`,
        metrics: { loadMs, heapMB: (after.heapUsed - before.heapUsed) / 1e6, arrayBuffersMB: (after.arrayBuffers - before.arrayBuffers) / 1e6 },
      });
      options.log(`loaded ${size} listings in ${(loadMs / 1000).toFixed(1)} s`);

      // Query parameters taken from the data, as a user would type them.
      const head = Buffer.alloc(64 * 1024);
      const fd = openSync(path.join(dir, 'Property.jsonl'), 'r');
      readSync(fd, head, 0, head.length, 0);
      closeSync(fd);
      const first = JSON.parse(head.toString('utf8').split('\n')[7]) as Record<string, unknown>;
      const street = `${first.StreetName as string} ${first.StreetSuffix === 'Street' ? 'St' : 'Street'} ${String(first.City).split(' ')[0]} ${first.StreetNumber as string}`;
      const families: Array<[string, string]> = [
        ['Q1', "$filter=StandardStatus eq 'Active' and ListPrice ge 300000 and ListPrice le 600000 and BedroomsTotal ge 3&$orderby=ListPrice desc&$top=25"],
        ['Q2', "$filter=search.text(KeywordSearchText,'pool granite')&$orderby=relevance desc&$top=25"],
        ['Q3', `$filter=search.text(RawAddressSearchText,'${street}')&$orderby=relevance desc&$top=10`],
        ['Q4', "$filter=geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 5000 and StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=100"],
        ['Q5', "$apply=filter(StandardStatus eq 'Active')/groupby((City),aggregate($count as N,ListPrice with median as Median,ListPrice with p90 as P90))"],
        ['Q6', "$filter=search.text(KeywordSearchText,'ocean view') and geo.distance(Location, geography'POINT(-117.1611 32.7157)') le 20000 and ListPrice ge 200000 and ListPrice le 2000000&$orderby=relevance desc&$top=25"],
        ['Q7', `$filter=search.text(ListAgentSearchText,'${first.ListAgentFirstName as string} ${first.ListAgentLastName as string}')&$top=50000&$select=ListingKey`],
        ['Q8', "$filter=StandardStatus eq 'Active'&$orderby=ModificationTimestamp desc&$skip=5000&$top=100"],
        ['Q9', "$filter=StandardStatus eq 'Active' and PropertyType eq 'Residential' and City eq 'Seattle'&$count=true&$top=0"],
        ['Q10', `$filter=ListingId eq '${first.ListingId as string}'&$select=ListingKey`],
      ];
      const engineAnswer = (q: string): string[] => {
        const r = engine.query('Property', q);
        if (q.includes('$apply')) return r.value.map((g) => JSON.stringify(g));
        if (r['@odata.count'] !== undefined && r.value.length === 0) return [String(r['@odata.count'])];
        return r.value.map((x) => x.ListingKey as string);
      };
      // First the engine alone in the process (the naive scan's million plain objects would make
      // every engine allocation pay for their garbage collection), then the scan.
      const timed: Array<{ id: string; q: string; row: BenchRow; answer: string[]; note: string }> = [];
      for (const [id, q] of families) {
        let note: string;
        try {
          engine.query('Property', q);
          note = `plan: ${engine.explain('Property', q).split('\n').filter((l) => /candidates|order/.test(l)).join('; ')}`;
        } catch (err) {
          rows.push({ bench: 'query', task: `${id} ${label}`, note: `n/a: ${(err as Error).message}` });
          continue;
        }
        const [e] = await timeTasks('query', [[`${id} ${label} engine`, () => engine.query('Property', q)]], options, 30);
        timed.push({ id, q, row: e, answer: engineAnswer(q), note });
      }

      options.log('reading plain records for the naive scan');
      const plain: Array<Record<string, unknown>> = [];
      for await (const line of createInterface({ input: createReadStream(path.join(dir, 'Property.jsonl')), crlfDelay: Infinity })) {
        if (line) plain.push(JSON.parse(line) as Record<string, unknown>);
      }
      const naive = new NaiveEngine(plain, Date.parse('2025-06-01T00:00:00Z'));
      const naiveAnswer = (q: string): string[] => {
        const parsed = parseQuery(q);
        if (parsed.apply) return naiveGroups(plain);
        const keys = naive.query(parsed.filter, parsed.orderby);
        if (parsed.count && parsed.top === 0) return [String(keys.length)];
        const skip = parsed.skip ?? 0;
        return keys.slice(skip, skip + (parsed.top ?? 10));
      };
      for (const { id, q, row: e, answer: mine, note } of timed) {
        if (size > 200_000 && q.includes('search.text')) {
          // The naive BM25 keeps every document's tokens: too big at this size. bench/search.bench.ts
          // has a streaming scan baseline for the search families at 1M.
          rows.push({ ...e, note: `naive scan: see bench/search.bench.ts at this size; ${note}` });
          continue;
        }
        const t = performance.now();
        const theirs = naiveAnswer(q);
        const firstScanMs = performance.now() - t;
        const same = JSON.stringify(mine) === JSON.stringify(theirs);
        options.log(`${id}: ${same ? 'same answer as the scan' : 'DIFFERENT from the scan'} (${mine.length} rows); ${note}`);
        // The scan takes up to seconds per call: a few samples after the first.
        const [n] = await timeTasks('query', [[`${id} ${label} naive scan`, () => naiveAnswer(q)]], { ...options, quick: true }, 3);
        rows.push({ ...e, metrics: { ratioScanOverEngine: (n.medianMs ?? firstScanMs) / (e.medianMs ?? 1) }, note: `${same ? 'same answer as the scan' : 'DIFFERENT from the scan'}; ${note}` });
        rows.push(n);
      }
    }
    return rows;
  },
};
/** $apply of Q5 the plain way: a Map of arrays per City, sorted for the nearest-rank median and p90. */
function naiveGroups(records: Array<Record<string, unknown>>): string[] {
  const groups = new Map<string | null, number[]>();
  const counts = new Map<string | null, number>();
  for (const r of records) {
    if (r.StandardStatus !== 'Active') continue;
    const city = (r.City as string | undefined) ?? null;
    counts.set(city, (counts.get(city) ?? 0) + 1);
    if (!groups.has(city)) groups.set(city, []);
    if (typeof r.ListPrice === 'number') groups.get(city)!.push(r.ListPrice);
  }
  const rank = (xs: number[], p: number): number | null => (xs.length ? xs[Math.ceil((p / 100) * xs.length) - 1] : null);
  return [...counts.keys()]
    .sort((a, b) => (a === b ? 0 : a === null ? -1 : b === null ? 1 : a < b ? -1 : 1))
    .slice(0, 10)
    .map((city) => {
      const xs = groups.get(city)!.sort((a, b) => a - b);
      return JSON.stringify({ City: city, N: counts.get(city), Median: rank(xs, 50), P90: rank(xs, 90) });
    });
}

export default bench;
