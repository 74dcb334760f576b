/**
 * Failure of one node of the partitioned layout (issue 17: "one worker stopped mid-query"): the
 * coordinator's tables are hash-partitioned, each partition a postgres_fdw foreign table on one of
 * two worker clusters of this suite's own (stopped and started here, so not the run's shared
 * ones). A query waiting on a worker when that worker stops is a 503 `BackendUnavailable` with
 * Retry-After, with nothing of an answer; while the worker is down, what touches it fails the same
 * way, what does not is answered, and a write fails whole; once the worker is back the same engine
 * answers exactly as before. The wait is made certain by a lock on the worker's partition, held
 * from another connection to that worker: the coordinator's remote scan blocks on it until the
 * worker stops, so nothing here depends on timing.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine, type PostgresEngine } from '../../src/engine.js';
import { BackendUnavailableError } from '../../src/errors.js';
import type { QueryResult } from '../../src/exec/page.js';
import type { ChangeOperation } from '../../src/live/change.js';
import { Layout } from '../../src/pg/layout.js';
import { createHandler, type Handler } from '../../src/service/handler.js';
import { call, expectErrorShape, login, NOW, quickAccounts, readDefaultFile, type Call } from '../service/helpers.js';
import { createDatabase, databaseName, startCluster, type Cluster } from './cluster.js';
import { freshDatabase, LAYOUTS, pgSkip } from './helpers.js';

type Rec = Record<string, unknown>;
const DATA = '/v1/listings/data';
const now = (): Date => new Date(NOW);
const layout = new Layout('reso');
/** A query over every partition of Property, with a count and an expansion (several statements, one snapshot). */
const QUERY = '$filter=ListPrice gt 100000&$orderby=ListPrice desc,City&$top=7&$count=true&$expand=Media($top=1)&$select=ListingKey,ListPrice,City';

/** A 503 BackendUnavailable in the standard error shape (nothing but the error), with a Retry-After of whole seconds. */
function expectUnavailable(c: Call, label: string): void {
  expect(c.status, `${label}: ${c.text}`).toBe(503);
  expectErrorShape(c, 503, 'BackendUnavailable');
  expect(c.headers.get('retry-after'), label).toMatch(/^[1-9][0-9]*$/);
}

/** What a promise settles to, without an unhandled rejection while it is pending. */
function settle<T>(p: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  return p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}

/** Rejects like a lost backend: a BackendUnavailableError with a Retry-After. */
function expectBackendUnavailable(outcome: { value?: unknown; error?: unknown }, label: string): void {
  expect(outcome.value, `${label}: no answer, not even part of one`).toBeUndefined();
  const e = outcome.error;
  if (!(e instanceof BackendUnavailableError)) throw new Error(`${label}: expected BackendUnavailableError, got ${describeError(e)}`);
  expect(e.code).toBe('BackendUnavailable');
  expect(e.retryAfterSeconds).toBeGreaterThan(0);
}

/** An error with the SQLSTATE of its cause, for a failure message. */
function describeError(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause as { code?: unknown; message?: unknown } | undefined;
  return `${e.name}: ${e.message}${cause === undefined ? '' : ` (cause: ${String(cause.code)} ${String(cause.message)})`} ${String((e as { code?: unknown }).code)}`;
}

/** Options of a catalog's `{name=value,...}` array. */
function optionsOf(list: readonly string[] | null): Map<string, string> {
  return new Map((list ?? []).map((o) => [o.slice(0, o.indexOf('=')), o.slice(o.indexOf('=') + 1)]));
}

/** Where each partition of a coordinator table lives: the worker's port and the remote table's qualified name. */
async function partitionsOf(coordinator: pg.Client, table: string): Promise<Array<{ partition: string; port: number; remote: string }>> {
  const r = await coordinator.query<{ partition: string; schema: string; name: string; ftoptions: string[] | null; srvoptions: string[] | null }>(
    `SELECT c.oid::regclass::text AS partition, n.nspname AS schema, c.relname AS name, ft.ftoptions, s.srvoptions
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_foreign_table ft ON ft.ftrelid = c.oid JOIN pg_foreign_server s ON s.oid = ft.ftserver
      WHERE i.inhparent = $1::regclass ORDER BY 1`,
    [table],
  );
  return r.rows.map((row) => {
    const ft = optionsOf(row.ftoptions);
    const srv = optionsOf(row.srvoptions);
    const quoteId = (s: string): string => `"${s.replace(/"/g, '""')}"`;
    return {
      partition: row.partition,
      port: Number(srv.get('port')),
      remote: `${quoteId(ft.get('schema_name') ?? row.schema)}.${quoteId(ft.get('table_name') ?? row.name)}`,
    };
  });
}

