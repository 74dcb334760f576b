/**
 * Failure behaviour of the PostgreSQL backend over HTTP (SERVICE.md §5, issue "Failure
 * behaviour"): a stopped or restarted server, a statement timeout, an exhausted pool and a server
 * killed mid-write give 503 `BackendUnavailable` with Retry-After, never a 500 or a hang; the
 * engine reconnects by itself; a write cut off leaves the data exactly as it was. Each suite runs
 * on its own throwaway cluster, which it stops and starts. The waits are made certain by locks
 * taken from another connection (a statement blocked on a lock runs until its timeout or until its
 * backend is terminated), so nothing here depends on timing.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine, type PostgresEngine, type PostgresOptions } from '../../src/engine.js';
import { BackendUnavailableError, QueryError } from '../../src/errors.js';
import { Layout } from '../../src/pg/layout.js';
import { hashPassword } from '../../src/generate/dataset.js';
import { createHandler, type Handler, type ServiceEngine } from '../../src/service/handler.js';
import { call, expectErrorShape, login, NOW, quickAccounts, readDefaultFile, type Call } from '../service/helpers.js';
import { createDatabase, startCluster, type Cluster } from './cluster.js';
import { pgSkip } from './helpers.js';

type Rec = Record<string, unknown>;
const DATA = '/v1/listings/data';
const now = (): Date => new Date(NOW);
const layout = new Layout('reso');

/** demo (not an admin) and `admin`, an admin account of demo's sources. */
function accounts(): { accounts: Rec[] } {
  const quick = quickAccounts().accounts;
  const salt = Buffer.from('admin'.padEnd(16, '.'));
  return { accounts: [...quick, { ...quick[0], username: 'admin', password_hash: hashPassword('admin-password', salt, 1024, 8, 1), admin: true }] };
}

