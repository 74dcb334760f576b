/**
 * The Engine: `Engine.open(...)` loads a data set and builds its indexes; `engine.query(resource,
 * query, { sources })` answers the query options of SERVICE.md §3 with the envelope of §5 (relative
 * nextLink); `engine.explain(...)` says how. Stages: parse (src/odata) → bind (src/plan/bind) →
 * plan (src/plan/planner) → execute (src/exec) → serialize (here).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { QueryError } from './errors.js';
import { spanOf, type ParsedQuery } from './odata/ast.js';
import { parseQuery, splitQuery } from './odata/parse-query.js';
import { printQueryOptions } from './odata/printer.js';
import { bindFilter, bindOrderBy, bindSelect, type BindContext, type BoundOrderKey } from './plan/bind.js';
import type { Bound } from './plan/bound.js';
import { StoreAccess, type StoreIndexes, type TableAccess } from './access/access.js';
import { runYielding } from './util/steps.js';
import { ChangeWriter, checkOperations, type ChangeOperation, type ChangeSummary, type Generation } from './live/change.js';
import { compactNow, compactSteps, worthCompacting } from './live/compact.js';
import { RESOURCE_NAMES, type ResourceName } from './schema/types.js';
import { andOf, answeredBy, chooseOrder, conjuncts, describeSource, lookupOf, searchCalls, type CandidateSource, type OrderStrategy } from './plan/planner.js';
import { compile, type Evaluator } from './exec/compile.js';
import { orderRows, type SortKey } from './exec/order.js';
import { bindExpand, type ExpandPlan } from './exec/expand.js';
import { bindApply, type BoundGrouping } from './plan/bind-apply.js';
import { describeGrouping, runApply } from './exec/aggregate.js';
import { evaluateSearch, prepareSearch, type PreparedSearch, type SearchMatch } from './search/bm25.js';
import { crc32 } from 'node:zlib';
import { rankSearch } from './search/ranked.js';
import { getBit, popcount32 } from './util/bits.js';
import { ParentKeyColumn, type JsonValue } from './store/columns.js';
import { loadDataDirectory, loadRecords, type RecordsInput } from './store/load.js';
import type { Store } from './store/store.js';
import { EARTH_RADIUS_M, haversineMeters } from './geo/distance.js';
import type { Table } from './store/table.js';
import { readEngineSnapshot, writeEngineSnapshot } from './snapshot/state.js';


export const DEFAULT_PAGE_SIZE = 10;
/** Residual geo.distance tests done point by point before the circle is collected (see execute). */
const GEO_DIRECT_TESTS = 65_536;
/** $top maximum per top-level resource (SERVICE.md §3). */
export const TOP_LIMITS: Readonly<Record<QueryResource, number>> = { Property: 50_000, OpenHouse: 50_000, Media: 25_000 };

export type QueryResource = 'Property' | 'Media' | 'OpenHouse';
const QUERY_RESOURCES: readonly QueryResource[] = ['Property', 'Media', 'OpenHouse'];

export interface EngineOpenOptions {
  /**
   * How long a generation that a nextLink pinned stays readable after it was last paged (ms;
   * default 10 minutes). Paging an expired one is a QueryError `SkipTokenExpired`.
   */
  readonly pageSnapshotTtlMs?: number;
  /**
   * Start a compaction (`engine.compact()`) once the rows replaced, removed or added since the
   * last one pass this fraction of a table (default 0.25; at least 1,024 rows); false: only when
   * asked.
   */
  readonly compactFraction?: number | false;
  /** A data directory, or records in memory; defaults to the embedded default data set. */
  readonly data?: string | RecordsInput;
  /**
   * A snapshot file written by `engine.save(path)`, instead of `data`: the data set and its
   * indexes as they were saved, read without rebuilding anything. A bad file is a SnapshotError.
   */
  readonly snapshot?: string;
  /** The engine's clock (DaysOnMarket, now(), profiles' current_year); defaults to the system clock. */
  readonly now?: () => Date;
  /** Skip bad data lines (and report them) instead of failing the load (no effect with `snapshot`). */
  readonly skipBadRecords?: boolean;
}

export interface QueryOptions {
  /** OriginatingSystemNames the caller may see; absent means every source. */
  readonly sources?: readonly string[];
  /** The client's `Prefer: odata.maxpagesize=N`. */
  readonly maxPageSize?: number;
}

/** A query string of OData options (already percent-decoded), or its options as an object. */
export type QueryInput = string | Readonly<Record<string, string | number | boolean>>;

export interface QueryResult {
  readonly '@odata.context': string;
  readonly '@odata.count'?: number;
  readonly value: Array<Record<string, JsonValue>>;
  readonly '@odata.nextLink'?: string;
}

export const DEFAULT_DATA_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/default');

/** Everything a query needs after binding, and what explain() reports. */
interface Prepared {
  readonly resource: QueryResource;
  readonly table: Table;
  readonly access: TableAccess;
  readonly parsed: ParsedQuery;
  readonly filter: Bound | null;
  readonly order: readonly BoundOrderKey[];
  readonly select: readonly string[] | null;
  readonly skip: number;
  /** Rows this response may hold, and whether $top set it. */
  readonly pageRows: number;
  readonly top: number | undefined;
  readonly searches: ReadonlyMap<number, { node: Extract<Bound, { kind: 'search' }>; prepared: PreparedSearch }>;
  readonly source: CandidateSource;
  readonly strategy: OrderStrategy;
  readonly visible: ((row: number) => boolean) | null;
  /** The caller's sources (undefined: all). */
  readonly sources: readonly string[] | undefined;
  /** Top-level conjuncts the candidate source answers exactly. */
  readonly answered: ReadonlySet<Bound>;
  readonly nowMs: number;
  /** The generation of the data the query reads (the newest, or the one its $skiptoken pinned). */
  readonly gen: Generation;
  /** The $skiptoken the nextLink carries (pins `gen`). */
  readonly token: string;
  /** $expand, bound against the child schemas (Property only). */
  readonly expand: ExpandPlan | null;
  /** $apply's groupby/aggregate step: the response rows are then its groups. */
  readonly grouping: BoundGrouping | null;
}

