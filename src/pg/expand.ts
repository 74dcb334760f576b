/**
 * `$expand` and navigation paths on PostgreSQL: the same children, in the same order, with the
 * same records as src/exec/expand.ts gives them from the in-memory ChildIndex.
 *
 * Children of a listing. A child row belongs to the listing whose ListingKey its link field holds
 * (Media: ResourceRecordKey, and only when ResourceName is 'Property'; OpenHouse and PropertyChange:
 * ListingKey). Only live rows are stored, and a child belongs to exactly one listing, so the
 * children of a visible listing are visible through it. A child table without its link field (or
 * Media without ResourceName) links nothing, as in memory.
 *
 * Orders. The default order (Media by Order, OpenHouse by OpenHouseStartTime, PropertyChange by
 * ModificationTimestamp desc) puts nulls lowest, as the in-memory `childComparator` does: `ASC
 * NULLS FIRST` and `DESC NULLS LAST`. An order field the schema lacks or holds as a non-numeric
 * type is skipped there, so here too. A nested `$orderby` is compiled by compileValue with the
 * same null placement (`orderRows`: nulls lowest in both directions), strings in JavaScript's
 * UTF-16 code unit order (`utf16Order`). Ties go by the child key in UTF-16 order as well: the
 * ChildIndex compares keys so (`compareUtf8`), and so does a nested `$orderby` among siblings;
 * `COLLATE "C"` alone (code point order) would differ where a supplementary character meets
 * U+E000..U+FFFF.
 *
 * One statement per navigation property per page (never one per listing), over the children of
 * every listing of the page at once:
 *
 *   SELECT c.<link>, c."#rn", <record columns of c>
 *   FROM (SELECT c.*, row_number() OVER (PARTITION BY c.<link> ORDER BY <order>) AS "#rn"
 *         FROM <child> AS c WHERE c.<link> = ANY($keys) AND (<nested $filter>)) AS c
 *   WHERE c."#rn" > $skip AND c."#rn" <= $skip + $top
 *
 * and each listing's children put in their order ("#rn") here, the listings in page order. The
 * link column is what the child table is distributed on (co-located with Property on Citus), and
 * every window is partitioned by it, so the whole statement is one listing's business: Citus runs
 * it on each shard as it is (no LATERAL, whose correlation with the page's keys, a recurring
 * function scan, and its LIMIT it cannot push down), and PostgreSQL reads the child table's
 * (link, default order, key) index once for the page's keys (layout.ts orders its columns with the
 * same null placement, so the window sorts only ties of equal order values, incrementally). A
 * single-valued navigation property (ListAgent ... CoBuyerOffice) is one look-up of the page's
 * distinct keys: `WHERE key = ANY($keys)` plus the target's own visibility (its
 * OriginatingSystemName among the caller's sources; a table without that field shows nothing to a
 * caller limited to sources) and the nested `$filter` (Member and Office are reference tables).
 *
 * PreferredMedia (at most two photos, src/exec/expand.ts `preferredRows`) is a subquery of its own
 * over the listing's photos (MediaCategory 'Photo' or null) that pass the nested `$filter`:
 *
 *   SELECT c.*, row_number() OVER (PARTITION BY c.<link> ORDER BY c.key = c."#first" DESC, <default order>) AS "#pick"
 *   FROM (SELECT c.*, first_value(c.key) OVER (PARTITION BY c.<link> ORDER BY c."PreferredPhotoYN" IS TRUE DESC, <default order>) AS "#first"
 *         FROM Media AS c WHERE <link> AND <photo> AND (<filter>)) AS c
 *
 * kept where "#pick" <= 2. `#first` is the first preferred photo in the default order, or the
 * first photo when none is preferred; ordering by "is #first" then the default order gives the
 * preferred photo and then the first other photo, or the first two photos: what the in-memory walk
 * picks. `"#pick"` is the order of these ≤ 2 rows without a nested `$orderby`; with one, they are
 * ordered by it, ties by key (`orderSiblings`).
 *
 * Navigation paths (`Property('K')/Media`, ...) read through `childrenScope`: the same FROM/WHERE
 * and default order as the expansion above, with the path's `$filter` in the place of the nested
 * one, so the two cannot disagree; the caller's statement adds the order, paging, `$count` and
 * `$apply` on top. The caller checks that the listing is live and visible (`EntityNotFound`).
 *
 * Every value from the request (listing keys, nested literals, $skip, $top) is a bind parameter;
 * identifiers come from layout.ts and the loaded schemas.
 */
