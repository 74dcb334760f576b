/**
 * The bulk load: a Store made by the in-memory loader (so parsing, checking and the strict/skip
 * error reporting, with file and line, are the in-memory engine's own) written into PostgreSQL in
 * one transaction: the layout's tables, every live row of every table by COPY (text format), each
 * listing's search tokens (the in-memory engine's own token sources, address normalization
 * applied) with their count, the term statistics (`#terms`: live listings per term; `#search`:
 * live listing count and total token length per search field), then the indexes, ANALYZE and the
 * metadata. A load that fails anywhere leaves the database as it was.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { QueryError } from '../errors.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../schema/search-fields.js';
import { RESOURCE_NAMES, type ResourceName } from '../schema/types.js';
import type { TableSchema } from '../schema/table-schema.js';
import { searchTokenSources } from '../search/indexes.js';
import { normalizeAddressToken } from '../search/tokenize.js';
import { loadDataDirectory, type LoadDirectoryOptions } from '../store/load.js';
import type { LoadReport, Store } from '../store/store.js';
import type { Table } from '../store/table.js';
import { transaction } from './connect.js';
import {
  checkDistribution,
  checkPartitions,
  distributionRecord,
  partitionIndexStatements,
  partitionsOf,
  partitionTable,
  spreadLayout,
  spreadOf,
  type Distribution,
  type DistributionRecord,
  type WorkerConnections,
} from './distribution.js';
import { arrayText, copyField, fieldColumns } from './encode.js';
import { column, indexStatements, lengthColumn, quote, SHARDED_RESOURCES, shardColumn, tokensColumn, type Layout } from './layout.js';
import { createLayout, readMeta, writeMeta } from './migrate.js';

export interface PgLoadOptions {
  /** Drop the layout the schema already holds and load anew (default: refuse with PgSchemaExists). */
  readonly replace?: boolean;
  /**
   * Which rows are live (a generation's access structures): rows it calls dead are left out.
   * Default: every row (a store as loaded has no dead row).
   */
  readonly access?: { of(table: Table): { isDead(row: number): boolean } };
  /**
   * How the layout is spread over servers (src/pg/distribution.ts; default: one server). With
   * `replace` and no distribution, a Citus layout stays on Citus; a partitioned one needs its
   * workers named again.
   */
  readonly distribution?: Distribution;
  /** Called after each step (a table's COPY, the term statistics, the indexes, ANALYZE) with the milliseconds it took. */
  readonly onProgress?: (step: PgLoadStep) => void;
}

export interface PgLoadStep {
  readonly step: 'copy' | 'terms' | 'indexes' | 'analyze';
  /** The table a COPY filled. */
  readonly resource?: ResourceName;
  /** Rows written (COPY, terms). */
  readonly rows?: number;
  readonly ms: number;
}

export interface PgLoadSummary {
  /** Rows written per table. */
  readonly tables: Readonly<Record<ResourceName, number>>;
  /** Milliseconds the PostgreSQL part took (transaction start to commit). */
  readonly ms: number;
}

/** COPY text goes to the server in chunks of about this many characters. */
const CHUNK_CHARS = 1 << 16;

/** The per-field token counts of the live listings, for `#terms` and `#search`. */
interface TermStatistics {
  readonly df: Map<string, number>;
  n: number;
  totalLength: number;
}

/** One table's COPY: its column list and the text of each live row. */
interface CopySource {
  readonly columns: readonly string[];
  /** The row's listing key the table is spread on (a sharded table's), or null. */
  readonly shardKey: ((row: number) => string | null) | null;
  /** The row's COPY line (no newline). */
  readonly line: (row: number) => string;
}

