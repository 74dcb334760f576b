/**
 * Parse throughput of typical listing-search query strings (60-300 characters each), as a
 * client of a RESO listings API sends them. Target: 50,000 parses per second on one core.
 * Beside it: the same with span recording on, and the lexer alone as a baseline (how the time
 * splits between lexing and parsing).
 */
import { parseQuery, splitQuery } from '../src/odata/parse-query.js';
import { lexer } from '../src/odata/tokens.js';
import { timeTasks, type BenchFile, type BenchRow } from './lib.js';

export const QUERIES: readonly string[] = [
  "$filter=StandardStatus eq 'Active' and ListPrice ge 400000 and ListPrice le 750000 and BedroomsTotal ge 3&$top=25",
  "$filter=City eq 'Seattle' and PropertyType eq 'Residential' and (StandardStatus eq 'Active' or StandardStatus eq 'Active Under Contract')&$orderby=ListPrice desc&$top=50",
  "$filter=search.text(RawAddressSearchText, '123 Main St Springfield') and StandardStatus in ('Active','Pending')&$orderby=relevance desc&$top=10",
  "$filter=geo.distance(Location, geography'SRID=4326;POINT(-122.3321 47.6062)') le 5000 and ListPrice lt 1000000 and BathroomsTotalInteger ge 2&$top=100&$count=true",
  "$filter=Appliances/any(a: a eq 'Dishwasher') and PoolPrivateYN eq true and YearBuilt ge 1990 and LivingArea gt 1800.5&$select=ListingKey,ListPrice,City,BedroomsTotal",
  "$filter=ModificationTimestamp gt 2024-05-01T10:00:00Z and not (StandardStatus eq 'Closed') and contains(tolower(PublicRemarks),'view')&$orderby=ModificationTimestamp,ListingKey",
  "$filter=search.text(KeywordSearchText, 'waterfront dock boat', 2) and ListPrice mul 0.2 le 300000 and DaysOnMarket lt 30&$orderby=relevance desc,ListPrice&$top=20&$skip=40",
  "$filter=PostalCode in ('98101','98102','98103','98104','98105') and ListingContractDate ge 2024-01-01&$expand=Media($select=MediaKey,MediaURL;$orderby=Order;$top=2)",
  "$apply=filter(StandardStatus eq 'Active')/groupby((City),aggregate(ListPrice with median as MedianPrice,$count as Listings))&$orderby=Listings desc",
  "$filter=StandardStatus eq 'Active' and City eq 'Boise'&$top=20",
  "$filter=StandardStatus eq 'Active' and PropertyType eq 'Residential' and ListPrice ge 350000 and ListPrice le 600000 and BedroomsTotal ge 3 and BathroomsTotalInteger ge 2 and geo.distance(Location, geography'POINT(-116.2023 43.615)') le 16000 and search.text(KeywordSearchText, 'garage yard')&$top=50",
];

const bench: BenchFile = {
  name: 'parse',
  async run(options) {
    for (const q of QUERIES) parseQuery(q); // every query must parse before it is timed
    // Let the JIT settle first: --quick gives tinybench only 50 ms of warm-up.
    const warmUntil = performance.now() + (options.quick ? 500 : 1000);
    while (performance.now() < warmUntil) for (const q of QUERIES) parseQuery(q, { spans: true });
    const lengths = QUERIES.map((q) => q.length);
    options.log(`${QUERIES.length} queries, ${Math.min(...lengths)}-${Math.max(...lengths)} characters`);
    // The lexer baseline tokenizes the grammar-parsed option values ($filter, $orderby, ...).
    const values = QUERIES.flatMap((q) =>
      splitQuery(q)
        .filter((o) => !/^\$(top|skip|count)$/.test(o.name))
        .map((o) => o.value),
    );
    let i = 0;
    const rows: BenchRow[] = await timeTasks(
      'parse',
      [
        [
          'parseQuery (typical listing search)',
          () => {
            // A batch per sample so that timer overhead does not dominate a microsecond task.
            for (let k = 0; k < QUERIES.length; k++) parseQuery(QUERIES[i++ % QUERIES.length]);
          },
        ],
        [
          'parseQuery with spans (spanOf positions)',
          () => {
            for (let k = 0; k < QUERIES.length; k++) parseQuery(QUERIES[i++ % QUERIES.length], { spans: true });
          },
        ],
        [
          'lexer only, same option values (baseline)',
          () => {
            for (let k = 0; k < values.length; k++) lexer.tokenize(values[k]);
          },
        ],
      ],
      options,
    );
    return rows.map((r): BenchRow => {
      const note = `ops = batches of ${QUERIES.length} query strings; parsesPerSec = ops/s × ${QUERIES.length}`;
      if (r.opsPerSec === undefined) return { ...r, note };
      return { ...r, metrics: { parsesPerSec: r.opsPerSec * QUERIES.length }, note };
    });
  },
};

export default bench;
