/**
 * The queries and the mix of changes the compaction tests run (compact.test.ts on the event loop,
 * compact-thread.test.ts on a worker thread).
 */
import type { Engine, QueryResource, QueryResult } from '../../src/engine.js';
import { dataset, type DataSet } from '../replicate/helpers.js';

export const QUERIES: ReadonlyArray<[QueryResource, string, string[]?]> = [
  ['Property', '$count=true&$top=50&$orderby=ListPrice desc,BedroomsTotal'],
  ['Property', '$count=true&$top=40&$expand=Media($select=MediaKey,Order),OpenHouse'],
  ['Property', "$filter=search.text(KeywordSearchText, 'granite kitchen pool')&$orderby=relevance desc&$top=25&$select=ListingKey&$count=true"],
  ['Property', "$filter=search.text(RawAddressSearchText, '12 main st')&$orderby=relevance desc&$top=25&$select=ListingKey"],
  [
    'Property',
    "$filter=StandardStatus eq 'Active' and ListPrice lt 700000&$count=true&$top=30&$select=ListingKey,ListPrice,service_OriginalEntryTimestamp,DaysOnMarket",
  ],
  ['Property', "$filter=geo.distance(Location, geography'POINT(-118.25 34.05)') le 50000&$count=true&$top=30&$select=ListingKey"],
  ['Property', '$apply=groupby((City),aggregate($count as n,ListPrice with max as top))&$top=100'],
  ['Property', '$count=true&$top=20&$select=ListingKey,BedroomsTotal,X_Added', ['CRMLS', 'MRED']],
  ['Media', '$count=true&$top=60&$orderby=ModificationTimestamp desc'],
  ['OpenHouse', '$count=true&$top=60'],
];

/** Answers without the $skiptoken (it names the generation, which compaction advances). */
export const unpinned = (r: QueryResult): QueryResult =>
  r['@odata.nextLink'] === undefined ? r : { ...r, '@odata.nextLink': r['@odata.nextLink'].replace(/&\$skiptoken=[^&]*/, '') };
export const answers = (e: Engine): QueryResult[] => QUERIES.map(([r, q, sources]) => unpinned(e.query(r, q, sources ? { sources } : {})));

/** A mix of changes: replaced and new listings (one with a new field), removals, children added, replaced and removed. */
export async function change(engine: Engine, base: DataSet): Promise<void> {
  const extra = dataset(30, 'compact-new');
  await engine.apply([
    {
      resource: 'Property',
      upsert: base.Property.slice(0, 60).map((p, i) => ({ ...p, ListPrice: 100_000 + i * 7_919, PublicRemarks: `granite kitchen pool remodel ${i}` })),
    },
    { resource: 'Property', upsert: extra.Property.map((p, i) => (i === 0 ? { ...p, X_Added: 'yes' } : p)) },
    { resource: 'Media', upsert: extra.Media },
    { resource: 'OpenHouse', upsert: extra.OpenHouse },
    { resource: 'Property', remove: base.Property.slice(100, 140).map((p) => p.ListingKey as string) },
  ]);
  await engine.upsert(
    'Media',
    base.Media.slice(0, 30).map((m) => ({ ...m, Order: 99 })),
  );
  await engine.remove(
    'Media',
    base.Media.slice(200, 230).map((m) => m.MediaKey as string),
  );
  // a listing replaced twice more: it keeps the first version's entry timestamp
  await engine.upsert('Property', [{ ...base.Property[1], ModificationTimestamp: '2025-05-30T00:00:00Z', ListingContractDate: null }]);
}