/** The parts of Prepared that depend on the caller or the moment, not on the query text. */
type Plan = Omit<Prepared, 'visible' | 'sources' | 'nowMs' | 'gen' | 'token'>;

/** Default time a paged generation stays readable after its last page (pageSnapshotTtlMs). */
export const PAGE_SNAPSHOT_TTL_MS = 10 * 60_000;
/** Default EngineOpenOptions.compactFraction. */
export const COMPACT_FRACTION = 0.25;
/**
 * Older generations kept for paging at most; past it the least recently paged expires early. Each
 * keeps the structures built for it (at 1M listings, tens of MB: its key order and rank, sorted
 * permutations, bitsets, dead rows), so the bound is a memory bound.
 */
export const MAX_PINNED_GENERATIONS = 8;

/** Plans kept for repeated query texts (least recently used dropped first). */
export const PLAN_CACHE_SIZE = 512;

export class Engine {
  private gen: Generation;
  private readonly plans = new Map<string, Plan>();
  private readonly writer: ChangeWriter;
  /**
   * The data set's part of every $skiptoken: a checksum of the listing keys and table sizes as
   * loaded, so that the same data gives the same nextLinks (deterministic responses), and a token
   * of another data set is unknown here.
   */
  private readonly instance: string;
  /** Older generations that nextLinks pinned, with the time they were last paged. */
  private readonly pinned = new Map<number, { gen: Generation; lastUsed: number }>();
  private readonly pageTtl: number;
  /** When a nextLink last pinned the newest generation (null: none since it was published). */
  private pagedAt: number | null = null;
  /** The last generation id given out. */
  private lastId = 0;
  /** The newest generation whose `access.base` indexes cover exactly its rows (loaded or compacted). */
  private baseId = 0;
  /** Row counts of that generation's tables (compaction compares the rows appended since). */
  private baseRows!: Record<ResourceName, number>;
  /** Whether a compaction the engine started itself is under way. */
  private compacting = false;
  private readonly compactFraction: number | false;

  private constructor(
    store: Store,
    private readonly clock: () => number,
    indexes?: StoreIndexes,
    pageTtl = PAGE_SNAPSHOT_TTL_MS,
    compactFraction: number | false = COMPACT_FRACTION,
    firstVersions?: ReadonlyMap<string, number>,
  ) {
    this.gen = { id: 0, store, access: new StoreAccess(store, indexes) };
    this.instance = fingerprint(store);
    this.setBase(this.gen);
    this.compactFraction = compactFraction;
    this.writer = new ChangeWriter(clock, () => ++this.lastId, firstVersions);
    this.pageTtl = pageTtl;
  }

  static async open(options: EngineOpenOptions = {}): Promise<Engine> {
    const now = options.now;
    const clock = now ? () => now().getTime() : () => Date.now();
    const ttl = options.pageSnapshotTtlMs;
    if (ttl !== undefined && !(typeof ttl === 'number' && ttl >= 0)) throw new TypeError('Engine.open: pageSnapshotTtlMs must be a number of milliseconds, 0 or more.');
    const fraction = options.compactFraction;
    if (fraction !== undefined && fraction !== false && !(typeof fraction === 'number' && fraction > 0)) {
      throw new TypeError('Engine.open: compactFraction must be a fraction above 0 (of a table\'s rows), or false.');
    }
    if (options.snapshot !== undefined) {
      if (options.data !== undefined) throw new TypeError('Engine.open takes either data or snapshot, not both: a snapshot holds its own data set.');
      if (typeof options.snapshot !== 'string') throw new TypeError('Engine.open: snapshot must be the path of a snapshot file.');
      const { store, indexes, firstVersions } = readEngineSnapshot(options.snapshot, clock);
      return new Engine(store, clock, indexes, ttl, options.compactFraction, firstVersions);
    }
    const data = options.data ?? DEFAULT_DATA_DIR;
    const load = { skipBadRecords: options.skipBadRecords, now: clock };
    const store = typeof data === 'string' ? await loadDataDirectory(data, load) : loadRecords(data, load);
    return new Engine(store, clock, undefined, ttl, options.compactFraction);
  }

  /** The data set as of now (the newest generation). */
  get store(): Store {
    return this.gen.store;
  }

  /** The number of the newest generation: 0 as loaded, one more per change applied. */
  get generation(): number {
    return this.gen.id;
  }

  /**
   * Writes the whole engine (tables, key indexes, child groupings, search and point indexes, load
   * report, accounts and profiles) to one snapshot file that `Engine.open({ snapshot })` reads
   * back much faster than the data. Synchronous; the file is replaced atomically (a temporary
   * file renamed over it), so `file` never holds a partial snapshot. Returns the file's size.
   * After changes, the newest generation's live rows are written as compacted (see `compact`),
   * which rebuilds the indexes first (slower). Throws a SnapshotError (SnapshotWriteFailed) when it cannot write.
   */
  save(file: string): { bytes: number } {
    const g = this.gen;
    const firstVersions = this.writer.firstVersions;
    if (g.id === this.baseId) return writeEngineSnapshot(file, g.store, g.access.base, firstVersions);
    const { store, indexes } = compactNow(g.store, g.access);
    return writeEngineSnapshot(file, store, indexes, firstVersions);
  }

