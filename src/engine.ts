/**
 * The Engine: the public API over the stages. `Engine.open(...)` loads a data set (src/store) or
 * a snapshot (src/snapshot) and builds its indexes; `engine.query(resource, query, { sources })`
 * answers the query options of SERVICE.md §3 with the envelope of §5 (`engine.navigate(...)` the
 * same for a navigation path, `Property('K')/Media`); `engine.explain(...)` says
 * how; upsert/remove/apply change the data while queries run (src/live). A query is planned
 * (src/plan: parse, bind, choose an access path; plans are data, cached across changes) and
 * executed on one generation (src/exec), with visibility applied at the root (src/live).
 * `Engine.open({ postgres })` opens the PostgreSQL backend's engine instead (src/pg).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildStoreIndexes, StoreAccess, type StoreIndexes } from './access/access.js';
import type { Generation } from './access/generation.js';
import { execute, executeRecord, RESULT_CACHE_ENTRIES, RESULT_CACHE_ROWS, ResultCache } from './exec/execute.js';
import { contextFragment, type ODataVersion, type QueryResult } from './exec/page.js';
import { actualCounts, statisticsOf } from './exec/statistics.js';
import { ChangeWriter, checkOperations, type ChangeOperation, type ChangeSummary } from './live/change.js';
import { PageWarmer, WARM_MIN_BUILT, type WarmRequest } from './live/warm.js';
import type { RecordSource } from './exec/page.js';
import { recordsBuilt } from './store/record-cache.js';
import { COMPACT_FRACTION, Compactor } from './live/compactor.js';
import { EVENT_RETENTION_MS } from './live/compact.js';
import { Generations, MAX_PINNED_GENERATIONS, PAGE_SNAPSHOT_TTL_MS } from './live/generations.js';
import { isVisible, liveRowOf, rosterVisibility, rowVisibility } from './live/visibility.js';
import { PLAN_CACHE_SIZE, PlanCache } from './plan/cache.js';
import { explainText } from './plan/explain.js';
import type { Plan, QueryResource } from './plan/plan.js';
import { EXPAND_TOP_LIMITS, EXPANSIONS, type ExpansionName } from './plan/bind-expand.js';
import { conjuncts, DEFAULT_PAGE_SIZE, singleNavigationOf, TOP_LIMITS, type NavigationRequest, type PlanRequest } from './plan/planner.js';
import {
  checkOpenOptions,
  queryText,
  type EngineOpenOptions,
  type OpenProgress,
  type ExplainOptions,
  type QueryInput,
  type QueryOptions,
} from './engine-options.js';
import type { TableSchema } from './schema/table-schema.js';
import { QueryError } from './errors.js';
import type { RecordResourceName, ResourceName } from './schema/types.js';
import { readEngineSnapshot, writeEngineSnapshot } from './snapshot/state.js';
import type { JsonValue } from './store/columns.js';
import { loadDataDirectory, loadRecords, type LoadProgress } from './store/load.js';
import type { Store } from './store/store.js';
import type { Table } from './store/table.js';
import { PostgresEngine, type PostgresOpenOptions, type PostgresOptions } from './pg/engine.js';

export {
  COMPACT_FRACTION,
  DEFAULT_PAGE_SIZE,
  EVENT_RETENTION_MS,
  MAX_PINNED_GENERATIONS,
  PAGE_SNAPSHOT_TTL_MS,
  PLAN_CACHE_SIZE,
  RESULT_CACHE_ENTRIES,
  RESULT_CACHE_ROWS,
  TOP_LIMITS,
};
export type { ExpansionName as NavigationName, NavigationRequest, ODataVersion, Plan, QueryResource, QueryResult };
/** Property's navigation properties and the resource each leads to (`$expand` and navigation paths). */
export const NAVIGATION_PROPERTIES = EXPANSIONS;
/** $top maximum of a navigation path (and of a nested $top in $expand), by the resource it leads to. */
export const NAVIGATION_TOP_LIMITS = EXPAND_TOP_LIMITS;
export { contextFragment };
export type { EngineOpenOptions, OpenProgress, ExplainOptions, QueryInput, QueryOptions };
export { PostgresEngine };
export type { PostgresOpenOptions, PostgresOptions };

