/**
 * Shared fixtures of the replication tests: reso-engine's own /v1 service as the upstream,
 * in-process (createHandler behind a fetch function), with data sets that can be swapped while a
 * replication runs; the records an account should end up with; and what a replica holds.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_DATA_DIR, Engine } from '../../src/engine.js';
import { generateListings, generateRoster, hashPassword } from '../../src/generate/dataset.js';
import type { JsonRecord } from '../../src/generate/listing.js';
import type { FetchLike } from '../../src/replicate/upstream.js';
import { REPLICATED_RESOURCES, type ReplicatedResource } from '../../src/replicate/sink.js';
import { CATALOG } from '../../src/schema/catalog.js';
import { createHandler, type Handler, type HandlerOptions } from '../../src/service/handler.js';
import { login, NOW, quickAccounts, TestClock } from '../service/helpers.js';

export { DEMO_SOURCES, NOW } from '../service/helpers.js';
/** A new temporary directory, removed after the test file. */
export { tempDir } from '../store/helpers.js';

export const ORIGIN = 'http://upstream.test';
/** The token replication sends; the test upstream swaps it for a real one of the current data set's handler. */
export const TOKEN = 'replication-test-token';

export interface DataSet {
  Property: JsonRecord[];
  Media: JsonRecord[];
  OpenHouse: JsonRecord[];
  PropertyChange: JsonRecord[];
  Member: JsonRecord[];
  Office: JsonRecord[];
}

/** A generated data set as records (copies: tests may change them). */
export function dataset(listings: number, seed: string): DataSet {
  const roster = generateRoster({ listings, seed });
  const out: DataSet = { Property: [], Media: [], OpenHouse: [], PropertyChange: [], Member: roster.members, Office: roster.offices };
  for (const l of generateListings({ listings, seed })) {
    out.Property.push({ ...l.property });
    out.Media.push(...l.media.map((m) => ({ ...m })));
    out.OpenHouse.push(...l.openHouses.map((o) => ({ ...o })));
    out.PropertyChange.push(...l.changes.map((c) => ({ ...c })));
  }
  return out;
}

export const clone = (d: DataSet): DataSet => ({
  Property: d.Property.map((r) => ({ ...r })),
  Media: d.Media.map((r) => ({ ...r })),
  OpenHouse: d.OpenHouse.map((r) => ({ ...r })),
  PropertyChange: d.PropertyChange.map((r) => ({ ...r })),
  Member: d.Member.map((r) => ({ ...r })),
  Office: d.Office.map((r) => ({ ...r })),
});

/** Removes listings and everything that belongs to them. */
export function dropListings(d: DataSet, keys: Iterable<string>): void {
  const gone = new Set(keys);
  d.Property = d.Property.filter((p) => !gone.has(p.ListingKey as string));
  d.Media = d.Media.filter((m) => !gone.has(m.ResourceRecordKey as string));
  d.OpenHouse = d.OpenHouse.filter((o) => !gone.has(o.ListingKey as string));
  d.PropertyChange = d.PropertyChange.filter((c) => !gone.has(c.ListingKey as string));
}

/** What an account with these sources should hold after replicating `d`: records by key per resource. */
export function visible(d: DataSet, sources: readonly string[]): Record<ReplicatedResource, Map<string, JsonRecord>> {
  const listings = new Map(d.Property.filter((p) => sources.includes(p.OriginatingSystemName as string)).map((p) => [p.ListingKey as string, p]));
  return {
    Property: listings,
    Media: new Map(d.Media.filter((m) => listings.has(m.ResourceRecordKey as string)).map((m) => [m.MediaKey as string, m])),
    OpenHouse: new Map(d.OpenHouse.filter((o) => listings.has(o.ListingKey as string)).map((o) => [o.OpenHouseKey as string, o])),
    Member: new Map(d.Member.filter((m) => sources.includes(m.OriginatingSystemName as string)).map((m) => [m.MemberKey as string, m])),
    Office: new Map(d.Office.filter((o) => sources.includes(o.OriginatingSystemName as string)).map((o) => [o.OfficeKey as string, o])),
  };
}

/** The default data set (fixtures/default) as records, PropertyChange left out. */
export function defaultFixture(): DataSet {
  const read = (file: string): JsonRecord[] =>
    readFileSync(path.join(DEFAULT_DATA_DIR, file), 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as JsonRecord);
  return {
    Property: read('Property.jsonl'),
    Media: read('Media.jsonl'),
    OpenHouse: read('OpenHouse.jsonl'),
    PropertyChange: [],
    Member: read('Member.jsonl'),
    Office: read('Office.jsonl'),
  };
}

