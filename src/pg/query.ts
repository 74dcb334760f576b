/**
 * The executor of the PostgreSQL backend: a Plan (src/plan/plan.ts, the same plans the in-memory
 * engine runs) compiled to parameterized SQL over the layout of src/pg/layout.ts. The whole filter
 * (`plan.filter`) becomes the WHERE clause with the caller's visibility; the in-memory access path
 * and order strategy are not used (PostgreSQL's planner picks its indexes). One statement gives the
 * page (LIMIT page + 1, to know whether more remain) and, under `$count=true`, the count as an
 * uncorrelated subquery, so both read one snapshot; `$expand` adds one statement per navigation
 * property per page (src/pg/expand.ts), `$apply` its grouping statements (src/pg/apply.ts).
 *
 * Paging: a nextLink carries a keyset `$skiptoken` (the last row's order values and key) instead
 * of the in-memory generation pin; the next page continues after that row, so paging under
 * concurrent writes neither skips nor repeats a record that stays in place (DESIGN.md,
 * "PostgreSQL backend").
 */
import { QueryError } from '../errors.js';
import { contextFragment, contextOf, morePages, nextPageOf, type ODataVersion, type QueryResult } from '../exec/page.js';
import type { BoundOrderKey } from '../plan/bind.js';
import type { Bound } from '../plan/bound.js';
import type { Plan, SearchNode } from '../plan/plan.js';
import { CATALOG, odataKeyOf } from '../schema/catalog.js';
import type { TableSchema } from '../schema/table-schema.js';
import type { ResourceName } from '../schema/types.js';
import type { JsonValue } from '../store/columns.js';
import { compileApply } from './apply.js';
import { childrenScope, expandPage, orderItems, referenceFields, type ChildNavigation, type ChildrenScope } from './expand.js';
import { compileFilter, compileValue, type FilterContext } from './filter.js';
import { castType, column, isStored, utf16Order, type Layout } from './layout.js';
import { recordReader, type RecordReader } from './records.js';
import { prepareSearchSql, type SearchSql } from './search.js';
import { arrayRows, Params, type ArrayQueryable } from './sql.js';

/** What one query brings besides its plan. */
export interface RunContext {
  /** Where the statements run (one client in a read-only snapshot when a query needs several). */
  readonly db: ArrayQueryable;
  readonly layout: Layout;
  readonly schemaOf: (resource: ResourceName) => TableSchema;
  readonly nowMs: number;
  /** The caller's sources (undefined: every source). */
  readonly sources: readonly string[] | undefined;
  /** Prefix of the context, nextLink and navigation link URLs ('' for relative ones). */
  readonly base: string;
  readonly version?: ODataVersion;
}

const ALIAS = 't';

/** The rows a query reads, as SQL pieces over alias `t`, with the parameters they use. */
interface Scope {
  readonly schema: TableSchema;
  readonly params: Params;
  readonly filter: FilterContext;
  /** `FROM <table> t`: the rows (what a relevance order joins is added by `scoredFrom`) */
  readonly from: string;
  /** WHERE conditions (ANDed), visibility included. */
  readonly where: string[];
  readonly searches: ReadonlyMap<number, SearchSql>;
  /** A navigation path's children, or null. */
  readonly children: ChildrenScope | null;
}

/**
 * The visibility condition of a resource's rows for the caller's sources, or null when every row
 * is visible (SERVICE.md §5; src/live/visibility.ts is the in-memory twin): Property, Member,
 * Office and EntityEvent by their own OriginatingSystemName, a child by its listing's, Lookup to all.
 */
export function visibilitySql(resource: ResourceName, alias: string, ctx: Pick<RunContext, 'layout' | 'schemaOf' | 'sources'>, params: Params): string | null {
  const sources = ctx.sources;
  if (sources === undefined || resource === 'Lookup') return null;
  const def = CATALOG[resource];
  const allowed = params.add(sources, 'text[]');
  if (def.parent === null) {
    return ctx.schemaOf(resource).field('OriginatingSystemName') === undefined ? 'false' : `${alias}."OriginatingSystemName" = ANY(${allowed})`;
  }
  const when = def.parent.when;
  const linkable = when === null ? '' : ` AND ${alias}.${column({ name: when.field })} = ${params.add(when.equals, 'text')}`;
  const property = ctx.schemaOf('Property').field('OriginatingSystemName') === undefined ? 'false' : `p."OriginatingSystemName" = ANY(${allowed})`;
  return `EXISTS (SELECT 1 FROM ${ctx.layout.table('Property')} p WHERE p."ListingKey" = ${alias}.${column({ name: def.parent.field })} AND ${property})${linkable}`;
}

