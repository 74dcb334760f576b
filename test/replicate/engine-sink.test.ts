/**
 * Replication into a running Engine (EngineSink) from reso-engine's own /v1 service: a pull into
 * an engine loaded with other data, an upstream changing during the pull, removals with their
 * children, a run stopped by failures and resumed (in the same process, from a state file, and
 * from a snapshot saved with its state), pages applied atomically while queries run, and
 * `reso-engine serve --replicate-from`. Every run ends with the engine holding exactly what the
 * account sees upstream, record for record.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Server } from '../../src/adapters/http.js';
import { Engine, type QueryResource } from '../../src/engine.js';
import type { JsonRecord } from '../../src/generate/listing.js';
import { CATALOG, DERIVED_PROPERTY_FIELDS } from '../../src/schema/catalog.js';
import { EngineSink } from '../../src/replicate/engine-sink.js';
import { ReplicationError } from '../../src/replicate/errors.js';
import { replicate, type ReplicateOptions } from '../../src/replicate/replicate.js';
import { REPLICATED_RESOURCES, type ReplicatedResource } from '../../src/replicate/sink.js';
import { collectCli, startServe } from '../service/helpers.js';
import {
  clone,
  dataset,
  DEMO_SOURCES,
  dropListings,
  entries,
  NOW,
  ORIGIN,
  recordingSleep,
  tempDir,
  TestUpstream,
  TOKEN,
  visible,
  type DataSet,
} from './helpers.js';

const DERIVED = new Set(DERIVED_PROPERTY_FIELDS.map((f) => f.name));
const now = (): Date => new Date(NOW);

/** A record as a data file holds it: no nulls, no empty collections (they read as absent ones), no annotations, none of the fields the engine derives. */
function plain(row: Record<string, unknown>): JsonRecord {
  const out: JsonRecord = {};
  for (const [name, value] of Object.entries(row)) {
    if (value !== null && !(Array.isArray(value) && value.length === 0) && !name.includes('@') && !DERIVED.has(name)) out[name] = value;
  }
  return out;
}

/** The engine's live records by key per resource, as plain records. */
function engineRecords(engine: Engine): Record<ReplicatedResource, Map<string, JsonRecord>> {
  const out = {} as Record<ReplicatedResource, Map<string, JsonRecord>>;
  for (const r of REPLICATED_RESOURCES) {
    const table = engine.store.table(r);
    out[r] = new Map(engine.keys(r).map((k) => [k, plain(table.record(table.rowOfKey(k)))]));
  }
  return out;
}

/** The engine holds exactly what `sources` see of `d`, field for field. */
function expectReplicaOf(engine: Engine, d: DataSet, sources: readonly string[] = DEMO_SOURCES): void {
  const expected = visible(d, sources);
  const held = engineRecords(engine);
  for (const r of REPLICATED_RESOURCES) expect(entries(held[r]), r).toEqual(entries(expected[r]));
}

/** Queries without derived fields or relevance order, answered alike by the upstream (for demo) and a replica. */
const QUERIES: ReadonlyArray<[QueryResource, string]> = [
  ['Property', "$filter=StandardStatus eq 'Active'&$orderby=ListPrice desc,ListingKey&$top=20&$count=true&$select=ListingKey,ListPrice,City"],
  ['Property', "$filter=search.text(KeywordSearchText,'granite pool')&$select=ListingKey&$orderby=ListingKey&$top=200&$count=true"],
  ['Property', '$apply=groupby((OriginatingSystemName,City),aggregate($count as n,ListPrice with max as top))'],
  [
    'Property',
    '$expand=Media($select=MediaKey,Order),OpenHouse($select=OpenHouseKey)&$select=ListingKey&$orderby=ModificationTimestamp desc,ListingKey&$top=30',
  ],
  ['Media', "$filter=MediaCategory eq 'Photo'&$orderby=ModificationTimestamp,MediaKey&$top=100&$count=true"],
  ['OpenHouse', '$orderby=OpenHouseStartTime,OpenHouseKey&$top=1000&$count=true'],
];