function copySource(table: Table, statistics: Map<SearchFieldName, TermStatistics> | null): CopySource {
  const fields = fieldColumns(table);
  const columns = fields.map((c) => c.column);
  const texts = fields.map((c) => c.text);
  const shard = SHARDED_RESOURCES.includes(table.resource) ? column({ name: shardColumn(table.resource) }) : null;
  const shardKey = shard === null ? null : (fields.find((c) => c.column === shard)?.text ?? (() => null));
  if (statistics === null) return { columns, shardKey, line: (row) => texts.map((text) => copyField(text(row))).join('\t') };
  // listings: per search field the tokens (as the in-memory index makes them) and their count
  const sources = searchTokenSources(table);
  const tokens: string[] = [];
  const seen = new Set<string>();
  for (const s of SEARCH_FIELDS) columns.push(tokensColumn(s), lengthColumn(s));
  return {
    columns,
    shardKey,
    line: (row) => {
      let line = texts.map((text) => copyField(text(row))).join('\t');
      for (const s of SEARCH_FIELDS) {
        tokens.length = 0;
        sources[s](row, tokens);
        if (s === 'RawAddressSearchText') for (let i = 0; i < tokens.length; i++) tokens[i] = normalizeAddressToken(tokens[i]);
        const stats = statistics.get(s)!;
        stats.n++;
        stats.totalLength += tokens.length;
        seen.clear();
        for (const t of tokens) {
          if (seen.has(t)) continue;
          seen.add(t);
          stats.df.set(t, (stats.df.get(t) ?? 0) + 1);
        }
        line += `\t${copyField(arrayText(tokens, `${table.resource} '${table.keyOf(row)}' search field ${s}`))}\t${tokens.length}`;
      }
      return line;
    },
  };
}

/** COPY text lines in chunks of about CHUNK_CHARS. */
function* chunks(lines: Iterable<string>): Generator<Buffer> {
  let chunk = '';
  for (const line of lines) {
    chunk += `${line}\n`;
    if (chunk.length >= CHUNK_CHARS) {
      yield Buffer.from(chunk, 'utf8');
      chunk = '';
    }
  }
  if (chunk !== '') yield Buffer.from(chunk, 'utf8');
}

/** Streams lines into `COPY target (columns) FROM STDIN`; a throw while making them aborts the COPY (CopyFail). */
async function copyInto(client: pg.ClientBase, target: string, columns: readonly string[], lines: Iterable<string>): Promise<void> {
  const stream = client.query(copyFrom(`COPY ${target} (${columns.join(', ')}) FROM STDIN`));
  await pipeline(Readable.from(chunks(lines)), stream);
}

/** The rows the generation keeps (not dead), in row order. */
function* liveRowNumbers(table: Table, isDead: (row: number) => boolean): Generator<number> {
  for (let row = 0; row < table.rowCount; row++) if (!isDead(row)) yield row;
}

/** The COPY lines of these rows, counting them in `count`. */
function* linesOf(rows: Iterable<number>, line: (row: number) => string, count: { rows: number } = { rows: 0 }): Generator<string> {
  for (const row of rows) {
    count.rows++;
    yield line(row);
  }
}

/** Keys per round trip when the coordinator computes partitions. */
const ROUTE_BATCH = 50_000;

/**
 * A sharded table's live rows COPYed straight into the workers' partition tables: each row's
 * partition is computed by the coordinator (partitionsOf, checked against its own routing on the
 * first batch), then each partition's rows go to its worker. Returns the rows written.
 */
async function copyPartitioned(
  coordinator: pg.PoolClient,
  workers: WorkerConnections,
  layout: Layout,
  record: Extract<DistributionRecord, { kind: 'partitioned' }>,
  table: Table,
  isDead: (row: number) => boolean,
  source: CopySource,
): Promise<number> {
  const live = [...liveRowNumbers(table, isDead)];
  const byPartition: number[][] = Array.from({ length: record.partitions }, () => []);
  for (let at = 0; at < live.length; at += ROUTE_BATCH) {
    const rows = live.slice(at, at + ROUTE_BATCH);
    const keys = rows.map((row) => source.shardKey!(row));
    const remainders = await partitionsOf(coordinator, keys, record.partitions);
    if (at === 0) {
      const sample = keys.slice(0, 1000).flatMap((k, i) => (k === null ? [] : [[k, remainders[i]] as const]));
      await checkPartitions(
        coordinator,
        layout,
        table.resource,
        sample.map((e) => e[0]),
        Int32Array.from(sample, (e) => e[1]),
        record.partitions,
      );
    }
    for (let i = 0; i < rows.length; i++) byPartition[remainders[i]].push(rows[i]);
  }
  for (let i = 0; i < record.partitions; i++) {
    const client = workers.clients[i % workers.clients.length];
    await copyInto(client, partitionTable(layout, table.resource, i), source.columns, linesOf(byPartition[i], source.line));
  }
  return live.length;
}