/** The ordinals of the search.text calls every matching row passes: conjuncts of the filter's top-level `and`s. */
function conjunctSearches(b: Bound | null, out = new Set<number>()): Set<number> {
  if (b?.kind === 'search') out.add(b.ordinal);
  else if (b?.kind === 'and') {
    conjunctSearches(b.left, out);
    conjunctSearches(b.right, out);
  }
  return out;
}

async function scopeOf(plan: Plan, ctx: RunContext): Promise<Scope> {
  const resource = plan.resource;
  const schema = ctx.schemaOf(resource);
  const params = new Params();
  const searches = new Map<number, SearchSql>();
  const required = conjunctSearches(plan.filter);
  for (const node of plan.searches) {
    searches.set(node.ordinal, await prepareSearchSql(ctx.db, ctx.layout, node, ALIAS, params, node.ordinal, required.has(node.ordinal)));
  }
  const filter: FilterContext = {
    schema,
    alias: ALIAS,
    table: ctx.layout.table(resource),
    params,
    nowMs: ctx.nowMs,
    search: (node: SearchNode) => searches.get(node.ordinal)!.test,
  };
  const where: string[] = [];
  let children: ChildrenScope | null = null;
  const access = plan.access;
  if (access.kind === 'children') {
    // the listing must be live and visible; its children are visible through it
    const listing = await ctx.db.query(
      `SELECT 1 FROM ${ctx.layout.table('Property')} p WHERE p."ListingKey" = $1${ctx.sources === undefined ? '' : ' AND p."OriginatingSystemName" = ANY($2::text[])'}`,
      ctx.sources === undefined ? [access.key] : [access.key, ctx.sources],
    );
    if (listing.rows.length === 0)
      throw new QueryError('EntityNotFound', `No listing with ListingKey '${access.key.slice(0, 100)}' is visible to the caller's sources.`);
    const navigation = access.navigation as ChildNavigation;
    children = childrenScope(navigation, access.key, {
      layout: ctx.layout,
      schema,
      alias: ALIAS,
      params,
      filter: plan.filter === null ? null : compileFilter(plan.filter, filter),
    });
    where.push(children.where);
  } else {
    const visible = visibilitySql(resource, ALIAS, ctx, params);
    if (visible !== null) where.push(visible);
    // WHERE keeps the rows where it is TRUE (not NULL, not FALSE): the filter as it is, so the planner sees its index conditions
    if (plan.filter !== null) where.push(`(${compileFilter(plan.filter, filter)})`);
  }
  const table = children !== null ? children.from : `${ctx.layout.table(resource)} ${ALIAS}`;
  return { schema, params, filter, from: `FROM ${table}`, where, searches, children };
}

/** The scope's FROM with the joins of the search scores read so far (read it after the statement's order and conditions). */
function scoredFrom(scope: Scope): string {
  const joins = [...scope.searches.values()].map((s) => s.join).filter((j) => j !== '');
  return joins.length ? `${scope.from} ${joins.join(' ')}` : scope.from;
}

function whereOf(where: readonly string[]): string {
  return where.length ? ` WHERE ${where.join(' AND ')}` : '';
}

/** A row's relevance: the sum of its scores over the search.text calls true for it, in ordinal order (as src/exec/search.ts sums). */
function relevanceSql(scope: Scope): string {
  const ordinals = [...scope.searches.keys()].sort((a, b) => a - b);
  if (ordinals.length === 0) throw new Error('unreachable: relevance without search.text');
  let sum = '0::float8';
  for (const o of ordinals) {
    const s = scope.searches.get(o)!;
    sum = `(${sum} + CASE WHEN ${s.test} THEN ${s.score} ELSE 0::float8 END)`;
  }
  return sum;
}

/** One key of a top-level order: its value expression and direction (nulls lowest). */
interface OrderKey {
  readonly sql: string;
  readonly descending: boolean;
  /** The SQL type of its values: a keyset value (text in the token) is cast to it. */
  readonly cast: string;
}

