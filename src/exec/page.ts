/**
 * The paging operator and the one response envelope (SERVICE.md §5): the page of $skip/$top out
 * of results in order (rows, or $apply groups), `@odata.count` when $count=true asked for it, and
 * the `@odata.nextLink` that carries the next $skip, what is left of $top and the $skiptoken that
 * pins the data generation. Context and nextLink are relative to the service root unless a base
 * URL is given (the HTTP service gives its own).
 *
 * A navigation path's nextLink repeats its path (`Property('K')/Media?$skip=10&...`). Its context
 * URL follows the OData JSON Format (context URL of a collection of entities): the entity set the
 * children belong to when the navigation property is bound to one (`$metadata#Media` for
 * `/Media` and `/PreferredMedia`), else, for contained entities (PropertyChange has no entity
 * set), the path to the containment navigation property (`$metadata#Property('K')/PropertyChange`).
 */
import { printQueryOptions } from '../odata/printer.js';
import type { ExpandItem, ParsedQuery, SelectItem } from '../odata/ast.js';
import { QUERY_RESOURCES, type Plan } from '../plan/plan.js';
import type { JsonValue } from '../store/columns.js';
import { recordTexts, type RecordSource } from './record-json.js';

export type { RecordSource } from './record-json.js';

/** The OData version a response is written for (the request's `OData-MaxVersion` decides). */
export type ODataVersion = '4.0' | '4.01';

export interface QueryResult {
  readonly '@odata.context': string;
  readonly '@odata.count'?: number;
  readonly value: Array<Record<string, JsonValue>>;
  readonly '@odata.nextLink'?: string;
}

export interface PageContext {
  /** The $skiptoken the nextLink carries. */
  readonly token: string;
  /** Prefix of the context and nextLink URLs ('' for relative ones). */
  readonly base: string;
  /** The context URL's form for expansions (default 4.01). */
  readonly version?: ODataVersion;
  /**
   * Called with the page's rows when its records are plain (`Table.record` of the rows: no
   * $ignorenulls, links or expansions), so that a writer of JSON can take the records' cached
   * texts (record-json.ts) instead of stringifying them. A hook of the request rather than a
   * property of the result: measured, a lazily built `value`, a symbol-keyed property or a
   * WeakMap entry per result each made `engine.query` of 25 whole listings 1.3x to 2.5x slower.
   */
  readonly onPage?: (page: RecordSource) => void;
  /**
   * With `onPage`: a page of plain records is handed over as its rows only, and its records are
   * not built (`value` stays empty): the caller writes them from the rows (cached texts, or the
   * table's records for rows without one). Pages that are not plain are built as always.
   */
  readonly plainPagesAsRows?: boolean;
}

/**
 * The context URL fragment (after `$metadata#`) of a response of the query (OData 4.01 Part 1
 * §10): the entity set, then the select list when `$select` or `$expand` shape the records
 * (`Property(ListingKey,ListPrice)`), then `/$entity` for one record. An expansion appears as
 * `Media()` or `Media(MediaKey,Order)` (its nested $select) in 4.01; a 4.0 response lists only
 * expansions with a nested $select, as `Media(MediaKey,Order)`. $apply results keep the plain
 * entity set.
 */
export function contextFragment(resource: string, query: ParsedQuery, version: ODataVersion = '4.01', entity = false): string {
  const items = query.apply ? [] : selectList(query.select, query.expand, version);
  return `${resource}${items.length ? `(${items.join(',')})` : ''}${entity ? '/$entity' : ''}`;
}

function selectList(select: readonly SelectItem[] | undefined, expand: readonly ExpandItem[] | undefined, version: ODataVersion): string[] {
  const items = new Set<string>();
  for (const s of select ?? []) items.add(s.kind === 'star' ? '*' : s.name);
  for (const e of expand ?? []) {
    const nested = selectList(e.options.select, undefined, version);
    if (version === '4.01' || nested.length) items.add(`${e.name}(${nested.join(',')})`);
  }
  return [...items];
}

/** The number of results, asked only under $count=true. */
export interface Counter {
  count(): number;
}

/** The record of one result (a row, or an $apply group). */
export interface Projector {
  record(id: number): Record<string, JsonValue>;
  /**
   * When every record is `table.record(row, fields, nowMs)` (no $ignorenulls, links or
   * expansions): that table and field list, so that a writer of JSON can take the records' cached
   * texts (record-json.ts) instead.
   */
  readonly plainRecords?: Omit<RecordSource, 'rows'> | null;
}

