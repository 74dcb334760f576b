/**
 * The PostgreSQL backend's engine: the same public methods as the in-memory Engine (src/engine.ts),
 * asynchronous where PostgreSQL makes them so, over a database laid out by src/pg/layout.ts.
 * Queries are planned exactly as in memory (src/plan: the same parser, binder, errors and plans,
 * kept in a plan cache), then run as parameterized SQL (src/pg/query.ts). The schemas, accounts
 * and profiles are read once at open (`#meta`); writes (src/pg/write.ts) keep them current.
 *
 * Failures of the database (connection lost, server restarting, statement timeout, pool
 * exhausted) are BackendUnavailableError (503 with Retry-After over HTTP); the pool reconnects by
 * itself on the next call.
 */
import { BackendUnavailableError, QueryError } from '../errors.js';
import type { QueryResult } from '../exec/page.js';
import type { ChangeOperation, ChangeSummary } from '../live/change.js';
import { checkOperations } from '../live/change.js';
import { PlanCache } from '../plan/cache.js';
import { explainText } from '../plan/explain.js';
import type { Plan, QueryResource } from '../plan/plan.js';
import { singleNavigationOf, type PlanRequest, type PlanStatistics } from '../plan/planner.js';
import type { TableSchema } from '../schema/table-schema.js';
import { RESOURCE_NAMES, type RecordResourceName, type ResourceName } from '../schema/types.js';
import type { JsonValue } from '../store/columns.js';
import { loadDataDirectory, loadRecords, type RecordsInput } from '../store/load.js';
import { queryText, type ExplainOptions, type QueryInput, type QueryOptions } from '../engine-options.js';
import { openPool, unavailable } from './connect.js';
import { DEFAULT_PG_SCHEMA, Layout } from './layout.js';
import { loadIntoPostgres } from './load.js';
import type { Distribution } from './distribution.js';
import { checkLayout, readSchemas } from './migrate.js';
import { countPlan, recordOf, runPlan, visibilitySql, type RunContext } from './query.js';
import { checkSearch } from './search.js';
import { Params, type ArrayQueryable } from './sql.js';
import { applyChanges } from './write.js';
import type pg from 'pg';

export interface PostgresOptions {
  /** A PostgreSQL connection URL (`postgres://user@host:port/database`). */
  readonly url: string;
  /** The PostgreSQL schema (namespace) holding the layout; default `reso`. */
  readonly schema?: string;
  /** Connections in the pool (default 10). */
  readonly poolSize?: number;
  /** Longest a statement may run, ms (default 30 s); longer is BackendUnavailable. */
  readonly statementTimeoutMs?: number;
  /** With `data`: replace a layout the schema already holds (default: refuse, PgSchemaExists). */
  readonly replace?: boolean;
  /**
   * With `data`: how the new layout is spread over servers (src/pg/distribution.ts; default one
   * server). Without `data` the database's own layout is read, however it is spread.
   */
  readonly distribution?: Distribution;
}

export interface PostgresOpenOptions {
  readonly postgres: PostgresOptions;
  /** A data directory, or records, loaded into the database first (with the in-memory loader's checks). */
  readonly data?: string | RecordsInput;
  readonly skipBadRecords?: boolean;
  /** The engine's clock (DaysOnMarket, now()); defaults to the system clock. */
  readonly now?: () => Date;
}