/** The SQL type compileValue gives an order expression: a stored field's column type, else by value type (numbers computed in float8). */
function castOf(expr: Bound): string {
  if (expr.kind === 'field' && isStored(expr.field)) return castType(expr.field);
  switch (expr.type) {
    case 'string':
      return 'text';
    case 'boolean':
      return 'boolean';
    case 'date':
      return 'date';
    case 'dateTimeOffset':
      return 'timestamptz';
    default:
      return 'float8';
  }
}

/**
 * How a plan's rows are ordered. A top-level collection: its $orderby (relevance: the summed
 * scores) and the key last, as value expressions a keyset continues after. A navigation path: the
 * navigation property's default order, or its $orderby with ties by the child key in UTF-16 order
 * (src/pg/expand.ts), paged by OFFSET (one listing's children: few rows).
 */
interface Ordering {
  readonly keys: readonly OrderKey[] | null;
  readonly orderBy: string;
}

function orderingOf(plan: Plan, scope: Scope): Ordering {
  if (scope.children !== null) {
    const items = plan.order.map((k: BoundOrderKey) => {
      if (k.kind !== 'expr') throw new Error('unreachable: relevance needs a search.text, which children do not have');
      return { expr: k.expr, descending: k.descending };
    });
    const orderBy = items.length ? [...orderItems(items, scope.filter), scope.children.keyOrder] : [...scope.children.defaultOrder];
    return { keys: null, orderBy: orderBy.join(', ') };
  }
  const keys: OrderKey[] = plan.order.map((k: BoundOrderKey) =>
    k.kind === 'relevance'
      ? { sql: relevanceSql(scope), descending: true, cast: 'float8' }
      : k.expr.type === 'string'
        ? { sql: utf16Order(compileValue(k.expr, scope.filter)), descending: k.descending, cast: 'text' }
        : { sql: compileValue(k.expr, scope.filter), descending: k.descending, cast: castOf(k.expr) },
  );
  keys.push(keyOrderKey(scope.schema));
  return { keys, orderBy: keys.map((k) => `${k.sql} ${k.descending ? 'DESC NULLS LAST' : 'ASC NULLS FIRST'}`).join(', ') };
}

/**
 * The key, last in every top-level order: in JavaScript's UTF-16 order as in memory (`utf16Order`,
 * served by an index on that expression, src/pg/layout.ts), so a keyset page continues after the
 * rewritten key.
 */
function keyOrderKey(schema: TableSchema): OrderKey {
  return { sql: utf16Order(`${ALIAS}.${column({ name: schema.key })}`), descending: false, cast: 'text' };
}

/** The $skiptoken of a nextLink paged by OFFSET ($skip): navigation paths and $apply groups. */
const OFFSET_TOKEN = 'o';

/** The keyset $skiptoken: `k` and the last row's order values (as text, null for null) in base64url JSON. */
function keysetToken(values: ReadonlyArray<string | null>): string {
  return `k${Buffer.from(JSON.stringify(values)).toString('base64url')}`;
}

/** The keyset a request's $skiptoken holds, or null (a first page, or one paged by OFFSET). */
function keysetOf(token: string | undefined, width: number | null): ReadonlyArray<string | null> | null {
  if (token === undefined || (token === OFFSET_TOKEN && width === null)) return null;
  const invalid = (): never => {
    throw new QueryError('InvalidSkipToken', `$skiptoken '${token.slice(0, 40)}' is not one this service gave: follow the @odata.nextLink as it is.`, {
      option: '$skiptoken',
    });
  };
  if (width === null || !token.startsWith('k')) return invalid();
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(token.slice(1), 'base64url').toString('utf8'));
  } catch {
    return invalid();
  }
  if (!Array.isArray(values) || values.length !== width || values.some((v) => v !== null && typeof v !== 'string')) return invalid();
  return values as Array<string | null>;
}

/**
 * The rows after the keyset row in the order (nulls lowest, the key last and never null): the
 * lexicographic "after" over the keys, each value a parameter PostgreSQL types by its key.
 */