/** What the schema holds now: a reso-engine layout, other relations, or nothing. */
async function schemaState(client: pg.PoolClient, layout: Layout): Promise<{ layout: boolean; relations: number }> {
  const { rows } = await client.query<{ layout: boolean; relations: number }>(
    `SELECT to_regclass($1) IS NOT NULL AS layout,
            (SELECT count(*)::int FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $2) AS relations`,
    [layout.meta, layout.schema],
  );
  return rows[0];
}

/**
 * Writes a loaded Store into the layout's schema in one transaction (see the file comment).
 * Refuses (PgSchemaExists) when the schema holds a layout already, unless `replace`, and always
 * when it holds other tables. A value PostgreSQL cannot hold as the engine does fails the load
 * with PgUnsupportedValue (src/pg/encode.ts).
 */
export async function loadIntoPostgres(pool: pg.Pool, layout: Layout, store: Store, options: PgLoadOptions = {}): Promise<PgLoadSummary> {
  const started = performance.now();
  const schemas = {} as Record<ResourceName, TableSchema>;
  for (const r of RESOURCE_NAMES) schemas[r] = store.table(r).schema;
  const tables = {} as Record<ResourceName, number>;
  await transaction(pool, async (client) => {
    // a pool's statement timeout is for queries; a load's COPYs and index builds take what they take
    await client.query('SET LOCAL statement_timeout = 0');
    // one load of a schema at a time: a second waits, then finds the first one's layout
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`reso-engine load ${layout.schema}`]);
    const state = await schemaState(client, layout);
    if (state.layout && options.replace !== true) {
      throw new QueryError(
        'PgSchemaExists',
        `The PostgreSQL schema ${quote(layout.schema)} holds reso-engine data already; load with replace (\`reso-engine pg load --replace\`) to drop it and load anew, or choose another schema.`,
      );
    }
    let distribution = checkDistribution(options.distribution);
    if (state.layout) {
      const before = distributionRecord(await readMeta(client, layout, 'distribution'));
      if (options.distribution === undefined && before.kind === 'citus') distribution = { kind: 'citus' };
      if (options.distribution === undefined && before.kind === 'partitioned') {
        throw new QueryError(
          'PgDistributionRequired',
          `The PostgreSQL schema ${quote(layout.schema)} is partitioned over ${before.servers.length} workers; name them again to replace it (\`reso-engine pg load --replace --workers URL,URL\`), or choose a distribution.`,
        );
      }
      await client.query(`DROP SCHEMA ${quote(layout.schema)} CASCADE`);
    } else if (state.relations > 0) {
      throw new QueryError(
        'PgSchemaExists',
        `The PostgreSQL schema ${quote(layout.schema)} holds ${state.relations} tables or other relations that are not reso-engine's; choose another schema (they are never dropped).`,
      );
    }
    await createLayout(client, layout, schemas, spreadOf(distribution));
    const spread = await spreadLayout(client, connectWorker, layout, schemas, distribution);
    await writeMeta(client, layout, 'distribution', spread.record);
    const workers = spread.workers;
    try {
      let at = performance.now();
      const done = (step: Omit<PgLoadStep, 'ms'>): void => {
        const now = performance.now();
        options.onProgress?.({ ...step, ms: now - at });
        at = now;
      };
      const statistics = new Map<SearchFieldName, TermStatistics>(SEARCH_FIELDS.map((s) => [s, { df: new Map(), n: 0, totalLength: 0 }]));
      for (const r of RESOURCE_NAMES) {
        const table = store.table(r);
        const access = options.access?.of(table);
        const isDead = access === undefined ? () => false : (row: number) => access.isDead(row);
        const source = copySource(table, r === 'Property' ? statistics : null);
        if (workers !== null && spread.record.kind === 'partitioned' && SHARDED_RESOURCES.includes(r)) {
          tables[r] = await copyPartitioned(client, workers, layout, spread.record, table, isDead, source);
        } else {
          const count = { rows: 0 };
          await copyInto(client, layout.table(r), source.columns, linesOf(liveRowNumbers(table, isDead), source.line, count));
          tables[r] = count.rows;
        }
        done({ step: 'copy', resource: r, rows: tables[r] });
      }
      await copyInto(client, layout.terms, ['field', 'term', 'df'], termLines(statistics));
      for (const [field, stats] of statistics) {
        await client.query(`UPDATE ${layout.search} SET n = $2, total_length = $3 WHERE field = $1`, [field, stats.n, stats.totalLength]);
      }
      done({ step: 'terms', rows: [...statistics.values()].reduce((n, stats) => n + stats.df.size, 0) });

      // index builds sort in memory up to this much (the default, 64 MB, spills to disk at 100k listings)
      await client.query(`SET LOCAL maintenance_work_mem = '256MB'`);
      const partitioned = spread.record.kind === 'partitioned' ? spread.record : null;
      for (const statement of indexStatements(layout, schemas, spreadOf(spread.record))) await client.query(statement);
      if (workers !== null && partitioned !== null) {
        // each worker builds its partitions' indexes and statistics at the same time as the others
        const perWorker = partitionIndexStatements(layout, schemas, partitioned);
        await Promise.all(
          workers.clients.map(async (c, w) => {
            await c.query(`SET LOCAL maintenance_work_mem = '256MB'`);
            for (const statement of perWorker[w]) await c.query(statement);
            for (const r of SHARDED_RESOURCES)
              for (let i = w; i < partitioned.partitions; i += workers.clients.length) await c.query(`ANALYZE ${partitionTable(layout, r, i)}`);
          }),
        );
      }
      done({ step: 'indexes' });
      // the workers' rows become visible to the coordinator's foreign tables (and its ANALYZE) once they commit
      if (workers !== null) await workers.commit();
      for (const r of RESOURCE_NAMES) await client.query(`ANALYZE ${layout.table(r)}`);
      await client.query(`ANALYZE ${layout.terms}`);
      done({ step: 'analyze' });
      await writeMeta(client, layout, 'accounts', store.accounts);
      await writeMeta(client, layout, 'profiles', store.profiles);
      await writeMeta(client, layout, 'report', store.report);
    } catch (err) {
      await workers?.rollback();
      throw err;
    }
  }).catch((err: unknown) => {
    throw tooLarge(err) ?? err;
  });
  return { tables, ms: performance.now() - started };
}

