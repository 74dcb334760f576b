import fc from 'fast-check';

type Rec = Record<string, unknown>;
const quote = (s: string): string => `'${s.replace(/'/g, "''")}'`;

/**
 * The fixed filter table of engine.test.ts (checked there against a naive reference), shared with
 * test/snapshot, which replays it on an engine reopened from a snapshot. Covers every column kind,
 * arithmetic and string functions, lambdas, dates and timestamps, DaysOnMarket, geo, search.text.
 */
export function fixedFilters(records: ReadonlyArray<Record<string, unknown>>): string[] {
  return [
    "StandardStatus eq 'Active'",
    "StandardStatus in ('Pending','Active Under Contract') and ListPrice lt 500000",
    'ListPrice ge 300000 and ListPrice le 600000 and BedroomsTotal ge 3',
    'YearBuilt eq null',
    'YearBuilt ne null and YearBuilt lt 1950',
    'not (BedroomsTotal gt 2)',
    'BedroomsTotal ge null',
    'LivingArea div BedroomsTotal gt 700',
    'BedroomsTotal div 2 eq 1',
    'ListPrice mod 7 eq 0 or ListPrice sub OriginalListPrice lt -20000',
    '-ListPrice lt -2000000',
    "contains(tolower(PublicRemarks),'granite') and startswith(PostalCode,'98')",
    "endswith(City,'e') or length(City) gt 10",
    "indexof(UnparsedAddress,' N ') ge 0",
    "substring(ListingId,0,2) eq 'NW'",
    "concat(City,StateOrProvince) eq 'SeattleWA'",
    "trim(toupper(City)) eq 'TAMPA'",
    'year(ModificationTimestamp) eq 2025 and month(ModificationTimestamp) ge 3',
    'day(ListingContractDate) eq 1 or hour(OnMarketTimestamp) eq 12',
    'date(ModificationTimestamp) ge 2025-05-01',
    'ListingContractDate lt 2024-06-01',
    'ModificationTimestamp gt 2025-05-20T12:00:00-07:00',
    'CloseDate eq null and ClosePrice ne null',
    'PoolPrivateYN eq true',
    'PoolPrivateYN ne false',
    "Appliances/any(a: a eq 'Dishwasher') and Appliances/all(a: a ne 'Oven')",
    'WaterfrontFeatures/any()',
    'not WaterfrontFeatures/any()',
    "View/all(v: startswith(v,'C'))",
    "'Pond' in WaterfrontFeatures",
    'DaysOnMarket gt 100',
    'DaysOnMarket le 7',
    'service_OriginalEntryTimestamp lt 2024-07-01T00:00:00Z',
    "geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 3000",
    "geo.distance(RawLocation, geography'SRID=4326;POINT(0 0)') le 10",
    "not (geo.distance(Location, geography'POINT(-87.6298 41.8781)') le 5000)",
    "search.text(KeywordSearchText,'pool granite')",
    "search.text(RawAddressSearchText,'maple street seattle') and ListPrice gt 400000",
    "search.text(ListAgentSearchText,'jose') or search.text(BuyerAgentSearchText,'smith')",
    "not search.text(KeywordSearchText,'pool')",
    "search.text(KeywordSearchText,'quartz spa view',2)",
    'null eq null',
    'ListPrice add 1000 gt 500000',
    'ListPrice mul 2 le 800000',
    'ListPrice div 1000 eq 450',
    'LivingArea div 100 gt 20.5',
    'second(ModificationTimestamp) eq 0 or minute(ModificationTimestamp) lt 10',
    'month(CloseDate) eq 3',
    'now() gt ModificationTimestamp and service_DaysOnMarketReferenceTimestamp le now()',
    "StandardStatus ne null and not (PropertyType in ('Residential','Land'))",
    `ListingId eq '${records[77].ListingId as string}'`,
    "ListingKey eq 'P000000005' or ListingKey eq 'P000000009'",
    "ListingKey eq 'P000000005' and ListPrice gt 0",
    "UnparsedAddress eq 'no such address'",
    "(StandardStatus eq 'Closed' or StandardStatus eq 'Expired') and not (City eq 'Houston')",
  ];
}

/**
 * The generated filters of engine.test.ts (fast-check): atoms over the data set's own values
 * (every column kind, functions, lambdas, DaysOnMarket, geo, search.text) combined with and, or,
 * not and comparisons with true/false/null. `search: false` leaves search.text out (for a
 * backend tested without it); `extra` atoms join the others.
 */