function expectAnswersOf(engine: Engine, upstream: Engine): void {
  for (const [resource, q] of QUERIES)
    expect(engine.query(resource, q).value, `${resource} ${q}`).toEqual(upstream.query(resource, q, { sources: DEMO_SOURCES }).value);
}

/**
 * The target: a running engine loaded with another data set (same generator, so every field the
 * upstream sends is there). Its keys overlap the upstream's (P000000001...): those records are
 * replaced, the others removed.
 */
const target = (): Promise<Engine> => Engine.open({ data: dataset(100, 'engine-sink-seed'), now });

const run = (upstream: TestUpstream, sink: EngineSink, options: Partial<ReplicateOptions> = {}): ReturnType<typeof replicate> =>
  replicate({ from: ORIGIN, token: TOKEN, sink, pageSize: 40, fetch: upstream.fetch, ...options });

describe('replicating into a running engine', () => {
  it("ends with exactly the records the account sees upstream, the target's own records removed", async () => {
    const data = dataset(200, 'engine-sink-pull');
    const upstream = await TestUpstream.open(data);
    const engine = await target();
    const seed = engineRecords(engine);
    const sink = new EngineSink(engine);
    const result = await run(upstream, sink);
    expectReplicaOf(engine, data);
    expectAnswersOf(engine, upstream.engine);
    const expected = visible(data, DEMO_SOURCES);
    // every seed listing the upstream does not show was removed with its children, and counted so
    const goneListings = [...seed.Property.keys()].filter((k) => !expected.Property.has(k));
    expect(goneListings.length).toBeGreaterThan(10);
    expect(result.resources.Property.removed).toBe(goneListings.length);
    for (const r of ['Media', 'OpenHouse'] as const) {
      const gone = [...seed[r].keys()].filter((k) => !expected[r].has(k)).length;
      expect(result.resources[r].removed, r).toBe(gone);
    }
    expect(sink.readState()).toMatchObject({ status: 'complete', from: `${ORIGIN}/v1/listings/data` });

    // a second run, with the state in memory, is incremental: nothing fetched, nothing changed
    const generation = engine.generation;
    const again = await run(upstream, sink);
    for (const r of REPLICATED_RESOURCES) expect(again.resources[r]).toMatchObject({ upserted: 0, removed: 0, pages: 0 });
    expect(engine.generation).toBe(generation);
  });

  it("ends with the upstream's final state when the upstream changes during the pull", async () => {
    const base = dataset(240, 'engine-sink-changes');
    const pool = dataset(20, 'engine-sink-new');
    const versions = [base];
    for (let step = 1; step <= 12; step++) versions.push(nextVersion(versions[step - 1], step, pool));
    const upstream = await TestUpstream.open(base);
    let pages = 0;
    let version = 0;
    // the next version before every third changes page
    upstream.intercept = async (url) => {
      if (!decodeURIComponent(url).includes('$orderby=ModificationTimestamp asc')) return undefined;
      if (++pages % 3 === 0 && version + 1 < versions.length) await upstream.setData(versions[++version]);
      return undefined;
    };
    const engine = await target();
    const result = await run(upstream, new EngineSink(engine));
    expect(version).toBe(versions.length - 1);
    expectReplicaOf(engine, versions[version]);
    expect(result.resources.Property.removed).toBeGreaterThan(0);
    expect(result.resources.Media.removed).toBeGreaterThan(0);
    expect(result.resources.Property.backfilled).toBeGreaterThan(0);
  });

  it('removes what the upstream removed: listings with their children, and children alone', async () => {
    const v1 = dataset(160, 'engine-sink-removals');
    const upstream = await TestUpstream.open(v1);
    const engine = await target();
    const sink = new EngineSink(engine);
    await run(upstream, sink);
    expectReplicaOf(engine, v1);

    const v2 = clone(v1);
    const mine = v2.Property.filter((p) => DEMO_SOURCES.includes(p.OriginatingSystemName as string));
    const withChildren = mine.filter(
      (p) => v2.Media.some((m) => m.ResourceRecordKey === p.ListingKey) && v2.OpenHouse.some((o) => o.ListingKey === p.ListingKey),
    );
    const deleted = withChildren.slice(0, 3).map((p) => p.ListingKey as string);
    dropListings(v2, deleted);
    const lostMedia = new Set(
      v2.Media.filter((m) => mine.some((p) => p.ListingKey === m.ResourceRecordKey))
        .slice(0, 7)
        .map((m) => m.MediaKey),
    );
    v2.Media = v2.Media.filter((m) => !lostMedia.has(m.MediaKey));
    await upstream.setData(v2);

    const before = engineRecords(engine);
    const result = await run(upstream, sink);
    expectReplicaOf(engine, v2);
    for (const k of deleted) expect(engine.has('Property', k)).toBe(false);
    const childrenOf = (r: 'Media' | 'OpenHouse'): number =>
      [...before[r].values()].filter((c) => deleted.includes(c[CATALOG[r].parent!.field] as string)).length;
    expect(deleted.length).toBe(2);
    expect(childrenOf('OpenHouse')).toBeGreaterThanOrEqual(2);
    expect(result.resources.Property).toMatchObject({ removed: 2, upserted: 0 });
    expect(result.resources.Media).toMatchObject({ removed: childrenOf('Media') + 7, upserted: 0 });
    expect(result.resources.OpenHouse).toMatchObject({ removed: childrenOf('OpenHouse'), upserted: 0 });
  });

  it('counts each removal once: children of removed listings, absent and repeated keys', async () => {
    const data = dataset(120, 'engine-sink-remove');
    const engine = await Engine.open({ data, now });
    const sink = new EngineSink(engine);
    const listing = data.Property.find(
      (p) => data.OpenHouse.some((o) => o.ListingKey === p.ListingKey) && data.Media.filter((m) => m.ResourceRecordKey === p.ListingKey).length > 1,
    )!;
    const key = listing.ListingKey as string;
    const media = data.Media.filter((m) => m.ResourceRecordKey === key);
    // one of its media removed first: not counted again with its listing
    expect(await sink.remove('Media', [media[0].MediaKey as string, 'no-such-media'])).toEqual({ Media: 1 });
    const counts = await sink.remove('Property', [key, key, 'P999999999']);
    expect(counts).toEqual({
      Property: 1,
      Media: media.length - 1,
      OpenHouse: data.OpenHouse.filter((o) => o.ListingKey === key).length,
    });
    expect(await sink.remove('Property', [key])).toEqual({});
    expect(engine.keys('Media').length).toBe(data.Media.length - media.length);
  });

  it('rejects a record the engine cannot hold as a BadRecord naming it and the page, applying nothing of the page', async () => {
    const engine = await Engine.open({ data: dataset(10, 'engine-sink-bad'), now });
    const sink = new EngineSink(engine);
    const generation = engine.generation;
    const good = { ...dataset(10, 'engine-sink-bad').Property[1], ListingKey: 'PNEW1' };
    const err = await sink
      .upsert('Property', [good, { ...good, ListingKey: 'PNEW2', ListPrice: 'a lot' }], 'http://up.test/Property?page')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReplicationError);
    expect(err).toMatchObject({ code: 'BadRecord', url: 'http://up.test/Property?page' });
    expect((err as Error).message).toContain("Property 'PNEW2' cannot be stored");
    expect(engine.has('Property', 'PNEW1')).toBe(false);
    expect(engine.generation).toBe(generation);

    // a field the engine's table lacks (none of its records had it) is added by the page
    const bare = dataset(10, 'engine-sink-bare');
    for (const p of bare.Property) delete p.PublicRemarks;
    const narrowEngine = await Engine.open({ data: bare, now });
    const narrow = new EngineSink(narrowEngine);
    await narrow.upsert(
      'Property',
      [
        { ...good, ListingKey: 'PNEW3', PublicRemarks: undefined },
        { ...good, ListingKey: 'PNEW4' },
      ],
      'http://up.test/p2',
    );
    expect(narrowEngine.query('Property', "$filter=ListingKey eq 'PNEW4'&$select=PublicRemarks").value).toEqual([
      { ListingKey: 'PNEW4', PublicRemarks: (good as Record<string, unknown>).PublicRemarks },
    ]);
    // a value whose type the table's field cannot hold is a SchemaMismatch: the page is refused whole
    const local = dataset(10, 'engine-sink-local');
    local.Property.forEach((p, i) => (p.X_Count = i));
    const typed = new EngineSink(await Engine.open({ data: local, now }));
    const mixed = [
      { ...good, ListingKey: 'PNEW5', X_Count: 1 },
      { ...good, ListingKey: 'PNEW6', X_Count: 'many' },
    ];
    await expect(typed.upsert('Property', mixed, 'http://up.test/p3')).rejects.toThrow(
      /^Property 'PNEW6' cannot be stored: .*X_Count.*nothing of the page was applied/,
    );
  });
});

