/**
 * What a query costs before it runs, through `engine.query` on the generated data set: the same
 * text again (a plan-cache hit), a new literal in a known shape (the ListingId lookup of Q10 and
 * the filter + sort of Q1 with the next id or price: no parse, bound and planned with the new
 * value), and the baseline of a cold plan (parse, bind, plan with `planQuery`, no cache) of the
 * same texts. The rotating queries cycle through more texts than the cache keeps (2,000 against
 * 512), so none of them is an exact hit. The result cache is off: the same text again would
 * otherwise skip execution too (what the HTTP mix of http.bench.ts measures), and this bench
 * times what a query costs around its execution.
 */
import { statisticsOf } from '../src/exec/statistics.js';
import type { Generation } from '../src/access/generation.js';
import { planQuery } from '../src/plan/planner.js';
import { loadedBenchEngine } from './data.js';
import { timeTasks, type BenchFile, type BenchRow } from './lib.js';

const TEXTS = 2000;

const bench: BenchFile = {
  name: 'plan-cache',
  async run(options) {
    const rows: BenchRow[] = [];
    for (const size of options.sizes) {
      const { engine, label } = await loadedBenchEngine(size, options.log, { resultCache: false });
      const keys = engine.keys('Property').slice(0, TEXTS);
      const ids = keys.map((k) => engine.query('Property', `$filter=ListingKey eq '${k}'&$select=ListingId`).value[0].ListingId as string);
      const q10 = ids.map((id) => `$filter=ListingId eq '${id}'&$select=ListingKey`);
      const q1 = ids.map(
        (_, i) =>
          `$filter=StandardStatus eq 'Active' and ListPrice ge ${300_000 + i * 10} and ListPrice le 600000 and BedroomsTotal ge 3&$orderby=ListPrice desc&$top=25&$select=ListingKey`,
      );
      const stats = () => statisticsOf((engine as unknown as { gen: Generation }).gen);
      let i = 0;
      const batch = 20; // queries per sample, so that the timer does not dominate a microsecond task
      const timed = await timeTasks(
        'plan-cache',
        [
          [`Q10 ${label}, same text (cache hit)`, () => repeat(batch, () => engine.query('Property', q10[0]))],
          [`Q10 ${label}, next ListingId (known shape)`, () => repeat(batch, () => engine.query('Property', q10[i++ % TEXTS]))],
          [
            `Q10 ${label}, baseline: parse + bind + plan, no cache`,
            () => repeat(batch, () => planQuery({ resource: 'Property', text: q10[i++ % TEXTS] }, stats())),
          ],
          [`Q1 keys ${label}, same text (cache hit)`, () => repeat(batch, () => engine.query('Property', q1[0]))],
          [`Q1 keys ${label}, next price (known shape)`, () => repeat(batch, () => engine.query('Property', q1[i++ % TEXTS]))],
          [
            `Q1 keys ${label}, baseline: parse + bind + plan, no cache`,
            () => repeat(batch, () => planQuery({ resource: 'Property', text: q1[i++ % TEXTS] }, stats())),
          ],
        ],
        options,
      );
      for (const r of timed) rows.push({ ...r, metrics: { usPerQuery: ((r.medianMs ?? 0) * 1000) / batch }, note: `ops = batches of ${batch} queries` });
    }
    return rows;
  },
};

function repeat(n: number, f: () => unknown): void {
  for (let k = 0; k < n; k++) f();
}

export default bench;
