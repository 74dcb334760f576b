/**
 * Every failure is a ReplicationError with a stable code and the URL it concerns, and none leaves
 * the target unloadable or half-written; transient answers (429, 503, network) are retried with
 * backoff or as long as Retry-After says, within bounds, through the injected sleep.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import type { JsonRecord } from '../../src/generate/listing.js';
import { ReplicationError } from '../../src/replicate/errors.js';
import { replicate, type ReplicateOptions } from '../../src/replicate/replicate.js';
import type { FetchLike } from '../../src/replicate/upstream.js';
import { dataset, DEMO_SOURCES, entries, NOW, ORIGIN, readState, recordingSleep, replicaRecords, tempDir, TestUpstream, TOKEN, visible } from './helpers.js';

const DATA = dataset(60, 'replicate-errors');
const EXPECTED = visible(DATA, DEMO_SOURCES);

async function upstreamOf(): Promise<TestUpstream> {
  return TestUpstream.open(DATA, { tokenLifetimeSeconds: 600 });
}

function run(u: TestUpstream, dir: string, extra: Partial<ReplicateOptions> = {}): Promise<unknown> {
  const { sleep } = recordingSleep();
  return replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 20, fetch: u.fetch, sleep, ...extra });
}

/** Runs to a ReplicationError and returns it. */
async function failure(promise: Promise<unknown>): Promise<ReplicationError> {
  const e = await promise.then(
    () => null,
    (err: unknown) => err,
  );
  if (!(e instanceof ReplicationError)) throw new Error(`expected a ReplicationError, got ${String(e)}`);
  return e;
}

/** A changes page of `resource` (any cursor). */
const isPage = (url: string, resource: string): boolean => {
  const u = decodeURIComponent(url);
  return u.includes(`/${resource}?`) && u.includes('$orderby=ModificationTimestamp');
};

/** Answers the first changes page of `resource` with `edit` applied to the real page's body. */
function editPage(u: TestUpstream, resource: string, edit: (body: { value: JsonRecord[] }) => string): void {
  u.intercept = async (url) => {
    if (!isPage(url, resource)) return undefined;
    u.intercept = null;
    const res = await u.fetch(url, { headers: { Authorization: `Bearer ${TOKEN}`, Prefer: 'odata.maxpagesize=20' } });
    return new Response(edit((await res.json()) as { value: JsonRecord[] }), { status: 200, headers: { 'Content-Type': 'application/json' } });
  };
}

/** The target holds nothing a loader could trip on: no data files, or a replica that loads. */
async function expectLoadable(dir: string): Promise<void> {
  const names = readdirSync(dir);
  expect(names.filter((n) => n.includes('.tmp') || n.includes('staging') || n.endsWith('.lock'))).toEqual([]);
  if (names.includes('Property.jsonl')) await Engine.open({ data: dir });
}