function afterSql(keys: readonly OrderKey[], values: ReadonlyArray<string | null>, params: Params): string {
  const ors: string[] = [];
  for (let i = 0; i < keys.length; i++) {
    const v = values[i];
    const k = keys[i];
    // nothing sorts after null when descending (nulls last): no term, and no parameter added for it
    if (v === null && k.descending) continue;
    const parts: string[] = [];
    for (let j = 0; j < i; j++) {
      parts.push(values[j] === null ? `${keys[j].sql} IS NULL` : `${keys[j].sql} = ${params.add(values[j], keys[j].cast)}`);
    }
    if (v === null) parts.push(`${k.sql} IS NOT NULL`);
    else {
      const p = params.add(v, k.cast);
      parts.push(k.descending ? `(${k.sql} < ${p} OR ${k.sql} IS NULL)` : `${k.sql} > ${p}`);
    }
    ors.push(`(${parts.join(' AND ')})`);
  }
  return ors.length ? `(${ors.join(' OR ')})` : 'false';
}

function envelope(plan: Plan, ctx: RunContext, value: Array<Record<string, JsonValue>>, count: number | undefined, token: string | null): QueryResult {
  const context = `${ctx.base}$metadata#${contextFragment(contextOf(plan), plan.query, ctx.version)}`;
  const nextLink = token === null ? undefined : `${ctx.base}${nextPageOf(plan, token)}`;
  return {
    '@odata.context': context,
    ...(plan.count ? { '@odata.count': count ?? 0 } : {}),
    value,
    ...(nextLink !== undefined ? { '@odata.nextLink': nextLink } : {}),
  };
}

/** Runs a plan: the envelope of SERVICE.md §5, equal to the in-memory engine's for the same data. */
export async function runPlan(plan: Plan, ctx: RunContext): Promise<QueryResult> {
  const scope = await scopeOf(plan, ctx);
  if (plan.grouping !== null) return runGrouping(plan, ctx, scope);
  const { page } = plan;
  const ordering = orderingOf(plan, scope);
  const keys = ordering.keys ?? [keyOrderKey(scope.schema)];
  const keyset = keysetOf(plan.query.skiptoken, ordering.keys === null ? null : keys.length);
  const where = [...scope.where];
  if (keyset !== null) where.push(afterSql(keys, keyset, scope.params));
  const count = plan.count ? `(SELECT count(*) FROM ${scope.from.slice('FROM '.length)}${whereOf(scope.where)})::float8` : 'NULL::float8';
  if (page.rows === 0) {
    const text = `SELECT ${count} AS n`;
    const r = await ctx.db.query<{ n: number | null }>(text, scope.params.valuesOf(text));
    return envelope(plan, ctx, [], r.rows[0].n ?? 0, null);
  }
  const reader = recordReader(scope.schema, ALIAS, plan.select);
  const refs = plan.expand !== null ? referenceFields(plan.expand) : [];
  const refColumns = refs.map((f) => (scope.schema.field(f) === undefined ? 'NULL::text' : `${ALIAS}.${column({ name: f })}`));
  const select = [`${count}`, `${ALIAS}.${column({ name: scope.schema.key })}`, ...keys.map((k) => `(${k.sql})::text`), ...refColumns, reader.columns];
  const offset = keyset === null ? page.skip : 0;
  const sql = `SELECT ${select.join(', ')} ${scoredFrom(scope)}${whereOf(where)} ORDER BY ${ordering.orderBy} LIMIT ${page.rows + 1}${offset > 0 ? ` OFFSET ${offset}` : ''}`;
  const result = await arrayRows(ctx.db, sql, scope.params.valuesOf(sql));
  const rows = result.slice(0, page.rows);
  const total = result.length ? (result[0][0] as number | null) : null;
  let n: number | undefined;
  if (plan.count) n = total ?? (await countOf(ctx.db, scope));
  const base = 2 + keys.length + refs.length;
  const records = await projectRows(plan, ctx, reader, rows, { key: 1, refs: 2 + keys.length, record: base }, refs);
  const last = rows[rows.length - 1];
  const more = morePages(plan, result.length);
  const token = !more ? null : ordering.keys === null ? OFFSET_TOKEN : keysetToken(keys.map((_, i) => (last[2 + i] as string | null) ?? null));
  return envelope(plan, ctx, records, n, token);
}

/**
 * The records of result rows (array mode): the plan's projection decoded from `at.record`, nulls
 * dropped under $ignorenulls, the navigation links $select names (from the key at `at.key`), then
 * the expansions, one statement per navigation property for all the rows (from the reference
 * fields at `at.refs`), as src/exec/project.ts builds them in memory.
 */