  /**
   * Upserts records of one resource as one atomic change: a record whose key exists replaces that
   * record (the whole record; a replaced listing keeps its children), others are added. Queries
   * see all of it or none of it; they keep running while it applies. Children need their listing
   * (MissingParent otherwise). Bad records are DataErrors as at load, and nothing is applied.
   */
  upsert(resource: ResourceName, records: readonly unknown[]): Promise<ChangeSummary> {
    return this.apply([{ resource, upsert: records }]);
  }

  /** Removes records by key as one atomic change; a removed listing's children go with it. Unknown keys are counted, not errors. */
  remove(resource: ResourceName, keys: readonly string[]): Promise<ChangeSummary> {
    return this.apply([{ resource, remove: keys }]);
  }

  /**
   * Applies several operations (`{ resource, upsert: records }` / `{ resource, remove: keys }`,
   * in order) as ONE atomic change, published as the next generation. Changes apply one at a
   * time, in the order they were asked for.
   */
  apply(operations: readonly ChangeOperation[]): Promise<ChangeSummary> {
    let checked: ChangeOperation[];
    try {
      checked = checkOperations(operations);
    } catch (e) {
      return Promise.reject(e);
    }
    const done = this.writer.apply(checked, () => this.gen, (next) => this.publish(next));
    return done.then((summary) => {
      this.considerCompaction();
      return summary;
    });
  }

  /** The $skiptoken nextLinks carry now: the data set and the newest generation (paging pins it). */
  get pageToken(): string {
    return this.tokenOf(this.gen);
  }

  /** Whether a live record of the resource has this key (any source: not for callers limited to some). */
  has(resource: ResourceName, key: string): boolean {
    const table = this.gen.store.table(resource);
    const row = table.rowOfKey(key);
    return row >= 0 && !this.gen.access.of(table).isDead(row);
  }

  /** The keys of every live record of the resource, in key order (any source: not for callers limited to some). */
  keys(resource: ResourceName): string[] {
    const table = this.gen.store.table(resource);
    const access = this.gen.access.of(table);
    const out: string[] = [];
    for (const row of access.keyOrder) if (!access.isDead(row)) out.push(table.keyOf(row));
    return out;
  }

  /** Makes `next` the generation new queries read; the previous one stays readable while pinned. */
  private publish(next: Generation): void {
    const previous = this.gen;
    const now = this.clock();
    if (this.pagedAt !== null) this.pinned.set(previous.id, { gen: previous, lastUsed: this.pagedAt });
    this.pagedAt = null;
    for (const [id, pin] of this.pinned) if (now - pin.lastUsed > this.pageTtl) this.pinned.delete(id);
    while (this.pinned.size > MAX_PINNED_GENERATIONS) {
      let oldest: number | null = null;
      for (const [id, pin] of this.pinned) if (oldest === null || pin.lastUsed < this.pinned.get(oldest)!.lastUsed) oldest = id;
      this.pinned.delete(oldest!);
    }
    this.gen = next;
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
    return this.writer.exclusive(async () => {
      const g = this.gen;
      if (g.id === this.baseId) return;
      const { store, indexes } = await runYielding(compactSteps(g.store, g.access));
      const compacted: Generation = { id: ++this.lastId, store, access: new StoreAccess(store, indexes) };
      this.writer.rebase();
      this.setBase(compacted);
      this.publish(compacted);
    });
  }