/**
 * Waits until `count` backends of the worker wait on a lock (the coordinator's remote scans). From
 * a connection outside any transaction: a transaction reads pg_stat_activity once and keeps that.
 * The deadline only turns a hang into a failure that says what it saw.
 */
async function remoteWaits(worker: pg.Client, count: number): Promise<void> {
  const until = Date.now() + 60_000;
  for (;;) {
    const r = await worker.query<{ n: number; seen: string | null }>(
      "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock')::int AS n, string_agg(concat_ws(' ', application_name, state, wait_event_type, wait_event), '; ') AS seen FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = current_database()",
    );
    if (r.rows[0].n >= count) return;
    if (Date.now() > until) throw new Error(`no ${count} remote scans waiting on the lock; the worker's sessions: ${r.rows[0].seen ?? 'none'}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The coordinator's own tables a write changes: the term statistics, the change log, the generation. */
const LOCAL = [layout.terms, layout.search, layout.table('EntityEvent'), layout.meta];

/** Every row of `tables`, as a count and a digest per table (read on the coordinator). */
async function contents(coordinator: pg.Client, tables = [...LOCAL, layout.table('Property'), layout.table('Media')]): Promise<string[]> {
  const out: string[] = [];
  for (const table of tables) {
    const r = await coordinator.query<{ n: string; digest: string | null }>(
      `SELECT count(*) AS n, md5(string_agg(t::text, '|' ORDER BY t::text)) AS digest FROM ${table} t`,
    );
    out.push(`${table} ${r.rows[0].n} ${r.rows[0].digest}`);
  }
  return out;
}

describe.skipIf(pgSkip || !LAYOUTS.includes('partitioned'))('a worker of the partitioned layout stopped mid-query and started again', () => {
  let workers: Cluster[] = [];
  let workerUrls: string[] = [];
  let engine: PostgresEngine;
  let handler: Handler;
  const errors: unknown[] = [];
  /** Connections outside the engine: the coordinator's database, and worker 0's. */
  let coordinator: pg.Client;
  /** Partitions of Property on worker 0 (stopped below), and a listing on each worker. */
  let onStopped: Array<{ partition: string; remote: string }> = [];
  let keyOnStopped = '';
  let keyOnOther = '';
  let token = '';
  /** The answers before the worker stops: the engine's, and over HTTP. */
  let before: QueryResult;
  let beforeText = '';
  let beforeContents: string[] = [];

  beforeAll(async () => {
    workers = await Promise.all([startCluster(), startCluster()]);
    const name = databaseName('worker_failure');
    const url = await freshDatabase('worker_failure', name);
    workerUrls = await Promise.all(workers.map((w) => createDatabase(w, 'worker_failure', name)));
    engine = await Engine.open({ postgres: { url, distribution: { kind: 'partitioned', workers: workerUrls } }, data: DEFAULT_DATA_DIR, now });
    handler = createHandler({ engine, accounts: quickAccounts(), onError: (e) => errors.push(e) });
    token = await login(handler);
    coordinator = new pg.Client({ connectionString: url });
    coordinator.on('error', () => undefined);
    await coordinator.connect();
    const partitions = await partitionsOf(coordinator, layout.table('Property'));
    expect(new Set(partitions.map((p) => p.port))).toEqual(new Set(workers.map((w) => w.port)));
    onStopped = partitions.filter((p) => p.port === workers[0].port);
    // a listing of the default data set's demo sources on each worker
    const demo = new Set(
      readDefaultFile('Property.jsonl').flatMap((l) => (['CRMLS', 'NWMLS'].includes(l.OriginatingSystemName as string) ? [l.ListingKey] : [])),
    );
    const placed = await coordinator.query<{ key: string; partition: string }>(
      `SELECT "ListingKey" AS key, tableoid::regclass::text AS partition FROM ${layout.table('Property')}`,
    );
    const stopped = new Set(onStopped.map((p) => p.partition));
    keyOnStopped = placed.rows.find((r) => demo.has(r.key) && stopped.has(r.partition))!.key;
    keyOnOther = placed.rows.find((r) => demo.has(r.key) && !stopped.has(r.partition))!.key;
    before = await engine.query('Property', QUERY);
    const c = await call(handler, `${DATA}/Property?${QUERY}`, { token });
    expect(c.status).toBe(200);
    beforeText = c.text;
    beforeContents = await contents(coordinator);
  }, 300_000);

  afterAll(async () => {
    // the workers first: a query still waiting on one (a failed test) then ends, so closing the engine cannot hang
    await Promise.all(workers.map((w) => w.stop()));
    await coordinator?.end().catch(() => undefined);
    await engine?.close().catch(() => undefined);
  }, 120_000);

  it('a query waiting on the worker when it stops: BackendUnavailable (503 with Retry-After over HTTP), nothing partial', async () => {
    expect(before.value.length).toBe(7);
    // one connection to worker 0 holds the lock, another watches its sessions
    const [lock, watch] = [new pg.Client({ connectionString: workerUrls[0] }), new pg.Client({ connectionString: workerUrls[0] })];
    for (const c of [lock, watch]) {
      c.on('error', () => undefined);
      await c.connect();
    }
    try {
      await lock.query('BEGIN');
      await lock.query(`LOCK TABLE ${onStopped.map((p) => p.remote).join(', ')} IN ACCESS EXCLUSIVE MODE`);
      // one through the engine, one over HTTP: both wait on the worker's lock
      const query = settle(engine.query('Property', QUERY));
      const http = call(handler, `${DATA}/Property?${QUERY}`, { token });
      await remoteWaits(watch, 2);
      await workers[0].kill();
      expectBackendUnavailable(await query, 'the engine');
      expectUnavailable(await http, 'over HTTP');
    } finally {
      await Promise.all([lock.end().catch(() => undefined), watch.end().catch(() => undefined)]);
    }
  });

  it('while the worker is down: what touches it is a 503 and a write fails whole; the rest is answered', async () => {
    for (const path of [`Property?${QUERY}`, 'Property/$count', `Property('${keyOnStopped}')`, 'Media?$top=3&$orderby=MediaKey']) {
      expectUnavailable(await call(handler, `${DATA}/${path}`, { token }), path);
    }
    expectBackendUnavailable(await settle(engine.query('Property', QUERY)), 'the engine, again');
    expectBackendUnavailable(await settle(engine.count('Property', '')), 'a count');
    // tables the coordinator holds itself, and what needs no database, are answered
    expect((await call(handler, `${DATA}/Member?$top=3`, { token })).status).toBe(200);
    expect((await call(handler, `${DATA}/$metadata`, { token })).status).toBe(200);
    // a write of listings on both workers: nothing of it is kept
    const template = readDefaultFile('Property.jsonl')[0];
    const change: ChangeOperation[] = [
      { resource: 'Property', upsert: Array.from({ length: 20 }, (_, i): Rec => ({ ...template, ListingKey: `WF-${i}`, PublicRemarks: 'zyzzogeton lamp' })) },
      { resource: 'Property', remove: [keyOnOther] },
    ];
    expectBackendUnavailable(await settle(engine.apply(change)), 'a write');
    expect(await contents(coordinator, LOCAL), 'the statistics, change log and generation as they were').toEqual(beforeContents.slice(0, LOCAL.length));
    const terms = await coordinator.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${layout.terms} WHERE term = 'zyzzogeton'`);
    expect(terms.rows[0].n, 'no term of the failed write in #terms').toBe(0);
  });

  it('after the worker starts again: the same engine answers exactly as before, and the write applies whole', async () => {
    await workers[0].start();
    expect(await engine.query('Property', QUERY)).toEqual(before);
    expect((await call(handler, `${DATA}/Property?${QUERY}`, { token })).text).toBe(beforeText);
    expect((await call(handler, `${DATA}/Property('${keyOnStopped}')`, { token })).status).toBe(200);
    expect(await contents(coordinator), 'nothing of the failed write').toEqual(beforeContents);
    const template = readDefaultFile('Property.jsonl')[0];
    const summary = await engine.apply([
      { resource: 'Property', upsert: Array.from({ length: 20 }, (_, i): Rec => ({ ...template, ListingKey: `WF-${i}`, PublicRemarks: 'zyzzogeton lamp' })) },
      { resource: 'Property', remove: [keyOnOther] },
    ]);
    expect([summary.upserted, summary.removed]).toEqual([20, 1]);
    expect(await engine.count('Property', "$filter=search.text(KeywordSearchText,'zyzzogeton')")).toBe(20);
    expect(errors).toEqual([]);
  });
});