import { PREFERRED_MEDIA_MAX, type BoundExpansion, type ExpansionName } from '../plan/bind-expand.js';
import type { Bound } from '../plan/bound.js';
import { CATALOG } from '../schema/catalog.js';
import type { TableSchema } from '../schema/table-schema.js';
import type { ChildResourceName, FieldDef, ResourceName } from '../schema/types.js';
import type { JsonValue } from '../store/columns.js';
import { compileFilter, compileValue, utf16Order, type FilterContext } from './filter.js';
import { column, quote, type Layout } from './layout.js';
import { recordReader } from './records.js';
import { arrayRows, Params, type ArrayQueryable } from './sql.js';

export interface ExpandContext {
  /** Where the statements run: a pool, or one client (one snapshot for the page and its expansions, in a transaction). */
  readonly db: ArrayQueryable;
  readonly layout: Layout;
  readonly schemaOf: (resource: ResourceName) => TableSchema;
  /** The engine clock's now for this query (now() in nested filters, DaysOnMarket). */
  readonly nowMs: number;
  /** $ignorenulls=true: null fields of expanded records are dropped too. */
  readonly ignoreNulls: boolean;
  /** The caller's sources (undefined: every source): Member/Office references are given only when their own OriginatingSystemName is one. */
  readonly sources: readonly string[] | undefined;
}

/** One listing of the page: its key and the reference key fields expandPage needs (referenceFields), null when absent. */
export interface ExpandParent {
  readonly key: string;
  readonly refs: Readonly<Record<string, string | null>>;
}

/** The collection-valued navigation properties (the rest are single-valued references). */
export type ChildNavigation = Exclude<
  ExpansionName,
  'ListAgent' | 'BuyerAgent' | 'CoListAgent' | 'CoBuyerAgent' | 'ListOffice' | 'BuyerOffice' | 'CoListOffice' | 'CoBuyerOffice'
>;

/** The alias of the child (or Member/Office) table in the statements expandPage builds. */
const C = 'c';
const RN = quote('#rn');
const PICK = quote('#pick');
const FIRST = quote('#first');

/**
 * The expansions of one page of listings (already visible to the caller), in request order: for
 * each parent, an object { [expansion name]: JsonValue[] | record | null } to append to its record
 * after its fields and navigation links. At most one statement per navigation property per page.
 */
export async function expandPage(
  expansions: readonly BoundExpansion[],
  parents: readonly ExpandParent[],
  ctx: ExpandContext,
): Promise<Array<Record<string, JsonValue>>> {
  const out = parents.map((): Record<string, JsonValue> => ({}));
  // one statement after the other: on one client (a read's snapshot) they run in turn anyway, and
  // node-postgres deprecates queueing a query on a client that is still running one
  const results: JsonValue[][] = [];
  for (const e of expansions) results.push(await (e.reference !== null ? expandReference(e, e.reference, parents, ctx) : expandChildren(e, parents, ctx)));
  for (let p = 0; p < parents.length; p++) {
    for (let e = 0; e < expansions.length; e++) out[p][expansions[e].name] = results[e][p];
  }
  return out;
}

/** The reference fields expandPage needs of the parents (for the caller's select list): those the Property schema has, when given. */
export function referenceFields(expansions: readonly BoundExpansion[], property?: TableSchema): string[] {
  const fields = new Set<string>();
  for (const e of expansions) if (e.reference !== null && (property === undefined || property.field(e.reference) !== undefined)) fields.add(e.reference);
  return [...fields];
}

/** A navigation path's children as SQL pieces over the child table alias (see the file comment and `childrenScope`). */
export interface ChildrenScope {
  /** The FROM item, aliased as asked: the child table, or PreferredMedia's picks (a subquery). */
  readonly from: string;
  /** The rows of that listing's children the expansion would give, the path's $filter included: use as `WHERE (where)`. */
  readonly where: string;
  /** ORDER BY items of the navigation property's default order, ending with the key: the order without a $orderby. */
  readonly defaultOrder: readonly string[];
  /** The key ascending (UTF-16 order): the last ORDER BY item after the items of a $orderby (`orderItems`), as ties go in memory. */
  readonly keyOrder: string;
  /** The link column over the alias (what the child table is distributed on), or null when the schema links nothing. */
  readonly link: string | null;
}