/** Member and Office visibility for callers of every source, made once per generation (queries ask for it on every call). */
const everySource = new WeakMap<Generation, ReturnType<typeof rosterVisibility>>();

/** Member and Office visibility for callers of `sources` (every source: undefined, made once per generation). */
function rosterOf(gen: Generation, sources: readonly string[] | undefined): ReturnType<typeof rosterVisibility> {
  if (sources !== undefined) return rosterVisibility(gen, sources);
  let v = everySource.get(gen);
  if (v === undefined) everySource.set(gen, (v = rosterVisibility(gen, undefined)));
  return v;
}

export const DEFAULT_DATA_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/default');

export class Engine {
  private readonly generations: Generations;
  private readonly writer: ChangeWriter;
  private readonly compactor: Compactor;
  private readonly plans = new PlanCache();
  /** Results of repeated queries on the newest generation (src/exec/result-cache.ts), or null when off. */
  private readonly results: ResultCache | null;
  /** The newest generation and the $skiptoken of its nextLinks, made once per generation. */
  private current: { readonly gen: Generation; readonly token: string } | null = null;
  /** Pages whose records a change keeps before it publishes (src/live/warm.ts). */
  private readonly warmer = new PageWarmer((warm, gen) => this.pageOf(warm, gen));

  private constructor(
    store: Store,
    private readonly clock: () => number,
    indexes?: StoreIndexes,
    pageTtl?: number,
    compactFraction?: number | false,
    firstVersions?: ReadonlyMap<string, number>,
    eventRetentionMs = EVENT_RETENTION_MS,
    results: { maxEntries: number; maxRows: number } | null = null,
  ) {
    this.results = results === null ? null : new ResultCache(results.maxEntries, results.maxRows);
    this.generations = new Generations({ id: 0, store, access: new StoreAccess(store, indexes) }, clock, pageTtl);
    this.writer = new ChangeWriter(clock, () => this.generations.nextId(), firstVersions);
    this.compactor = new Compactor(this.generations, this.writer, compactFraction, { retentionMs: eventRetentionMs, clock }, (previous, next) =>
      this.warmer.steps(previous, next),
    );
  }

  /** With `postgres`: an engine over a PostgreSQL database (src/pg), loaded with `data` first when given. */
  static open(options: PostgresOpenOptions): Promise<PostgresEngine>;
  static open(options?: EngineOpenOptions): Promise<Engine>;
  static async open(options: EngineOpenOptions | PostgresOpenOptions = {}): Promise<Engine | PostgresEngine> {
    if ('postgres' in options) {
      if ('snapshot' in options) throw new TypeError('Engine.open takes either postgres or snapshot, not both: a snapshot is an in-memory engine.');
      return PostgresEngine.open(options);
    }
    const { clock, ttl, fraction, retention, results } = checkOpenOptions(options);
    if (options.snapshot !== undefined) {
      if (options.data !== undefined) throw new TypeError('Engine.open takes either data or snapshot, not both: a snapshot holds its own data set.');
      if (typeof options.snapshot !== 'string') throw new TypeError('Engine.open: snapshot must be the path of a snapshot file.');
      const progress = options.onProgress;
      const onBytes = progress === undefined ? undefined : (bytesRead: number, bytesTotal: number) => progress({ kind: 'snapshot', bytesRead, bytesTotal });
      const { store, indexes, firstVersions } = readEngineSnapshot(options.snapshot, clock, onBytes);
      return new Engine(store, clock, indexes, ttl, fraction, firstVersions, retention, results);
    }
    const data = options.data ?? DEFAULT_DATA_DIR;
    const progress = options.onProgress;
    // The listings' search and point indexes are built as soon as Property is loaded, while the
    // loader's worker thread may still be parsing Media.
    let indexes: StoreIndexes | undefined;
    const load = {
      skipBadRecords: options.skipBadRecords,
      now: clock,
      onProgress: progress === undefined ? undefined : (p: LoadProgress) => progress({ kind: 'load', ...p }),
      onListings: (property: Table) => (indexes = buildStoreIndexes(property)),
    };
    const store = typeof data === 'string' ? await loadDataDirectory(data, load) : loadRecords(data, load);
    return new Engine(store, clock, indexes, ttl, fraction, undefined, retention, results);
  }

