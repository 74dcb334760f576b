/**
 * Replication by the upstream's EntityEvent log: after a full run, the next runs read the events
 * after the saved sequence and fetch the records they name, without listing any keys; an upstream
 * without the log, a restarted one, or an account with other sources gets a full run by key.
 * Every run ends with the replica equal, record for record, to what the account sees upstream.
 */
import { describe, expect, it } from 'vitest';
import type { JsonRecord } from '../../src/generate/listing.js';
import { replicate } from '../../src/replicate/replicate.js';
import { REPLICATED_RESOURCES } from '../../src/replicate/sink.js';
import { PARTNER_SOURCES } from '../service/helpers.js';
import {
  clone,
  dataset,
  DEMO_SOURCES,
  dropListings,
  entries,
  ORIGIN,
  readState,
  replicaRecords,
  tempDir,
  TestUpstream,
  TOKEN,
  visible,
  type DataSet,
} from './helpers.js';

/** The replica holds exactly what `sources` see of `d`, in every replicated resource. */
function expectReplicaOf(dir: string, d: DataSet, sources: readonly string[]): void {
  const expected = visible(d, sources);
  const replica = replicaRecords(dir);
  for (const r of REPLICATED_RESOURCES) expect(entries(replica[r]), r).toEqual(entries(expected[r]));
}

/** Requests that list a resource's keys (`$select=<Key>` without a key list). */
const keyListings = (urls: readonly string[]): string[] => urls.filter((u) => /\$select=\w+Key(&|$)/.test(u));

const run = (u: TestUpstream, dir: string): ReturnType<typeof replicate> => replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 50, fetch: u.fetch });

/** Runs again and expects a full run by key whose replica is what `sources` see of `d`. */
async function expectFullRun(u: TestUpstream, dir: string, d: DataSet, sources: readonly string[]): Promise<void> {
  const before = u.urls.length;
  const result = await run(u, dir);
  expect(result.incremental).toBe(false);
  expect(keyListings(u.urls.slice(before).map((x) => decodeURIComponent(x))).length).toBeGreaterThanOrEqual(REPLICATED_RESOURCES.length);
  expectReplicaOf(dir, d, sources);
}

