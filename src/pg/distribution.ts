/**
 * How a layout is spread over servers (DESIGN.md, "Scale-out"). The table and column names on
 * the server the engine talks to are the single-node ones in every case, so every compiled
 * statement is the same; only the DDL, the bulk load and a new field's ALTER TABLE differ.
 *
 * - `single`: plain PostgreSQL, every table on one server.
 * - `citus`: Citus. Property is hash-distributed on ListingKey; Media (ResourceRecordKey),
 *   OpenHouse and PropertyChange (ListingKey) are co-located with it, so a listing's children are
 *   on its shard and `$expand` and navigation paths run shard-locally; Member, Office, Lookup,
 *   EntityEvent and the engine's own tables (`#meta`, `#terms`, `#search`, `#first`) are
 *   reference tables, on every node, so the term statistics BM25 takes are global (no per-shard
 *   idf) and joins with them stay local.
 * - `partitioned`: what Citus does, with PostgreSQL's own parts (for CI and for teams without
 *   Citus): the coordinator's Property, Media, OpenHouse and PropertyChange are hash-partitioned
 *   on the listing key with the same modulus, partition i of each a postgres_fdw foreign table on
 *   worker i mod W, in a table `<Resource>#p<i>` of the same schema there; the other tables stay on
 *   the coordinator. Equal remainders hold equal listing keys, so a listing and its children are
 *   on one worker, and PostgreSQL's partitionwise join and aggregation send each partition's part
 *   to its worker.
 *
 * Worker connection settings go to the coordinator's catalog (a foreign server per worker, a user
 * mapping with the URL's user and password); `#meta` records only the kind, the partition count
 * and the server names. Everything a caller gives (URLs, counts) reaches SQL as bind parameters or
 * through format() on the server, never spliced into statement text.
 */
import type pg from 'pg';
import { parse as parseConnectionString } from 'pg-connection-string';
import { shownUrl } from './connect.js';
import { RESOURCE_NAMES, type ResourceName } from '../schema/types.js';
import type { TableSchema } from '../schema/table-schema.js';
import { columnDefinitions, quote, SHARDED_RESOURCES, shardColumn, tableIndexStatements, type Layout, type TableSpread } from './layout.js';

export type Distribution =
  | { readonly kind: 'single' }
  | {
      readonly kind: 'citus';
      /** Shards per distributed table (default: the cluster's citus.shard_count, 32 unless set). */
      readonly shardCount?: number;
    }
  | {
      readonly kind: 'partitioned';
      /** The workers' connection URLs (postgres://user:password@host:port/database), at least one. */
      readonly workers: readonly string[];
      /** Hash partitions per sharded table (default: two per worker), spread over the workers in turn. */
      readonly partitions?: number;
    };

/** A partitioned layout's partition count: as given, else two per worker. */
function partitionCount(d: { readonly workers: readonly unknown[]; readonly partitions?: number }): number {
  return d.partitions ?? 2 * d.workers.length;
}

export const SINGLE_NODE: Distribution = { kind: 'single' };

/** What `#meta` key `distribution` records: the kind, and for `partitioned` the partition count and the coordinator's foreign server per worker. */
export type DistributionRecord =
  { readonly kind: 'single' } | { readonly kind: 'citus' } | { readonly kind: 'partitioned'; readonly partitions: number; readonly servers: readonly string[] };

/** Most hash partitions per table a partitioned layout takes (each is a foreign table and a remote scan). */
export const MAX_PARTITIONS = 256;