/**
 * A navigation path `Property('K')/<navigation>` (Media, OpenHouse, PropertyChange,
 * PreferredMedia) as SQL pieces over the child table alias `alias`: the rows of that listing's
 * children that `$expand=<navigation>($filter=...)` would give, so that the caller's statement,
 * `SELECT ... FROM from WHERE where ORDER BY <orderItems($orderby), keyOrder | defaultOrder>`, adds the
 * order, paging, `$count` and `$apply` on top.
 *
 * `filter` is the path's $filter compiled over `alias` (compileFilter, with the same `params`), or
 * null. It is part of the scope rather than added by the caller because PreferredMedia applies it
 * to the candidates before choosing its ≤ 2 photos: its `from` is then a subquery of those photos
 * (aliased `alias`, exposing every column of Media plus `"#pick"`, their order), its `where` is
 * TRUE, and $orderby/$skip/$top/$count/$apply apply to the picks, as in memory.
 */
export function childrenScope(
  navigation: ChildNavigation,
  listingKey: string,
  ctx: { readonly layout: Layout; readonly schema: TableSchema; readonly alias: string; readonly params: Params; readonly filter: string | null },
): ChildrenScope {
  if (!/^[a-z_][a-z0-9_]*$/.test(ctx.alias)) throw new Error(`childrenScope: the alias must be a lower-case identifier, got ${JSON.stringify(ctx.alias)}`);
  return scopeOf(navigation, ctx.schema, ctx.layout, ctx.alias, `= ${ctx.params.add(listingKey, 'text')}`, ctx.filter);
}

/**
 * The scope of the children of the listings `keys` names: an SQL comparison with the link column
 * on its left, `= $n::text` (one listing) or `= ANY($n::text[])` (a page of them).
 */
function scopeOf(navigation: ChildNavigation, schema: TableSchema, layout: Layout, alias: string, keys: string, filter: string | null): ChildrenScope {
  const resource = schema.resource as ChildResourceName;
  // the alias as compileFilter and recordReader write it (unquoted, so lower-case)
  const a = alias;
  const table = `${layout.table(resource)} AS ${a}`;
  const keyColumn = `${a}.${column({ name: schema.key })}`;
  // ties by the key in JavaScript's UTF-16 order, as the ChildIndex (compareUtf8) and a $orderby
  // (orderSiblings) both break them; code point order (COLLATE "C") differs for a few characters
  const keyOrder = `${utf16Order(keyColumn)} ASC`;
  const defaultOrder = [...defaultOrderKeys(schema, a), keyOrder];
  const link = linkOf(schema, a);
  const conditions = [link === null ? 'FALSE' : `${link.column} ${keys}${link.when}`];
  if (filter !== null) conditions.push(`(${filter})`);
  if (navigation !== 'PreferredMedia') return { from: table, where: conditions.join(' AND '), defaultOrder, keyOrder, link: link?.column ?? null };
  conditions.push(photoCondition(schema, a));
  // every window is one listing's (PARTITION BY its link): the rows of a listing are on one shard
  const partition = link === null ? '' : `PARTITION BY ${link.column} `;
  const candidates = `SELECT ${a}.*, first_value(${keyColumn}) OVER (${partition}ORDER BY ${preferredCondition(schema, a)} DESC, ${defaultOrder.join(', ')}) AS ${FIRST} FROM ${table} WHERE ${conditions.join(' AND ')}`;
  const ranked = `SELECT ${a}.*, row_number() OVER (${partition}ORDER BY ${keyColumn} = ${a}.${FIRST} DESC, ${defaultOrder.join(', ')}) AS ${PICK} FROM (${candidates}) AS ${a}`;
  const picks = `(SELECT ${a}.* FROM (${ranked}) AS ${a} WHERE ${a}.${PICK} <= ${PREFERRED_MEDIA_MAX}) AS ${a}`;
  return { from: picks, where: 'TRUE', defaultOrder: [`${a}.${PICK} ASC`], keyOrder, link: link?.column ?? null };
}

/**
 * How a child row at `a` names its listing: the link column (Media: ResourceRecordKey, the
 * others: ListingKey; the column the child table is distributed on) and the condition under which
 * it is a link at all (Media: ResourceName 'Property'), or null when the schema lacks the fields
 * (the in-memory loader then links nothing).
 */
