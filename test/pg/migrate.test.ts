/**
 * Layout versions against a real PostgreSQL: a fresh layout checks out; an empty database, a
 * newer layout, an older one without a migration path and an unreadable record are refused with
 * their codes; an older one is upgraded by an injected migration list in one transaction (a failing
 * step leaves it as it was; concurrent starts migrate once). Also the connection layer: which
 * failures are BackendUnavailable (refused connection, statement timeout, pool exhaustion, a
 * terminated backend) and that the pool recovers from them.
 */
import net from 'node:net';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendUnavailableError, QueryError } from '../../src/errors.js';
import { APPLICATION_NAME, openPool, transaction, unavailable, withClient } from '../../src/pg/connect.js';
import { LAYOUT_VERSION, Layout, indexStatements, schemaToJson } from '../../src/pg/layout.js';
import { checkLayout, initLayout, migrationPath, PACKAGE_VERSION, readSchemas, writeMeta, type Migration } from '../../src/pg/migrate.js';
import { SEARCH_FIELDS } from '../../src/schema/search-fields.js';
import { RESOURCE_NAMES, type ResourceName } from '../../src/schema/types.js';
import type { TableSchema } from '../../src/schema/table-schema.js';
import { loadRecords } from '../../src/store/load.js';
import { freshDatabase, pgSkip } from './helpers.js';

const store = loadRecords({
  Property: [{ ListingKey: 'A', StandardStatus: 'Active', ListPrice: 1, LocalFlag: true }],
  Media: [{ MediaKey: 'M', ResourceRecordKey: 'A' }],
});
const schemas = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, store.table(r).schema])) as Record<ResourceName, TableSchema>;

async function codeOf(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(QueryError);
  return { code: (err as QueryError).code, message: (err as QueryError).message };
}

describe('migrationPath', () => {
  const m = (from: number, to: number): Migration => ({ from, to, up: [`-- ${from} to ${to}`] });
  it('finds the shortest chain, or null', () => {
    expect(migrationPath([], 1, 1)).toEqual([]);
    expect(migrationPath([m(1, 2), m(2, 3)], 1, 3)).toEqual([m(1, 2), m(2, 3)]);
    expect(migrationPath([m(1, 2), m(2, 3), m(1, 3)], 1, 3)).toEqual([m(1, 3)]);
    expect(migrationPath([m(2, 3)], 1, 3)).toBeNull();
    // never past the target, never backwards
    expect(migrationPath([m(1, 4), m(4, 3)], 1, 3)).toBeNull();
    expect(migrationPath([m(1, 2), m(2, 1)], 1, 3)).toBeNull();
  });
});

describe('unavailable: which errors mean the backend cannot answer now', () => {
  const err = (props: Record<string, unknown>, message = 'x'): Error => Object.assign(new Error(message), props);
  it.each([
    ['connection failure (class 08)', err({ code: '08006' })],
    ['admin shutdown', err({ code: '57P01' })],
    ['crash shutdown', err({ code: '57P02' })],
    ['cannot connect now (starting up)', err({ code: '57P03' })],
    ['too many connections', err({ code: '53300' })],
    ['statement timeout', err({ code: '57014' }, 'canceling statement due to statement timeout')],
    ['refused', err({ code: 'ECONNREFUSED' })],
    ['reset', err({ code: 'ECONNRESET' })],
    ['pool exhaustion', new Error('timeout exceeded when trying to connect')],
    ['lost connection', new Error('Connection terminated unexpectedly')],
    ['every address refused', new AggregateError([err({ code: 'ECONNREFUSED' }), err({ code: 'ECONNREFUSED' })])],
  ])('%s', (_, error) => {
    const u = unavailable(error);
    expect(u).toBeInstanceOf(BackendUnavailableError);
    expect(u).toBeInstanceOf(QueryError);
    expect(u!.code).toBe('BackendUnavailable');
    expect(u!.retryAfterSeconds).toBe(1);
    expect(u!.cause).toBe(error);
  });
  it.each([
    ['syntax error', err({ code: '42601' })],
    ['unique violation', err({ code: '23505' })],
    ['a query error of ours', new QueryError('PgNotInitialized', 'no')],
    ['a plain error', new Error('boom')],
    ['not an error', 'text'],
    ['null', null],
  ])('%s is not', (_, error) => {
    expect(unavailable(error)).toBeNull();
  });
});