/**
 * PostgreSQL's program_limit_exceeded (54000) as PgUnsupportedValue: an index entry (a text value
 * of an indexed field, a search token of thousands of letters) beyond what an index page holds.
 */
export function tooLarge(err: unknown): QueryError | null {
  if ((err as { code?: unknown } | null)?.code !== '54000') return null;
  return new QueryError(
    'PgUnsupportedValue',
    `A value is too large for a PostgreSQL index (${(err as Error).message}); PostgreSQL cannot store it as the in-memory engine does, so the data cannot be written there.`,
  );
}

/** A worker connection of a partitioned load (its own session: it is in a transaction of its own until the load commits). */
async function connectWorker(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, application_name: 'reso-engine' });
  // a lost worker fails the load's statements; unheard, the client's 'error' event would end the process
  c.on('error', () => undefined);
  await c.connect();
  return c;
}

function* termLines(statistics: ReadonlyMap<SearchFieldName, TermStatistics>): Generator<string> {
  for (const [field, stats] of statistics) for (const [term, df] of stats.df) yield `${field}\t${copyField(term)}\t${df}`;
}

/**
 * Loads a data directory with the in-memory loader (its options: strict or skip mode, clock) and
 * writes it into PostgreSQL; a bad record fails exactly as the in-memory engine's load does,
 * before anything is written.
 */
export async function loadDirectoryIntoPostgres(
  pool: pg.Pool,
  layout: Layout,
  dir: string,
  options: LoadDirectoryOptions & PgLoadOptions = {},
): Promise<PgLoadSummary & { readonly report: LoadReport }> {
  const store = await loadDataDirectory(dir, options);
  const summary = await loadIntoPostgres(pool, layout, store, options);
  return { ...summary, report: store.report };
}