export class PostgresEngine {
  private readonly plans = new PlanCache();
  private readonly stats: PlanStatistics;
  /** Writes run one at a time, in call order. */
  private writes: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly pool: pg.Pool,
    readonly layout: Layout,
    private schemas: Readonly<Record<ResourceName, TableSchema>>,
    readonly accounts: unknown,
    readonly profiles: unknown,
    private readonly clock: () => number,
  ) {
    this.stats = {
      schemaOf: (resource) => this.schemas[resource],
      rowCount: () => 0,
      searchRows: (node) => {
        checkSearch(node);
        return 0;
      },
      lookupRows: () => null,
      textRows: () => null,
      rangeRows: () => null,
      geoRows: () => null,
    };
  }

  /** Opens an engine over a database (loading `data` into it first when given). */
  static async open(options: PostgresOpenOptions): Promise<PostgresEngine> {
    const now = options.now;
    const clock = now ? () => now().getTime() : () => Date.now();
    const layout = new Layout(options.postgres.schema ?? DEFAULT_PG_SCHEMA);
    const pool = openPool(options.postgres.url, { max: options.postgres.poolSize, statementTimeoutMs: options.postgres.statementTimeoutMs });
    try {
      if (options.data !== undefined) {
        const load = { skipBadRecords: options.skipBadRecords, now: clock };
        const store = typeof options.data === 'string' ? await loadDataDirectory(options.data, load) : loadRecords(options.data, load);
        await loadIntoPostgres(pool, layout, store, { replace: options.postgres.replace ?? false, distribution: options.postgres.distribution });
      }
      await checkLayout(pool, layout);
      const meta = await readSchemas(pool, layout);
      return new PostgresEngine(pool, layout, meta.schemas, meta.accounts, meta.profiles, clock);
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw unavailable(error) ?? error;
    }
  }

  /**
   * The pool (connections open, idle, and callers waiting for one) and whether the database
   * answers a `SELECT 1`: what the service's readiness route reports.
   */
  async health(): Promise<{ ok: boolean; pool: { total: number; idle: number; waiting: number }; latencyMs: number; error?: string }> {
    const started = performance.now();
    let error: string | undefined;
    try {
      await this.pool.query('SELECT 1');
    } catch (e) {
      error = (e as Error).message;
    }
    const pool = { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount };
    const latencyMs = Math.round((performance.now() - started) * 10) / 10;
    return error === undefined ? { ok: true, pool, latencyMs } : { ok: false, pool, latencyMs, error };
  }

  /** Closes the connection pool. */
  close(): Promise<void> {
    return this.pool.end();
  }

  schemaOf(resource: ResourceName): TableSchema {
    return this.schemas[resource];
  }

  now(): number {
    return this.clock();
  }

  private context(db: ArrayQueryable, options: QueryOptions): RunContext {
    return {
      db,
      layout: this.layout,
      schemaOf: (r) => this.schemas[r],
      nowMs: this.clock(),
      sources: options.sources,
      base: options.base ?? '',
      version: options.odataVersion,
    };
  }

  /** Runs `fn` on the pool, or on one client in a read-only snapshot when the plan reads with several statements. */
  private async read<T>(snapshot: boolean, fn: (db: ArrayQueryable) => Promise<T>): Promise<T> {
    try {
      if (!snapshot) return await fn(this.pool);
      const client = await this.pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
        const out = await fn(client);
        await client.query('COMMIT');
        return out;
      } catch (error) {
        broken = unavailable(error) !== null;
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.release(broken);
      }
    } catch (error) {
      throw unavailable(error) ?? error;
    }
  }

  private plan(request: PlanRequest): Plan {
    return this.plans.plan(request, this.stats);
  }

  query(resource: QueryResource, query: QueryInput, options: QueryOptions = {}): Promise<QueryResult> {
    return this.run({ resource, text: queryText(query), maxPageSize: options.maxPageSize }, options);
  }

  /** A navigation path, `Property('KEY')/Media` (see Engine.navigate). */
  navigate(resource: QueryResource, key: string, navigation: string, query: QueryInput, options: QueryOptions = {}): Promise<QueryResult> {
    return this.run({ resource, text: queryText(query), maxPageSize: options.maxPageSize, navigation: { key, name: navigation } }, options);
  }

  private async run(request: PlanRequest, options: QueryOptions): Promise<QueryResult> {
    const plan = this.plan(request);
    const snapshot = plan.access.kind === 'children' || (plan.expand !== null && plan.expand.length > 0) || plan.count || plan.grouping !== null;
    return this.read(snapshot, (db) => runPlan(plan, this.context(db, options)));
  }

  /** `Property('KEY')/ListAgent` (see Engine.navigateOne). */
  async navigateOne(
    resource: QueryResource,
    key: string,
    navigation: string,
    query: QueryInput,
    options: QueryOptions = {},
  ): Promise<Record<string, JsonValue> | null> {
    const reference = singleNavigationOf(resource, navigation);
    const plan = this.plan({ resource: reference.target, text: queryText(query) });
    return this.read(true, async (db) => {
      const ctx = this.context(db, options);
      const params = new Params();
      const where = [`t."ListingKey" = ${params.add(key, 'text')}`];
      const visible = visibilitySql('Property', 't', ctx, params);
      if (visible !== null) where.push(visible);
      const has = this.schemas.Property.field(reference.field) !== undefined;
      const r = await db.query<{ ref: string | null }>(
        `SELECT ${has ? `t."${reference.field}"` : 'NULL::text'} AS ref FROM ${this.layout.table('Property')} t WHERE ${where.join(' AND ')}`,
        params.values,
      );
      if (r.rows.length === 0) throw new QueryError('EntityNotFound', `No listing with ListingKey '${key.slice(0, 100)}' is visible to the caller's sources.`);
      const named = r.rows[0].ref;
      return typeof named === 'string' ? recordOf(plan, named, ctx) : null;
    });
  }

  /** The number of visible records the query's `$filter` matches (`/Property/$count`). */
  count(resource: QueryResource, query: QueryInput, options: Pick<QueryOptions, 'sources'> = {}): Promise<number> {
    const plan = this.plan({ resource, text: queryText(query), countOnly: true });
    return this.read(false, (db) => countPlan(plan, this.context(db, options)));
  }

  /** One record by key with $select, $expand and $ignorenulls, or null when none is visible. */
  entity(resource: QueryResource, key: string, query: QueryInput, options: QueryOptions = {}): Promise<Record<string, JsonValue> | null> {
    const plan = this.plan({ resource, text: queryText(query) });
    if (resource === 'EntityEvent' && !/^[1-9][0-9]{0,15}$/.test(key)) return Promise.resolve(null);
    return this.read(plan.expand !== null && plan.expand.length > 0, (db) => recordOf(plan, key, this.context(db, options)));
  }

  /** How a query would run: the plan as text with the SQL shape, or the Plan itself with `{ format: 'json' }`. */
  explain(resource: QueryResource, query: QueryInput, options?: ExplainOptions & { format?: 'text' }): Promise<string>;
  explain(resource: QueryResource, query: QueryInput, options: ExplainOptions & { format: 'json' }): Promise<Plan>;
  explain(resource: QueryResource, query: QueryInput, options: ExplainOptions = {}): Promise<string | Plan> {
    const plan = this.plans.plan({ resource, text: queryText(query), maxPageSize: options.maxPageSize, navigation: options.navigation }, this.stats);
    if (options.format === 'json') return Promise.resolve(plan);
    // the planner's in-memory estimates are not PostgreSQL's (its statistics here answer no size): left out
    return Promise.resolve(
      `${explainText({ ...plan, estimates: undefined }, { sources: options.sources, accessRows: null })}\nbackend: PostgreSQL (schema ${this.layout.schema}); the whole filter runs as one parameterized WHERE clause`,
    );
  }

  /** Whether a record of the resource has this key (any source). */
  has(resource: ResourceName, key: string): Promise<boolean> {
    return this.isVisible(resource, key, undefined);
  }

  /** Whether a record with this key exists and the caller's sources (absent: every source) see it. */
  isVisible(resource: ResourceName, key: string, sources?: readonly string[]): Promise<boolean> {
    return this.read(false, async (db) => {
      const params = new Params();
      const keyField = resource === 'EntityEvent' ? 'EntityEventSequence' : this.schemas[resource].key;
      if (resource === 'EntityEvent' && !/^[1-9][0-9]{0,15}$/.test(key)) return false;
      const where = [`t."${keyField}" = ${params.add(resource === 'EntityEvent' ? Number(key) : key)}`];
      const visible = visibilitySql(resource, 't', { layout: this.layout, schemaOf: (r) => this.schemas[r], sources }, params);
      if (visible !== null) where.push(visible);
      const r = await db.query(`SELECT 1 FROM ${this.layout.table(resource)} t WHERE ${where.join(' AND ')}`, params.values);
      return r.rows.length > 0;
    });
  }

  /** Every key of the resource in key order (any source). */
  keys(resource: ResourceName): Promise<string[]> {
    return this.read(false, async (db) => {
      const key = this.schemas[resource].key;
      const r = await db.query<{ k: string }>(`SELECT t."${key}" AS k FROM ${this.layout.table(resource)} t ORDER BY t."${key}"`);
      return r.rows.map((row) => row.k);
    });
  }

  upsert(resource: ResourceName, records: readonly unknown[]): Promise<ChangeSummary> {
    return this.apply([{ resource: resource as RecordResourceName, upsert: records }]);
  }

  remove(resource: ResourceName, keys: readonly string[]): Promise<ChangeSummary> {
    return this.apply([{ resource: resource as RecordResourceName, remove: keys }]);
  }

  /** Several operations as ONE transaction: readers see all of it or none of it. */
  apply(operations: readonly ChangeOperation[]): Promise<ChangeSummary> {
    const checked = checkOperations(operations);
    const run = this.writes.then(async () => {
      try {
        const out = await applyChanges(this.pool, this.layout, this.schemas, checked, this.clock);
        this.schemas = out.schemas;
        return out.summary;
      } catch (error) {
        throw unavailable(error) ?? error;
      }
    });
    this.writes = run.catch(() => undefined);
    return run;
  }
}

export { BackendUnavailableError, RESOURCE_NAMES };