  private setBase(g: Generation): void {
    this.baseId = g.id;
    this.baseRows = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, g.store.table(r).rowCount])) as Record<ResourceName, number>;
  }

  /** After a change: starts a compaction when the newest generation carries enough dead and appended rows. */
  private considerCompaction(): void {
    if (this.compactFraction === false || this.compacting) return;
    if (!worthCompacting(this.gen.store, this.gen.access, this.baseRows, this.compactFraction)) return;
    this.compacting = true;
    this.compact().then(
      () => (this.compacting = false),
      (e: unknown) => {
        this.compacting = false;
        // A defect, not bad input (the data was valid when it went in): say so, keep serving.
        process.emitWarning(`reso-engine: compaction failed, the engine keeps its uncompacted data (${e instanceof Error ? e.message : String(e)})`);
      },
    );
  }

  /** The engine clock's current instant, epoch ms. */
  now(): number {
    return this.clock();
  }

  query(resource: QueryResource, query: QueryInput, options: QueryOptions = {}): QueryResult {
    const p = this.prepare(resource, query, options);
    const result = this.execute(p);
    if (result['@odata.nextLink'] !== undefined) this.pinForPaging(p.gen);
    return result;
  }

  /** The plan a query would run, as text. */
  explain(resource: QueryResource, query: QueryInput, options: QueryOptions = {}): string {
    const p = this.prepare(resource, query, options);
    const lines = [
      `resource: ${resource}`,
      `visibility: ${options.sources ? `sources ${options.sources.join(', ') || '(none)'}` : 'all sources'}`,
      `candidates: ${describeSource(p.source, this.sourceSize(p))}`,
      `residual filter: ${p.filter ? 'yes' : 'none'}`,
      `order: ${describeOrder(p.strategy, p.order)}`,
      ...(p.grouping ? [`apply: ${describeGrouping(p.grouping)}`] : []),
      `page: skip ${p.skip}, up to ${p.pageRows} rows`,
    ];
    return lines.join('\n');
  }

  private prepare(resource: QueryResource, query: QueryInput, options: QueryOptions): Prepared {
    if (!QUERY_RESOURCES.includes(resource)) {
      throw new QueryError('UnknownResource', `No resource '${String(resource)}': query Property, Media or OpenHouse.`);
    }
    const text = typeof query === 'string' ? query : Object.entries(query).map(([k, v]) => `${k}=${String(v)}`).join('&');
    const { gen, token } = this.generationOf(text);
    const key = `${gen.id}\n${resource}\n${options.maxPageSize ?? ''}\n${text}`;
    let plan = this.plans.get(key);
    if (plan) {
      this.plans.delete(key); // refresh its place in the LRU order
    } else {
      try {
        plan = this.plan(gen, resource, text, options, false);
      } catch (err) {
        // Parse without source spans (faster); a binder error re-plans with them for its position.
        if (!(err instanceof QueryError) || err.position !== undefined || err.option === undefined) throw err;
        plan = this.plan(gen, resource, text, options, true);
      }
      if (this.plans.size >= PLAN_CACHE_SIZE) this.plans.delete(this.plans.keys().next().value!);
    }
    this.plans.set(key, plan);
    return { ...plan, visible: this.visibility(gen, plan.table, options.sources), sources: options.sources, nowMs: this.clock(), gen, token };
  }

  /**
   * The generation a query reads: the one its $skiptoken pinned (a nextLink of an earlier page),
   * else the newest. A token this engine did not give, or whose generation is no longer kept, is a
   * QueryError.
   */
  private generationOf(text: string): { gen: Generation; token: string } {
    const current = this.gen;
    if (!text.includes('$skiptoken=')) return { gen: current, token: this.tokenOf(current) };
    const raw = splitQuery(text).find((o) => o.name === '$skiptoken')?.value;
    if (raw === undefined) return { gen: current, token: this.tokenOf(current) };
    const m = /^([0-9a-f]{8})-([0-9]{1,15})$/.exec(raw);
    if (m === null) {
      throw new QueryError('InvalidSkipToken', `$skiptoken '${raw.slice(0, 40)}' is not one this service gave: follow the @odata.nextLink as it is.`, { option: '$skiptoken' });
    }
    const id = Number(m[2]);
    const now = this.clock();
    if (m[1] === this.instance && id === current.id) return { gen: current, token: raw };
    const pin = m[1] === this.instance ? this.pinned.get(id) : undefined;
    if (pin === undefined || now - pin.lastUsed > this.pageTtl) {
      if (pin !== undefined) this.pinned.delete(id);
      throw new QueryError(
        'SkipTokenExpired',
        `The data this nextLink was paging (generation ${id}) has changed and is no longer kept: start again from the first page.`,
        { option: '$skiptoken' },
      );
    }
    pin.lastUsed = now;
    return { gen: pin.gen, token: raw };
  }

  private tokenOf(gen: Generation): string {
    return `${this.instance}-${gen.id}`;
  }

  /** Called when a response carries a nextLink on `gen`: keeps it readable for paging once newer data is published. */
  private pinForPaging(gen: Generation): void {
    const now = this.clock();
    if (gen === this.gen) this.pagedAt = now;
    else {
      const pin = this.pinned.get(gen.id);
      if (pin !== undefined) pin.lastUsed = now;
    }
  }

  /** Parse, bind and plan: everything about a query that depends only on its text and the data. */
  private plan(gen: Generation, resource: QueryResource, text: string, options: QueryOptions, spans: boolean): Plan {
    const parsed = parseQuery(text, { spans });
    const expand = parsed.expand ? bindExpand(parsed.expand, { resource, store: gen.store, spanOf: (node) => spanOf(parsed, node) }) : null;
    if (parsed.format !== undefined && parsed.format !== 'json') {
      throw new QueryError('UnsupportedFormat', `$format=${parsed.format} is not available here: data comes as json.`, { option: '$format' });
    }
    const table = gen.store.table(resource);
    const access = gen.access.of(table);
    const ctx = (option: string): BindContext => ({ schema: table.schema, option, spanOf: (node) => spanOf(parsed, node) });
    const bound = parsed.filter ? bindFilter(parsed.filter, ctx('$filter')) : null;
    const applied = parsed.apply ? bindApply(parsed, ctx, bound) : null;
    const grouping = applied?.grouping ?? null;
    const filter = applied ? applied.filter : bound?.expr ?? null;
    const order = parsed.orderby && !grouping ? bindOrderBy(parsed.orderby, ctx('$orderby'), applied?.searchCount ?? bound?.searchCount ?? 0) : [];
    const select = parsed.select && !grouping ? bindSelect(parsed.select, ctx('$select'))?.map((f) => f.name) ?? null : null;

    const limit = TOP_LIMITS[resource];
    if (parsed.top !== undefined && parsed.top > limit) {
      throw new QueryError('TopTooLarge', `$top=${parsed.top} is above the maximum of ${limit} for ${resource}.`, { option: '$top' });
    }
    const maxPage = options.maxPageSize !== undefined && options.maxPageSize > 0 ? Math.min(Math.floor(options.maxPageSize), limit) : undefined;
    const pageRows = parsed.top !== undefined ? Math.min(parsed.top, maxPage ?? parsed.top) : maxPage ?? DEFAULT_PAGE_SIZE;

    const searches = new Map<number, { node: Extract<Bound, { kind: 'search' }>; prepared: PreparedSearch }>();
    for (const node of searchCalls(filter)) {
      searches.set(node.ordinal, { node, prepared: prepareSearch(gen.access.search[node.field], node.text, node.minMatches) });
    }
    const top = conjuncts(filter);
    const strategy = chooseOrder(order, top, [...searches.values()].map((s) => s.node), parsed.count === true, parsed.top !== undefined, (name) => access.sortedBy(name) !== null);
    const source = this.chooseSource(gen, top, searches, access);
    const answered = answeredBy(source, top);
    return {
      resource, table, access, parsed, filter, order, select, expand, grouping,
      skip: parsed.skip ?? 0, pageRows, top: parsed.top, searches, source, strategy, answered,
    };
  }

  /** The cheapest candidate source among the top-level conjuncts (sizes known before running). */
  private chooseSource(gen: Generation, top: readonly Bound[], searches: Prepared['searches'], access: TableAccess): CandidateSource {
    let best: { source: CandidateSource; size: number } | null = null;
    const consider = (source: CandidateSource, size: number): void => {
      if (!best || size < best.size) best = { source, size };
    };
    const lookups: Array<{ field: string; values: string[] }> = [];
    let lookupSize = Infinity;
    for (const e of top) {
      if (e.kind === 'search') {
        const s = searches.get(e.ordinal)!;
        // an upper bound: the postings of the rarest required term (exact), or all expansions
        const view = gen.access.search[e.field];
        let size = 0;
        for (const t of s.prepared.terms) {
          if (t.exact >= 0) size += view.postingCount(t.exact);
          for (const id of t.inexact) size += view.postingCount(id);
        }
        consider({ kind: 'search', node: e }, size);
      } else if (e.kind === 'geo') {
        consider({ kind: 'geo', node: e }, access.table.rowCount / 4);
      } else {
        const l = lookupOf(e);
        const counts = l ? access.codeCounts(l.field) : null;
        if (l && counts) {
          const col = access.table.columnOf(l.field, 'dictionary')!;
          let size = 0;
          for (const v of l.values) {
            const code = col.dictionary.indexOf(v);
            if (code > 0) size += counts[code];
          }
          lookups.push(l);
          lookupSize = Math.min(lookupSize, size);
        }
        if (e.kind === 'compare' && e.op === 'eq' && e.left.kind === 'field' && e.right.kind === 'const' && typeof e.right.value === 'string') {
          const rows = access.textRows(e.left.field.name, e.right.value);
          if (rows) consider({ kind: 'text', node: e, field: e.left.field.name, value: e.right.value }, rows.length);
        }
        // A range on a numeric column: the slice of its sorted permutation (binary search).
        const field = e.kind === 'compare' && e.op !== 'ne' && e.left.kind === 'field' && e.right.kind === 'const' && typeof e.right.value === 'number' ? e.left.field.name : null;
        const perm = field ? access.sortedBy(field) : null;
        if (field && perm) {
          const range = rangeOf(perm, access.table, field, top);
          consider({ kind: 'range', field, start: range.start, end: range.end }, range.end - range.start);
        }
      }
    }
    // All dictionary lookups together: an AND of bitsets, no larger than the smallest of them.
    if (lookups.length) consider({ kind: 'lookup', terms: lookups }, lookupSize);
    return (best as { source: CandidateSource } | null)?.source ?? { kind: 'scan' };
  }

  private sourceSize(p: Prepared): number | null {
    return p.source.kind === 'scan' ? p.table.rowCount : null;
  }

  /** Row visibility for the caller's sources: the listing's OriginatingSystemName (children: their listing's). */
  /**
   * Row visibility: the row is live in the generation, and for a caller limited to some sources,
   * the listing's OriginatingSystemName is one of them (children: their listing's, read from the
   * listing's live version). Null when every row is visible.
   */
  private visibility(gen: Generation, table: Table, sources: readonly string[] | undefined): ((row: number) => boolean) | null {
    const dead = gen.access.of(table).dead;
    const alive = dead === null ? null : (row: number): boolean => (dead[row >>> 5] & (1 << (row & 31))) === 0;
    if (sources === undefined) return alive;
    const property = gen.store.Property;
    const osn = property.columnOf('OriginatingSystemName', 'dictionary');
    if (!osn) return () => false;
    const allowed = new Uint8Array(osn.dictionary.length);
    osn.dictionary.forEach((name, code) => {
      if (name !== null && sources.includes(name)) allowed[code] = 1;
    });
    const codes = osn.codes;
    if (table === property) return alive === null ? (row) => allowed[codes[row]] === 1 : (row) => alive(row) && allowed[codes[row]] === 1;
    const link = table.schema.resource === 'Media' ? table.column('ResourceRecordKey') : table.column('ListingKey');
    if (!(link instanceof ParentKeyColumn)) return () => false;
    const parent = link.parentRow;
    const listings = gen.access.of(property);
    if (listings.dead === null) return (row) => (alive === null || alive(row)) && parent[row] >= 0 && allowed[codes[parent[row]]] === 1;
    return (row) => {
      if (alive !== null && !alive(row)) return false;
      let p = parent[row];
      // a link to a replaced version of the listing: its live version decides
      if (p >= 0 && listings.isDead(p)) p = property.rowOfKey(property.keyOf(p));
      return p >= 0 && !listings.isDead(p) && allowed[codes[p]] === 1;
    };
  }

  private execute(p: Prepared): QueryResult {
    const { table, access } = p;
    // search.text results (membership as bitsets, scores by binary search)
    const results = new Map<number, { match: SearchMatch; bits: Uint32Array }>();
    const resultOf = (ordinal: number): { match: SearchMatch; bits: Uint32Array } => {
      let r = results.get(ordinal);
      if (!r) {
        const s = p.searches.get(ordinal)!;
        const match = evaluateSearch(p.gen.access.search[s.node.field], s.prepared);
        const bits = new Uint32Array((table.rowCount + 31) >>> 5);
        for (const row of match.rows) bits[row >>> 5] |= 1 << (row & 31);
        r = { match, bits };
        results.set(ordinal, r);
      }
      return r;
    };
    // geo.distance as a residual: tested point by point (the same exact haversine the KD-tree
    // applies) while few rows ask, as in an ordered walk that stops at its page; past
    // GEO_DIRECT_TESTS rows the whole circle is collected once from the KD-tree into a bitset.
    const geoTests = new Map<Bound, (row: number) => boolean>();
    const geoTest = (node: Extract<Bound, { kind: 'geo' }>): ((row: number) => boolean) => {
      let test = geoTests.get(node);
      if (test) return test;
      const { validity, lat, lon } = table.columnOf(node.field.name, 'point')!;
      // A great-circle distance is at least the latitude difference (as an arc): most rows fail
      // this before any trigonometry.
      const latSpan = ((node.meters / EARTH_RADIUS_M) * 180) / Math.PI * (1 + 1e-9) + 1e-9;
      let left = GEO_DIRECT_TESTS;
      let bits: Uint32Array | null = null;
      test = (row) => {
        if (bits === null && left-- > 0) {
          if (!getBit(validity, row) || Math.abs(lat[row] - node.lat) > latSpan) return false;
          return haversineMeters(node.lon, node.lat, lon[row], lat[row]) <= node.meters;
        }
        if (bits === null) {
          bits = new Uint32Array((table.rowCount + 31) >>> 5);
          const index = p.gen.access.points[node.field.name as 'Location' | 'RawLocation'];
          for (const r of index.within(node.lon, node.lat, node.meters)) bits[r >>> 5] |= 1 << (r & 31);
        }
        return getBit(bits, row);
      };
      geoTests.set(node, test);
      return test;
    };
    const visible = p.visible;
    // The filter as a closure, less the conjuncts an access path answers exactly itself.
    const residualWithout = (answered: ReadonlySet<Bound>): Evaluator | null => {
      const rest = andOf(conjuncts(p.filter).filter((e) => !answered.has(e)));
      return rest ? compile(rest, { table, nowMs: p.nowMs, searchHit: (ordinal, row) => getBit(resultOf(ordinal).bits, row), geoTest }) : null;
    };
    const acceptWith = (ev: Evaluator | null) => (row: number): boolean => (visible === null || visible(row)) && (ev === null || ev(row) === true);
    /** Visibility and the whole filter (walks over permutations, which answer nothing themselves). */
    // Compiled on first use: most paths need only one of them.
    let acceptAll: ((row: number) => boolean) | undefined;
    const accept = (): ((row: number) => boolean) => (acceptAll ??= acceptWith(residualWithout(new Set())));
    let rest: { ev: Evaluator | null; accept: (row: number) => boolean } | undefined;
    const restOf = (): { ev: Evaluator | null; accept: (row: number) => boolean } => {
      if (!rest) {
        const ev = residualWithout(p.answered);
        rest = { ev, accept: acceptWith(ev) };
      }
      return rest;
    };
    const acceptRest = (): ((row: number) => boolean) => restOf().accept;
    const countMatches = (): number => {
      if (p.source.kind === 'lookup' && restOf().ev === null) {
        // every condition is a dictionary lookup: count an AND of bitsets (visibility folded in)
        // (lookup bitsets leave dead rows out themselves)
        const terms = p.sources !== undefined && table === p.gen.store.Property ? [...p.source.terms, { field: 'OriginatingSystemName', values: p.sources }] : p.source.terms;
        if (p.sources === undefined || terms !== p.source.terms) return this.lookupCount(p, { kind: 'lookup', terms });
      }
      return this.collect(p, acceptRest()).length;
    };

    // How many ordered rows we need: the page, plus one to know whether more remain.
    const need = p.skip + p.pageRows + 1;
    if (p.grouping) {
      const groups = runApply(table, this.collect(p, acceptRest()), p.grouping, { nowMs: p.nowMs, limit: need, ignoreNulls: p.parsed.ignorenulls === true });
      return respond(p, groups.order, () => groups.count, (g) => groups.record(g));
    }
    let ordered: Uint32Array;
    let count: number | undefined;

    if (p.pageRows === 0) {
      // $top=0: only the count can be asked for
      return respond(p, new Uint32Array(0), countMatches, (row) => this.project(table, row, p));
    } else if (p.strategy.kind === 'key' && p.source.kind === 'scan') {
      // No index narrows the rows: walk them in key order and stop at the page, starting at the
      // first key a top-level `Key gt/ge 'k'` allows (keyset paging), found by binary search.
      const order = access.keyOrder;
      ordered = walkOrder(order, keyLowerBound(table, order, conjuncts(p.filter)), accept(), need);
    } else if (p.strategy.kind === 'ranked') {
      const s = p.searches.get(p.strategy.node.ordinal)!;
      const acceptRanked = acceptWith(residualWithout(new Set([s.node])));
      const ranked = rankSearch(p.gen.access.search[s.node.field], s.prepared, need, { accept: acceptRanked, tieRank: access.keyRank });
      ordered = ranked.rows;
    } else if (p.strategy.kind === 'walk') {
      const { field, descending } = p.strategy;
      const perm = access.sortedBy(field)!;
      const range = rangeOf(perm, table, field, conjuncts(p.filter));
      // A descending walk reads the cached descending order: the same slice, mirrored (a range's
      // bounds fall between runs of equal values, and only an unranged slice holds the nulls).
      const order = descending ? access.sortedDescending(field)!.subarray(perm.length - range.end, perm.length - range.start) : perm.subarray(range.start, range.end);
      // With dictionary lookups as the source, a bit test stands in for their closures.
      const source = p.source;
      const bits = source.kind === 'lookup' ? this.lookupBits(p, source) : null;
      if (bits === null) ordered = walkOrder(order, 0, accept(), need);
      else {
        const rest = restOf();
        ordered = rest.ev === null && p.sources === undefined ? walkBits(order, bits, need) : walkOrder(order, 0, (row) => getBit(bits, row) && rest.accept(row), need);
      }
    } else {
      const matches = this.collect(p, acceptRest());
      count = matches.length;
      const keys: SortKey[] = p.order.map((k) =>
        k.kind === 'relevance'
          ? { read: (row: number) => relevanceOf(row, p, resultOf), descending: true }
          : { read: compile(k.expr, { table, nowMs: p.nowMs, searchHit: () => false, geoTest: () => () => false }), descending: k.descending },
      );
      ordered = orderRows(matches, keys, access.keyRank, need);
    }

    return respond(p, ordered, () => count ?? countMatches(), (row) => this.project(table, row, p));
  }

  /** Every matching row, ascending. */
  private collect(p: Prepared, accept: (row: number) => boolean): Uint32Array {
    const s = p.source;
    const out: number[] = [];
    switch (s.kind) {
      case 'search': {
        const ref = p.searches.get(s.node.ordinal)!;
        const match = evaluateSearch(p.gen.access.search[s.node.field], ref.prepared);
        for (const row of match.rows) if (accept(row)) out.push(row);
        return Uint32Array.from(out);
      }
      case 'geo': {
        const index = p.gen.access.points[s.node.field.name as 'Location' | 'RawLocation'];
        return index.within(s.node.lon, s.node.lat, s.node.meters, accept);
      }
      case 'lookup': {
        const bits = this.lookupBits(p, s);
        for (let w = 0; w < bits.length; w++) {
          let word = bits[w];
          while (word !== 0) {
            const row = (w << 5) | (31 - Math.clz32(word & -word));
            if (accept(row)) out.push(row);
            word &= word - 1;
          }
        }
        return Uint32Array.from(out);
      }
      case 'text':
        return Uint32Array.from(p.access.textRows(s.field, s.value)!.filter(accept));
      case 'range': {
        const perm = p.access.sortedBy(s.field)!;
        for (let i = s.start; i < s.end; i++) if (accept(perm[i])) out.push(perm[i]);
        return Uint32Array.from(out).sort();
      }
      case 'scan': {
        const n = p.table.rowCount;
        for (let row = 0; row < n; row++) if (accept(row)) out.push(row);
        return Uint32Array.from(out);
      }
    }
  }

  /**
   * One bitset per lookup term: the value's own cached bitset when the term has one value (no
   * copy), else the OR of the values' bitsets; plus the live rows when some are dead.
   */
  private termBits(p: Prepared, s: Extract<CandidateSource, { kind: 'lookup' }>): Uint32Array[] {
    const words = (p.table.rowCount + 31) >>> 5;
    const live = p.access.liveBits;
    const terms = s.terms.map((t) => {
      const col = p.table.columnOf(t.field, 'dictionary')!;
      const codes = t.values.map((v) => col.dictionary.indexOf(v)).filter((code) => code > 0);
      if (codes.length === 1) return p.access.valueBits(t.field, codes[0]);
      const term = new Uint32Array(words);
      for (const code of codes) {
        const bits = p.access.valueBits(t.field, code);
        for (let w = 0; w < words; w++) term[w] |= bits[w];
      }
      return term;
    });
    // dead rows (replaced or removed) as one more term
    return live === null ? terms : [...terms, live];
  }

  /** AND over the lookup terms of (OR over each term's values) of per-value bitsets. */
  private lookupBits(p: Prepared, s: Extract<CandidateSource, { kind: 'lookup' }>): Uint32Array {
    const terms = this.termBits(p, s);
    const out = new Uint32Array((p.table.rowCount + 31) >>> 5);
    if (terms.length === 0) return out;
    out.set(terms[0]);
    for (let t = 1; t < terms.length; t++) {
      const bits = terms[t];
      for (let w = 0; w < out.length; w++) out[w] &= bits[w];
    }
    return out;
  }

  /** Rows in every lookup term: a popcount of the AND, word by word, with no bitset built. */
  private lookupCount(p: Prepared, s: Extract<CandidateSource, { kind: 'lookup' }>): number {
    const terms = this.termBits(p, s);
    if (terms.length === 0) return 0;
    const words = terms[0].length;
    let n = 0;
    for (let w = 0; w < words; w++) {
      let x = terms[0][w];
      for (let t = 1; t < terms.length && x !== 0; t++) x &= terms[t][w];
      if (x !== 0) n += popcount32(x);
    }
    return n;
  }

  private project(table: Table, row: number, p: Prepared): Record<string, JsonValue> {
    const record = table.record(row, p.select ?? undefined, p.nowMs);
    if (p.parsed.ignorenulls === true) {
      for (const k of Object.keys(record)) if (record[k] === null) delete record[k];
    }
    p.expand?.expandInto(record, row, { nowMs: p.nowMs, ignoreNulls: p.parsed.ignorenulls === true, visible: p.visible });
    return record;
  }
}