function linkOf(schema: TableSchema, a: string): { readonly column: string; readonly when: string } | null {
  const parent = CATALOG[schema.resource].parent;
  if (parent === null) throw new Error(`${schema.resource} is not a child resource`);
  const link = schema.field(parent.field);
  if (link === undefined || !isPlainString(link)) return null;
  if (parent.when === null) return { column: `${a}.${column(link)}`, when: '' };
  const when = schema.field(parent.when.field);
  if (when === undefined || !isPlainString(when)) return null;
  // a fixed name of the catalog, not a request's value; quote it as a string literal
  return { column: `${a}.${column(link)}`, when: ` AND ${a}.${column(when)} = ${stringLiteral(parent.when.equals)}` };
}

/** The default order's keys (without the key tie-break): nulls lowest, numeric, date and timestamp fields only (childComparator). */
function defaultOrderKeys(schema: TableSchema, a: string): string[] {
  const out: string[] = [];
  for (const k of CATALOG[schema.resource].childOrder) {
    const f = schema.field(k.field);
    if (f === undefined || !isOrderedByValue(f)) continue;
    out.push(`${a}.${column(f)} ${k.descending ? 'DESC NULLS LAST' : 'ASC NULLS FIRST'}`);
  }
  return out;
}

/** Whether a Media row is a photo: MediaCategory 'Photo' or null (every row when the schema lacks the field). */
function photoCondition(schema: TableSchema, a: string): string {
  const f = schema.field('MediaCategory');
  if (f === undefined) return 'TRUE';
  if (!isPlainString(f)) return f.collection ? 'FALSE' : `${a}.${column(f)} IS NULL`;
  return `(${a}.${column(f)} IS NULL OR ${a}.${column(f)} = ${stringLiteral('Photo')})`;
}

/** Whether a Media row is marked preferred: PreferredPhotoYN true (never when the schema lacks it as a boolean). */
function preferredCondition(schema: TableSchema, a: string): string {
  const f = schema.field('PreferredPhotoYN');
  if (f === undefined || f.type !== 'Edm.Boolean' || f.collection) return 'FALSE';
  return `(${a}.${column(f)} IS TRUE)`;
}

const isPlainString = (f: FieldDef): boolean => f.type === 'Edm.String' && !f.collection;

/** Fields the ChildIndex orders by value: numbers, dates and timestamps (others are skipped there). */
function isOrderedByValue(f: FieldDef): boolean {
  if (f.collection) return false;
  return f.type !== 'Edm.String' && f.type !== 'Edm.Boolean' && f.type !== 'Edm.GeographyPoint';
}

/** A string literal of a fixed catalog name (letters only; checked so it can never need escaping). */
function stringLiteral(value: string): string {
  if (!/^[A-Za-z]+$/.test(value)) throw new Error(`not a catalog name: ${JSON.stringify(value)}`);
  return `'${value}'`;
}

/** A filter context over the child alias: children and the roster have no search fields. */
function filterContext(schema: TableSchema, layout: Layout, params: Params, nowMs: number): FilterContext {
  return {
    schema,
    alias: C,
    table: layout.table(schema.resource),
    params,
    nowMs,
    search: () => {
      throw new Error(`unreachable: search.text is bound only on Property, not ${schema.resource}`);
    },
  };
}

/**
 * ORDER BY items of a nested $orderby as orderRows sorts: nulls lowest in both directions, strings
 * in JavaScript's UTF-16 order.
 */
export function orderItems(order: ReadonlyArray<{ readonly expr: Bound; readonly descending: boolean }>, fc: FilterContext): string[] {
  return order.map((k) => {
    const value = compileValue(k.expr, fc);
    return `${k.expr.type === 'string' ? utf16Order(value) : `(${value})`} ${k.descending ? 'DESC NULLS LAST' : 'ASC NULLS FIRST'}`;
  });
}