describe('upstream errors', () => {
  it('401: a bad token is Unauthorized, naming the URL, before anything is written', async () => {
    const u = await upstreamOf();
    const dir = tempDir();
    const e = await failure(replicate({ from: ORIGIN, token: 'not-a-token', to: dir, fetch: u.fetch }));
    expect(e).toMatchObject({ code: 'Unauthorized', status: 401, url: `${ORIGIN}/v1/listings/data/$metadata` });
    expect(e.message).toContain('InvalidToken');
    expect(e.message).not.toContain('not-a-token');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('401 midway (the token expired): what was applied is kept, and a new token resumes', async () => {
    const u = await upstreamOf();
    let pages = 0;
    u.intercept = (url) => {
      if (isPage(url, 'Media') && ++pages === 3) u.clock.advance(3600);
      return undefined;
    };
    const dir = tempDir();
    const e = await failure(run(u, dir, { flushRecords: 10 }));
    expect(e).toMatchObject({ code: 'Unauthorized', status: 401 });
    expect(decodeURIComponent(e.url!)).toContain('/Media?');
    expect(readState(dir)).toMatchObject({ status: 'running' });
    expect(replicaRecords(dir).Property.size).toBe(EXPECTED.Property.size);
    await expectLoadable(dir);
    u.intercept = null;
    await u.loginAs('demo');
    await run(u, dir);
    expect(entries(replicaRecords(dir).Media)).toEqual(entries(EXPECTED.Media));
  });

  it("4xx: an unknown path is an HttpError with the status and the upstream's own code", async () => {
    const u = await upstreamOf();
    const e = await failure(replicate({ from: `${ORIGIN}/odata`, token: TOKEN, to: tempDir(), fetch: u.fetch }));
    expect(e).toMatchObject({ code: 'HttpError', status: 404, url: `${ORIGIN}/odata/$metadata` });
    expect(e.message).toContain('NotFound');
  });

  it('5xx: a 500 is an HttpError at once, not retried', async () => {
    const u = await upstreamOf();
    u.intercept = (url) => (isPage(url, 'Media') ? new Response('{"error":{"code":"InternalError","message":"boom"}}', { status: 500 }) : undefined);
    const dir = tempDir();
    const e = await failure(run(u, dir));
    expect(e).toMatchObject({ code: 'HttpError', status: 500 });
    expect(e.message).toContain('InternalError: boom');
    expect(u.urls.filter((x) => isPage(x, 'Media'))).toHaveLength(1);
    await expectLoadable(dir);
  });

  it('a network failure is retried with backoff, then a NetworkError', async () => {
    const u = await upstreamOf();
    const failing: FetchLike = () => Promise.reject(new TypeError('fetch failed', { cause: new Error('getaddrinfo ENOTFOUND upstream.test') }));
    const { sleep, waits } = recordingSleep();
    const e = await failure(replicate({ from: ORIGIN, token: TOKEN, to: tempDir(), fetch: failing, sleep, maxRetries: 3 }));
    expect(e).toMatchObject({ code: 'NetworkError', url: `${ORIGIN}/v1/listings/data/$metadata` });
    expect(e.message).toContain('ENOTFOUND');
    expect(e.message).toContain('after 4 attempts');
    expect(waits).toEqual([1000, 2000, 4000]);
    void u;
  });

  it('malformed JSON, or a body without "value", is a BadResponse', async () => {
    for (const body of ['{"value":[{"ListingKey":', '{"items":[]}', '{"value":[1,2]}', '{"value":[],"@odata.nextLink":42}']) {
      const u = await upstreamOf();
      editPage(u, 'Property', () => body);
      const dir = tempDir();
      const e = await failure(run(u, dir));
      expect(e.code, body).toBe('BadResponse');
      expect(decodeURIComponent(e.url!)).toContain('/Property?$orderby=ModificationTimestamp asc,ListingKey asc');
      await expectLoadable(dir);
    }
  });

  it('a record without its key is MissingKey; nothing of its page is applied', async () => {
    const u = await upstreamOf();
    editPage(u, 'Property', (b) => {
      delete b.value[3].ListingKey;
      return JSON.stringify(b);
    });
    const dir = tempDir();
    const e = await failure(run(u, dir));
    expect(e).toMatchObject({ code: 'MissingKey' });
    expect(e.message).toContain('Property record 4 of the page has no ListingKey');
    expect(replicaRecords(dir).Property.size).toBe(0);
  });

  it('rows out of the requested order (an upstream ignoring $orderby) are a BadResponse', async () => {
    const u = await upstreamOf();
    editPage(u, 'Property', (b) => JSON.stringify({ value: b.value.reverse(), '@odata.nextLink': 'x' }));
    const e = await failure(run(u, tempDir()));
    expect(e).toMatchObject({ code: 'BadResponse' });
    expect(e.message).toContain('not in the requested order');
  });

  it('a malformed timestamp, a value of the wrong type, a child without its listing key are BadRecords; the replica is left as it was', async () => {
    const cases: Array<[string, string, (r: JsonRecord) => void, string]> = [
      ['Property', 'timestamp', (r) => void (r.ModificationTimestamp = 'yesterday'), 'malformed ModificationTimestamp'],
      ['Property', 'type', (r) => void (r.ListPrice = 'cheap'), 'cannot be stored'],
      ['Media', 'link', (r) => void delete r.ResourceRecordKey, 'has no ResourceRecordKey'],
    ];
    for (const [resource, what, spoil, message] of cases) {
      const u = await upstreamOf();
      const dir = tempDir();
      await run(u, dir);
      const before = readdirSync(dir)
        .filter((n) => n.endsWith('.jsonl'))
        .map((n) => readFileSync(path.join(dir, n), 'utf8'));
      // the upstream changes one record, which now carries the defect
      const changed = structuredClone(DATA);
      const table = changed[resource as 'Property' | 'Media'];
      const victim = table.find((r) =>
        resource === 'Property' ? DEMO_SOURCES.includes(r.OriginatingSystemName as string) : EXPECTED.Media.has(r.MediaKey as string),
      )!;
      victim.ModificationTimestamp = new Date(NOW + 60_000).toISOString();
      await u.setData(changed);
      const key = (victim.ListingKey ?? victim.MediaKey) as string;
      editPage(u, resource, (b) => {
        spoil(b.value.find((r) => r.ListingKey === key || r.MediaKey === key)!);
        return JSON.stringify(b);
      });
      const e = await failure(run(u, dir));
      expect(e.code, what).toBe('BadRecord');
      expect(e.message, what).toContain(message);
      expect(e.message, what).toContain(key);
      expect(decodeURIComponent(e.url!), what).toContain(`/${resource}?`);
      const after = readdirSync(dir)
        .filter((n) => n.endsWith('.jsonl'))
        .map((n) => readFileSync(path.join(dir, n), 'utf8'));
      expect(after, what).toEqual(before);
      await expectLoadable(dir);
    }
  });

  it('an upstream whose $metadata lacks a resource is UnsupportedUpstream', async () => {
    const u = await upstreamOf();
    u.intercept = async (url) => {
      if (!url.endsWith('$metadata')) return undefined;
      u.intercept = null;
      const xml = await (await u.fetch(url, { headers: { Authorization: `Bearer ${TOKEN}` } })).text();
      return new Response(xml.replace(/<EntityType Name="OpenHouse">[\s\S]*?<\/EntityType>/, ''), { status: 200 });
    };
    const e = await failure(run(u, tempDir()));
    expect(e).toMatchObject({ code: 'UnsupportedUpstream' });
    expect(e.message).toContain('OpenHouse');
  });
});

describe('target and argument errors', () => {
  it('refuses a directory holding data that replication did not write', async () => {
    const u = await upstreamOf();
    const plain = tempDir();
    writeFileSync(path.join(plain, 'Property.jsonl'), '{"ListingKey":"A"}\n');
    expect(await failure(run(u, plain))).toMatchObject({ code: 'TargetNotReplica' });
    expect(readFileSync(path.join(plain, 'Property.jsonl'), 'utf8')).toBe('{"ListingKey":"A"}\n');
    const withChanges = tempDir();
    writeFileSync(path.join(withChanges, 'PropertyChange.jsonl'), '');
    expect((await failure(run(u, withChanges))).message).toContain('PropertyChange.jsonl');
  });

  it('refuses a replica of another upstream, a locked target, an unreadable state', async () => {
    const u = await upstreamOf();
    const dir = tempDir();
    await run(u, dir);
    const e = await failure(replicate({ from: 'http://elsewhere.test', token: TOKEN, to: dir, fetch: u.fetch }));
    expect(e).toMatchObject({ code: 'TargetMismatch' });

    writeFileSync(path.join(dir, '.replication.lock'), String(process.pid));
    expect(await failure(run(u, dir))).toMatchObject({ code: 'TargetLocked' });
    // a lock left by a process that is gone is taken over
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout;
    writeFileSync(path.join(dir, '.replication.lock'), gone);
    await run(u, dir);
    expect(readdirSync(dir)).not.toContain('.replication.lock');

    writeFileSync(path.join(dir, '.replication.json'), '{"version":1,');
    expect(await failure(run(u, dir))).toMatchObject({ code: 'BadState' });
  });

  it('rejects bad options as InvalidArgument', async () => {
    const u = await upstreamOf();
    const base = { token: TOKEN, to: tempDir(), fetch: u.fetch };
    for (const options of [
      { ...base, from: 'ftp://upstream.test' },
      { ...base, from: 'not a url' },
      { ...base, from: `${ORIGIN}/v1?x=1` },
      { ...base, from: ORIGIN, pageSize: 0 },
      { ...base, from: ORIGIN, pageSize: 1.5 },
      { ...base, from: ORIGIN, token: 'two words' },
      { from: ORIGIN, token: TOKEN, fetch: u.fetch },
    ]) {
      expect(await failure(replicate(options as ReplicateOptions)), JSON.stringify(options.from)).toMatchObject({ code: 'InvalidArgument' });
    }
  });
});

describe('retries', () => {
  it('429 from a rate limit: waits as long as Retry-After says, then carries on to the same result', async () => {
    const u = await TestUpstream.open(DATA, { rateLimit: { requestsPerSecond: 0.5, burst: 4 } });
    const retryAfter: number[] = [];
    const fetch: FetchLike = async (url, init) => {
      const res = await u.fetch(url, init);
      if (res.status === 429) retryAfter.push(Number(res.headers.get('retry-after')) * 1000);
      return res;
    };
    const waits: number[] = [];
    const sleep = async (ms: number): Promise<void> => {
      waits.push(ms);
      u.clock.advance(ms / 1000);
    };
    const dir = tempDir();
    await replicate({ from: ORIGIN, token: TOKEN, to: dir, pageSize: 20, fetch, sleep });
    expect(waits.length).toBeGreaterThan(5);
    expect(waits).toEqual(retryAfter);
    expect(entries(replicaRecords(dir).Media)).toEqual(entries(EXPECTED.Media));
  });

  it('503 with Retry-After as an HTTP date: waits until then by the injected clock', async () => {
    const u = await upstreamOf();
    let n = 0;
    u.intercept = (url) =>
      isPage(url, 'Property') && ++n <= 2 ? new Response('busy', { status: 503, headers: { 'Retry-After': new Date(NOW + 7000).toUTCString() } }) : undefined;
    const { sleep, waits } = recordingSleep();
    const progress: string[] = [];
    const dir = tempDir();
    await replicate({
      from: ORIGIN,
      token: TOKEN,
      to: dir,
      fetch: u.fetch,
      sleep,
      now: () => new Date(NOW),
      onProgress: (p) => p.phase === 'retry' && progress.push(p.message),
    });
    expect(waits).toEqual([7000, 7000]);
    expect(progress[0]).toContain('upstream answered 503; retry 1 in 7.0 s');
    expect(entries(replicaRecords(dir).Property)).toEqual(entries(EXPECTED.Property));
  });

  it('gives up: after maxRetries, or at once when Retry-After is beyond maxRetryDelayMs', async () => {
    const u = await upstreamOf();
    u.intercept = (url) => (isPage(url, 'Property') ? new Response('', { status: 503 }) : undefined);
    const { sleep, waits } = recordingSleep();
    const e = await failure(replicate({ from: ORIGIN, token: TOKEN, to: tempDir(), fetch: u.fetch, sleep, maxRetries: 2 }));
    expect(e).toMatchObject({ code: 'HttpError', status: 503 });
    expect(e.message).toContain('after 3 attempts');
    expect(waits).toEqual([1000, 2000]);

    u.intercept = (url) => (isPage(url, 'Property') ? new Response('', { status: 429, headers: { 'Retry-After': '3600' } }) : undefined);
    const long = recordingSleep();
    const e2 = await failure(replicate({ from: ORIGIN, token: TOKEN, to: tempDir(), fetch: u.fetch, sleep: long.sleep, maxRetryDelayMs: 60_000 }));
    expect(e2).toMatchObject({ code: 'HttpError', status: 429 });
    expect(e2.message).toContain('asks to wait 3600 s');
    expect(long.waits).toEqual([]);
  });
});