describe("an engine kept up to date by the upstream's EntityEvent", () => {
  it('records the log position in its state file; a new sink over it runs incrementally: removals and changes, no key listing', async () => {
    const data = dataset(120, 'engine-sink-events');
    const upstream = await TestUpstream.open(clone(data));
    const engine = await target();
    const stateFile = path.join(tempDir(), 'state.json');
    expect((await run(upstream, new EngineSink(engine, { stateFile }))).incremental).toBe(false);
    const seq = (JSON.parse(readFileSync(stateFile, 'utf8')) as { events: { sequence: number } }).events.sequence;
    expect(seq).toBeGreaterThan(0);
    const listings = data.Property.filter((p) => DEMO_SOURCES.includes(p.OriginatingSystemName as string));
    const changed: JsonRecord = { ...listings[0], PublicRemarks: 'Changed, same timestamp' };
    await upstream.engine.upsert('Property', [changed]);
    await upstream.engine.remove('Property', [listings[1].ListingKey as string]);
    const next = clone(data);
    next.Property = next.Property.map((p) => (p.ListingKey === changed.ListingKey ? changed : p));
    dropListings(next, [listings[1].ListingKey as string]);
    const result = await run(upstream, new EngineSink(engine, { stateFile }));
    expect(result.incremental).toBe(true);
    for (const r of REPLICATED_RESOURCES) expect(result.resources[r].keyPages, r).toBe(0);
    expectReplicaOf(engine, next);
  });
});