/** One collection-valued expansion of every parent: one statement (none when nothing can come back). */
async function expandChildren(e: BoundExpansion, parents: readonly ExpandParent[], ctx: ExpandContext): Promise<JsonValue[][]> {
  const out = parents.map((): JsonValue[] => []);
  if (parents.length === 0 || e.top === 0) return out;
  const schema = ctx.schemaOf(e.resource);
  const params = new Params();
  const fc = filterContext(schema, ctx.layout, params, ctx.nowMs);
  // the parents of each key (a page names a listing once, but nothing here depends on it)
  const parentsOf = new Map<string, number[]>();
  parents.forEach((p, i) => parentsOf.set(p.key, [...(parentsOf.get(p.key) ?? []), i]));
  const keys = params.add([...parentsOf.keys()], 'text[]');
  const filter = e.filter === null ? null : compileFilter(e.filter, fc);
  const scope = scopeOf(e.name as ChildNavigation, schema, ctx.layout, C, `= ANY(${keys})`, filter);
  if (scope.link === null) return out;
  const order = (e.order.length > 0 ? [...orderItems(e.order, fc), scope.keyOrder] : scope.defaultOrder).join(', ');
  const reader = recordReader(schema, C, e.select);
  const skip = params.add(e.skip, 'bigint');
  const text =
    `SELECT ${scope.link}, ${C}.${RN}, ${reader.columns} FROM (` +
    `SELECT ${C}.*, row_number() OVER (PARTITION BY ${scope.link} ORDER BY ${order}) AS ${RN} FROM ${scope.from} WHERE ${scope.where}` +
    // (skip and top are safe integers: their sum is far from bigint's end; `#rn <= constant` lets
    // the window stop reading a listing's children at $skip + $top, a run condition)
    `) AS ${C} WHERE ${C}.${RN} > ${skip} AND ${C}.${RN} <= ${skip} + ${params.add(e.top, 'bigint')}`;
  // rows come per shard in no order: each listing's children are put in their order ("#rn") here
  const found = parents.map((): Array<[number, unknown[]]> => []);
  for (const row of await arrayRows(ctx.db, text, params.values)) {
    for (const p of parentsOf.get(row[0] as string) ?? []) found[p].push([Number(row[1]), row]);
  }
  found.forEach((rows, p) => {
    rows.sort((x, y) => x[0] - y[0]);
    for (const [, row] of rows) out[p].push(finish(reader.decode(row, 2, ctx.nowMs), ctx.ignoreNulls));
  });
  return out;
}

/**
 * One single-valued expansion (ListAgent, ...) of every parent: the Member or Office each names,
 * if live, visible to the caller's sources and passing the nested $filter, else null.
 */
async function expandReference(e: BoundExpansion, field: string, parents: readonly ExpandParent[], ctx: ExpandContext): Promise<JsonValue[]> {
  const named = parents.map((p) => p.refs[field] ?? null);
  const keys = [...new Set(named.filter((k): k is string => k !== null))];
  if (keys.length === 0) return named.map(() => null);
  const schema = ctx.schemaOf(e.resource);
  const params = new Params();
  const fc = filterContext(schema, ctx.layout, params, ctx.nowMs);
  const key = `${C}.${column({ name: schema.key })}`;
  const conditions = [`${key} = ANY(${params.add(keys, 'text[]')})`];
  const visible = sourceCondition(schema, C, ctx.sources, params);
  if (visible !== null) conditions.push(visible);
  if (e.filter !== null) conditions.push(`(${compileFilter(e.filter, fc)})`);
  const reader = recordReader(schema, C, e.select);
  const text = `SELECT ${key}, ${reader.columns} FROM ${ctx.layout.table(e.resource)} AS ${C} WHERE ${conditions.join(' AND ')}`;
  const rows = new Map<string, unknown[]>();
  for (const row of await arrayRows(ctx.db, text, params.values)) rows.set(row[0] as string, row);
  // each parent gets a record of its own (callers may change one)
  return named.map((k) => {
    const row = k === null ? undefined : rows.get(k);
    return row === undefined ? null : finish(reader.decode(row, 1, ctx.nowMs), ctx.ignoreNulls);
  });
}

/**
 * A Member's or Office's own visibility: its OriginatingSystemName among the sources; null when
 * every source is asked for; FALSE when the table has no such field (it shows nothing then).
 */
function sourceCondition(schema: TableSchema, a: string, sources: readonly string[] | undefined, params: Params): string | null {
  if (sources === undefined) return null;
  const f = schema.field('OriginatingSystemName');
  if (f === undefined || !isPlainString(f)) return 'FALSE';
  return `${a}.${column(f)} = ANY(${params.add(sources, 'text[]')})`;
}

/** The record as the response carries it: null fields dropped under $ignorenulls. */
function finish(record: Record<string, JsonValue>, ignoreNulls: boolean): Record<string, JsonValue> {
  if (ignoreNulls) for (const k of Object.keys(record)) if (record[k] === null) delete record[k];
  return record;
}
