/**
 * The layout's version in the database and what to do about it. `#meta` key `layout` holds
 * `{ version, writtenBy }`: the layout version (src/pg/layout.ts LAYOUT_VERSION) and the
 * reso-engine version that wrote or last migrated it. A database of this build's version is read;
 * an older one is upgraded by the versioned MIGRATIONS in one transaction, or refused when no
 * chain of them reaches this version; a newer one is always refused. A database is never read
 * under a layout it was not written in.
 */
import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { QueryError } from '../errors.js';
import { SEARCH_FIELDS } from '../schema/search-fields.js';
import { RESOURCE_NAMES, type ResourceName } from '../schema/types.js';
import type { TableSchema } from '../schema/table-schema.js';
import type { LoadReport } from '../store/store.js';
import { transaction, unavailable } from './connect.js';
import { LAYOUT_VERSION, createStatements, indexStatements, quote, schemaFromJson, schemaToJson, type Layout, type TableSpread } from './layout.js';

/** One step of the layout: statements that turn a database of version `from` into version `to`. */
export interface Migration {
  readonly from: number;
  readonly to: number;
  /**
   * Run in order, in the migration's transaction, with `search_path` set to the layout's schema
   * (then `public`, for PostGIS): statements name the layout's tables unqualified.
   */
  readonly up: readonly string[];
}

/** The migrations of every layout version this build can upgrade (none yet: version 1 is the first). */
export const MIGRATIONS: readonly Migration[] = [];

/** This package's version, recorded as `writtenBy`. */
export const PACKAGE_VERSION: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
})();

export interface LayoutRecord {
  readonly version: number;
  readonly writtenBy: string;
}

export interface LayoutCheck {
  /** The version the database has now (this build's). */
  readonly version: number;
  /** The versions it went through when it was upgraded, oldest first ([] when it was current). */
  readonly migratedFrom: readonly number[];
}