describe.skipIf(pgSkip)('layout versions (real PostgreSQL)', () => {
  let pool: pg.Pool;
  beforeAll(async () => {
    pool = openPool(await freshDatabase('migrate'));
  });
  afterAll(async () => {
    await pool.end();
  });

  const setVersion = async (layout: Layout, version: number, writtenBy = '0.0.1'): Promise<void> => writeMeta(pool, layout, 'layout', { version, writtenBy });
  const versionOf = async (layout: Layout): Promise<unknown> =>
    (await pool.query<{ value: unknown }>(`SELECT value FROM ${layout.meta} WHERE key = 'layout'`)).rows[0].value;
  const columnExists = async (schema: string, table: string, column: string): Promise<boolean> =>
    (
      await pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND column_name = $3',
        [schema, table, column],
      )
    ).rows[0].n === 1;

  it('a fresh layout checks out, with its schemas, empty statistics and indexes', async () => {
    const layout = new Layout('fresh');
    await initLayout(pool, layout, schemas);
    expect(await checkLayout(pool, layout)).toEqual({ version: LAYOUT_VERSION, migratedFrom: [] });
    expect(await versionOf(layout)).toEqual({ version: LAYOUT_VERSION, writtenBy: PACKAGE_VERSION });
    expect(PACKAGE_VERSION).toMatch(/^\d+\.\d+\.\d+/);
    const meta = await readSchemas(pool, layout);
    for (const r of RESOURCE_NAMES) expect(schemaToJson(meta.schemas[r])).toEqual(schemaToJson(schemas[r]));
    expect(meta.schemas.Property.field('LocalFlag')).toEqual(schemas.Property.field('LocalFlag'));
    expect([meta.accounts, meta.profiles, meta.report]).toEqual([null, null, null]);
    const search = await pool.query<{ field: string; n: string; total_length: string }>(`SELECT field, n, total_length FROM ${layout.search} ORDER BY field`);
    expect(search.rows).toEqual([...SEARCH_FIELDS].sort().map((field) => ({ field, n: '0', total_length: '0' })));
    const indexes = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_indexes WHERE schemaname = 'fresh' AND indexname LIKE '%#%' AND indexname NOT LIKE '%_pkey'`,
    );
    expect(indexes.rows[0].n).toBe(indexStatements(layout, schemas).length);
  });

  it('PgNotInitialized: no schema, a schema without #meta, #meta without a layout record', async () => {
    for (const layout of [new Layout('nothing_here'), new Layout('public')]) {
      const e = await codeOf(checkLayout(pool, layout));
      expect(e.code).toBe('PgNotInitialized');
      expect(e.message).toContain(`"${layout.schema}"`);
      expect(e.message).toContain('reso-engine pg load');
    }
    const layout = new Layout('no_record');
    await initLayout(pool, layout, schemas);
    await pool.query(`DELETE FROM ${layout.meta} WHERE key = 'layout'`);
    const e = await codeOf(checkLayout(pool, layout));
    expect(e.code).toBe('PgNotInitialized');
    expect(e.message).toMatch(/no layout record/);
  });

  it('PgLayoutUnreadable: a layout record or schemas that are not this build’s', async () => {
    const layout = new Layout('unreadable');
    await initLayout(pool, layout, schemas);
    for (const value of [{ version: '1', writtenBy: 'x' }, { version: 1.5, writtenBy: 'x' }, { version: 1 }, null, 7]) {
      await writeMeta(pool, layout, 'layout', value);
      expect((await codeOf(checkLayout(pool, layout))).code).toBe('PgLayoutUnreadable');
    }
    const tampered = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, schemaToJson(schemas[r])]));
    tampered.Property = { ...tampered.Property, fields: [...tampered.Property.fields, { name: 'NotInTheDictionary', origin: 'reso' }] };
    await writeMeta(pool, layout, 'schemas', tampered);
    const e = await codeOf(readSchemas(pool, layout));
    expect(e.code).toBe('PgLayoutUnreadable');
    expect(e.message).toMatch(/NotInTheDictionary/);
    tampered.Property = {
      ...schemaToJson(schemas.Property),
      fields: [...schemaToJson(schemas.Property).fields, { name: 'Odd', origin: 'local', type: 'Edm.Binary' }],
    };
    await writeMeta(pool, layout, 'schemas', tampered);
    expect((await codeOf(readSchemas(pool, layout))).code).toBe('PgLayoutUnreadable');
  });

  it('PgLayoutTooNew: a newer layout is refused, naming both versions, and left untouched', async () => {
    const layout = new Layout('too_new');
    await initLayout(pool, layout, schemas);
    await setVersion(layout, LAYOUT_VERSION + 1, '9.9.9');
    const e = await codeOf(checkLayout(pool, layout, { migrations: [{ from: LAYOUT_VERSION + 1, to: LAYOUT_VERSION, up: ['SELECT 1'] }] }));
    expect(e.code).toBe('PgLayoutTooNew');
    expect(e.message).toContain(`layout version ${LAYOUT_VERSION + 1} (written by reso-engine 9.9.9)`);
    expect(e.message).toContain(`reads layout version ${LAYOUT_VERSION}`);
    expect(await versionOf(layout)).toEqual({ version: LAYOUT_VERSION + 1, writtenBy: '9.9.9' });
  });

  it('PgLayoutTooOld: an older layout without a migration path is refused and left untouched', async () => {
    const layout = new Layout('too_old');
    await initLayout(pool, layout, schemas);
    await setVersion(layout, 0);
    let e = await codeOf(checkLayout(pool, layout));
    expect(e.code).toBe('PgLayoutTooOld');
    expect(e.message).toContain('layout version 0 (written by reso-engine 0.0.1)');
    expect(e.message).toContain('no migration from version 0');
    expect(e.message).toContain('--replace');
    // a chain with a gap is no path either
    e = await codeOf(
      checkLayout(pool, layout, {
        version: 3,
        migrations: [
          { from: 1, to: 2, up: [] },
          { from: 2, to: 3, up: [] },
        ],
      }),
    );
    expect(e.code).toBe('PgLayoutTooOld');
    expect(await versionOf(layout)).toEqual({ version: 0, writtenBy: '0.0.1' });
  });

  it('an older layout is upgraded by the migrations, in order, with unqualified names resolving to the layout’s schema', async () => {
    const layout = new Layout('upgrade');
    await initLayout(pool, layout, schemas);
    await setVersion(layout, 1);
    const migrations: Migration[] = [
      { from: 2, to: 3, up: ['ALTER TABLE "Property" RENAME COLUMN "step2" TO "step3"', `INSERT INTO "#meta" VALUES ('steps', '"1,2"')`] },
      { from: 1, to: 2, up: ['ALTER TABLE "Property" ADD COLUMN "step2" integer', 'CREATE TABLE "#extra" (g geography(Point,4326))'] },
    ];
    expect(await checkLayout(pool, layout, { version: 3, migrations })).toEqual({ version: 3, migratedFrom: [1, 2] });
    expect(await versionOf(layout)).toEqual({ version: 3, writtenBy: PACKAGE_VERSION });
    expect(await columnExists('upgrade', 'Property', 'step3')).toBe(true);
    expect(await columnExists('upgrade', '#extra', 'g')).toBe(true);
    expect(await columnExists('public', 'Property', 'step2')).toBe(false);
    // the session's search_path was the migration's only (SET LOCAL)
    const path = await pool.query<{ p: string }>("SELECT current_setting('search_path') AS p");
    expect(path.rows[0].p).not.toContain('upgrade');
    // current now: nothing runs again
    expect(await checkLayout(pool, layout, { version: 3, migrations })).toEqual({ version: 3, migratedFrom: [] });
    // the real list has nothing to do for this build's version
    await setVersion(layout, LAYOUT_VERSION);
    expect(await checkLayout(pool, layout)).toEqual({ version: LAYOUT_VERSION, migratedFrom: [] });
  });

  it('a migration that fails changes nothing (one transaction) and its error comes through unchanged', async () => {
    const layout = new Layout('failing');
    await initLayout(pool, layout, schemas);
    await setVersion(layout, 0);
    const migrations: Migration[] = [
      { from: 0, to: 1, up: ['ALTER TABLE "Property" ADD COLUMN "half" integer', 'ALTER TABLE "NoSuchTable" ADD COLUMN x int'] },
    ];
    const err = await checkLayout(pool, layout, { migrations }).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(QueryError);
    expect((err as { code?: string }).code).toBe('42P01');
    expect(await columnExists('failing', 'Property', 'half')).toBe(false);
    expect(await versionOf(layout)).toEqual({ version: 0, writtenBy: '0.0.1' });
  });

  it('concurrent checks migrate once', async () => {
    const layout = new Layout('concurrent');
    await initLayout(pool, layout, schemas);
    await setVersion(layout, 0);
    // a second run would fail: the table exists
    const migrations: Migration[] = [{ from: 0, to: 1, up: ['SELECT pg_sleep(0.2)', 'CREATE TABLE "#once" (x int)'] }];
    const results = await Promise.all([1, 2, 3].map(() => checkLayout(pool, layout, { migrations })));
    expect(results.filter((r) => r.migratedFrom.length > 0)).toEqual([{ version: 1, migratedFrom: [0] }]);
    expect(results.every((r) => r.version === 1)).toBe(true);
  });
});

describe.skipIf(pgSkip)('connections (real PostgreSQL)', () => {
  let url: string;
  const pools: pg.Pool[] = [];
  const open = (options: Parameters<typeof openPool>[1] = {}, at = url): pg.Pool => {
    const p = openPool(at, options);
    pools.push(p);
    return p;
  };
  beforeAll(async () => {
    url = await freshDatabase('connect');
  });
  afterAll(async () => {
    for (const p of pools) await p.end().catch(() => undefined);
  });

  async function unavailableError(promise: Promise<unknown>): Promise<BackendUnavailableError> {
    const err = await promise.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(BackendUnavailableError);
    expect((err as BackendUnavailableError).code).toBe('BackendUnavailable');
    expect((err as BackendUnavailableError).retryAfterSeconds).toBe(1);
    return err as BackendUnavailableError;
  }

  it('names itself reso-engine', async () => {
    const { rows } = await open().query<{ name: string }>(`SELECT current_setting('application_name') AS name`);
    expect(rows[0].name).toBe(APPLICATION_NAME);
  });

  it('a refused connection is BackendUnavailable (and so is checkLayout through it)', async () => {
    const port = await new Promise<number>((resolve) => {
      const server = net.createServer();
      server.listen(0, '127.0.0.1', () => {
        const p = (server.address() as net.AddressInfo).port;
        server.close(() => resolve(p));
      });
    });
    const dead = open({}, `postgres://postgres@127.0.0.1:${port}/postgres`);
    const err = await unavailableError(withClient(dead, (c) => c.query('SELECT 1')));
    expect(err.message).toMatch(/cannot be reached/);
    await unavailableError(checkLayout(dead, new Layout('reso')));
  });

  it('a statement timeout is BackendUnavailable, and the connection stays usable', async () => {
    const pool = open({ statementTimeoutMs: 100, max: 1 });
    const err = await unavailableError(withClient(pool, (c) => c.query('SELECT pg_sleep(30)')));
    expect(err.message).toMatch(/too long/);
    expect((err.cause as { code?: string }).code).toBe('57014');
    const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one');
    expect(rows[0].one).toBe(1);
  });

  it('pool exhaustion is BackendUnavailable, not a hang', async () => {
    const pool = open({ max: 1, connectTimeoutMs: 200 });
    await withClient(pool, async () => {
      const err = await unavailableError(withClient(pool, (c) => c.query('SELECT 1')));
      expect(err.message).toMatch(/no database connection became free/);
    });
    expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0].one).toBe(1);
  });

  it('a backend terminated mid-query is BackendUnavailable; the pool reconnects by itself', async () => {
    const pool = open({ max: 2 });
    const admin = open({ max: 1 });
    const running = withClient(pool, async (c) => {
      const { rows } = await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const stop = admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
      await c.query('SELECT pg_sleep(30)').finally(() => stop);
    });
    const err = await unavailableError(running);
    expect((err.cause as { code?: string }).code).toBe('57P01');
    const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one');
    expect(rows[0].one).toBe(1);
  });

  it('an idle client whose backend dies does not crash the process; the next query reconnects', async () => {
    const pool = open({ max: 1 });
    const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const errors: unknown[] = [];
    pool.on('error', (e) => errors.push(e));
    await open({ max: 1 }).query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
    // the idle client's error arrives as an event; wait for it
    for (let i = 0; i < 200 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(errors.length).toBe(1);
    const again = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    expect(again.rows[0].pid).not.toBe(rows[0].pid);
  });

  it('transaction commits, or rolls back and rethrows other errors unchanged', async () => {
    const pool = open();
    await pool.query('CREATE TABLE tx (x int PRIMARY KEY)');
    await transaction(pool, async (c) => {
      await c.query('INSERT INTO tx VALUES (1)');
    });
    const err = await transaction(pool, async (c) => {
      await c.query('INSERT INTO tx VALUES (2)');
      await c.query('INSERT INTO tx VALUES (1)');
    }).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(QueryError);
    expect((err as { code?: string }).code).toBe('23505');
    const thrown = new Error('mine');
    await expect(
      transaction(pool, async (c) => {
        await c.query('INSERT INTO tx VALUES (3)');
        throw thrown;
      }),
    ).rejects.toBe(thrown);
    const { rows } = await pool.query<{ x: number }>('SELECT x FROM tx ORDER BY x');
    expect(rows).toEqual([{ x: 1 }]);
    const ro = await transaction(pool, (c) => c.query('INSERT INTO tx VALUES (4)'), { readOnly: true, isolation: 'repeatable read' }).catch((e: unknown) => e);
    expect((ro as { code?: string }).code).toBe('25006');
    expect(pool.totalCount).toBeGreaterThan(0);
    expect(pool.waitingCount).toBe(0);
  });
});