describe('resuming into an engine', () => {
  it('continues a run stopped by failures, in the same process, from a state file and from a saved snapshot', async () => {
    const data = dataset(200, 'engine-sink-resume');
    const upstream = await TestUpstream.open(data);
    const dir = tempDir();
    const stateFile = path.join(dir, 'state.json');
    const engine = await target();
    const seed = engineRecords(engine);
    const sink = new EngineSink(engine, { stateFile });

    // the network goes away after 20 data pages (during the Media pass)
    let pages = 0;
    upstream.intercept = (url) => {
      if (!url.includes('$metadata') && ++pages > 20) throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') });
      return undefined;
    };
    const { sleep } = recordingSleep();
    const failed = await run(upstream, sink, { sleep, maxRetries: 1 }).catch((e: unknown) => e);
    expect(failed).toMatchObject({ code: 'NetworkError' });
    const stopped = sink.readState()!;
    expect(stopped.status).toBe('running');
    expect(stopped.resources.Media!.cursor).not.toBeNull();
    // the file holds the state of the last commit
    expect(JSON.parse(readFileSync(stateFile, 'utf8'))).toEqual(stopped);
    // every record the engine holds is the upstream's or still the target's own (not reconciled yet)
    const expected = visible(data, DEMO_SOURCES);
    const partial = engineRecords(engine);
    const pulled = (r: ReplicatedResource): number =>
      [...partial[r]].filter(([k, rec]) => expect.objectContaining(rec).asymmetricMatch(expected[r].get(k)) && rec !== seed[r].get(k)).length;
    for (const r of REPLICATED_RESOURCES) {
      for (const [k, rec] of partial[r]) expect([expected[r].get(k), seed[r].get(k)], `${r} ${k}`).toContainEqual(rec);
    }
    expect(pulled('Property')).toBe(expected.Property.size);
    expect(pulled('Media')).toBeGreaterThan(0);
    expect(pulled('Media')).toBeLessThan(expected.Media.size);

    // a snapshot and its state, saved now; then the commits of later runs never touch the pair
    const snapshot = path.join(dir, 'engine.snapshot');
    await sink.save(snapshot);
    const pair = readFileSync(EngineSink.stateFileOf(snapshot), 'utf8');
    expect(JSON.parse(pair)).toEqual(stopped);

    upstream.intercept = null;
    // 1. another sink over the same engine, resuming from the state file (a restarted replicator)
    const fromFile = new EngineSink(engine, { stateFile });
    expect(fromFile.readState()).toEqual(stopped);
    const resumed = await run(upstream, fromFile);
    expect(resumed.resumed).toBe(true);
    expect(resumed.resources.Property.pages).toBe(0);
    expect(resumed.resources.Media.upserted).toBeLessThan(expected.Media.size);
    expectReplicaOf(engine, data);
    expect(JSON.parse(readFileSync(stateFile, 'utf8')).status).toBe('complete');

    // 2. the snapshot and its state, opened in a new engine (a restarted process)
    const restored = await EngineSink.openSnapshot(snapshot, { now });
    expect(restored.readState()).toEqual(stopped);
    expect(engineRecords(restored.engine)).toEqual(partial);
    const again = await run(upstream, restored);
    expect(again.resumed).toBe(true);
    expect(again.resources.Property.pages).toBe(0);
    expectReplicaOf(restored.engine, data);
    expect(readFileSync(EngineSink.stateFileOf(snapshot), 'utf8')).toBe(pair);

    // a snapshot of an engine without any commit has no state beside it
    const fresh = new EngineSink(await target());
    await fresh.save(snapshot);
    expect(existsSync(EngineSink.stateFileOf(snapshot))).toBe(false);
    expect((await EngineSink.openSnapshot(snapshot)).readState()).toBeNull();
  });

  it('refuses an unreadable state file', async () => {
    const file = path.join(tempDir(), 'state.json');
    writeFileSync(file, '{"version":1,"from":"http://x","status":"done","resources":{}}');
    const sink = new EngineSink(await Engine.open({ data: dataset(5, 'engine-sink-state'), now }), { stateFile: file });
    expect(() => sink.readState()).toThrow(expect.objectContaining({ code: 'BadState' }));
  });
});