  /** The newest generation with its $skiptoken (what forQuery gives for a text without one). */
  private newest(): { readonly gen: Generation; readonly token: string } {
    const gen = this.gen;
    if (this.current?.gen !== gen) this.current = { gen, token: this.generations.tokenOf(gen) };
    return this.current;
  }

  /** The newest generation (tests reach it by this name). */
  private get gen(): Generation {
    return this.generations.current;
  }

  /** The data set as of now (the newest generation). */
  get store(): Store {
    return this.gen.store;
  }

  /** The number of the newest generation: 0 as loaded, one more per change applied. */
  get generation(): number {
    return this.gen.id;
  }

  /** The loaded schema of a resource (fields in record order). */
  schemaOf(resource: ResourceName): TableSchema {
    return this.gen.store.table(resource).schema;
  }

  /** The data set's accounts.json as parsed (shape checked), or null when it has none. */
  get accounts(): unknown {
    return this.gen.store.accounts;
  }

  /** The data set's mls_profiles.json as parsed (shape checked), or null. */
  get profiles(): unknown {
    return this.gen.store.profiles;
  }

  /**
   * Writes the whole engine (tables, key indexes, child groupings, search and point indexes, load
   * report, accounts and profiles) to one snapshot file that `Engine.open({ snapshot })` reads
   * back much faster than the data. Synchronous; the file is replaced atomically (a temporary
   * file renamed over it), so `file` never holds a partial snapshot. Returns the file's size.
   * After changes, the newest generation's live rows are written as compacted (see `compact`),
   * which rebuilds the indexes first (slower). Throws a SnapshotError (SnapshotWriteFailed) when it cannot write.
   */
  save(file: string, options: { readonly onProgress?: (bytesWritten: number, bytesTotal: number) => void } = {}): { bytes: number } {
    const { store, indexes } = this.compactor.compactedImage(this.gen);
    return writeEngineSnapshot(file, store, indexes, this.writer.firstVersions, options.onProgress);
  }

  /**
   * Upserts records of one resource as one atomic change: a record whose key exists replaces that
   * record (the whole record; a replaced listing keeps its children), others are added. Queries
   * see all of it or none of it; they keep running while it applies. Children need their listing
   * (MissingParent otherwise). Bad records are DataErrors as at load, and nothing is applied.
   */
  upsert(resource: ResourceName, records: readonly unknown[]): Promise<ChangeSummary> {
    // checkOperations refuses Lookup (ReadOnlyResource), EntityEvent (InvalidChange) and names outside the catalog
    return this.apply([{ resource: resource as RecordResourceName, upsert: records }]);
  }

  /** Removes records by key as one atomic change; a removed listing's children go with it. Unknown keys are counted, not errors. */
  remove(resource: ResourceName, keys: readonly string[]): Promise<ChangeSummary> {
    return this.apply([{ resource: resource as RecordResourceName, remove: keys }]);
  }

