/**
 * Replication against an upstream that changes: records modified (moving behind the cursor),
 * added and removed while the pages are served; a run stopped midway and resumed; removals and
 * visibility changes between runs; resources without ModificationTimestamp; orphaned children.
 * Every run ends with the replica equal, record for record, to what the account sees upstream.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import type { JsonRecord } from '../../src/generate/listing.js';
import { ReplicationError } from '../../src/replicate/errors.js';
import { replicate } from '../../src/replicate/replicate.js';
import {
  accountsWith,
  clone,
  dataset,
  DEMO_SOURCES,
  dropListings,
  entries,
  NOW,
  ORIGIN,
  readState,
  recordingSleep,
  replicaRecords,
  tempDir,
  TestUpstream,
  TOKEN,
  visible,
  type DataSet,
} from './helpers.js';

const RESOURCES = ['Property', 'Media', 'OpenHouse'] as const;
const ts = (minutes: number): string => new Date(NOW + minutes * 60_000).toISOString();

/** The replica holds exactly what `sources` see of `d`, and an engine opens it. */
async function expectReplicaOf(dir: string, d: DataSet, sources: readonly string[]): Promise<void> {
  const expected = visible(d, sources);
  const replica = replicaRecords(dir);
  for (const r of RESOURCES) expect(entries(replica[r]), r).toEqual(entries(expected[r]));
  const engine = await Engine.open({ data: dir });
  expect(engine.store.Property.rowCount).toBe(expected.Property.size);
}

const byTime = (a: JsonRecord, b: JsonRecord): number =>
  String(a.ModificationTimestamp ?? '').localeCompare(String(b.ModificationTimestamp ?? '')) ||
  String(a.ListingKey ?? a.MediaKey).localeCompare(String(b.ListingKey ?? b.MediaKey));

/** A listing with media and open houses, new to `d`, keyed `key`, visible to demo, stamped `at`. */
function newListing(pool: DataSet, i: number, key: string, at: string): DataSet {
  const p = pool.Property[i];
  const old = p.ListingKey as string;
  const rekey = (k: string): string => key + k.slice(old.length);
  return {
    Property: [{ ...p, ListingKey: key, ListingId: `X${key}`, OriginatingSystemName: 'HAR', ModificationTimestamp: at }],
    Media: pool.Media.filter((m) => m.ResourceRecordKey === old).map((m) => ({
      ...m,
      MediaKey: rekey(m.MediaKey as string),
      ResourceRecordKey: key,
      ModificationTimestamp: at,
    })),
    OpenHouse: pool.OpenHouse.filter((o) => o.ListingKey === old).map((o) => ({
      ...o,
      OpenHouseKey: rekey(o.OpenHouseKey as string),
      ListingKey: key,
      OriginatingSystemName: 'HAR',
      ModificationTimestamp: at,
    })),
    PropertyChange: [],
    Member: [],
    Office: [],
  };
}

/**
 * The next version of a data set: the two earliest visible listings and three earliest visible
 * media modified (they move to the end of the order), a listing removed, one moved out of the
 * demo account's sight, a new listing with media added, two media and an open house removed.
 */