describe('queries during replication', () => {
  it('never see a half-applied page: each page is one change, seen whole or not at all', async () => {
    const data = dataset(300, 'engine-sink-atomic');
    const upstream = await TestUpstream.open(data);
    // no compaction of its own: every generation counted here is a page's change
    const engine = await Engine.open({ data: dataset(100, 'engine-sink-seed'), now, compactFraction: false });
    const seen: Array<{ resource: ReplicatedResource; records: number; before: number; during: number[]; after: number; generations: number }> = [];
    const count = (r: ReplicatedResource): number => engine.query(r, '$top=0&$count=true')['@odata.count']!;
    class Watched extends EngineSink {
      override async upsert(resource: ReplicatedResource, records: readonly JsonRecord[], source: string): Promise<void> {
        const before = count(resource);
        const generation = engine.generation;
        let done = false;
        const applying = super.upsert(resource, records, source).finally(() => (done = true));
        const during: number[] = [];
        // queries keep running while the change applies (the engine yields between chunks)
        while (!done) {
          during.push(count(resource));
          await new Promise((resolve) => setImmediate(resolve));
        }
        await applying;
        seen.push({ resource, records: records.length, before, during, after: count(resource), generations: engine.generation - generation });
      }
    }
    await run(upstream, new Watched(engine), { pageSize: 1500 });
    expectReplicaOf(engine, data);
    // pages of more than one chunk (512 records) are applied in several steps
    const big = seen.filter((s) => s.records > 512);
    expect(big.length).toBeGreaterThanOrEqual(2);
    expect(big.filter((s) => s.after !== s.before).length).toBeGreaterThanOrEqual(1);
    for (const s of seen) {
      expect(s.generations, s.resource).toBe(1);
      for (const n of s.during) expect([s.before, s.after], s.resource).toContain(n);
    }
    expect(big.reduce((n, s) => n + s.during.length, 0)).toBeGreaterThan(big.length);
  });
});