/** Checks a distribution a caller gives; a TypeError names what is wrong. */
export function checkDistribution(value: Distribution | undefined): Distribution {
  if (value === undefined) return SINGLE_NODE;
  switch (value.kind) {
    case 'single':
      return value;
    case 'citus':
      if (value.shardCount !== undefined && !(Number.isSafeInteger(value.shardCount) && value.shardCount >= 1 && value.shardCount <= 64_000))
        throw new TypeError(`distribution.shardCount must be an integer from 1 to 64000, got ${String(value.shardCount)}`);
      return value;
    case 'partitioned': {
      const workers: readonly unknown[] = Array.isArray(value.workers) ? value.workers : [];
      if (workers.length === 0) throw new TypeError('distribution.workers must list at least one worker URL');
      for (const url of workers) workerSettings(url);
      const partitions = partitionCount(value);
      if (!Number.isSafeInteger(partitions) || partitions < value.workers.length || partitions > MAX_PARTITIONS)
        throw new TypeError(
          `distribution.partitions must be an integer from the number of workers (${value.workers.length}) to ${MAX_PARTITIONS}, got ${String(partitions)}`,
        );
      return { ...value, partitions };
    }
    default:
      throw new TypeError(`distribution.kind must be 'single', 'citus' or 'partitioned', got ${JSON.stringify((value as { kind?: unknown }).kind)}`);
  }
}

/** How the sharded resources' tables are spread under a distribution. */
export function spreadOf(d: Distribution | DistributionRecord): Exclude<TableSpread, 'partition'> {
  return d.kind === 'single' ? 'local' : d.kind;
}

interface WorkerSettings {
  readonly host: string;
  readonly port: string;
  readonly dbname: string;
  readonly user: string | null;
  readonly password: string | null;
}