/** 8 hex digits: CRC-32 of the table sizes and the listing keys (see Engine.instance). */
function fingerprint(store: Store): string {
  let crc = crc32(RESOURCE_NAMES.map((r) => store.table(r).rowCount).join(','));
  const keys = store.Property.keyColumn;
  crc = crc32(keys.bytes.subarray(0, keys.offsets[store.Property.rowCount]), crc);
  return crc.toString(16).padStart(8, '0');
}

/**
 * The response for results in order (rows, or $apply groups): the page of $skip/$top, the count
 * (asked only under $count=true) and the nextLink (SERVICE.md §3 server paging). `ordered` holds
 * at least the page plus one more result when more remain.
 */
function respond(p: Prepared, ordered: Uint32Array, count: () => number, project: (id: number) => Record<string, JsonValue>): QueryResult {
  const wantCount = p.parsed.count === true;
  const pageEnd = Math.min(ordered.length, p.skip + p.pageRows);
  const page = p.skip < pageEnd ? ordered.subarray(p.skip, pageEnd) : new Uint32Array(0);
  const more = ordered.length > p.skip + p.pageRows && (p.top === undefined || p.pageRows < p.top);
  const value = page.length ? Array.from(page, project) : [];
  const envelope: { -readonly [K in keyof QueryResult]: QueryResult[K] } = { '@odata.context': `$metadata#${p.resource}`, value };
  if (wantCount) envelope['@odata.count'] = count();
  if (more) {
    const next: ParsedQuery = { ...p.parsed, skip: p.skip + p.pageRows, skiptoken: p.token, ...(p.top !== undefined ? { top: p.top - p.pageRows } : {}) };
    envelope['@odata.nextLink'] = `${p.resource}?${printQueryOptions(next).map(([name, v]) => `${name}=${encodeURIComponent(v)}`).join('&')}`;
  }
  // key order for the @odata.count position: context, count, value, nextLink
  return wantCount
    ? { '@odata.context': envelope['@odata.context'], '@odata.count': envelope['@odata.count'], value, ...(more ? { '@odata.nextLink': envelope['@odata.nextLink'] } : {}) }
    : envelope;
}