/** A 503 BackendUnavailable in the standard error shape, with a Retry-After of whole seconds. */
function expectUnavailable(c: Call): void {
  expectErrorShape(c, 503, 'BackendUnavailable');
  expect(c.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
}

const post = (handler: Handler, path: string, token: string, body: unknown): Promise<Call> =>
  call(handler, `${DATA}/${path}`, { method: 'POST', token, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('BackendUnavailable in the handler (any engine)', () => {
  /** An engine whose every read fails as a backend that cannot answer does. */
  function failingEngine(
    retryAfterSeconds: number,
    error: Error = new BackendUnavailableError('The database is unavailable.', { retryAfterSeconds }),
  ): ServiceEngine {
    const fail = (): Promise<never> => Promise.reject(error);
    return {
      accounts: quickAccounts(),
      profiles: null,
      schemaOf: () => {
        throw error;
      },
      now: () => NOW,
      query: fail,
      navigate: fail,
      navigateOne: fail,
      count: fail,
      entity: fail,
      has: fail,
      isVisible: fail,
      apply: fail,
    };
  }

  it('answers 503 with Retry-After (rounded up to whole seconds) on every engine call, never a 500', async () => {
    for (const [seconds, header] of [
      [1, '1'],
      [2.5, '3'],
      [0, '1'],
    ] as const) {
      const errors: unknown[] = [];
      const handler = createHandler({ engine: failingEngine(seconds), onError: (e) => errors.push(e) });
      const token = await login(handler);
      for (const path of [
        'Property?$top=1',
        "Property('K')",
        "Property('K')/Media",
        "Property('K')/ListAgent",
        'Property/$count',
        'Media?$filter=Order eq 1',
      ]) {
        const c = await call(handler, `${DATA}/${path}`, { token });
        expectUnavailable(c);
        expect(c.headers.get('retry-after'), path).toBe(header);
      }
      expect(errors).toEqual([]);
    }
  });

  it('keeps other errors as they were: a QueryError is a 400, a defect a 500 with a request id', async () => {
    const bad = createHandler({ engine: failingEngine(1, new QueryError('InvalidSyntax', 'bad')), onError: () => undefined });
    const token = await login(bad);
    const c = await call(bad, `${DATA}/Property`, { token });
    expectErrorShape(c, 400, 'InvalidSyntax');
    expect(c.headers.get('retry-after')).toBeNull();
    const broken = createHandler({ engine: failingEngine(1, new Error('defect')), onError: () => undefined });
    const d = await call(broken, `${DATA}/Property`, { token: await login(broken) });
    expectErrorShape(d, 500, 'InternalError');
    expect(d.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

/** A cluster, a database loaded with the default data set, an engine and a handler over it. */
interface World {
  readonly cluster: Cluster;
  readonly url: string;
  readonly engine: PostgresEngine;
  readonly handler: Handler;
  readonly errors: unknown[];
  /** A second connection, outside the engine's pool. */
  readonly admin: pg.Client;
}

async function world(options: Omit<PostgresOptions, 'url'> = {}): Promise<World> {
  const cluster = await startCluster();
  try {
    const url = await createDatabase(cluster, 'failure');
    // loaded with the default settings, then opened with the ones under test (a 300 ms statement timeout would stop the load)
    await (await Engine.open({ postgres: { url }, data: DEFAULT_DATA_DIR, now })).close();
    const engine = await Engine.open({ postgres: { url, ...options }, now });
    const errors: unknown[] = [];
    const handler = createHandler({ engine, accounts: accounts(), onError: (e) => errors.push(e) });
    const admin = new pg.Client({ connectionString: url });
    admin.on('error', () => undefined);
    await admin.connect();
    return { cluster, url, engine, handler, errors, admin };
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}

async function endWorld(w: World | undefined): Promise<void> {
  if (w === undefined) return;
  await w.admin.end().catch(() => undefined);
  await w.engine.close().catch(() => undefined);
  await w.cluster.stop();
}

/** Waits until a backend of the engine's pool waits on a lock; returns its PID. */
async function lockedBackend(admin: pg.Client): Promise<number> {
  for (;;) {
    const r = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE application_name = 'reso-engine' AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
    );
    if (r.rows.length > 0) return r.rows[0].pid;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The record tables of the layout a backend's open transaction has written to (holds a row-exclusive lock on). */
async function writtenTables(admin: pg.Client, pid: number): Promise<string[]> {
  const r = await admin.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE l.pid = $1 AND l.granted AND l.mode = 'RowExclusiveLock' AND n.nspname = $2 AND c.relkind = 'r' AND c.relname = ANY($3) ORDER BY 1`,
    [pid, layout.schema, ['Property', 'Media', 'OpenHouse', 'PropertyChange', 'Member', 'Office']],
  );
  return r.rows.map((row) => row.name);
}

/** Every row of the tables a change writes, as text (the data as it is, statistics included). */
async function contents(admin: pg.Client): Promise<string[]> {
  const out: string[] = [];
  for (const table of [layout.table('Property'), layout.table('Media'), layout.table('OpenHouse'), layout.table('EntityEvent'), layout.terms, layout.search]) {
    const r = await admin.query<{ n: string; digest: string | null }>(
      `SELECT count(*) AS n, md5(string_agg(t::text, '|' ORDER BY t::text)) AS digest FROM ${table} t`,
    );
    out.push(`${table} ${r.rows[0].n} ${r.rows[0].digest}`);
  }
  return out;
}

/** A suite on a cluster of its own, its world opened with `options`. */
function onOwnCluster(name: string, options: Omit<PostgresOptions, 'url'>, tests: (world: () => World) => void): void {
  describe.skipIf(pgSkip)(name, () => {
    let w: World | undefined;
    beforeAll(async () => {
      w = await world(options);
    }, 300_000);
    afterAll(() => endWorld(w), 120_000);
    tests(() => w!);
  });
}

/** Runs `fn` while the other connection holds ACCESS EXCLUSIVE locks on `tables` (released after it, unless the server is gone). */
async function whileLocked<T>(admin: pg.Client, tables: readonly string[], fn: () => Promise<T>): Promise<T> {
  await admin.query('BEGIN');
  try {
    await admin.query(`LOCK TABLE ${tables.join(', ')} IN ACCESS EXCLUSIVE MODE`);
    return await fn();
  } finally {
    await admin.query('ROLLBACK').catch(() => undefined);
  }
}

onOwnCluster('a stopped and restarted server', {}, (world) => {
  it('gives 503 for a query whose connection is cut mid-query (between its statements), and answers the next one', async () => {
    const { handler, admin, errors } = world();
    const token = await login(handler);
    // Property first, then the page's Media: the second statement waits on the lock
    const path = `${DATA}/Property?$filter=City eq 'Seattle'&$expand=Media($top=1)&$top=3`;
    const want = (await call(handler, path, { token })).text;
    const cut = await whileLocked(admin, [layout.table('Media')], async () => {
      const pending = call(handler, path, { token });
      await admin.query('SELECT pg_terminate_backend($1)', [await lockedBackend(admin)]);
      return { pending };
    });
    expectUnavailable(await cut.pending);
    expect((await call(handler, path, { token })).text).toBe(want);
    expect(errors).toEqual([]);
  });

  it('gives 503 with Retry-After while the server is down, and answers again once it is back, without a new engine', async () => {
    const { handler, cluster, errors } = world();
    const token = await login(handler);
    const path = `${DATA}/Property?$filter=City eq 'Seattle'&$orderby=ListPrice desc&$top=5&$count=true`;
    const before = await call(handler, path, { token });
    expect(before.status).toBe(200);
    expect(before.json.value.length).toBe(5);
    // readiness reports the pool and a SELECT 1 answered
    const ready = await call(handler, '/ready');
    expect(ready.status).toBe(200);
    expect(ready.text).toContain('"ok":true');
    expect(ready.text).toContain('"pool"');

    await cluster.kill();
    const down = await call(handler, '/ready');
    expect(down.status).toBe(503);
    expect(down.json.ready).toBe(false);
    expect(down.json.reasons.join(' ')).toContain('the database does not answer');
    expect((await call(handler, '/health')).status).toBe(200);
    for (const p of [path, `${DATA}/Property('${before.json.value[0].ListingKey}')`, `${DATA}/Property/$count`, `${DATA}/Media?$top=1`]) {
      expectUnavailable(await call(handler, p, { token }));
    }
    // a write of an admin session too (its source checks read first)
    const admin = await login(handler, 'admin');
    expectUnavailable(await call(handler, `${DATA}/Property('${before.json.value[0].ListingKey}')`, { token: admin, method: 'DELETE' }));
    // what the handler answers without the database still works
    expect((await call(handler, `${DATA}/$metadata`, { token })).status).toBe(200);

    await cluster.start();
    const after = await call(handler, path, { token });
    expect(after.status).toBe(200);
    expect(after.text).toBe(before.text);
    expect((await call(handler, '/ready')).status).toBe(200);
    expect(errors).toEqual([]);
  });
});

onOwnCluster('a statement timeout', { statementTimeoutMs: 300 }, (world) => {
  it('cancels a statement that runs too long (here: one waiting on a lock) with 503, and the next query is answered', async () => {
    const { handler, admin, errors } = world();
    const token = await login(handler);
    const path = `${DATA}/Property?$filter=contains(tolower(PublicRemarks),'view')&$top=3`;
    const before = await call(handler, path, { token });
    expect(before.status).toBe(200);
    await whileLocked(admin, [layout.table('Property')], async () => {
      expectUnavailable(await call(handler, path, { token }));
      expectUnavailable(await call(handler, `${DATA}/Property/$count`, { token }));
    });
    const after = await call(handler, path, { token });
    expect(after.status).toBe(200);
    expect(after.text).toBe(before.text);
    expect(errors).toEqual([]);
  });
});

onOwnCluster('an exhausted pool', { poolSize: 1 }, (world) => {
  it('answers 503 when no connection becomes free in time, instead of waiting for ever; the held query then finishes', async () => {
    const { handler, admin, errors } = world();
    const token = await login(handler);
    const path = `${DATA}/Property?$orderby=ListPrice desc&$top=2`;
    const want = (await call(handler, path, { token })).text;
    const held = await whileLocked(admin, [layout.table('Property')], async () => {
      // the pool's one connection waits on the lock ...
      const first = call(handler, path, { token });
      await lockedBackend(admin);
      // ... so this request finds none free
      expectUnavailable(await call(handler, `${DATA}/Media?$top=1`, { token }));
      return { first };
    });
    const first = await held.first;
    expect(first.status).toBe(200);
    expect(first.text).toBe(want);
    expect((await call(handler, `${DATA}/Media?$top=1`, { token })).status).toBe(200);
    expect(errors).toEqual([]);
  }, 120_000);
});

onOwnCluster('a server killed mid-write', {}, (world) => {
  const listings = readDefaultFile('Property.jsonl').filter((l) => l.OriginatingSystemName === 'CRMLS');
  const keys = new Set(listings.map((l) => l.ListingKey));
  const media = readDefaultFile('Media.jsonl').filter((m) => keys.has(m.ResourceRecordKey));
  /** A large change: copies of every CRMLS listing under new keys, with their media, and the removal of listing `removed`. */
  function bigChange(tag: string, removed: number): { operations: Rec[] } {
    const copies = listings.map((l) => ({ ...l, ListingKey: `${tag}-${l.ListingKey as string}`, ListingId: `${tag}-${l.ListingId as string}` }));
    const photos = media.map((m) => ({ ...m, MediaKey: `${tag}-${m.MediaKey as string}`, ResourceRecordKey: `${tag}-${m.ResourceRecordKey as string}` }));
    return {
      operations: [
        { resource: 'Property', upsert: copies },
        { resource: 'Media', upsert: photos },
        { resource: 'Property', remove: [listings[removed].ListingKey] },
      ],
    };
  }
  // the change's last tables are the term statistics: it waits there with its records written
  const statistics = [layout.search, layout.terms];

  it('a backend terminated while the change waits inside its transaction: 503, and nothing of the change is kept', async () => {
    const { handler, admin, errors } = world();
    const token = await login(handler, 'admin');
    const before = await contents(admin);
    const write = await whileLocked(admin, statistics, async () => {
      const pending = post(handler, '$changes', token, bigChange('T1', 0));
      const pid = await lockedBackend(admin);
      // mid-write indeed: its transaction has written listings and media already
      expect(await writtenTables(admin, pid)).toEqual(expect.arrayContaining(['Media', 'Property']));
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      return { pending };
    });
    expectUnavailable(await write.pending);
    expect(await contents(admin)).toEqual(before);
    // the engine goes on: the same change now applies whole
    const again = await post(handler, '$changes', token, bigChange('T1', 0));
    expect(again.status).toBe(200);
    expect([again.json.upserted, again.json.removed]).toEqual([listings.length + media.length, 1]);
    expect(await contents(admin)).not.toEqual(before);
    expect(errors).toEqual([]);
  }, 120_000);

  it('the whole server stopped mid-change: 503; after a restart the data is as it was before the change', async () => {
    const { handler, admin: first, cluster, url, errors } = world();
    const token = await login(handler, 'admin');
    const before = await contents(first);
    const write = await whileLocked(first, statistics, async () => {
      const pending = post(handler, '$changes', token, bigChange('T2', 2));
      await lockedBackend(first);
      await cluster.kill();
      return { pending };
    });
    expectUnavailable(await write.pending);
    await cluster.start();
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      expect(await contents(admin)).toEqual(before);
      // and reads through the same engine answer again
      const demo = await login(handler);
      expect((await call(handler, `${DATA}/Property('T2-${listings[1].ListingKey as string}')`, { token: demo })).status).toBe(404);
      expect((await call(handler, `${DATA}/Property('${listings[2].ListingKey as string}')`, { token: demo })).status).toBe(200);
    } finally {
      await admin.end();
    }
    expect(errors).toEqual([]);
  }, 120_000);
});