describe('replication by the upstream EntityEvent', () => {
  it('replicates upserts and removals (a listing with children, Member, Office) incrementally, without listing keys', async () => {
    const d = dataset(120, 'replicate-events');
    const u = await TestUpstream.open(clone(d));
    const dir = tempDir();
    const first = await run(u, dir);
    expect(first.incremental).toBe(false);
    expectReplicaOf(dir, d, DEMO_SOURCES);
    const seq = readState(dir).events.sequence as number;
    expect(seq).toBeGreaterThan(0);

    const mine = (r: { OriginatingSystemName?: unknown }): boolean => DEMO_SOURCES.includes(r.OriginatingSystemName as string);
    const listings = d.Property.filter(mine);
    // a listing changed without a new ModificationTimestamp: only the log can tell
    const changed: JsonRecord = { ...listings[0], PublicRemarks: 'Changed, same timestamp' };
    // a listing with children removed
    const gone = listings.find((p) => d.Media.some((m) => m.ResourceRecordKey === p.ListingKey) && p !== listings[0])!;
    const media = d.Media.find((m) => m.ResourceRecordKey === listings[0].ListingKey)!;
    const changedMedia = { ...media, ShortDescription: 'Retaken photo' };
    const member: JsonRecord = { ...d.Member.filter(mine)[0], MemberFirstName: 'Renamed' };
    const office = d.Office.filter(mine).at(-1)!;
    const removedMember = d.Member.filter(mine).at(-1)!;
    await u.engine.upsert('Property', [changed]);
    await u.engine.upsert('Media', [changedMedia]);
    await u.engine.remove('Property', [gone.ListingKey as string]);
    await u.engine.upsert('Member', [member]);
    await u.engine.remove('Member', [removedMember.MemberKey as string]);
    await u.engine.remove('Office', [office.OfficeKey as string]);

    const next = clone(d);
    next.Property = next.Property.map((p) => (p.ListingKey === changed.ListingKey ? changed : p));
    next.Media = next.Media.map((m) => (m.MediaKey === media.MediaKey ? changedMedia : m));
    dropListings(next, [gone.ListingKey as string]);
    next.Member = next.Member.filter((m) => m.MemberKey !== removedMember.MemberKey).map((m) => (m.MemberKey === member.MemberKey ? member : m));
    next.Office = next.Office.filter((o) => o.OfficeKey !== office.OfficeKey);

    const before = u.urls.length;
    const second = await run(u, dir);
    const urls = u.urls.slice(before).map((x) => decodeURIComponent(x));
    expect(second.incremental).toBe(true);
    expect(urls.some((x) => x.includes(`/EntityEvent?$filter=EntityEventSequence gt ${seq}`))).toBe(true);
    expect(keyListings(urls)).toEqual([]);
    for (const r of REPLICATED_RESOURCES) expect(second.resources[r].keyPages, r).toBe(0);
    expect(second.resources.Property.removed).toBe(1);
    expect(second.resources.Media.removed).toBeGreaterThan(0);
    expectReplicaOf(dir, next, DEMO_SOURCES);
    expect(readState(dir).events.sequence).toBeGreaterThan(seq);

    // nothing changed since: a run reads one empty events page and fetches nothing
    const third = await run(u, dir);
    expect(third.incremental).toBe(true);
    for (const r of REPLICATED_RESOURCES) expect(third.resources[r]).toMatchObject({ upserted: 0, removed: 0, keyPages: 0 });
    expectReplicaOf(dir, next, DEMO_SOURCES);
  });

  it('an upstream without EntityEvent in its $metadata replicates by listing keys, and removals still replicate', async () => {
    const d = dataset(60, 'replicate-no-events');
    const u = await TestUpstream.open(clone(d));
    u.intercept = async (url) => {
      if (url.includes('/EntityEvent')) return new Response('{"error":{"code":"NotFound","message":"no such set"}}', { status: 404 });
      if (!url.endsWith('/$metadata')) return undefined;
      const saved = u.intercept;
      u.intercept = null;
      try {
        const xml = await (await u.fetch(url, { headers: { Authorization: `Bearer ${TOKEN}` } })).text();
        return new Response(xml.replace(/<EntityType Name="EntityEvent"[\s\S]*?<\/EntityType>/, ''), { headers: { 'content-type': 'application/xml' } });
      } finally {
        u.intercept = saved;
      }
    };
    const dir = tempDir();
    await run(u, dir);
    expect(readState(dir).events ?? null).toBe(null);
    const gone = d.Property.find((p) => DEMO_SOURCES.includes(p.OriginatingSystemName as string))!.ListingKey as string;
    await u.engine.remove('Property', [gone]);
    const next = clone(d);
    dropListings(next, [gone]);
    const before = u.urls.length;
    const second = await run(u, dir);
    const urls = u.urls.slice(before);
    expect(second.incremental).toBe(false);
    expect(urls.some((x) => x.includes('/EntityEvent'))).toBe(false);
    expect(keyListings(urls.map((x) => decodeURIComponent(x))).length).toBeGreaterThanOrEqual(REPLICATED_RESOURCES.length);
    expect(second.resources.Property.removed).toBe(1);
    expectReplicaOf(dir, next, DEMO_SOURCES);
  });

  it('a restarted upstream (another engine with other data behind the URL: its log no longer names the saved event) makes the next run a full one', async () => {
    const d = dataset(60, 'replicate-restart-a');
    const u = await TestUpstream.open(clone(d));
    const dir = tempDir();
    await run(u, dir);
    // the new engine's data: listings removed, a listing and a member changed (newer timestamps)
    const other = clone(d);
    const mine = (r: { OriginatingSystemName?: unknown }): boolean => DEMO_SOURCES.includes(r.OriginatingSystemName as string);
    dropListings(
      other,
      other.Property.filter(mine)
        .slice(0, 3)
        .map((p) => p.ListingKey as string),
    );
    const later = new Date(Date.parse(String(other.Property[0].ModificationTimestamp)) + 86_400_000 * 365).toISOString();
    const p = other.Property.find(mine)!;
    p.PublicRemarks = 'After the restart';
    p.ModificationTimestamp = later;
    const m = other.Member.find(mine)!;
    m.MemberFirstName = 'Restarted';
    m.ModificationTimestamp = later;
    await u.setData(clone(other));
    await expectFullRun(u, dir, other, DEMO_SOURCES);
    // and the full run recorded the new log's position: the next run is incremental again
    const third = await run(u, dir);
    expect(third.incremental).toBe(true);
    expectReplicaOf(dir, other, DEMO_SOURCES);
  });

  it('an account that sees other sources makes the next run a full one', async () => {
    const d = dataset(80, 'replicate-account');
    const u = await TestUpstream.open(clone(d));
    const dir = tempDir();
    await run(u, dir);
    expectReplicaOf(dir, d, DEMO_SOURCES);
    await u.loginAs('partner');
    await expectFullRun(u, dir, d, PARTNER_SOURCES);
  });
});