async function projectRows(
  plan: Plan,
  ctx: RunContext,
  reader: RecordReader,
  rows: readonly unknown[][],
  at: { readonly key: number; readonly refs: number; readonly record: number },
  refs: readonly string[],
): Promise<Array<Record<string, JsonValue>>> {
  const records = rows.map((row) => {
    const record = reader.decode(row, at.record, ctx.nowMs);
    if (plan.ignoreNulls) for (const k of Object.keys(record)) if (record[k] === null) delete record[k];
    if (plan.links.length) {
      const entity = `${ctx.base}${plan.resource}('${encodeURIComponent(String(row[at.key]).replace(/'/g, "''"))}')`;
      for (const name of plan.links) record[`${name}@odata.navigationLink`] = `${entity}/${name}`;
    }
    return record;
  });
  if (plan.expand !== null && plan.expand.length && rows.length) {
    const parents = rows.map((row) => ({
      key: row[at.key] as string,
      refs: Object.fromEntries(refs.map((f, i) => [f, (row[at.refs + i] as string | null) ?? null])),
    }));
    const expansions = await expandPage(plan.expand, parents, {
      db: ctx.db,
      layout: ctx.layout,
      schemaOf: ctx.schemaOf,
      nowMs: ctx.nowMs,
      ignoreNulls: plan.ignoreNulls,
      sources: ctx.sources,
    });
    records.forEach((r, i) => Object.assign(r, expansions[i]));
  }
  return records;
}

async function countOf(db: ArrayQueryable, scope: Scope): Promise<number> {
  const text = `SELECT count(*)::text AS n ${scope.from}${whereOf(scope.where)}`;
  const r = await db.query<{ n: string }>(text, scope.params.valuesOf(text));
  return Number(r.rows[0].n);
}

/** The number of rows a plan's filter matches among those the caller sees (`/Property/$count`). */
export async function countPlan(plan: Plan, ctx: RunContext): Promise<number> {
  return countOf(ctx.db, await scopeOf(plan, ctx));
}

/** `$apply` groups: one statement for the page of groups, one for their number under $count. Paged by $skip (groups have no stable keyset). */
async function runGrouping(plan: Plan, ctx: RunContext, scope: Scope): Promise<QueryResult> {
  const { page } = plan;
  keysetOf(plan.query.skiptoken, null);
  const grouped = compileApply(
    plan.grouping!,
    `${scope.from}${whereOf(scope.where)}`,
    scope.filter,
    { offset: page.skip, limit: page.rows + 1 },
    plan.ignoreNulls,
  );
  const rows = page.rows === 0 ? [] : await arrayRows(ctx.db, grouped.rowsSql, scope.params.valuesOf(grouped.rowsSql));
  let n: number | undefined;
  if (plan.count) {
    const r = await ctx.db.query<{ n: string | number }>(grouped.countSql, scope.params.valuesOf(grouped.countSql));
    n = Number(Object.values(r.rows[0])[0]);
  }
  const value = rows.slice(0, page.rows).map((row) => grouped.decode(row));
  return envelope(plan, ctx, value, n, morePages(plan, rows.length) ? OFFSET_TOKEN : null);
}

/** One record by key with the plan's projection and expansions, or null when no record with the key is visible. */
export async function recordOf(plan: Plan, key: string, ctx: RunContext): Promise<Record<string, JsonValue> | null> {
  const params = new Params();
  const schema = ctx.schemaOf(plan.resource);
  const reader = recordReader(schema, ALIAS, plan.select);
  const refs = plan.expand !== null ? referenceFields(plan.expand) : [];
  const where = [`${ALIAS}.${column({ name: odataKeyOf(plan.resource) })} = ${params.add(plan.resource === 'EntityEvent' ? Number(key) : key)}`];
  const visible = visibilitySql(plan.resource, ALIAS, ctx, params);
  if (visible !== null) where.push(visible);
  const refColumns = refs.map((f) => (schema.field(f) === undefined ? 'NULL::text' : `${ALIAS}.${column({ name: f })}`));
  const sql = `SELECT ${[`${ALIAS}.${column({ name: schema.key })}`, ...refColumns, reader.columns].join(', ')} FROM ${ctx.layout.table(plan.resource)} ${ALIAS}${whereOf(where)}`;
  const rows = await arrayRows(ctx.db, sql, params.values);
  if (rows.length === 0) return null;
  const [record] = await projectRows(plan, ctx, reader, rows, { key: 0, refs: 1, record: 1 + refs.length }, refs);
  return record;
}
