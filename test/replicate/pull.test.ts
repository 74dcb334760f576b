/**
 * A full pull of the default data set as the demo account sees it, into an empty directory: the
 * replica holds exactly the demo account's records, field for field, and an engine opened on it
 * answers like the upstream does for that account. Then a second run that finds nothing to do.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { Engine, type QueryResource, type QueryResult } from '../../src/engine.js';
import { replicate, type ReplicationProgress, type ReplicationResult } from '../../src/replicate/replicate.js';
import { REPLICATED_RESOURCES } from '../../src/replicate/sink.js';
import { defaultEngine } from '../service/helpers.js';
import { defaultFixture, DEMO_SOURCES, entries, NOW, ORIGIN, readState, replicaRecords, tempDir, TestUpstream, TOKEN, visible } from './helpers.js';

/** Queries both engines must answer alike (no relevance order: BM25's N is the data set's size). */
const QUERIES: ReadonlyArray<[QueryResource, string]> = [
  ['Property', "$filter=City eq 'Seattle' and StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=20&$count=true"],
  ['Property', "$filter=geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 5000&$select=ListingKey,ListPrice,Location,DaysOnMarket&$top=50"],
  ['Property', "$filter=search.text(KeywordSearchText,'granite pool')&$select=ListingKey,City&$top=200&$count=true"],
  ['Property', '$apply=groupby((OriginatingSystemName,City),aggregate($count as n,ListPrice with median as m,ModificationTimestamp with max as latest))'],
  ['Property', '$expand=Media($top=3),OpenHouse,PreferredMedia&$orderby=ModificationTimestamp desc&$top=30'],
  [
    'Property',
    '$filter=service_OriginalEntryTimestamp ge 2025-01-01T00:00:00Z&$select=ListingKey,service_OriginalEntryTimestamp,service_DaysOnMarketReferenceTimestamp&$top=500',
  ],
  ['Property', '$top=2000&$skip=0&$orderby=ListingKey'],
  ['Media', "$filter=MediaCategory eq 'Photo' and ImageWidth ge 2048&$orderby=ImageWidth desc,ModificationTimestamp&$top=100&$count=true"],
  ['OpenHouse', '$orderby=OpenHouseStartTime&$top=1000&$count=true'],
  ['Member', "$filter=MemberStatus eq 'Active'&$orderby=MemberLastName,MemberFirstName&$top=1000&$count=true"],
  ['Office', '$top=1000&$count=true'],
  ['Property', '$select=ListingKey&$expand=ListAgent,BuyerAgent($select=MemberFullName),ListOffice,CoListOffice&$top=2000'],
];

describe('a full pull of the default data set as the demo account', () => {
  let dir: string;
  let result: ReplicationResult;
  let upstream: TestUpstream;
  const progress: ReplicationProgress[] = [];

  beforeAll(async () => {
    upstream = await TestUpstream.open(await defaultEngine());
    dir = path.join(tempDir(), 'replica'); // does not exist yet: replicate creates it
    result = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 500, fetch: upstream.fetch, onProgress: (p) => progress.push(p) });
  });

  it('holds exactly the records the demo account sees, field for field', () => {
    const fixture = defaultFixture();
    const expected = visible(fixture, DEMO_SOURCES);
    const replica = replicaRecords(dir);
    expect(expected.Property.size).toBeGreaterThan(500);
    expect(expected.Property.size).toBeLessThan(fixture.Property.length);
    for (const r of REPLICATED_RESOURCES) {
      expect(replica[r].size, r).toBe(expected[r].size);
      expect(entries(replica[r]), r).toEqual(entries(expected[r]));
    }
    expect(result.resources.Property.upserted).toBe(expected.Property.size);
    expect(result.resources.Media.upserted).toBe(expected.Media.size);
    expect(result.resources.OpenHouse.upserted).toBe(expected.OpenHouse.size);
    expect(result.resumed).toBe(false);
  });

  it('writes only the data files and the state: no accounts, profiles or leftovers', () => {
    expect(readdirSync(dir).sort()).toEqual(['.replication.json', 'Media.jsonl', 'Member.jsonl', 'Office.jsonl', 'OpenHouse.jsonl', 'Property.jsonl']);
    const state = readState(dir);
    expect(state).toMatchObject({ version: 1, from: `${ORIGIN}/v1/listings/data`, status: 'complete' });
    for (const r of ['Property', 'Media', 'OpenHouse']) expect(state.resources[r].field).toBe('ModificationTimestamp');
  });

  it('answers like the upstream does for the demo account', async () => {
    const local = await Engine.open({ data: dir, now: () => new Date(NOW) });
    const remote = upstream.engine;
    // nextLinks pin each engine's own data set (their $skiptoken differs); the rest is the same
    const unpinned = (r: QueryResult): QueryResult =>
      r['@odata.nextLink'] === undefined ? r : { ...r, '@odata.nextLink': r['@odata.nextLink'].replace(/&\$skiptoken=[^&]*/, '') };
    for (const [resource, q] of QUERIES) {
      expect(unpinned(local.query(resource, q)), `${resource} ${q}`).toEqual(unpinned(remote.query(resource, q, { sources: DEMO_SOURCES })));
    }
  });

  it('paged with a keyset cursor, never with $skip, and listed keys for removals', () => {
    const pages = upstream.dataUrls();
    expect(pages.some((u) => u.includes('$skip'))).toBe(false);
    expect(pages.filter((u) => u.includes('/Media?')).some((u) => u.includes('ModificationTimestamp ge ') && u.includes(" or MediaKey gt '"))).toBe(true);
    expect(pages.some((u) => u.includes('/Property?$select=ListingKey'))).toBe(true);
    expect(result.resources.Media.pages).toBe(Math.ceil(result.resources.Media.upserted / 500));
    expect(progress.some((p) => p.phase === 'changes' && p.resource === 'Media')).toBe(true);
    expect(progress.at(-1)?.phase).toBe('done');
  });

  it("finds nothing to do on a second run: no records fetched, no keys listed (the upstream's EntityEvent says nothing changed)", async () => {
    const before = upstream.urls.length;
    const again = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 500, fetch: upstream.fetch });
    expect(again.incremental).toBe(true);
    for (const r of REPLICATED_RESOURCES) {
      expect(again.resources[r]).toMatchObject({ upserted: 0, removed: 0, pages: 0, backfilled: 0, keyPages: 0 });
    }
    // $metadata, /account/resources, EntityEvent(N), one empty changes page per resource, one empty events page
    expect(upstream.urls.length - before).toBe(3 + REPLICATED_RESOURCES.length + 1);
    expect(replicaRecords(dir).Property.size).toBe(result.resources.Property.upserted);
  });
});
