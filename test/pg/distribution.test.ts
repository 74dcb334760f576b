/**
 * The distributed layouts' own parts (src/pg/distribution.ts): the options a caller gives and the
 * errors for bad ones; the DDL of each spread (Citus's primary keys with the distribution column,
 * a partitioned parent without one); the Citus calls (checked on a capturing stand-in, the one
 * place a mock serves: Citus is not on this machine, the RESO_CITUS_URL suites run the real one);
 * the partition routing the loader computes, against PostgreSQL's own on a real partitioned table;
 * and, on the run's worker clusters (test/pg/global-setup.ts), a partitioned load that fails leaving nothing on any server, a
 * replace that must name the workers again, and the CLI's flags.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { QueryError } from '../../src/errors.js';
import { checkDistribution, partitionsOf, spreadLayout } from '../../src/pg/distribution.js';
import { createStatements, indexStatements, Layout, SHARDED_RESOURCES } from '../../src/pg/layout.js';
import { loadIntoPostgres } from '../../src/pg/load.js';
import { RESOURCE_NAMES, type ResourceName } from '../../src/schema/types.js';
import type { TableSchema } from '../../src/schema/table-schema.js';
import { loadDataDirectory } from '../../src/store/load.js';
import { collectCli } from '../service/helpers.js';
import { freshDatabase, freshDatabases, LAYOUTS, pgSkip } from './helpers.js';

const jsonl = (records: object[]): string => records.map((r) => JSON.stringify(r)).join('\n') + '\n';
const temp: string[] = [];
function dataDir(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-dist-'));
  temp.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}
afterAll(() => {
  for (const dir of temp) rmSync(dir, { recursive: true, force: true });
});

const listing = (key: string, extra: object = {}): object => ({ ListingKey: key, City: 'Tampa', ListPrice: 100_000, OriginatingSystemName: 'MLS1', ...extra });

async function schemasOf(files: Record<string, string>): Promise<Record<ResourceName, TableSchema>> {
  const store = await loadDataDirectory(dataDir(files));
  return Object.fromEntries(RESOURCE_NAMES.map((r) => [r, store.table(r).schema])) as Record<ResourceName, TableSchema>;
}

describe('distribution options', () => {
  it('takes the three kinds and fills in the partition count', () => {
    expect(checkDistribution(undefined)).toEqual({ kind: 'single' });
    expect(checkDistribution({ kind: 'citus', shardCount: 8 })).toEqual({ kind: 'citus', shardCount: 8 });
    expect(checkDistribution({ kind: 'partitioned', workers: ['postgres://u@h1/db', 'postgres://u@h2:5433/db'] })).toEqual({
      kind: 'partitioned',
      workers: ['postgres://u@h1/db', 'postgres://u@h2:5433/db'],
      partitions: 4,
    });
  });

  it('refuses what cannot be spread, naming the option', () => {
    const bad: Array<[unknown, RegExp]> = [
      [{ kind: 'sharded' }, /distribution.kind must be/],
      [{ kind: 'citus', shardCount: 0 }, /shardCount must be an integer from 1/],
      [{ kind: 'citus', shardCount: 2.5 }, /shardCount/],
      [{ kind: 'partitioned', workers: [] }, /at least one worker URL/],
      [{ kind: 'partitioned', workers: 'postgres://h/db' }, /at least one worker URL/],
      [{ kind: 'partitioned', workers: ['http://h/db'] }, /must be a postgres:\/\/ URL/],
      [{ kind: 'partitioned', workers: ['postgres://h'] }, /must name a host and a database/],
      [{ kind: 'partitioned', workers: ['postgres://h/a', 'postgres://h/b'], partitions: 1 }, /partitions must be an integer from the number of workers \(2\)/],
      [{ kind: 'partitioned', workers: ['postgres://h/a'], partitions: 257 }, /to 256/],
    ];
    for (const [value, message] of bad) expect(() => checkDistribution(value as never), JSON.stringify(value)).toThrow(message);
  });
});

describe('distributed DDL', () => {
  let schemas: Record<ResourceName, TableSchema>;
  beforeAll(async () => {
    schemas = await schemasOf({
      'Property.jsonl': jsonl([listing('A')]),
      'Media.jsonl': jsonl([{ MediaKey: 'M1', ResourceRecordKey: 'A', ResourceName: 'Property', Order: 1 }]),
      'OpenHouse.jsonl': jsonl([{ OpenHouseKey: 'O1', ListingKey: 'A' }]),
    });
  });
  const tableStatement = (statements: string[], r: ResourceName): string => statements.find((s) => s.startsWith(`CREATE TABLE "reso"."${r}" `))!;

  it('the sharded resources are Property and its children, spread on the listing key', () => {
    expect([...SHARDED_RESOURCES].sort()).toEqual(['Media', 'OpenHouse', 'Property', 'PropertyChange']);
  });

  it('single node: every table keyed by its own key', () => {
    const statements = createStatements(new Layout('reso'), schemas);
    expect(tableStatement(statements, 'Media')).toMatch(/PRIMARY KEY \("MediaKey"\)\)$/);
    expect(tableStatement(statements, 'Property')).toMatch(/PRIMARY KEY \("ListingKey"\)\)$/);
  });

  it('Citus: a child table’s primary key holds its listing key, the distribution column; a child table the data never had still gets the column', () => {
    const statements = createStatements(new Layout('reso'), schemas, 'citus');
    expect(tableStatement(statements, 'Property')).toMatch(/PRIMARY KEY \("ListingKey"\)\)$/);
    expect(tableStatement(statements, 'Media')).toMatch(/PRIMARY KEY \("ResourceRecordKey", "MediaKey"\)\)$/);
    expect(tableStatement(statements, 'OpenHouse')).toMatch(/PRIMARY KEY \("ListingKey", "OpenHouseKey"\)\)$/);
    expect(tableStatement(statements, 'PropertyChange')).toMatch(/"ListingKey" text COLLATE "C", PRIMARY KEY \("ListingKey", "[A-Za-z]+"\)\)$/);
    expect(tableStatement(statements, 'Member')).toMatch(/PRIMARY KEY \("MemberKey"\)\)$/);
  });

  it('Citus: a child table has an index on its own key besides the primary key that leads with the listing key; a partitioned coordinator indexes only its own tables', () => {
    const citus = indexStatements(new Layout('reso'), schemas, 'citus');
    expect(citus).toContain('CREATE INDEX "Media##own" ON "reso"."Media" ("MediaKey")');
    expect(citus).toContain('CREATE INDEX "OpenHouse##own" ON "reso"."OpenHouse" ("OpenHouseKey")');
    expect(indexStatements(new Layout('reso'), schemas).filter((i) => i.includes('##own'))).toEqual([]);
    const partitioned = indexStatements(new Layout('reso'), schemas, 'partitioned');
    for (const r of SHARDED_RESOURCES) expect(partitioned.filter((i) => i.includes(` ON "reso"."${r}" `))).toEqual([]);
    expect(partitioned.some((i) => i.includes(' ON "reso"."Member" '))).toBe(true);
  });

  it('partitioned: the sharded parents are hash-partitioned on the listing key, without a primary key', () => {
    const statements = createStatements(new Layout('reso'), schemas, 'partitioned');
    expect(tableStatement(statements, 'Property')).toMatch(/\) PARTITION BY HASH \("ListingKey"\)$/);
    expect(tableStatement(statements, 'Media')).toMatch(/\) PARTITION BY HASH \("ResourceRecordKey"\)$/);
    for (const r of SHARDED_RESOURCES) expect(tableStatement(statements, r)).not.toMatch(/PRIMARY KEY/);
    expect(tableStatement(statements, 'Office')).toMatch(/PRIMARY KEY \("OfficeKey"\)\)$/);
  });

  it('Citus: Property distributed, its children co-located with it, every other table a reference table', async () => {
    const calls: Array<{ text: string; values: unknown[] }> = [];
    const db = {
      query: (text: string, values: unknown[] = []) => {
        calls.push({ text, values });
        return Promise.resolve({ rows: [] } as unknown as pg.QueryResult);
      },
    };
    const spread = await spreadLayout(db as never, () => Promise.reject(new Error('no worker connection on Citus')), new Layout('reso'), schemas, {
      kind: 'citus',
      shardCount: 16,
    });
    expect(spread).toEqual({ record: { kind: 'citus' }, workers: null });
    expect(calls[0]).toEqual({ text: "SELECT set_config('citus.shard_count', $1, true)", values: ['16'] });
    const distributed = calls.filter((c) => c.text.includes('create_distributed_table')).map((c) => c.values);
    expect(distributed).toEqual([
      ['"reso"."Property"', 'ListingKey', 'default'],
      ['"reso"."Media"', 'ResourceRecordKey', '"reso"."Property"'],
      ['"reso"."OpenHouse"', 'ListingKey', '"reso"."Property"'],
      ['"reso"."PropertyChange"', 'ListingKey', '"reso"."Property"'],
    ]);
    const reference = calls.filter((c) => c.text.includes('create_reference_table')).map((c) => c.values[0]);
    expect(reference.sort()).toEqual(
      [
        '"reso"."Member"',
        '"reso"."Office"',
        '"reso"."Lookup"',
        '"reso"."EntityEvent"',
        '"reso"."#meta"',
        '"reso"."#terms"',
        '"reso"."#search"',
        '"reso"."#first"',
      ].sort(),
    );
    // every value went as a bind parameter
    for (const c of calls) expect(c.text).not.toMatch(/reso"\."/);
  });
});

describe.skipIf(pgSkip)('partition routing', () => {
  it('partitionsOf gives the partition PostgreSQL routes each key to, for several moduli', async () => {
    const pool = new pg.Pool({ connectionString: await freshDatabase('route') });
    try {
      const keys = ['', 'A', 'a', 'ListingKey-1', 'Ünïcödé', '😀 emoji', 'x'.repeat(300), ...Array.from({ length: 500 }, (_, i) => `K${i * 7919}`)];
      for (const modulus of [1, 2, 3, 4, 7, 16]) {
        await pool.query('DROP TABLE IF EXISTS routed');
        await pool.query('CREATE TABLE routed (k text COLLATE "C") PARTITION BY HASH (k)');
        for (let i = 0; i < modulus; i++) await pool.query(`CREATE TABLE routed_${i} PARTITION OF routed FOR VALUES WITH (MODULUS ${modulus}, REMAINDER ${i})`);
        await pool.query('INSERT INTO routed SELECT unnest($1::text[])', [[...keys, null]]);
        const { rows } = await pool.query<{ k: string | null; part: string }>('SELECT k, tableoid::regclass::text AS part FROM routed');
        const actual = new Map(rows.map((r) => [r.k, Number(r.part.slice('routed_'.length))]));
        const computed = await partitionsOf(pool, [...keys, null], modulus);
        expect(Array.from(computed), `modulus ${modulus}`).toEqual([...keys, null].map((k) => actual.get(k)));
        if (modulus > 2) expect(new Set(computed).size).toBe(modulus);
      }
    } finally {
      await pool.end();
    }
  });
});

describe.skipIf(pgSkip || !LAYOUTS.includes('partitioned'))('a partitioned layout on real worker clusters', () => {
  let coordinator: string;
  let workerUrls: string[];
  beforeAll(async () => {
    [coordinator, ...workerUrls] = await freshDatabases(inject('pgWorkerUrls'), 'dist');
  });

  async function workerTables(url: string): Promise<string[]> {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const { rows } = await c.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'reso' AND c.relkind = 'r' ORDER BY 1`,
      );
      return rows.map((r) => r.name);
    } finally {
      await c.end();
    }
  }

  it('a load that fails on a worker leaves nothing on any server; the next load succeeds', async () => {
    const pool = new pg.Pool({ connectionString: coordinator });
    try {
      const bad = await loadDataDirectory(dataDir({ 'Property.jsonl': jsonl([listing('A'), listing('B', { City: 'nul\u0000here' })]) }));
      const err = await loadIntoPostgres(pool, new Layout('reso'), bad, { distribution: { kind: 'partitioned', workers: workerUrls } }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(QueryError);
      expect((err as QueryError).code).toBe('PgUnsupportedValue');
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'reso'`);
      expect(rows[0].n).toBe(0);
      for (const url of workerUrls) expect(await workerTables(url)).toEqual([]);

      const good = await loadDataDirectory(dataDir({ 'Property.jsonl': jsonl([listing('A'), listing('B'), listing('C')]) }));
      const summary = await loadIntoPostgres(pool, new Layout('reso'), good, { distribution: { kind: 'partitioned', workers: workerUrls, partitions: 3 } });
      expect(summary.tables.Property).toBe(3);
      // partitions 0 and 2 on the first worker, 1 on the second, one table per sharded resource each
      expect((await workerTables(workerUrls[0])).filter((t) => t.startsWith('Property#'))).toEqual(['Property#p0', 'Property#p2']);
      expect(await workerTables(workerUrls[1])).toEqual(['Media#p1', 'OpenHouse#p1', 'Property#p1', 'PropertyChange#p1']);
      const keys = await pool.query<{ k: string }>(`SELECT "ListingKey" AS k FROM reso."Property" ORDER BY 1`);
      expect(keys.rows.map((r) => r.k)).toEqual(['A', 'B', 'C']);

      // replacing it must name the workers again (their URLs are not kept), and nothing changes until then
      const again = await loadIntoPostgres(pool, new Layout('reso'), good, { replace: true }).catch((e: unknown) => e);
      expect(again).toMatchObject({ code: 'PgDistributionRequired' });
      expect((again as Error).message).toMatch(/partitioned over 2 workers; name them again/);
      expect((await pool.query(`SELECT count(*)::int AS n FROM reso."Property"`)).rows[0]).toEqual({ n: 3 });
    } finally {
      await pool.end();
    }
  }, 120_000);

  it('the CLI: pg init --workers loads the embedded data set partitioned; contradictory flags are usage errors', async () => {
    const [db, ...urls] = await freshDatabases(inject('pgWorkerUrls'), 'cli');
    const init = await collectCli(['pg', 'init', '--url', db, '--workers', urls.join(','), '--partitions', '3']);
    expect(init.err).toMatch(/^loading /);
    expect(init.out).toMatch(/^loaded [\d,]+ listings/);
    expect(init.code).toBe(0);
    const query = await collectCli(['query', '--postgres', db, '--now', '2025-06-01T00:00:00Z', '$count=true&$top=0']);
    expect(query.code).toBe(0);
    expect(JSON.parse(query.out)['@odata.count']).toBe(Number(/^loaded ([\d,]+)/.exec(init.out)![1].replace(/,/g, '')));

    for (const [args, message] of [
      [['--citus', '--workers', urls.join(',')], /--citus and --workers are two different layouts/],
      [['--shard-count', '4'], /--shard-count goes with --citus/],
      [['--partitions', '4'], /--partitions goes with --workers/],
      [['--workers', urls.join(','), '--partitions', 'many'], /--partitions takes an integer/],
      [['--workers', 'http://nowhere/db'], /a worker must be a postgres:\/\/ URL/],
    ] as const) {
      const r = await collectCli(['pg', 'init', '--url', db, ...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toMatch(message);
    }
  }, 180_000);
});