describe('reso-engine serve --replicate-from', () => {
  let upstream: TestUpstream;
  let server: Server;

  beforeAll(async () => {
    upstream = await TestUpstream.open(dataset(150, 'engine-sink-serve'));
    // the in-process upstream over HTTP; TOKEN stands for a token of its current data set
    server = await serve(
      async (request) => {
        const headers: Record<string, string> = {};
        request.headers.forEach((value, name) => (headers[name === 'authorization' ? 'Authorization' : name] = value));
        return upstream.fetch(request.url, { headers });
      },
      { port: 0, host: '127.0.0.1' },
    );
  });

  afterAll(async () => {
    await server?.close();
  });

  it("serves the upstream's data, retries a failed pass and follows later changes", async () => {
    const v1 = dataset(150, 'engine-sink-serve');
    // the first pass fails ($metadata answers 500)
    upstream.intercept = (_url, n) => (n === 1 ? new Response('{"error":{"code":"Down","message":"maintenance"}}', { status: 500 }) : undefined);
    // the embedded data set (2,000 listings, every field the generator writes, the demo accounts)
    // becomes a replica of the upstream's 150 as demo sees them
    let release!: () => void;
    const gate = new Promise<undefined>((resolve) => (release = () => resolve(undefined)));
    const served = await startServe(
      ['--port', '0', '--now', '2025-06-01T00:00:00Z', '--replicate-from', server.url, '--replicate-token', TOKEN, '--replicate-every', '1'],
      '2,000',
    );
    try {
      expect(served.out()).toContain(`replicating ${server.url}/v1/listings/data every 1 s`);
      await waitFor(served.err, /replication from .* failed: HttpError: the upstream answered 500: Down: maintenance/);
      await waitFor(served.err, /replicated .* Property \+\d+ -\d+/);
      await expectServed(served.url, v1);

      const v2 = clone(v1);
      const gone = v2.Property.filter((p) => DEMO_SOURCES.includes(p.OriginatingSystemName as string))
        .slice(0, 4)
        .map((p) => p.ListingKey as string);
      dropListings(v2, gone);
      const changed = v2.Property.find((p) => DEMO_SOURCES.includes(p.OriginatingSystemName as string))!;
      Object.assign(changed, { ListPrice: 1_234_567, ModificationTimestamp: new Date(NOW + 60_000).toISOString() });
      await upstream.setData(v2);
      // a pass that began before the change may see only part of it: the next one sees the rest
      await eventually(() => expectServed(served.url, v2));

      // SIGTERM while a pass waits on a stalled upstream: the pass is aborted, the server exits
      let stalled = false;
      upstream.intercept = () => {
        stalled = true;
        return gate;
      };
      await eventually(async () => expect(stalled).toBe(true));
      served.child.kill('SIGTERM');
      expect(await served.exited).toBe(0);
      expect(served.err()).toContain('stopped');
      expect(served.err()).not.toMatch(/failed: (NetworkError|AbortError)/);
    } finally {
      if (served.child.exitCode === null) served.child.kill('SIGKILL');
      upstream.intercept = null;
      release();
    }
  });

  it('checks its arguments', async () => {
    const [noToken, noFrom, every, url] = await Promise.all([
      collectCli(['serve', '--replicate-from', server.url]),
      collectCli(['serve', '--replicate-token', 'x']),
      collectCli(['serve', '--replicate-from', server.url, '--replicate-token', 'x', '--replicate-every', '0']),
      collectCli(['serve', '--replicate-from', 'ftp://x', '--replicate-token', 'x']),
    ]);
    expect(noToken).toMatchObject({ code: 2 });
    expect(noToken.err).toContain('--replicate-from needs --replicate-token TOKEN');
    expect(noFrom.err).toContain('--replicate-token and --replicate-every go with --replicate-from URL');
    expect(every.err).toContain('--replicate-every takes an integer of at least 1');
    expect(url).toMatchObject({ code: 1 });
    expect(url.err).toContain("InvalidArgument: the upstream URL 'ftp://x' is not an http(s) URL");
  });
});