function mutate(d: DataSet, step: number, pool: DataSet): DataSet {
  const at = ts(step);
  const next = clone(d);
  const demo = (p: JsonRecord): boolean => DEMO_SOURCES.includes(p.OriginatingSystemName as string);
  const seen = next.Property.filter(demo).sort(byTime);
  for (const p of seen.slice(0, 2)) Object.assign(p, { ModificationTimestamp: at, ListPrice: (p.ListPrice as number) + 1000 * step });
  const hidden = seen[seen.length - 1 - step];
  if (hidden.OriginatingSystemName === 'CRMLS' || hidden.OriginatingSystemName === 'NWMLS')
    Object.assign(hidden, { OriginatingSystemName: 'MRED', ModificationTimestamp: at });
  dropListings(next, [seen[2 + step].ListingKey as string]);
  const keys = new Set(next.Property.filter(demo).map((p) => p.ListingKey));
  const media = next.Media.filter((m) => keys.has(m.ResourceRecordKey)).sort(byTime);
  for (const m of media.slice(0, 3)) Object.assign(m, { ModificationTimestamp: at, MediaURL: `${m.MediaURL as string}?v=${step}` });
  const goneMedia = new Set([media[10 + step].MediaKey, media[40 + step].MediaKey]);
  next.Media = next.Media.filter((m) => !goneMedia.has(m.MediaKey));
  const oh = next.OpenHouse.filter((o) => keys.has(o.ListingKey));
  if (oh.length > 2) next.OpenHouse = next.OpenHouse.filter((o) => o !== oh[step % oh.length]);
  const added = newListing(pool, step, `Q${String(step).padStart(9, '0')}`, at);
  next.Property.push(...added.Property);
  next.Media.push(...added.Media);
  next.OpenHouse.push(...added.OpenHouse);
  return next;
}

const isChangesPage = (url: string): boolean => decodeURIComponent(url).includes('$orderby=ModificationTimestamp asc');

describe('an upstream that changes during the pull', () => {
  it("ends with the upstream's final state, where following nextLinks across the change is refused (SkipTokenExpired)", async () => {
    const base = dataset(240, 'replicate-changes');
    // a few media without a timestamp: they sort first (nulls lowest)
    base.Media.forEach((m, i) => {
      if (i % 97 === 5) delete m.ModificationTimestamp;
    });
    const pool = dataset(40, 'replicate-new');
    const versions = [base];
    for (let step = 1; step <= 16; step++) versions.push(mutate(versions[step - 1], step, pool));

    // Switch to the next version before every third changes page.
    const schedule = (upstream: TestUpstream): void => {
      let pages = 0;
      let version = 0;
      upstream.intercept = async (url) => {
        if (!isChangesPage(url) && !url.includes('$skip') && !url.includes('$orderby=ModificationTimestamp%2CListingKey')) return undefined;
        if (++pages % 3 === 0 && version + 1 < versions.length) await upstream.setData(versions[++version]);
        return undefined;
      };
    };

    const upstream = await TestUpstream.open(base);
    schedule(upstream);
    const dir = tempDir();
    const result = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 40, flushRecords: 300, fetch: upstream.fetch });
    const final = versions.at(-1)!;
    expect(upstream.engine.store.Property.rowCount).toBe(final.Property.length); // every version was served
    await expectReplicaOf(dir, final, DEMO_SOURCES);
    // new listings whose media arrived before the listing did were fetched by key
    expect(result.resources.Property.backfilled).toBeGreaterThan(0);
    expect(result.resources.Property.removed).toBeGreaterThan(0);
    expect(result.resources.Media.removed).toBeGreaterThan(0);

    // The same schedule, followed by nextLinks ($skip) instead of a cursor: a nextLink pins the data
    // it started on, so once the upstream's data is replaced under it, it says so instead of
    // silently skipping records.
    const naive = await TestUpstream.open(base);
    schedule(naive);
    let url: string | undefined = `${ORIGIN}/v1/listings/data/Property?$orderby=ModificationTimestamp%2CListingKey`;
    let pages = 0;
    let expired: { status: number; code: string } | null = null;
    while (url !== undefined && expired === null) {
      const res = await naive.fetch(url, { headers: { Authorization: `Bearer ${TOKEN}`, Prefer: 'odata.maxpagesize=40' } });
      const body = (await res.json()) as { value: JsonRecord[]; '@odata.nextLink'?: string; error?: { code: string } };
      if (res.status !== 200) expired = { status: res.status, code: body.error!.code };
      else {
        pages++;
        url = body['@odata.nextLink'];
      }
    }
    expect(pages).toBeGreaterThan(0);
    expect(expired).toEqual({ status: 400, code: 'SkipTokenExpired' });
  });

  it('converges on the next run when records change during the key listing too', async () => {
    const base = dataset(120, 'replicate-late');
    const pool = dataset(40, 'replicate-new');
    const later = mutate(mutate(base, 1, pool), 2, pool);
    const upstream = await TestUpstream.open(base);
    let switched = false;
    upstream.intercept = async (url) => {
      if (!switched && decodeURIComponent(url).includes('/Media?$select=MediaKey')) {
        switched = true;
        await upstream.setData(later);
      }
      return undefined;
    };
    const dir = tempDir();
    await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 25, fetch: upstream.fetch });
    // The Property key listing ran before the change: the removed listing is still here.
    expect(replicaRecords(dir).Property.size).not.toBe(visible(later, DEMO_SOURCES).Property.size);
    await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 25, fetch: upstream.fetch });
    await expectReplicaOf(dir, later, DEMO_SOURCES);
  });
});

