/**
 * The query families of the benchmark issue, through `engine.query` (parse, bind, plan and
 * execute included; no plan cache), on the bench data sets. Load + index build time and retained
 * heap are reported first. Peers (SQLite, Orama, MiniSearch, a naive scan) are the benchmark
 * issue's; here each family's answer is checked against a plain filter over the records where
 * that is simple.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Engine } from '../src/engine.js';
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
      const first = JSON.parse(readFileSync(path.join(dir, 'Property.jsonl'), 'utf8').slice(0, 20000).split('\n')[7]) as Record<string, unknown>;
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
      const tasks: Array<readonly [string, () => unknown]> = [];
      for (const [id, q] of families) {
        let note: string;
        try {
          const r = engine.query('Property', q);
          note = `${r.value.length} rows${r['@odata.count'] !== undefined ? `, count ${r['@odata.count']}` : ''}; plan: ${engine.explain('Property', q).split('\n').filter((l) => /candidates|order/.test(l)).join('; ')}`;
        } catch (err) {
          rows.push({ bench: 'query', task: `${id} ${label}`, note: `n/a: ${(err as Error).message}` });
          continue;
        }
        options.log(`${id}: ${note}`);
        tasks.push([`${id} ${label}`, () => engine.query('Property', q)]);
        rows.push({ bench: 'query', task: `${id} ${label} (answer)`, note });
      }
      rows.push(...(await timeTasks('query', tasks, options, 30)));
    }
    return rows;
  },
};
export default bench;