export function generatedFilter(
  records: ReadonlyArray<Rec>,
  options: { readonly search?: boolean; readonly extra?: ReadonlyArray<fc.Arbitrary<string>> } = {},
): fc.Arbitrary<string> {
  const rec = fc.nat(records.length - 1).map((i) => records[i]);
  const cmp = fc.constantFrom('lt', 'le', 'gt', 'ge', 'eq', 'ne');
  const atom: fc.Arbitrary<string> = fc.oneof(
    fc.tuple(cmp, rec).map(([op, r]) => `ListPrice ${op} ${r.ListPrice as number}`),
    fc.tuple(cmp, fc.constantFrom('null', '0', '2', '3', '4')).map(([op, v]) => `BedroomsTotal ${op} ${v}`),
    fc.tuple(cmp, fc.constantFrom('null', '1960', '2000')).map(([op, v]) => `YearBuilt ${op} ${v}`),
    rec.map((r) => `City eq ${quote(r.City as string)}`),
    fc.tuple(rec, rec).map(([a, b]) => `StandardStatus in (${quote(a.StandardStatus as string)},${quote(b.StandardStatus as string)})`),
    rec.map((r) => `PropertyType ne ${quote(r.PropertyType as string)}`),
    fc.constantFrom('Dishwasher', 'Microwave', 'Dryer', 'Oven').map((v) => `Appliances/any(a: a eq ${quote(v)})`),
    fc.constantFrom('C', 'P', 'N').map((v) => `View/all(v: startswith(v,${quote(v)}))`),
    fc.constantFrom('Pond', 'Waterfront', 'Creek').map((v) => `${quote(v)} in WaterfrontFeatures`),
    rec.map((r) => `startswith(PostalCode,${quote(String(r.PostalCode ?? '9').slice(0, 2))})`),
    fc.constantFrom('pool', 'Pool', 'granite', 'view', 'garage').map((v) => `contains(PublicRemarks,${quote(v)})`),
    fc.tuple(fc.constantFrom('lt', 'ge'), rec).map(([op, r]) => `ModificationTimestamp ${op} ${r.ModificationTimestamp as string}`),
    fc.tuple(fc.constantFrom('lt', 'ge'), rec).map(([op, r]) => `ListingContractDate ${op} ${r.ListingContractDate as string}`),
    fc.tuple(fc.constantFrom('lt', 'gt'), fc.integer({ min: 5, max: 300 })).map(([op, d]) => `DaysOnMarket ${op} ${d}`),
    fc.constantFrom('true', 'false', 'null').map((v) => `PoolPrivateYN eq ${v}`),
    fc
      .tuple(rec, fc.constantFrom(500, 2000, 8000))
      .map(([r, m]) => `geo.distance(Location, geography'POINT(${(r.Longitude as number) ?? -122.3} ${(r.Latitude as number) ?? 47.6})') le ${m}`),
    ...(options.search === false
      ? []
      : [
          fc.constantFrom('pool', 'granite counters', 'spa', 'hardwood floors', 'quartz').map((v) => `search.text(KeywordSearchText,${quote(v)})`),
          fc.tuple(rec, rec).map(([a, b]) => `search.text(RawAddressSearchText,${quote(`${a.StreetName as string} ${b.City as string}`)})`),
        ]),
    fc.integer({ min: 300, max: 2000 }).map((n) => `LivingArea div BedroomsTotal gt ${n}`),
    fc.integer({ min: 2, max: 9 }).map((n) => `ListPrice mod ${n} eq 0`),
    fc.integer({ min: 0, max: 100000 }).map((n) => `OriginalListPrice sub ListPrice gt ${n}`),
    fc.integer({ min: 4, max: 12 }).map((n) => `length(City) gt ${n}`),
    fc.constantFrom(2023, 2024, 2025).map((y) => `year(ModificationTimestamp) eq ${y}`),
    fc.constantFrom('seattle', 'tampa', 'mesa').map((c) => `tolower(City) eq ${quote(c)}`),
    fc.constantFrom('981', '770', '852').map((z) => `substring(PostalCode,0,3) eq ${quote(z)}`),
    fc.constantFrom('pool', 'view').map((w) => `indexof(PublicRemarks,${quote(w)}) ge 0`),
    fc.tuple(fc.constantFrom('Location', 'RawLocation'), fc.constantFrom('eq', 'ne')).map(([f, op]) => `${f} ${op} null`),
    ...(options.extra ?? []),
  );
  return fc.letrec<{ expr: string }>((tie) => ({
    expr: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      atom,
      fc.tuple(tie('expr'), tie('expr')).map(([a, b]) => `${a} and ${b}`),
      fc.tuple(tie('expr'), tie('expr')).map(([a, b]) => `(${a} or ${b})`),
      tie('expr').map((a) => `not (${a})`),
      // a boolean compared with a literal: `(search.text(...)) eq true`, `(...) ne null`
      fc.tuple(tie('expr'), fc.constantFrom('eq true', 'eq false', 'ne true', 'ne false', 'eq null', 'ne null')).map(([a, t]) => `(${a}) ${t}`),
    ),
  })).expr;
}