describe('resuming a stopped run', () => {
  it('continues from the saved cursor, without duplicates, to the same end as an uninterrupted run', async () => {
    const data = dataset(200, 'replicate-resume');
    const upstream = await TestUpstream.open(data);
    const full = tempDir();
    const uninterrupted = await replicate({ from: ORIGIN, token: TOKEN, to: full, pageSize: 30, fetch: upstream.fetch });

    // The network goes away after 25 data pages (the Media pass), as a killed process would stop.
    let pages = 0;
    upstream.intercept = (url) => {
      if (!url.includes('$metadata') && ++pages > 25) throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') });
      return undefined;
    };
    const dir = tempDir();
    const { sleep, waits } = recordingSleep();
    const failed = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 30, flushRecords: 100, fetch: upstream.fetch, sleep, maxRetries: 2 }).catch(
      (e: unknown) => e,
    );
    expect(failed).toBeInstanceOf(ReplicationError);
    expect(failed).toMatchObject({ code: 'NetworkError' });
    expect((failed as ReplicationError).message).toContain('ECONNREFUSED');
    expect(waits).toEqual([1000, 2000]); // two retries with backoff, then the error
    const stopped = readState(dir);
    expect(stopped.status).toBe('running');
    expect(stopped.resources.Property.cursor).not.toBeNull();
    expect(stopped.resources.Media.cursor).not.toBeNull();
    expect(existsSync(path.join(dir, '.replication.lock'))).toBe(false);
    // what is there loads, and is what the upstream holds
    const partial = replicaRecords(dir);
    const expected = visible(data, DEMO_SOURCES);
    expect(partial.Media.size).toBeGreaterThan(0);
    expect(partial.Media.size).toBeLessThan(expected.Media.size);
    for (const r of RESOURCES) for (const [k, rec] of partial[r]) expect(rec).toEqual(expected[r].get(k));
    await Engine.open({ data: dir });

    upstream.intercept = null;
    const mediaCursor = stopped.resources.Media.cursor;
    const first = upstream.urls.length;
    const resumed = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 30, fetch: upstream.fetch });
    expect(resumed.resumed).toBe(true);
    const urls = upstream.urls.slice(first).map((u) => decodeURIComponent(u));
    expect(urls.find((u) => u.includes('/Media?'))).toContain(`MediaKey gt '${mediaCursor.key}'`);
    for (const r of ['Property', 'Media'] as const) expect(resumed.resources[r].pages).toBeLessThan(uninterrupted.resources[r].pages);
    expect(resumed.resources.Property.pages).toBe(0);
    await expectReplicaOf(dir, data, DEMO_SOURCES);
    expect(replicaRecords(dir)).toEqual(replicaRecords(full));
    expect(readState(dir).status).toBe('complete');
  });

  it('picks up changes made while it was stopped', async () => {
    const data = dataset(100, 'replicate-resume-2');
    const upstream = await TestUpstream.open(data);
    let pages = 0;
    upstream.intercept = (url) => {
      if (!url.includes('$metadata') && ++pages > 8) return new Response('{"error":{"code":"Down","message":"maintenance"}}', { status: 500 });
      return undefined;
    };
    const dir = tempDir();
    await expect(replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 20, flushRecords: 50, fetch: upstream.fetch })).rejects.toMatchObject({
      code: 'HttpError',
      status: 500,
    });
    const later = mutate(data, 1, dataset(5, 'replicate-new'));
    await upstream.setData(later);
    upstream.intercept = null;
    await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 20, fetch: upstream.fetch });
    await expectReplicaOf(dir, later, DEMO_SOURCES);
  });
});

