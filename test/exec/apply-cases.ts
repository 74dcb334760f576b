/**
 * The $apply cases both backends answer (test/exec/apply.test.ts checks the in-memory engine
 * against its naive reference, test/pg/apply.test.ts PostgreSQL against the in-memory engine) on
 * the default data set: each a query and, where given, the caller's sources.
 */

/** Every aggregation method over fields of every type, with DaysOnMarket and $count. */
export const EVERY_METHOD = [
  'ListPrice with sum as SumPrice',
  'ListPrice with average as AvgPrice',
  'ListPrice with avg',
  'ListPrice with min',
  'ListPrice with max',
  'ListPrice with countdistinct',
  'ListPrice with median',
  'ListPrice with p10',
  'ListPrice with p25',
  'ListPrice with p50',
  'ListPrice with p75',
  'ListPrice with p90',
  'ListPrice with p95',
  'ClosePrice with sum',
  'ClosePrice with median',
  'ClosePrice with average',
  'ClosePrice with p95',
  'BedroomsTotal with countdistinct',
  'BedroomsTotal with p75',
  'LivingArea with average',
  'Latitude with sum',
  'Latitude with median',
  'ListingContractDate with min',
  'ListingContractDate with max',
  'ListingContractDate with median',
  'ListingContractDate with countdistinct',
  'CloseDate with p90',
  'CloseDate with min',
  'ModificationTimestamp with min',
  'ModificationTimestamp with max',
  'ModificationTimestamp with p25',
  'ModificationTimestamp with countdistinct',
  'City with min',
  'City with max',
  'City with countdistinct',
  'ListAgentFullName with countdistinct',
  'ListAgentFullName with max',
  'PublicRemarks with min',
  'PublicRemarks with countdistinct',
  'ListingId with max',
  'PoolPrivateYN with countdistinct',
  'DaysOnMarket with average',
  'DaysOnMarket with max',
  'DaysOnMarket with p90',
  '$count as N',
].join(',');

export const APPLY_CASES: Array<[string, string[]?]> = [
  [`$apply=groupby((StandardStatus),aggregate(${EVERY_METHOD}))`],
  [`$apply=groupby((City),aggregate(${EVERY_METHOD}))`],
  [`$apply=groupby((OriginatingSystemName,PropertyType),aggregate(${EVERY_METHOD}))`],
  [`$apply=aggregate(${EVERY_METHOD})`],
  ['$apply=groupby((City,StandardStatus,PoolPrivateYN),aggregate($count as N,ListPrice with median as M))'],
  ['$apply=groupby((BedroomsTotal),aggregate($count as N,ClosePrice with max as Top))'],
  ['$apply=groupby((PoolPrivateYN))'],
  ['$apply=groupby((StandardStatus,PropertyType))'],
  ['$apply=groupby((ListingContractDate),aggregate($count as N))'],
  ['$apply=groupby((CloseDate,City),aggregate(ClosePrice with sum as Closed))'],
  ['$apply=groupby((ModificationTimestamp),aggregate($count as N))'],
  ['$apply=groupby((DaysOnMarket),aggregate($count as N))'],
  ['$apply=groupby((ListingKey),aggregate(ListPrice with max as P))'],
  ['$apply=groupby((YearBuilt,GarageSpaces),aggregate(LivingArea with p50 as L))'],
  ['$apply=groupby((ListPrice),aggregate($count as N,City with countdistinct as C))'],
  ['$apply=groupby((Latitude,PoolPrivateYN),aggregate(Longitude with max as X))'],
  // filters: $filter, filter(...) chains, indexes serving them, search.text ordinals across both
  [`$filter=ListPrice gt 400000&$apply=filter(BedroomsTotal ge 3)/groupby((City),aggregate(${EVERY_METHOD}))`],
  [
    "$apply=filter(StandardStatus in ('Active','Pending'))/filter(PoolPrivateYN eq true)/groupby((OriginatingSystemName,PropertyType),aggregate($count as N,ListPrice with p90 as P90,DaysOnMarket with median as Dom))",
  ],
  ["$apply=filter(City eq 'Seattle')/aggregate($count as N,ListPrice with average as A,ListPrice with p25 as Q1)"],
  [
    "$filter=search.text(KeywordSearchText,'granite')&$apply=filter(search.text(KeywordSearchText,'pool') or ListPrice lt 300000)/groupby((City),aggregate($count as N,ListPrice with max as Top))",
  ],
  ["$apply=filter(geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 20000)/groupby((City),aggregate($count as N))"],
  ['$apply=filter(ListPrice ge 500000 and ListPrice lt 700000)/groupby((StandardStatus),aggregate($count as N,ListPrice with sum as S))'],
  ['$filter=ListPrice gt 1000000000&$apply=groupby((City),aggregate($count as N))'],
  ['$filter=ListPrice gt 1000000000&$apply=aggregate($count as N,ListPrice with sum as S,ListPrice with p50 as M,City with countdistinct as C)'],
  // $orderby over group fields and aliases
  ['$apply=groupby((City),aggregate($count as N,ListPrice with max as Top))&$orderby=N desc'],
  ['$apply=groupby((City),aggregate($count as N,ListPrice with max as Top))&$orderby=N,Top desc'],
  ['$apply=groupby((OriginatingSystemName,PropertyType),aggregate($count as N))&$orderby=PropertyType desc,N'],
  ['$apply=groupby((BedroomsTotal),aggregate(ClosePrice with min as Low))&$orderby=Low desc'],
  ['$apply=groupby((City),aggregate(ListAgentFullName with max as Agent))&$orderby=Agent'],
  // visibility restricts rows before everything
  [`$apply=groupby((City),aggregate(${EVERY_METHOD}))`, ['CRMLS', 'MRED']],
  ['$apply=groupby((OriginatingSystemName),aggregate($count as N,ListPrice with median as M))', ['NWMLS', 'Stellar']],
  ["$apply=filter(OriginatingSystemName eq 'CRMLS')/aggregate($count as N,ListPrice with sum as S)", ['NWMLS']],
  ["$filter=OriginatingSystemName eq 'CRMLS' or ListPrice gt 0&$apply=groupby((OriginatingSystemName),aggregate($count as N))", ['HAR']],
  ['$apply=aggregate($count as N,ListPrice with max as Top)', []],
];

/**
 * Groups of n = 1, 2, 4, 10 and 11 prices (a null among some) and the query of every percentile
 * over them: nearest-rank edge cases worked by hand in test/exec/apply.test.ts.
 */
export function percentileRecords(): Array<Record<string, unknown>> {
  const data: Array<Record<string, unknown>> = [];
  const add = (city: string, prices: Array<number | null>): void => {
    prices.forEach((p, i) => data.push({ ListingKey: `${city}-${i}`, OriginatingSystemName: 'T', City: city, ...(p === null ? {} : { ListPrice: p }) }));
  };
  add('n1', [7, null]);
  add('n2', [20, 10]);
  add('n10', [3, 1, 4, 10, null, 5, 9, 2, 6, 8, 7]);
  add('n11', [11, 3, 1, 4, 10, 5, 9, 2, 6, 8, 7]);
  add('even', [4, 1, 3, 2]);
  return data;
}

export const PERCENTILE_QUERY =
  '$apply=groupby((City),aggregate(ListPrice with median as med,ListPrice with p10,ListPrice with p25,ListPrice with p50,ListPrice with p75,ListPrice with p90,ListPrice with p95))';