/** A worker URL's connection settings, as the coordinator's foreign server and user mapping take them. */
function workerSettings(url: unknown): WorkerSettings {
  if (typeof url !== 'string' || !/^postgres(ql)?:\/\//.test(url)) throw new TypeError(`a worker must be a postgres:// URL, got ${JSON.stringify(url)}`);
  const c = parseConnectionString(url);
  if (!c.host || !c.database) throw new TypeError(`worker URL ${shownUrl(url)} must name a host and a database`);
  return { host: c.host, port: c.port ?? '5432', dbname: c.database, user: c.user ?? null, password: c.password ?? null };
}

/** The foreign server of worker i of a layout: a database-wide name, so it carries the layout's schema. */
function serverName(layout: Layout, i: number): string {
  return `${layout.schema}#w${i}`;
}

/** The worker table holding partition i of a sharded resource, qualified (the layout's schema on the worker). */
export function partitionTable(layout: Layout, resource: ResourceName, i: number): string {
  return `${quote(layout.schema)}.${quote(`${resource}#p${i}`)}`;
}

/** The worker index of partition i. */
function workerOf(d: { readonly workers: readonly string[] }, i: number): number {
  return i % d.workers.length;
}

/** Anything that runs a statement. */
interface Db {
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/** Runs a statement that format() made on the server from a template of fixed text and the values. */
async function runFormatted(db: Db, template: string, values: readonly unknown[]): Promise<void> {
  const placeholders = values.map((_, i) => `$${i + 2}::text`).join(', ');
  const { rows } = await db.query<{ statement: string }>(`SELECT format($1::text${placeholders === '' ? '' : `, ${placeholders}`}) AS statement`, [
    template,
    ...values,
  ]);
  await db.query(rows[0].statement);
}

/** The connections a partitioned load holds to its workers, each in a transaction until commit or rollback. */
export interface WorkerConnections {
  /** Worker w's client. */
  readonly clients: readonly pg.Client[];
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

/**
 * Spreads a layout whose tables createStatements just made (in the caller's transaction on the
 * coordinator): Citus distributes and replicates them; a partitioned layout gets its foreign
 * servers, user mappings and foreign partitions, and each worker, in a transaction of its own
 * (returned, for the load to fill and then commit), the partition tables. Returns the record for
 * `#meta`.
 */
export async function spreadLayout(
  client: Db,
  connect: (url: string) => Promise<pg.Client>,
  layout: Layout,
  schemas: Readonly<Record<ResourceName, TableSchema>>,
  d: Distribution,
): Promise<{ record: DistributionRecord; workers: WorkerConnections | null }> {
  if (d.kind === 'single') return { record: { kind: 'single' }, workers: null };
  if (d.kind === 'citus') {
    if (d.shardCount !== undefined) await client.query(`SELECT set_config('citus.shard_count', $1, true)`, [String(d.shardCount)]);
    const property = layout.table('Property');
    for (const r of SHARDED_RESOURCES) {
      // children go with their listing: the same shard count and hash ranges as Property
      await client.query('SELECT create_distributed_table($1::regclass, $2, colocate_with => $3)', [
        layout.table(r),
        shardColumn(r),
        r === 'Property' ? 'default' : property,
      ]);
    }
    for (const table of [
      ...RESOURCE_NAMES.filter((r) => !SHARDED_RESOURCES.includes(r)).map((r) => layout.table(r)),
      layout.meta,
      layout.terms,
      layout.search,
      layout.first,
    ]) {
      await client.query('SELECT create_reference_table($1::regclass)', [table]);
    }
    return { record: { kind: 'citus' }, workers: null };
  }
  const partitions = partitionCount(d);
  const servers = d.workers.map((_, w) => serverName(layout, w));
  await client.query('CREATE EXTENSION IF NOT EXISTS postgres_fdw');
  // a new field's column is added on the workers through dblink (addColumns)
  await client.query('CREATE EXTENSION IF NOT EXISTS dblink');
  for (const [w, url] of d.workers.entries()) {
    const s = workerSettings(url);
    await runFormatted(client, 'DROP SERVER IF EXISTS %I CASCADE', [servers[w]]);
    // extensions: PostGIS functions and operators may be sent to the worker; async_capable: the
    // partitions of one Append are scanned at once. fetch_size (rows per round trip of a remote
    // scan) stays PostgreSQL's 100: LIMIT is not sent through the partitions' Merge Append, so a
    // page of 25 costs a whole first fetch per partition (1000 rows each at fetch_size 1000)
    await runFormatted(
      client,
      `CREATE SERVER %I FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host %L, port %L, dbname %L, extensions 'postgis', batch_size '1000', async_capable 'true')`,
      [servers[w], s.host, s.port, s.dbname],
    );
    const mapping: string[] = [];
    const values: unknown[] = [servers[w]];
    if (s.user !== null) {
      mapping.push('user %L');
      values.push(s.user);
    }
    if (s.password !== null) {
      mapping.push('password %L');
      values.push(s.password);
    }
    await runFormatted(client, `CREATE USER MAPPING FOR CURRENT_USER SERVER %I${mapping.length === 0 ? '' : ` OPTIONS (${mapping.join(', ')})`}`, values);
  }
  const clients: pg.Client[] = [];
  const workers: WorkerConnections = {
    clients,
    commit: async () => {
      for (const c of clients) await c.query('COMMIT');
      await Promise.all(clients.map((c) => c.end()));
    },
    rollback: async () => {
      await Promise.all(clients.map((c) => c.query('ROLLBACK').catch(() => undefined)));
      await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
    },
  };
  try {
    for (const url of d.workers) {
      const c = await connect(url);
      clients.push(c);
      await c.query('BEGIN');
      await c.query('CREATE EXTENSION IF NOT EXISTS postgis');
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${quote(layout.schema)}`);
    }
    for (const r of SHARDED_RESOURCES) {
      for (let i = 0; i < partitions; i++) {
        const w = workerOf(d, i);
        const table = partitionTable(layout, r, i);
        await clients[w].query(`DROP TABLE IF EXISTS ${table}`);
        await clients[w].query(`CREATE TABLE ${table} (${columnDefinitions(schemas[r], 'partition').join(', ')})`);
        await runFormatted(
          client,
          `CREATE FOREIGN TABLE ${partitionTable(layout, r, i)} PARTITION OF ${layout.table(r)} FOR VALUES WITH (MODULUS ${partitions}, REMAINDER ${i}) SERVER %I OPTIONS (schema_name %L, table_name %L)`,
          [servers[w], layout.schema, `${r}#p${i}`],
        );
      }
    }
  } catch (err) {
    await workers.rollback();
    throw err;
  }
  return { record: { kind: 'partitioned', partitions, servers }, workers };
}

/** The index statements of every worker partition, per worker (made after the load's COPY, on the worker's client). */
export function partitionIndexStatements(
  layout: Layout,
  schemas: Readonly<Record<ResourceName, TableSchema>>,
  d: Extract<DistributionRecord, { kind: 'partitioned' }>,
): string[][] {
  const out: string[][] = d.servers.map(() => []);
  for (const r of SHARDED_RESOURCES) {
    for (let i = 0; i < d.partitions; i++) out[i % d.servers.length].push(...tableIndexStatements(schemas[r], partitionTable(layout, r, i), null));
  }
  return out;
}

/**
 * The partition (remainder) of each listing key under PostgreSQL's hash partitioning with this
 * modulus, computed by the coordinator as its tuple routing does (partbounds.c: the text's
 * extended hash with the partition seed, combined into 0, modulo the modulus; a null key is
 * remainder 0). The loader checks the formula against satisfies_hash_partition on its first rows.
 */
export async function partitionsOf(db: Db, keys: ReadonlyArray<string | null>, modulus: number): Promise<Int32Array> {
  const { rows } = await db.query<{ r: number | null }>(
    `SELECT mod(mod(hashtextextended(k, 8816678312871386365)::numeric + 18446744073709551616 + 5305509591434766563, 18446744073709551616), $2::int)::int AS r
     FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i`,
    [keys, modulus],
  );
  return Int32Array.from(rows, (row) => row.r ?? 0);
}

/** Throws when the coordinator routes any of these keys elsewhere than partitionsOf says (a PostgreSQL whose hashing differs). */
export async function checkPartitions(
  db: Db,
  layout: Layout,
  resource: ResourceName,
  keys: readonly string[],
  remainders: Int32Array,
  modulus: number,
): Promise<void> {
  if (keys.length === 0) return;
  const { rows } = await db.query<{ bad: number }>(
    `SELECT count(*)::int AS bad FROM unnest($1::text[], $2::int[]) AS u(k, r) WHERE NOT satisfies_hash_partition($3::regclass, $4::int, r, k)`,
    [keys, Array.from(remainders), layout.table(resource), modulus],
  );
  if (rows[0].bad > 0) throw new Error(`hash partition routing differs from the coordinator's for ${rows[0].bad} of ${keys.length} ${resource} keys`);
}

/** The distribution a layout was made with (`#meta` key `distribution`; a layout from before it is single-node). */
export function distributionRecord(value: unknown): DistributionRecord {
  if (value === undefined || value === null) return { kind: 'single' };
  const v = value as { kind?: unknown; partitions?: unknown; servers?: unknown };
  if (v.kind === 'single' || v.kind === 'citus') return { kind: v.kind };
  if (v.kind === 'partitioned' && Number.isSafeInteger(v.partitions) && Array.isArray(v.servers) && v.servers.every((s) => typeof s === 'string'))
    return { kind: 'partitioned', partitions: v.partitions as number, servers: v.servers };
  throw new Error(`not a distribution reso-engine writes: ${JSON.stringify(value)}`);
}

/**
 * Adds columns to a table of a spread layout, outside the change that needs them (src/pg/write.ts):
 * on Citus an ALTER TABLE the coordinator propagates; on a partitioned layout first each worker's
 * partition tables (through dblink, with the coordinator's foreign servers), then the coordinator's
 * table, whose foreign partitions take the column too. A column of the same name left by a change
 * that failed after adding it (it is not in the schema, so it holds nothing) is dropped first.
 */
export async function addColumns(db: Db, layout: Layout, record: DistributionRecord, resource: ResourceName, definitions: readonly string[]): Promise<void> {
  // a definition starts with its quoted column name (layout.ts fieldColumnDefinitions)
  const drop = definitions.map((d) => `DROP COLUMN IF EXISTS ${d.slice(0, d.indexOf('"', 1) + 1)}`);
  const alter = (table: string): string => `ALTER TABLE ${table} ${[...drop, ...definitions.map((d) => `ADD COLUMN ${d}`)].join(', ')}`;
  if (record.kind === 'partitioned' && SHARDED_RESOURCES.includes(resource)) {
    for (let i = 0; i < record.partitions; i++) {
      await db.query('SELECT dblink_exec($1, $2)', [record.servers[i % record.servers.length], alter(partitionTable(layout, resource, i))]);
    }
  }
  await db.query(alter(layout.table(resource)));
}