  /**
   * Applies several operations (`{ resource, upsert: records }` / `{ resource, remove: keys }`,
   * in order) as ONE atomic change, published as the next generation. Changes apply one at a
   * time, in the order they were asked for.
   */
  apply(operations: readonly ChangeOperation[]): Promise<ChangeSummary> {
    // Queued at once, so changes apply in call order. Not an async function: its frame would hold
    // the records until the change is published; the writer drops them once read.
    let checked: ChangeOperation[];
    try {
      checked = checkOperations(operations);
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    return this.writer
      .apply(
        checked,
        () => this.gen,
        (next) => this.generations.publish(next),
        (next) => this.warmer.steps(this.gen, next),
      )
      .then((summary) => {
        this.compactor.afterChange();
        return summary;
      });
  }

  /**
   * Rewrites the newest generation's live rows into fresh tables and indexes (dead rows dropped,
   * appended rows folded into the search postings and KD-trees), published as the next
   * generation when done. Runs in steps between queries (they keep running on the published
   * generation), after any change already asked for; changes asked for meanwhile wait for it.
   * The engine starts one itself after a change leaves more than `compactFraction` of a table
   * dead or appended (EngineOpenOptions).
   */
  compact(): Promise<void> {
    return this.compactor.compact();
  }

  /** The $skiptoken nextLinks carry now: the data set and the newest generation (paging pins it). */
  get pageToken(): string {
    return this.generations.tokenOf(this.gen);
  }

  /** Whether a live record of the resource has this key (any source: not for callers limited to some). */
  has(resource: ResourceName, key: string): boolean {
    return liveRowOf(this.gen, resource, key) >= 0;
  }

  /** Whether a live record of the resource has this key and the caller's sources (absent: every source) see it. */
  isVisible(resource: ResourceName, key: string, sources?: readonly string[]): boolean {
    return isVisible(this.gen, resource, key, sources);
  }

  /** The keys of every live record of the resource, in key order (any source: not for callers limited to some). */
  keys(resource: ResourceName): string[] {
    const table = this.gen.store.table(resource);
    const access = this.gen.access.of(table);
    const out: string[] = [];
    for (const row of access.keyOrder) if (!access.isDead(row)) out.push(table.keyOf(row));
    return out;
  }

  /** Compactions run since the engine opened, and the seconds they took in all. */
  get compactions(): { readonly count: number; readonly seconds: number } {
    return { ...this.compactor.done };
  }

  /** The engine clock's current instant, epoch ms. */
  now(): number {
    return this.clock();
  }

  query(resource: QueryResource, query: QueryInput, options: QueryOptions = {}): QueryResult {
    return this.run({ resource, text: queryText(query), maxPageSize: options.maxPageSize }, resource, options);
  }

  /**
   * A navigation path, `Property('KEY')/Media` (also `OpenHouse`, `PropertyChange`,
   * `PreferredMedia`): the listing's children that `$expand=<navigation>` gives on it, in the same
   * order, as a collection that takes the query options of `query` ($filter, $select, $orderby,
   * $top, $skip, $count, $ignorenulls, $apply over the child resource) with the same paging,
   * `maxPageSize` and envelope; the nextLink repeats the path (`Property('KEY')/Media?$skip=10&...`).
   * Throws a QueryError: `UnknownNavigationProperty` for a name Property does not have,
   * `EntityNotFound` when no live listing with the key is visible to the caller's sources (the same
   * whether it exists in another source or not), and the query's own codes.
   */
  navigate(resource: QueryResource, key: string, navigation: string, query: QueryInput, options: QueryOptions = {}): QueryResult {
    // the children are visible through their listing: the rows are checked against Property's visibility
    return this.run({ resource, text: queryText(query), maxPageSize: options.maxPageSize, navigation: { key, name: navigation } }, 'Property', options);
  }

  /**
   * A single-valued navigation path, `Property('KEY')/ListAgent` (ListAgent, BuyerAgent,
   * CoListAgent, CoBuyerAgent: a Member; ListOffice, BuyerOffice, CoListOffice, CoBuyerOffice: an
   * Office): the record `$expand=<navigation>` gives on that listing, with the query's $select and
   * $ignorenulls, or null when the listing names none, or names one that is not live or not
   * visible to the caller's sources. Throws a QueryError: `EntityNotFound` when no live listing
   * with the key is visible (as `navigate`), `UnknownNavigationProperty` for another name.
   */
  navigateOne(resource: QueryResource, key: string, navigation: string, query: QueryInput, options: QueryOptions = {}): Record<string, JsonValue> | null {
    const reference = singleNavigationOf(resource, navigation);
    const gen = this.gen;
    if (!isVisible(gen, 'Property', key, options.sources)) {
      throw new QueryError('EntityNotFound', `No listing with ListingKey '${key.slice(0, 100)}' is visible to the caller's sources.`);
    }
    const named = gen.store.Property.value(liveRowOf(gen, 'Property', key), reference.field);
    return typeof named === 'string' ? this.entity(reference.target, named, query, options) : null;
  }

  /**
   * The number of records of the resource that the query's `$filter` (its only option; any other
   * is a QueryError `QueryOptionNotAllowed`) matches among those visible to the caller's sources:
   * what `/Property/$count` answers.
   */
  count(resource: QueryResource, query: QueryInput, options: Pick<QueryOptions, 'sources'> = {}): number {
    return this.run({ resource, text: queryText(query), countOnly: true }, resource, options)['@odata.count']!;
  }

  /** Plans a request on the generation it reads and executes it, rows visible as `visibleAs`'s rows are to the caller. */
  private run(request: PlanRequest, visibleAs: QueryResource, options: QueryOptions): QueryResult {
    // a text planned before without $skiptoken reads the newest generation: no look at the text
    const known = this.plans.peek(request);
    const { gen, token } = known !== undefined && known.query.skiptoken === undefined ? this.newest() : this.generations.forQuery(request.text);
    const plan = this.plans.plan(request, statisticsOf(gen));
    options.onPlan?.(plan);
    const sources = options.sources;
    const stats = options.onExecuted === undefined ? undefined : { rowsScanned: 0 };
    const built = recordsBuilt();
    const result = execute(
      plan,
      gen,
      {
        stats,
        visible: rowVisibility(gen, gen.store.table(visibleAs), sources),
        visibleOf: rosterOf(gen, sources),
        sources,
        nowMs: this.clock(),
        token,
        base: options.base ?? '',
        version: options.odataVersion,
        onPage: options.onPage,
        plainPagesAsRows: options.plainPagesAsRows,
      },
      // only the newest generation's results are kept: a nextLink's older one runs as it always did
      gen === this.gen ? this.results : null,
    );
    if (result['@odata.nextLink'] !== undefined) this.generations.pinForPaging(gen);
    if (stats !== undefined) options.onExecuted!(stats);
    // a page of the newest generation whose records were built, not copied: warmed before the next change publishes
    const fresh = recordsBuilt() - built;
    if (gen === this.gen && plan.query.skiptoken === undefined && (this.warmer.active || fresh >= WARM_MIN_BUILT))
      this.warmer.ran(request, sources, gen, fresh);
    return result;
  }

  /** The page `request` gives on `gen` as rows, no record built (null: its records are not plain); for the warmer. */
  private pageOf({ request, sources }: WarmRequest, gen: Generation): RecordSource | null {
    const plan = this.plans.plan(request, statisticsOf(gen));
    let page: RecordSource | null = null;
    execute(plan, gen, {
      visible: rowVisibility(gen, gen.store.table(request.resource), sources),
      visibleOf: rosterOf(gen, sources),
      sources,
      nowMs: this.clock(),
      token: this.generations.tokenOf(gen),
      base: '',
      onPage: (p) => (page = p),
      plainPagesAsRows: true,
    });
    return page;
  }

  /**
   * One record by key (`Property('KEY')`), with the query's $select, $expand and $ignorenulls
   * applied (its other options do not apply to one record and are not read), or null when no live record with the key is visible to the caller's sources.
   */
  entity(resource: QueryResource, key: string, query: QueryInput, options: QueryOptions = {}): Record<string, JsonValue> | null {
    const gen = this.gen;
    const row = liveRowOf(gen, resource, key);
    const table = gen.store.table(resource);
    const visible = rowVisibility(gen, table, options.sources);
    if (row < 0 || (visible !== null && !visible(row))) return null;
    const plan = this.plans.plan({ resource, text: queryText(query) }, statisticsOf(gen));
    return executeRecord(plan, gen, row, { visible, visibleOf: rosterOf(gen, options.sources), nowMs: this.clock(), base: options.base ?? '' });
  }

  /** How a query would run: as text (default), or the Plan itself with `{ format: 'json' }`. */
  explain(resource: QueryResource, query: QueryInput, options?: ExplainOptions & { format?: 'text' }): string;
  explain(resource: QueryResource, query: QueryInput, options: ExplainOptions & { format: 'json' }): Plan;
  explain(resource: QueryResource, query: QueryInput, options: ExplainOptions = {}): string | Plan {
    const text = queryText(query);
    const { gen } = this.generations.forQuery(text);
    const stats = statisticsOf(gen);
    const plan = this.plans.plan({ resource, text, maxPageSize: options.maxPageSize, navigation: options.navigation }, stats);
    if (options.format === 'json') return plan;
    const a = plan.access;
    const accessRows = a.kind === 'scan' ? stats.rowCount(resource) : a.kind === 'range' ? stats.rangeRows(resource, a.field, conjuncts(plan.filter)) : null;
    const actual = actualCounts(plan, gen, {
      visible: rowVisibility(gen, gen.store.table(resource), options.sources),
      visibleOf: rosterOf(gen, options.sources),
      sources: options.sources,
      nowMs: this.clock(),
      token: '',
      base: '',
    });
    return explainText(plan, { sources: options.sources, accessRows, actual });
  }
}