/**
 * `head + the page's records' JSON texts joined by commas + tail` as UTF-8, from the cache of
 * record texts (record-json.ts), or null: the writer stringifies the records.
 */
export function pageBytes(page: RecordSource, head: string, tail: string): Buffer | null {
  return recordTexts.pageBytes(page, head, tail);
}

/**
 * The response for results in order. `ordered` holds at least the page plus one more result when
 * more remain; the count is asked only under $count=true.
 */
export function respond(plan: Plan, ctx: PageContext, ordered: Uint32Array, count: number | Counter, records: Projector): QueryResult {
  const { skip, rows } = plan.page;
  return respondPage(plan, ctx, ordered, skip, Math.min(ordered.length, skip + rows), morePages(plan, ordered.length - skip), count, records);
}

/**
 * Whether a next page follows the plan's page, given `fromPage` results from the page's first on
 * (at least the page and one more when more remain) and that `$top` leaves room for one.
 */
export function morePages(plan: Plan, fromPage: number): boolean {
  const { rows, top } = plan.page;
  return fromPage > rows && (top === undefined || rows < top);
}

/**
 * The response for one page of results: `ordered[start..end)` (row or group ids, in order), `more`
 * when a next page follows. The page is read in place: a typed array's `subarray` costs more than
 * a one-record page's whole envelope.
 */
export function respondPage(
  plan: Plan,
  ctx: PageContext,
  ordered: Uint32Array,
  start: number,
  end: number,
  more: boolean,
  count: number | Counter,
  records: Projector,
): QueryResult {
  const context = ctx.base + contextUrlOf(plan, ctx.version ?? '4.01');
  const counted = plan.count ? (typeof count === 'number' ? count : count.count()) : undefined;
  const plain = ctx.onPage === undefined ? null : (records.plainRecords ?? null);
  // the caller's own copy of the rows: it may keep or change them
  if (plain !== null) ctx.onPage!({ ...plain, rows: ordered.slice(start, end) });
  const value: Array<Record<string, JsonValue>> = [];
  if (plain === null || ctx.plainPagesAsRows !== true) for (let i = start; i < end; i++) value.push(records.record(ordered[i]));
  // key order: context, count, value, nextLink
  const result: { '@odata.context': string; '@odata.count'?: number; value: typeof value; '@odata.nextLink'?: string } =
    counted !== undefined ? { '@odata.context': context, '@odata.count': counted, value } : { '@odata.context': context, value };
  if (more) result['@odata.nextLink'] = ctx.base + nextPageOf(plan, ctx.token);
  return result;
}

/** The context URL after the base, by plan and version: the same for every response of a cached plan. */
const contextUrls = new WeakMap<Plan, { '4.0'?: string; '4.01'?: string }>();

function contextUrlOf(plan: Plan, version: ODataVersion): string {
  let urls = contextUrls.get(plan);
  if (urls === undefined) contextUrls.set(plan, (urls = {}));
  return (urls[version] ??= `$metadata#${contextFragment(contextOf(plan), plan.query, version)}`);
}

/** The last nextLink written per plan and its token: a repeated page (same plan, same generation) prints its options once. */
const nextPages = new WeakMap<Plan, { readonly token: string; readonly link: string }>();

/** The next page's relative URL: the same options with the next $skip, the rest of $top and the token. */
export function nextPageOf(plan: Plan, token: string): string {
  const last = nextPages.get(plan);
  if (last !== undefined && last.token === token) return last.link;
  const link = printNextPage(plan, token);
  nextPages.set(plan, { token, link });
  return link;
}

function printNextPage(plan: Plan, token: string): string {
  const { skip, rows, top } = plan.page;
  const next: ParsedQuery = { ...plan.query, skip: skip + rows, skiptoken: token, ...(top !== undefined ? { top: top - rows } : {}) };
  return `${pathOf(plan)}?${printQueryOptions(next)
    .map(([name, v]) => `${name}=${encodeURIComponent(v)}`)
    .join('&')}`;
}

/** The resource path a plan reads: its resource, or a navigation path `Property('K')/Media`. */
function pathOf(plan: Plan): string {
  const a = plan.access;
  return a.kind === 'children' ? `${a.parent}('${encodeURIComponent(a.key.replace(/'/g, "''"))}')/${a.navigation}` : plan.resource;
}

/** The context URL's fragment: the entity set of the rows, or the path of contained ones. */
export function contextOf(plan: Plan): string {
  const topLevel = (QUERY_RESOURCES as readonly string[]).includes(plan.resource);
  return topLevel ? plan.resource : pathOf(plan);
}