/** A replica's records by key per resource, read from its files (duplicate keys fail). */
export function replicaRecords(dir: string): Record<ReplicatedResource, Map<string, JsonRecord>> {
  const out = {} as Record<ReplicatedResource, Map<string, JsonRecord>>;
  for (const r of REPLICATED_RESOURCES) {
    const map = new Map<string, JsonRecord>();
    let text = '';
    try {
      text = readFileSync(path.join(dir, `${r}.jsonl`), 'utf8');
    } catch {
      // no file: no records
    }
    for (const line of text.split('\n')) {
      if (line === '') continue;
      const rec = JSON.parse(line) as JsonRecord;
      const key = rec[CATALOG[r].key] as string;
      if (map.has(key)) throw new Error(`${r} ${key} appears twice in the replica`);
      map.set(key, rec);
    }
    out[r] = map;
  }
  return out;
}

/** Sorted [key, record] pairs, for toEqual with a readable diff. */
export const entries = (m: Map<string, JsonRecord>): Array<[string, JsonRecord]> => [...m].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

export const readState = (dir: string): any => JSON.parse(readFileSync(path.join(dir, '.replication.json'), 'utf8')); // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * reso-engine's /v1 service over a data set that can be replaced at any time. Requests carrying
 * TOKEN are sent with a real token of the current handler; any other token is passed as it is.
 * `intercept` sees every request first and may answer it itself (errors, malformed bodies) or
 * change the data set before it is served.
 */
export class TestUpstream {
  readonly clock = new TestClock();
  /** Every URL requested, in order. */
  readonly urls: string[] = [];
  intercept: ((url: string, n: number) => Promise<Response | undefined> | Response | undefined) | null = null;
  private current!: { handler: Handler; token: string; engine: Engine };

  /** The account whose token TOKEN stands for (default demo). */
  username = 'demo';

  private constructor(private readonly handlerOptions: Partial<HandlerOptions>) {}

  static async open(data: DataSet | Engine, handlerOptions: Partial<HandlerOptions> = {}): Promise<TestUpstream> {
    const u = new TestUpstream(handlerOptions);
    await u.setData(data);
    return u;
  }

  /** From the next request on, TOKEN stands for this account of `accountsWith`. */
  async loginAs(username: string): Promise<void> {
    this.username = username;
    this.current = { ...this.current, token: await login(this.current.handler, username) };
  }

  get engine(): Engine {
    return this.current.engine;
  }

  /** Serves `data` from the next request on. */
  async setData(data: DataSet | Engine): Promise<void> {
    const engine = data instanceof Engine ? data : await Engine.open({ data, now: () => new Date(NOW) });
    const handler = createHandler({ engine, accounts: accountsWith([]), clock: this.clock.now, onError: () => undefined, ...this.handlerOptions });
    this.current = { handler, engine, token: await login(handler, this.username) };
  }

  readonly fetch: FetchLike = async (url, init) => {
    this.urls.push(url);
    const answer = await this.intercept?.(url, this.urls.length);
    if (answer !== undefined) return answer;
    const headers = { ...init.headers };
    if (headers.Authorization === `Bearer ${TOKEN}`) headers.Authorization = `Bearer ${this.current.token}`;
    return this.current.handler(new Request(url, { headers }));
  };

  /** The URLs of data pages (collections), decoded, in order. */
  dataUrls(): string[] {
    return this.urls.filter((u) => !u.includes('$metadata')).map((u) => decodeURIComponent(u));
  }
}

/** demo and partner (quickAccounts) plus accounts with other sources; passwords are `<username>-password`. */
export function accountsWith(extra: ReadonlyArray<{ username: string; sources: string[] }>): {
  accounts: Array<{ username: string; password_hash: string; sources: string[] }>;
} {
  const base = quickAccounts();
  for (const a of extra) {
    base.accounts.push({
      username: a.username,
      password_hash: hashPassword(`${a.username}-password`, Buffer.from(a.username.padEnd(16, '.')), 1024, 8, 1),
      sources: a.sources,
    });
  }
  return base;
}

/** A no-op sleep that records what it was asked to wait. */
export function recordingSleep(): { sleep: (ms: number) => Promise<void>; waits: number[] } {
  const waits: number[] = [];
  return { waits, sleep: async (ms) => void waits.push(ms) };
}