/** Waits until `text()` matches (the child's stderr), for up to 30 s. */
async function waitFor(text: () => string, pattern: RegExp): Promise<void> {
  for (let waited = 0; !pattern.test(text()); waited += 50) {
    if (waited > 30_000) throw new Error(`no ${pattern} in:\n${text()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Runs `check` until it passes, for up to 30 s. */
async function eventually(check: () => Promise<void>): Promise<void> {
  for (let waited = 0; ; waited += 200) {
    try {
      return await check();
    } catch (err) {
      if (waited > 30_000) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function loginTo(url: string, username: string): Promise<string> {
  const res = await fetch(`${url}/v1/token`, { method: 'POST', body: new URLSearchParams({ username, password: `${username}-password` }) });
  return ((await res.json()) as { access_token: string }).access_token;
}

/** Every record the served engine shows demo, following nextLinks, as plain records. */
async function servedRecords(url: string, token: string, resource: ReplicatedResource): Promise<Map<string, JsonRecord>> {
  const out = new Map<string, JsonRecord>();
  let next: string | undefined = `${url}/v1/listings/data/${resource}?$orderby=${CATALOG[resource].key}`;
  while (next !== undefined) {
    const res = await fetch(next, { headers: { authorization: `Bearer ${token}`, prefer: 'odata.maxpagesize=1000' } });
    const body = (await res.json()) as { value: Array<Record<string, unknown>>; '@odata.nextLink'?: string };
    for (const row of body.value) out.set(row[CATALOG[resource].key] as string, plain(row));
    next = body['@odata.nextLink'];
  }
  return out;
}

/** The served engine holds what demo sees of `d` upstream: demo sees it all, and nothing else is left. */
async function expectServed(url: string, d: DataSet): Promise<void> {
  const expected = visible(d, DEMO_SOURCES);
  const demo = await loginTo(url, 'demo');
  for (const r of REPLICATED_RESOURCES) expect(entries(await servedRecords(url, demo, r)), r).toEqual(entries(expected[r]));
  // partner sees HAR, MRED, ...: of the served listings only the HAR ones are left
  const partner = await servedRecords(url, await loginTo(url, 'partner'), 'Property');
  expect([...partner.keys()].sort()).toEqual(
    [...expected.Property.values()]
      .filter((p) => p.OriginatingSystemName === 'HAR')
      .map((p) => p.ListingKey)
      .sort(),
  );
}

/**
 * The next version of an upstream data set: its three oldest visible listings and media modified
 * (they move behind the cursor), one listing removed with its children, one media removed, and a
 * listing of `pool` added under a new key with its media (stamped now, so a Media page may bring
 * them before the listing's own page: the replicator fetches the listing by key).
 */
function nextVersion(d: DataSet, step: number, pool: DataSet): DataSet {
  const next = clone(d);
  const at = new Date(NOW + step * 60_000).toISOString();
  const oldest = <T extends JsonRecord>(records: T[]): T[] =>
    [...records].sort((a, b) => String(a.ModificationTimestamp).localeCompare(String(b.ModificationTimestamp)));
  const mine = oldest(next.Property.filter((p) => DEMO_SOURCES.includes(p.OriginatingSystemName as string)));
  for (const p of mine.slice(0, 3)) Object.assign(p, { ModificationTimestamp: at, ListPrice: (p.ListPrice as number) + step });
  dropListings(next, [mine[3 + step].ListingKey as string]);
  const keys = new Set(mine.map((p) => p.ListingKey));
  const media = oldest(next.Media.filter((m) => keys.has(m.ResourceRecordKey)));
  for (const m of media.slice(0, 3)) Object.assign(m, { ModificationTimestamp: at, MediaURL: `${m.MediaURL as string}?v=${step}` });
  next.Media = next.Media.filter((m) => m !== media[20 + step]);
  const source = pool.Property[step];
  const key = `N${String(step).padStart(9, '0')}`;
  next.Property.push({ ...source, ListingKey: key, ListingId: `N${step}`, OriginatingSystemName: 'HAR', ModificationTimestamp: at });
  for (const m of pool.Media.filter((x) => x.ResourceRecordKey === source.ListingKey)) {
    next.Media.push({ ...m, MediaKey: `${key}-${m.MediaKey as string}`, ResourceRecordKey: key, ModificationTimestamp: at });
  }
  return next;
}
