/**
 * The result cache: what running a plan on the newest generation produced before any record was
 * built (the page's rows in order, whether more follow, the count, an $apply page's result rows),
 * kept for the next run of the same plan by a caller who sees the same rows. Repeated requests (a
 * front page, a map's pins, a search box's usual words) then skip the filter, the ranking and the
 * grouping; records are still built per request, at the caller's clock, as without the cache.
 * Solr's queryResultCache and Elasticsearch's shard request cache do the same, dropped when a new
 * searcher opens or a refresh publishes.
 *
 * An entry is keyed by the plan object (the plan cache gives the same text the same plan; a new
 * literal or page size makes another plan), the generation's id and the caller's sources as a set.
 * Every other run parameter that changes which rows come back ($skip, $top, $count, the page size,
 * a $skiptoken, a navigation path's listing) is part of the plan. Only runs on the newest
 * generation are kept, and the first run on a newer one drops the rest: an entry never outlives
 * the data it was read from, and holds none of it (ids and plain values only). The executor keeps
 * out runs that read the clock (src/exec/execute.ts `resultsCacheable`). Bounded in entries and in
 * rows held; the oldest placed entry goes first unless used since ("second chance", as the plan
 * cache).
 */
import type { Plan } from '../plan/plan.js';
import type { JsonValue } from '../store/columns.js';

/** Entries kept by default. */
export const RESULT_CACHE_ENTRIES = 1024;
/** Rows (page row ids and $apply result rows) held across all entries by default: about 1 MB of ids. */
export const RESULT_CACHE_ROWS = 262_144;

/** The bounds of a result cache: 0 for either turns it off. */
export interface ResultCacheOptions {
  /** Results kept at most (default RESULT_CACHE_ENTRIES). */
  readonly maxEntries?: number;
  /** Rows held at most across all results (default RESULT_CACHE_ROWS); a larger result is not kept. */
  readonly maxRows?: number;
}

/** What a run produced before records are built. */
export interface RunResult {
  /** The page in order: row ids of the plan's table, or for $apply indexes into `groups`. */
  readonly page: Uint32Array;
  /** Whether a next page follows (the response carries a nextLink). */
  readonly more: boolean;
  /** `@odata.count` when the plan asks for it, else -1. */
  readonly count: number;
  /** $apply groupby/aggregate: the page's result rows (handed out as copies only); null otherwise. */
  readonly groups: ReadonlyArray<Readonly<Record<string, JsonValue>>> | null;
}

interface Entry {
  readonly plan: Plan;
  readonly sources: string;
  readonly result: RunResult;
  readonly rows: number;
  /** Used since it was last placed at the back of the order. */
  used: boolean;
}

export class ResultCache {
  /** The generation the entries were read from (-1: none yet). */
  private generation = -1;
  private readonly byPlan = new Map<Plan, Map<string, Entry>>();
  /** Every entry, oldest placed first. */
  private readonly order = new Set<Entry>();
  private held = 0;
  /** Runs answered from the cache, and runs that were cacheable but not cached. */
  hits = 0;
  misses = 0;

  constructor(
    readonly maxEntries = RESULT_CACHE_ENTRIES,
    readonly maxRows = RESULT_CACHE_ROWS,
  ) {}

  /** Results kept now. */
  get size(): number {
    return this.order.size;
  }

  /** Rows held now (page row ids and $apply result rows). */
  get rows(): number {
    return this.held;
  }

  /** The result of the plan's run on the generation for callers of these sources (`sourcesKey`), if kept. */
  get(plan: Plan, generation: number, sources: string): RunResult | undefined {
    if (generation !== this.generation) return this.miss(generation);
    const e = this.byPlan.get(plan)?.get(sources);
    if (e === undefined) return this.miss(generation);
    e.used = true;
    this.hits++;
    return e.result;
  }

  private miss(generation: number): undefined {
    this.misses++;
    // a run on a newer generation: what was read from the older one is never asked for again
    if (generation > this.generation) {
      this.clear();
      this.generation = generation;
    }
    return undefined;
  }

  /** Keeps a run's result (after `get` missed it on this generation), dropping older entries to make room. */
  set(plan: Plan, generation: number, sources: string, result: RunResult): void {
    const rows = Math.max(1, result.page.length);
    if (generation !== this.generation || this.maxEntries <= 0 || rows > this.maxRows) return;
    let bySources = this.byPlan.get(plan);
    if (bySources === undefined) this.byPlan.set(plan, (bySources = new Map<string, Entry>()));
    const old = bySources.get(sources);
    if (old !== undefined) this.drop(old);
    while (this.order.size >= this.maxEntries || this.held + rows > this.maxRows) this.dropOne();
    const e: Entry = { plan, sources, result, rows, used: false };
    // the map may have been emptied and deleted by dropOne
    if (!this.byPlan.has(plan)) this.byPlan.set(plan, bySources);
    bySources.set(sources, e);
    this.order.add(e);
    this.held += rows;
  }

  /** Drops every entry. */
  clear(): void {
    this.byPlan.clear();
    this.order.clear();
    this.held = 0;
  }

  private dropOne(): void {
    // an entry used since it was placed goes to the back once (a Set's iteration reaches it again)
    for (const e of this.order) {
      if (e.used) {
        this.order.delete(e);
        e.used = false;
        this.order.add(e);
      } else {
        this.drop(e);
        return;
      }
    }
  }

  private drop(e: Entry): void {
    this.order.delete(e);
    this.held -= e.rows;
    const bySources = this.byPlan.get(e.plan)!;
    bySources.delete(e.sources);
    if (bySources.size === 0) this.byPlan.delete(e.plan);
  }
}

/** Canonical keys of frozen source lists (a service session's): made once per list, since a frozen list cannot change. */
const frozenKeys = new WeakMap<readonly string[], string>();

/**
 * The caller's sources as a key: the same for the same set of names in any order, '*' for every
 * source (undefined). A list that is not frozen is read afresh on every call: its caller may
 * change it between queries, and a stale key would show one caller's rows to another.
 */
export function sourcesKey(sources: readonly string[] | undefined): string {
  if (sources === undefined) return '*';
  if (!Object.isFrozen(sources)) return canonical(sources);
  let key = frozenKeys.get(sources);
  if (key === undefined) frozenKeys.set(sources, (key = canonical(sources)));
  return key;
}

function canonical(sources: readonly string[]): string {
  return JSON.stringify([...new Set(sources)].sort());
}

/** A copy of a JSON value that shares nothing mutable with it. */
export function copyJson(v: JsonValue): JsonValue {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(copyJson);
  const out: Record<string, JsonValue> = {};
  for (const [k, x] of Object.entries(v)) {
    if (k === '__proto__') Object.defineProperty(out, k, { value: copyJson(x), enumerable: true, writable: true, configurable: true });
    else out[k] = copyJson(x);
  }
  return out;
}