/** Anything that runs a statement: a pool or a client. */
export interface Db {
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

const NOT_INITIALIZED_HINT = 'run `reso-engine pg load --data DIR --url URL` to load a data set into it';

/** The `#meta` value of `key`, or undefined when the row is absent. */
export async function readMeta(db: Db, layout: Layout, key: string, lock = false): Promise<unknown> {
  const { rows } = await db.query<{ value: unknown }>(`SELECT value FROM ${layout.meta} WHERE key = $1${lock ? ' FOR UPDATE' : ''}`, [key]);
  return rows.length === 0 ? undefined : rows[0].value;
}

/** Writes (or replaces) a `#meta` row. The value goes as JSON text, kept as written (the column is json). */
export async function writeMeta(db: Db, layout: Layout, key: string, value: unknown): Promise<void> {
  await db.query(`INSERT INTO ${layout.meta} (key, value) VALUES ($1, $2::json) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, [
    key,
    JSON.stringify(value ?? null),
  ]);
}

function layoutRecord(version: number): LayoutRecord {
  return { version, writtenBy: PACKAGE_VERSION };
}

/**
 * Creates the whole layout (schema, tables, `#meta` with the layout record and the schemas,
 * `#search` with an empty row per search field) on a client inside the caller's transaction.
 * Indexes are not made here (the loader makes them after its COPY).
 */
export async function createLayout(
  client: Db,
  layout: Layout,
  schemas: Readonly<Record<ResourceName, TableSchema>>,
  spread: TableSpread = 'local',
): Promise<void> {
  for (const statement of createStatements(layout, schemas, spread)) await client.query(statement);
  await writeMeta(client, layout, 'layout', layoutRecord(LAYOUT_VERSION));
  await writeMeta(client, layout, 'schemas', Object.fromEntries(RESOURCE_NAMES.map((r) => [r, schemaToJson(schemas[r])])));
  await client.query(`INSERT INTO ${layout.search} (field, n, total_length) SELECT unnest($1::text[]), 0, 0`, [SEARCH_FIELDS]);
}

/** Creates an empty layout (no rows, no accounts) in one transaction, indexes included. */
export async function initLayout(pool: pg.Pool, layout: Layout, schemas: Readonly<Record<ResourceName, TableSchema>>): Promise<void> {
  await transaction(pool, async (client) => {
    await createLayout(client, layout, schemas);
    for (const statement of indexStatements(layout, schemas)) await client.query(statement);
    await writeMeta(client, layout, 'accounts', null);
    await writeMeta(client, layout, 'profiles', null);
    await writeMeta(client, layout, 'report', null);
  });
}

/** The layout record of a database, or a PgNotInitialized / PgLayoutUnreadable error. */
async function readLayoutRecord(db: Db, layout: Layout, lock = false): Promise<LayoutRecord> {
  const { rows } = await db.query<{ exists: boolean }>('SELECT to_regclass($1) IS NOT NULL AS exists', [layout.meta]);
  if (!rows[0].exists) {
    throw new QueryError(
      'PgNotInitialized',
      `The PostgreSQL schema ${quote(layout.schema)} holds no reso-engine data (no "#meta" table); ${NOT_INITIALIZED_HINT}.`,
    );
  }
  const value = await readMeta(db, layout, 'layout', lock);
  if (value === undefined) {
    throw new QueryError('PgNotInitialized', `The PostgreSQL schema ${quote(layout.schema)} has no layout record in "#meta"; ${NOT_INITIALIZED_HINT}.`);
  }
  if (
    typeof value !== 'object' ||
    value === null ||
    !('version' in value) ||
    !('writtenBy' in value) ||
    !Number.isSafeInteger(value.version) ||
    typeof value.writtenBy !== 'string'
  ) {
    throw new QueryError(
      'PgLayoutUnreadable',
      `The layout record of PostgreSQL schema ${quote(layout.schema)} is not one reso-engine writes (${JSON.stringify(value)}); reload the data with \`reso-engine pg load --replace\`.`,
    );
  }
  return { version: value.version as number, writtenBy: value.writtenBy };
}

/** The shortest chain of migrations from `from` to `to`, or null when there is none. */
export function migrationPath(migrations: readonly Migration[], from: number, to: number): Migration[] | null {
  const via = new Map<number, Migration[]>([[from, []]]);
  const queue = [from];
  while (queue.length > 0) {
    const at = queue.shift()!;
    if (at === to) return via.get(at)!;
    for (const m of migrations) {
      if (m.from !== at || m.to <= m.from || m.to > to || via.has(m.to)) continue;
      via.set(m.to, [...via.get(at)!, m]);
      queue.push(m.to);
    }
  }
  return null;
}

export interface CheckLayoutOptions {
  /** The migrations to use (default MIGRATIONS; tests pass their own). */
  readonly migrations?: readonly Migration[];
  /** The version this build reads (default LAYOUT_VERSION; tests pass their own). */
  readonly version?: number;
}

/**
 * Makes sure the database's layout is this build's: returns when it is, upgrades it in one
 * transaction when migrations lead from its version to this one, and otherwise throws
 * PgNotInitialized (no layout), PgLayoutTooNew or PgLayoutTooOld (no migration path).
 */
export async function checkLayout(pool: pg.Pool, layout: Layout, options: CheckLayoutOptions = {}): Promise<LayoutCheck> {
  const migrations = options.migrations ?? MIGRATIONS;
  const target = options.version ?? LAYOUT_VERSION;
  let found: LayoutRecord;
  try {
    found = await readLayoutRecord(pool, layout);
  } catch (err) {
    throw unavailable(err) ?? err;
  }
  if (found.version === target) return { version: target, migratedFrom: [] };
  if (found.version > target) throw tooNew(layout, found, target);
  if (migrationPath(migrations, found.version, target) === null) throw tooOld(layout, found, target);
  return transaction(pool, async (client) => {
    // the row lock makes concurrent starts migrate once: the second sees the new version
    const now = await readLayoutRecord(client, layout, true);
    if (now.version === target) return { version: target, migratedFrom: [] };
    if (now.version > target) throw tooNew(layout, now, target);
    const path = migrationPath(migrations, now.version, target);
    if (path === null) throw tooOld(layout, now, target);
    await client.query(`SET LOCAL search_path TO ${quote(layout.schema)}, public`);
    // a pool's statement timeout is for queries, not for rewriting tables
    await client.query('SET LOCAL statement_timeout = 0');
    for (const m of path) for (const statement of m.up) await client.query(statement);
    await writeMeta(client, layout, 'layout', layoutRecord(target));
    return { version: target, migratedFrom: path.map((m) => m.from) };
  });
}

function tooNew(layout: Layout, found: LayoutRecord, target: number): QueryError {
  return new QueryError(
    'PgLayoutTooNew',
    `The PostgreSQL schema ${quote(layout.schema)} has layout version ${found.version} (written by reso-engine ${found.writtenBy}); this build (reso-engine ${PACKAGE_VERSION}) reads layout version ${target} and will not read a newer one: upgrade reso-engine.`,
  );
}

function tooOld(layout: Layout, found: LayoutRecord, target: number): QueryError {
  return new QueryError(
    'PgLayoutTooOld',
    `The PostgreSQL schema ${quote(layout.schema)} has layout version ${found.version} (written by reso-engine ${found.writtenBy}); this build (reso-engine ${PACKAGE_VERSION}) reads layout version ${target} and has no migration from version ${found.version}: reload the data with \`reso-engine pg load --replace\`.`,
  );
}

/** What a loaded layout holds besides its rows. */
export interface StoredMeta {
  readonly schemas: Readonly<Record<ResourceName, TableSchema>>;
  /** accounts.json as loaded, or null. */
  readonly accounts: unknown;
  /** mls_profiles.json as loaded, or null. */
  readonly profiles: unknown;
  /** The load's report, or null (a layout made by initLayout). */
  readonly report: LoadReport | null;
}

/** The table schemas, accounts, profiles and load report of a checked layout (checkLayout first). */
export async function readSchemas(db: Db, layout: Layout): Promise<StoredMeta> {
  let rows: Array<{ key: string; value: unknown }>;
  try {
    ({ rows } = await db.query<{ key: string; value: unknown }>(`SELECT key, value FROM ${layout.meta} WHERE key = ANY($1::text[])`, [
      ['schemas', 'accounts', 'profiles', 'report'],
    ]));
  } catch (err) {
    throw unavailable(err) ?? err;
  }
  const meta = new Map(rows.map((r) => [r.key, r.value]));
  const json = meta.get('schemas') as Record<string, unknown> | null | undefined;
  const schemas = {} as Record<ResourceName, TableSchema>;
  for (const r of RESOURCE_NAMES) {
    try {
      schemas[r] = schemaFromJson(r, json?.[r] ?? null);
    } catch (err) {
      throw new QueryError('PgLayoutUnreadable', `The schemas of PostgreSQL schema ${quote(layout.schema)} cannot be read: ${(err as Error).message}.`);
    }
  }
  return {
    schemas,
    accounts: meta.get('accounts') ?? null,
    profiles: meta.get('profiles') ?? null,
    report: (meta.get('report') as LoadReport | undefined) ?? null,
  };
}