describe('removals', () => {
  it('removes records the upstream no longer lists, and the children of removed listings', async () => {
    const v1 = dataset(200, 'replicate-removals');
    const upstream = await TestUpstream.open(v1);
    const dir = tempDir();
    await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 50, fetch: upstream.fetch });
    await expectReplicaOf(dir, v1, DEMO_SOURCES);

    const v2 = clone(v1);
    const mine = v2.Property.filter((p) => DEMO_SOURCES.includes(p.OriginatingSystemName as string));
    const withMedia = (p: JsonRecord): boolean => v2.Media.some((m) => m.ResourceRecordKey === p.ListingKey);
    const deleted = mine
      .filter(withMedia)
      .slice(0, 6)
      .map((p) => p.ListingKey as string);
    // no longer visible to this token (its timestamp unchanged: only the key listing can tell)
    const moved = mine.filter((p) => withMedia(p) && !deleted.includes(p.ListingKey as string)).slice(0, 2);
    for (const p of moved) p.OriginatingSystemName = 'MRED';
    dropListings(v2, deleted);
    const gone = new Set([...deleted, ...moved.map((p) => p.ListingKey as string)]);
    const keep = new Set(mine.filter((p) => !gone.has(p.ListingKey as string)).map((p) => p.ListingKey));
    const lostMedia = v2.Media.filter((m) => keep.has(m.ResourceRecordKey))
      .slice(0, 10)
      .map((m) => m.MediaKey);
    v2.Media = v2.Media.filter((m) => !lostMedia.includes(m.MediaKey));
    const lostOpenHouse = v2.OpenHouse.find((o) => keep.has(o.ListingKey));
    v2.OpenHouse = v2.OpenHouse.filter((o) => o !== lostOpenHouse);
    await upstream.setData(v2);

    const before = replicaRecords(dir);
    const result = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 50, fetch: upstream.fetch });
    await expectReplicaOf(dir, v2, DEMO_SOURCES);
    const childrenOfGone = [...before.Media.values()].filter((m) => gone.has(m.ResourceRecordKey as string)).length;
    expect(childrenOfGone).toBeGreaterThanOrEqual(8);
    expect(result.resources.Property).toMatchObject({ removed: 8, upserted: 0 });
    expect(result.resources.Media).toMatchObject({ removed: childrenOfGone + 10, upserted: 0 });
    expect(result.resources.OpenHouse.removed).toBe(
      [...before.OpenHouse.values()].filter((o) => gone.has(o.ListingKey as string)).length + (lostOpenHouse ? 1 : 0),
    );
  });

  it("follows the token's visibility both ways: more sources are fetched by key, fewer removed", async () => {
    const data = dataset(150, 'replicate-visibility');
    const upstream = await TestUpstream.open(data, { accounts: accountsWith([{ username: 'narrow', sources: ['CRMLS'] }]) });
    await upstream.loginAs('narrow');
    const dir = tempDir();
    await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 40, fetch: upstream.fetch });
    await expectReplicaOf(dir, data, ['CRMLS']);

    // demo also sees NWMLS, ARMLS, HAR: records older than the cursor, found by the key listing
    await upstream.loginAs('demo');
    const wider = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 40, fetch: upstream.fetch });
    await expectReplicaOf(dir, data, DEMO_SOURCES);
    const added = visible(data, DEMO_SOURCES).Property.size - visible(data, ['CRMLS']).Property.size;
    expect(wider.resources.Property).toMatchObject({ backfilled: added, upserted: added, removed: 0 });

    await upstream.loginAs('narrow');
    const narrower = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 40, fetch: upstream.fetch });
    await expectReplicaOf(dir, data, ['CRMLS']);
    expect(narrower.resources.Property.removed).toBe(added);
  });

  it('gives an account that sees nothing an empty replica that loads', async () => {
    const data = dataset(30, 'replicate-empty');
    const upstream = await TestUpstream.open(data, { accounts: accountsWith([{ username: 'nobody', sources: ['NoSuchMLS'] }]) });
    await upstream.loginAs('nobody');
    const dir = tempDir();
    const result = await replicate({ from: ORIGIN, token: TOKEN, to: dir, fetch: upstream.fetch });
    expect(result.resources.Property.upserted).toBe(0);
    await expectReplicaOf(dir, data, ['NoSuchMLS']);
  });

  it('leaves out a child whose listing the upstream does not show', async () => {
    const data = dataset(60, 'replicate-orphan');
    const upstream = await TestUpstream.open(data);
    let done = false;
    upstream.intercept = async (url) => {
      if (done || !decodeURIComponent(url).includes('/Media?$orderby=ModificationTimestamp')) return undefined;
      done = true;
      upstream.intercept = null;
      const res = await upstream.fetch(url, { headers: { Authorization: `Bearer ${TOKEN}`, Prefer: 'odata.maxpagesize=20' } });
      const body = (await res.json()) as { value: JsonRecord[] };
      const first = body.value[0];
      body.value.unshift({ ...first, MediaKey: 'O-orphan', ResourceRecordKey: 'P999999999' });
      return new Response(JSON.stringify(body), { status: 200 });
    };
    const dir = tempDir();
    const result = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 20, fetch: upstream.fetch });
    expect(result.resources.Media.orphans).toBe(1);
    expect(upstream.dataUrls().some((u) => u.includes("ListingKey in ('P999999999')"))).toBe(true);
    await expectReplicaOf(dir, data, DEMO_SOURCES);
  });
});