function relevanceOf(row: number, p: Prepared, resultOf: (ordinal: number) => { match: SearchMatch; bits: Uint32Array }): number {
  let sum = 0;
  for (const ordinal of p.searches.keys()) {
    const { match, bits } = resultOf(ordinal);
    if (!getBit(bits, row)) continue;
    let lo = 0;
    let hi = match.rows.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (match.rows[mid] < row) lo = mid + 1;
      else hi = mid;
    }
    sum += match.scores[lo];
  }
  return sum;
}

/** The first `need` rows of `order`, from position `from` on, that `keep` allows. */
function walkOrder(order: Uint32Array, from: number, keep: (row: number) => boolean, need: number): Uint32Array {
  const out: number[] = [];
  for (let i = from; i < order.length && out.length < need; i++) if (keep(order[i])) out.push(order[i]);
  return Uint32Array.from(out);
}

/**
 * The first position of the key order that top-level `Key gt 'k'` / `Key ge 'k'` conjuncts allow
 * (their largest bound; rows before it fail them), or 0. The walk still applies the whole filter.
 */
function keyLowerBound(table: Table, order: Uint32Array, top: readonly Bound[]): number {
  let bound: string | null = null;
  for (const e of top) {
    if (e.kind !== 'compare' || (e.op !== 'gt' && e.op !== 'ge') || e.left.kind !== 'field' || e.left.field.name !== table.schema.key) continue;
    if (e.right.kind !== 'const' || typeof e.right.value !== 'string') continue;
    if (bound === null || e.right.value > bound) bound = e.right.value;
  }
  if (bound === null) return 0;
  let lo = 0;
  let hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (table.keyOf(order[mid]) < bound) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The first `need` rows of an order whose bit is set. */
function walkBits(order: Uint32Array, bits: Uint32Array, need: number): Uint32Array {
  const out: number[] = [];
  for (let i = 0; i < order.length && out.length < need; i++) {
    const row = order[i];
    if ((bits[row >>> 5] & (1 << (row & 31))) !== 0) out.push(row);
  }
  return Uint32Array.from(out);
}

/**
 * The slice of a sorted permutation (ascending, nulls first) that top-level range conjuncts on
 * its field allow (`X ge 3 and X lt 9`): a binary search instead of walking past rows the filter
 * would reject one by one. Nulls never satisfy a range, so they are cut too.
 */
function rangeOf(perm: Uint32Array, table: Table, field: string, top: readonly Bound[]): { start: number; end: number } {
  const col = table.column(field) as { values: Float64Array; validity: Uint32Array };
  let lo = -Infinity;
  let hi = Infinity;
  let loOpen = false;
  let hiOpen = false;
  let ranged = false;
  for (const e of top) {
    if (e.kind !== 'compare' || e.left.kind !== 'field' || e.left.field.name !== field || e.right.kind !== 'const' || typeof e.right.value !== 'number') continue;
    const v = e.right.value;
    ranged = true;
    if ((e.op === 'ge' || e.op === 'gt') && (v > lo || (v === lo && e.op === 'gt'))) [lo, loOpen] = [v, e.op === 'gt'];
    if ((e.op === 'le' || e.op === 'lt') && (v < hi || (v === hi && e.op === 'lt'))) [hi, hiOpen] = [v, e.op === 'lt'];
    if (e.op === 'eq') {
      if (v > lo) [lo, loOpen] = [v, false];
      if (v < hi) [hi, hiOpen] = [v, false];
    }
  }
  if (!ranged) return { start: 0, end: perm.length };
  // first position whose (valid) value is not below the bound
  const lowerBound = (pred: (v: number) => boolean): number => {
    let a = 0;
    let b = perm.length;
    while (a < b) {
      const m = (a + b) >>> 1;
      const row = perm[m];
      if (!getBit(col.validity, row) || !pred(col.values[row])) a = m + 1;
      else b = m;
    }
    return a;
  };
  const start = lowerBound((v) => (loOpen ? v > lo : v >= lo));
  const end = lowerBound((v) => (hiOpen ? v >= hi : v > hi));
  return { start, end: Math.max(start, end) };
}

function describeOrder(s: OrderStrategy, order: readonly BoundOrderKey[]): string {
  switch (s.kind) {
    case 'key':
      return 'key ascending';
    case 'ranked':
      return `ranked top-k by relevance (impact-ordered postings, early stop)`;
    case 'walk':
      return `ordered walk of ${s.field} ${s.descending ? 'desc' : 'asc'} (sorted permutation, stops at the page)`;
    case 'heap':
      return `all matches, then top-k heap on ${order.map((k) => (k.kind === 'relevance' ? 'relevance desc' : `${k.expr.kind === 'field' ? k.expr.field.name : 'expression'} ${k.descending ? 'desc' : 'asc'}`)).join(', ')}, key`;
  }
}


