/**
 * The options of the Engine's public API (src/engine.ts): how an engine opens, and what a query
 * call takes besides its text. Checked here, so the facade stays a facade.
 */
import { COMPACT_FRACTION } from './live/compactor.js';
import type { ODataVersion, RecordSource } from './exec/page.js';
import { RESULT_CACHE_ENTRIES, RESULT_CACHE_ROWS, type ResultCacheOptions } from './exec/execute.js';
import type { NavigationRequest } from './plan/planner.js';
import type { Plan } from './plan/plan.js';
import type { LoadProgress, RecordsInput } from './store/load.js';

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
  /**
   * How long compaction keeps the EntityEvent of a removed record after it was written, ms
   * (default a week, EVENT_RETENTION_MS). Compaction keeps the newest event of each record there
   * is; a consumer that last read the log longer ago than this must copy the data again.
   */
  readonly eventRetentionMs?: number;
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
  /**
   * The result cache: what a repeated query produced on the newest generation (its page's rows in
   * order, the count, an $apply page's result rows) kept for its next run by callers of the same
   * sources, so that only the records are built again (src/exec/result-cache.ts). Never kept for a
   * query whose filter, order or grouping reads the clock (now(), DaysOnMarket); dropped as a newer
   * generation is read. Default on, `{ maxEntries: 1024, maxRows: 262144 }` (rows: page row ids
   * and $apply result rows held in all); false, or 0 for either bound, turns it off.
   */
  readonly resultCache?: false | ResultCacheOptions;
  /** Called as a data directory's files are read (about every MiB) or a snapshot's bytes (every chunk): for a progress display. */
  readonly onProgress?: (progress: OpenProgress) => void;
}

/** How far Engine.open is: a data directory's file being read, or the snapshot file. */
export type OpenProgress = ({ readonly kind: 'load' } & LoadProgress) | { readonly kind: 'snapshot'; readonly bytesRead: number; readonly bytesTotal: number };

export interface QueryOptions {
  /** OriginatingSystemNames the caller may see; absent means every source. */
  readonly sources?: readonly string[];
  /** The client's `Prefer: odata.maxpagesize=N`. */
  readonly maxPageSize?: number;
  /** The service root URL (ending in '/') that `@odata.context`, `@odata.nextLink` and navigation links are made absolute with; relative by default. */
  readonly base?: string;
  /** The OData version the response is for: '4.01' (default) or '4.0' (the context URL of expansions differs; DESIGN.md "OData versions"). */
  readonly odataVersion?: ODataVersion;
  /** Called with the plan the query runs (the service's metrics and access log name its access path); the in-memory engine calls it. */
  readonly onPlan?: (plan: Plan) => void;
  /** Called after the query ran with the rows it tested one by one (for metrics; counting costs a little, so only when asked). */
  readonly onExecuted?: (stats: { readonly rowsScanned: number }) => void;
  /**
   * Called with the page's table, field list and rows when its records are the rows' plain fields
   * (no $ignorenulls, navigation links or expansions): the HTTP service writes such pages from
   * the cached JSON texts of their records (src/exec/record-json.ts). The in-memory engine calls it.
   */
  readonly onPage?: (page: RecordSource) => void;
  /**
   * With `onPage`: the caller writes a page of plain records from its rows (the HTTP service
   * writes their cached JSON texts), so the engine does not build them: such a page's `value` is
   * empty and its rows come only through `onPage`. Pages that are not plain ($ignorenulls,
   * navigation links, expansions, $apply) and every page without this option are built as always.
   */
  readonly plainPagesAsRows?: boolean;
}

export interface ExplainOptions extends QueryOptions {
  /** 'text' (default): one line per decision; 'json': the Plan itself, as data. */
  readonly format?: 'text' | 'json';
  /** Explain the navigation path `resource('key')/name` instead (see `navigate`). */
  readonly navigation?: NavigationRequest;
}

/** A query string of OData options (already percent-decoded), or its options as an object. */
export type QueryInput = string | Readonly<Record<string, string | number | boolean>>;

/** The query text of a QueryInput: the string itself, or the options joined as `name=value&...`. */
export function queryText(query: QueryInput): string {
  return typeof query === 'string'
    ? query
    : Object.entries(query)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join('&');
}

/** The clock, paging, compaction and result cache settings of EngineOpenOptions, checked (a TypeError names a bad one). */
export function checkOpenOptions(options: EngineOpenOptions): {
  clock: () => number;
  ttl: number | undefined;
  fraction: number | false;
  retention: number | undefined;
  /** The result cache's bounds, or null when it is off. */
  results: { maxEntries: number; maxRows: number } | null;
} {
  const now = options.now;
  const clock = now ? () => now().getTime() : () => Date.now();
  const ttl = options.pageSnapshotTtlMs;
  if (ttl !== undefined && !(typeof ttl === 'number' && ttl >= 0))
    throw new TypeError('Engine.open: pageSnapshotTtlMs must be a number of milliseconds, 0 or more.');
  const fraction = options.compactFraction;
  if (fraction !== undefined && fraction !== false && !(typeof fraction === 'number' && fraction > 0)) {
    throw new TypeError("Engine.open: compactFraction must be a fraction above 0 (of a table's rows), or false.");
  }
  const retention = options.eventRetentionMs;
  if (retention !== undefined && !(typeof retention === 'number' && retention >= 0)) {
    throw new TypeError('Engine.open: eventRetentionMs must be a number of milliseconds, 0 or more.');
  }
  return { clock, ttl, fraction: fraction ?? COMPACT_FRACTION, retention, results: resultCacheOf(options.resultCache) };
}

function resultCacheOf(option: EngineOpenOptions['resultCache']): { maxEntries: number; maxRows: number } | null {
  if (option === false) return null;
  if (option !== undefined && (typeof option !== 'object' || option === null)) {
    throw new TypeError('Engine.open: resultCache must be false or { maxEntries, maxRows }.');
  }
  const bound = (v: unknown, fallback: number, name: string): number => {
    if (v === undefined) return fallback;
    if (!(typeof v === 'number' && Number.isInteger(v) && v >= 0)) throw new TypeError(`Engine.open: resultCache.${name} must be a whole number, 0 or more.`);
    return v;
  };
  const maxEntries = bound(option?.maxEntries, RESULT_CACHE_ENTRIES, 'maxEntries');
  const maxRows = bound(option?.maxRows, RESULT_CACHE_ROWS, 'maxRows');
  return maxEntries === 0 || maxRows === 0 ? null : { maxEntries, maxRows };
}