describe('resources without ModificationTimestamp', () => {
  it('orders Media by MediaModificationTimestamp when that is the field the upstream has', async () => {
    const data = dataset(80, 'replicate-media-ts');
    for (const m of data.Media) {
      m.MediaModificationTimestamp = m.ModificationTimestamp;
      delete m.ModificationTimestamp;
    }
    const upstream = await TestUpstream.open(data);
    const dir = tempDir();
    await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 100, fetch: upstream.fetch });
    expect(readState(dir).resources.Media.field).toBe('MediaModificationTimestamp');
    expect(upstream.dataUrls().some((u) => u.includes('/Media?$orderby=MediaModificationTimestamp asc,MediaKey asc'))).toBe(true);
    await expectReplicaOf(dir, data, DEMO_SOURCES);
  });

  it('pulls a resource without any timestamp field in full, by key, on every run', async () => {
    const data = dataset(200, 'replicate-no-ts');
    for (const o of data.OpenHouse) delete o.ModificationTimestamp;
    const upstream = await TestUpstream.open(data);
    const dir = tempDir();
    const first = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 5, fetch: upstream.fetch });
    const n = visible(data, DEMO_SOURCES).OpenHouse.size;
    expect(n).toBeGreaterThan(5);
    expect(first.resources.OpenHouse.upserted).toBe(n);
    expect(readState(dir).resources.OpenHouse).toMatchObject({ field: null });
    expect(upstream.dataUrls().some((u) => u.includes("/OpenHouse?$filter=OpenHouseKey gt '"))).toBe(true);

    const changed = clone(data);
    const o = changed.OpenHouse.find((x) => DEMO_SOURCES.includes(x.OriginatingSystemName as string))!;
    o.OpenHouseRemarks = 'Now with refreshments';
    await upstream.setData(changed);
    const second = await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 5, fetch: upstream.fetch });
    expect(second.resources.OpenHouse.upserted).toBe(n);
    expect(second.resources.Property.upserted).toBe(0);
    await expectReplicaOf(dir, changed, DEMO_SOURCES);
  });
});
