/**
 * The executor: runs a Plan (src/plan/plan.ts) on one generation of the in-memory data. What a
 * plan needs of a generation (its table and access structures, search.text calls prepared against
 * the generation's search views, the expansions over its store) is compiled once per plan and
 * generation and kept in a WeakMap keyed by the generation, so that a cached plan holds nothing
 * of the data and a generation no query reads any more is collected with what was compiled for it.
 *
 * Per query: visibility (the caller's sources and the generation's live rows, src/live) is applied
 * at the root; the filter becomes closures over columns (src/exec/compile.ts), less the conjuncts
 * the access path answers exactly; then one of the order strategies produces the rows in order,
 * and src/exec/page.ts cuts the page and builds the envelope. A navigation path's plan (access
 * path `children`) reads one listing's children instead (src/exec/navigate.ts).
 */
import type { TableAccess } from '../access/access.js';
import type { Generation } from '../access/generation.js';
import { operandsOf, type Bound } from '../plan/bound.js';
import type { Plan } from '../plan/plan.js';
import { andOf, conjuncts } from '../plan/planner.js';
import { prepareSearch } from '../search/bm25.js';
import { rankSearch } from '../search/ranked.js';
import type { JsonValue } from '../store/columns.js';
import type { Table } from '../store/table.js';
import { getBit } from '../util/bits.js';
import { runApply } from './aggregate.js';
import { compile, type Evaluator } from './compile.js';
import { Expansions, type ExpandEnv } from './expand.js';
import { collectGeo, geoResidual } from './geo.js';
import { collectBits, lookupBits, lookupCount } from './lookup.js';
import { orderRows, type SortKey } from './order.js';
import { morePages, respond, respondPage, type Counter, type ODataVersion, type PageContext, type Projector, type QueryResult } from './page.js';
import { project } from './project.js';
import { collectRange, rangeOf } from './range.js';
import { copyJson, sourcesKey, type ResultCache, type RunResult } from './result-cache.js';

/** The caller's sources as one key (the result cache's; the service keys its kept bodies by it too). */
export { sourcesKey };
import { collectScan } from './scan.js';
import { collectSearch, SearchResults, type PreparedCall } from './search.js';
import { collectText } from './text.js';
import { NavigationRows } from './navigate.js';
import { keyLowerBound, lookupWalk, walkLookupPage, walkOrder } from './walk.js';

export { constantValue } from './compile.js';
export { RESULT_CACHE_ENTRIES, RESULT_CACHE_ROWS, ResultCache, type ResultCacheOptions } from './result-cache.js';

/** What one query brings to the executor besides its plan. */
export interface ExecContext {
  /**
   * Row visibility of the queried table (live rows, the caller's sources), or null for every row;
   * for a navigation path, of Property (its children are visible through their listing).
   */
  readonly visible: ((row: number) => boolean) | null;
  /** The same for the Member and Office rows expansions reach (ListAgent, ListOffice, ...). */
  readonly visibleOf: ExpandEnv['visibleOf'];
  /** The caller's sources (undefined: all). */
  readonly sources: readonly string[] | undefined;
  /** The engine clock's now for this query. */
  readonly nowMs: number;
  /** The $skiptoken a nextLink carries. */
  readonly token: string;
  /** Prefix of the context, nextLink and navigation link URLs ('' for relative ones). */
  readonly base: string;
  /** The OData version the envelope is written for (default 4.01). */
  readonly version?: ODataVersion;
  /** Called with a page of plain records' rows (page.ts `PageContext`). */
  readonly onPage?: PageContext['onPage'];
  /** With onPage: plain pages go out as rows only, their records not built (page.ts `PageContext`). */
  readonly plainPagesAsRows?: boolean;
  /** When given, counts the rows the query tested one by one (filters and visibility; bitset and index arithmetic is not counted). */
  readonly stats?: { rowsScanned: number };
}

/** What a plan needs of one generation. */
interface Compiled {
  readonly table: Table;
  readonly access: TableAccess;
  /** search.text calls by ordinal, prepared against this generation's views. */
  readonly calls: ReadonlyMap<number, PreparedCall>;
  readonly expansions: Expansions | null;
  /** The plan's filter and residual compiled once when they read nothing of one run (see `runIndependent`); null: compiled per run. */
  readonly filters: Map<Bound, Evaluator | null>;
  /** Whether the plan's answer may come from the result cache (`resultsCacheable`), decided on first use. */
  cacheable?: boolean;
}

const compiledPlans = new WeakMap<Generation, WeakMap<Plan, Compiled>>();

function compiledOf(plan: Plan, gen: Generation): Compiled {
  let plans = compiledPlans.get(gen);
  if (plans === undefined) compiledPlans.set(gen, (plans = new WeakMap()));
  let c = plans.get(plan);
  if (c === undefined) {
    const table = gen.store.table(plan.resource);
    const calls = new Map<number, PreparedCall>();
    for (const node of plan.searches) calls.set(node.ordinal, { node, prepared: prepareSearch(gen.access.search[node.field], node.text, node.minMatches) });
    c = { table, access: gen.access.of(table), calls, expansions: plan.expand ? new Expansions(gen.store, plan.expand) : null, filters: new Map() };
    plans.set(plan, c);
  }
  return c;
}

/**
 * Whether a filter's closures read nothing that changes from one run to the next: no clock (now(),
 * DaysOnMarket), no search.text membership and no geo test, which a run computes for itself.
 */
function runIndependent(expr: Bound, table: Table): boolean {
  return !readsOfRun(expr, table, true);
}

/** Whether an expression reads the clock (now(), DaysOnMarket), or with `searchAndGeo` a search.text or geo test. */
function readsOfRun(expr: Bound, table: Table, searchAndGeo: boolean): boolean {
  const stack: Bound[] = [expr];
  while (stack.length) {
    const e = stack.pop()!;
    if (searchAndGeo && (e.kind === 'search' || e.kind === 'geo')) return true;
    if ((e.kind === 'call' && e.fn === 'now') || (e.kind === 'field' && readsClock(table, e.field.name))) return true;
    stack.push(...operandsOf(e));
  }
  return false;
}

const readsClock = (table: Table, field: string): boolean => table.column(field)?.kind === 'daysOnMarket';

function unreachableTest(): never {
  throw new Error('a run-independent filter asked for a search or geo test');
}

/**
 * Runs a plan on a generation. With a result cache (the engine gives one for runs on its newest
 * generation), a plan whose answer reads nothing of one run is answered from what an earlier run
 * for the same sources kept (src/exec/result-cache.ts); its records are built for this run.
 */
export function execute(plan: Plan, gen: Generation, ctx: ExecContext, results: ResultCache | null = null): QueryResult {
  const compiled = compiledOf(plan, gen);
  if (results === null || !(compiled.cacheable ??= resultsCacheable(plan, compiled.table))) {
    const { ordered, count, records } = outcomeOf(plan, gen, compiled, ctx);
    return respond(plan, ctx, ordered, count, records);
  }
  const sources = sourcesKey(ctx.sources);
  let kept = results.get(plan, gen.id, sources);
  if (kept === undefined) {
    kept = runResultOf(plan, outcomeOf(plan, gen, compiled, ctx));
    results.set(plan, gen.id, sources, kept);
  }
  const groups = kept.groups;
  const records: Projector =
    groups !== null
      ? { record: (i) => copyJson(groups[i]) as Record<string, JsonValue> }
      : plan.access.kind === 'children'
        ? childRecords(plan, compiled.table, ctx)
        : new QueryRun(plan, gen, compiled, ctx);
  return respondPage(plan, ctx, kept.page, 0, kept.page.length, kept.more, kept.count, records);
}

/**
 * Whether a plan's answer (rows, order, count, groups) reads nothing of one run but the caller's
 * sources: no clock in its filter, order or grouping (now(), DaysOnMarket). search.text and geo
 * depend only on the generation. DaysOnMarket in $select or an expansion is fine: records are
 * built per run.
 */
function resultsCacheable(plan: Plan, table: Table): boolean {
  if (plan.filter !== null && readsOfRun(plan.filter, table, false)) return false;
  if (plan.order.some((k) => k.kind === 'expr' && readsOfRun(k.expr, table, false))) return false;
  const g = plan.grouping;
  return g === null || !(g.groupBy.some((f) => readsClock(table, f.name)) || g.aggregates.some((a) => a.field !== null && readsClock(table, a.field.name)));
}

/** What a run kept for the next: the page cut from the ordered results, the count if asked, an $apply page's result rows. */
function runResultOf(plan: Plan, { ordered, count, records }: Outcome): RunResult {
  const { skip, rows } = plan.page;
  const more = morePages(plan, ordered.length - skip);
  const page = ordered.slice(skip, skip + rows);
  const counted = !plan.count ? -1 : typeof count === 'number' ? count : count.count();
  if (plan.grouping === null) return { page, more, count: counted, groups: null };
  const groups = Array.from(page, (g) => records.record(g));
  return { page: Uint32Array.from(groups, (_, i) => i), more, count: counted, groups };
}

/** What execution produced: results in order (at least the page and one more when more remain), the count, the records. */
interface Outcome {
  readonly ordered: Uint32Array;
  readonly count: number | Counter;
  readonly records: Projector;
}

function outcomeOf(plan: Plan, gen: Generation, compiled: Compiled, ctx: ExecContext): Outcome {
  // How many ordered rows we need: the page, plus one to know whether more remain.
  const need = plan.page.skip + plan.page.rows + 1;
  if (plan.access.kind === 'children') return childrenOutcome(plan, plan.access, gen, compiled.table, ctx, need);
  const run = new QueryRun(plan, gen, compiled, ctx);
  const { table, access, calls } = compiled;
  const source = plan.access;
  const strategy = plan.strategy;
  if (plan.grouping) {
    const groups = runApply(table, run.collect(), plan.grouping, { nowMs: ctx.nowMs, limit: need, ignoreNulls: plan.ignoreNulls });
    return { ordered: groups.order, count: groups.count, records: groups };
  }
  let ordered: Uint32Array;
  let count = -1;
  if (plan.page.rows === 0) {
    // $top=0: only the count can be asked for
    ordered = NO_ROWS;
  } else if (strategy.kind === 'key' && source.kind === 'scan') {
    // No index narrows the rows: walk them in key order and stop at the page, starting at the
    // first key a top-level `Key gt/ge 'k'` allows (keyset paging), found by binary search.
    const order = access.keyOrder;
    ordered = walkOrder(order, keyLowerBound(table, order, conjuncts(plan.filter)), order.length, run.acceptAll(), need);
  } else if (strategy.kind === 'ranked') {
    const call = calls.get(strategy.node.ordinal)!;
    const acceptRanked = run.acceptWith(run.compileFilter(andOf(conjuncts(plan.filter).filter((e) => e !== strategy.node))));
    ordered = rankSearch(gen.access.search[strategy.node.field], call.prepared, need, { accept: acceptRanked, tieRank: access.keyRank }).rows;
  } else if (strategy.kind === 'walk') {
    const { field, descending } = strategy;
    const perm = access.sortedBy(field)!;
    const range = rangeOf(perm, table, field, conjuncts(plan.filter));
    // A descending walk reads the cached descending order: the same slice, mirrored (a range's
    // bounds fall between runs of equal values, and only an unranged slice holds the nulls).
    const whole = descending ? access.sortedDescending(field)! : perm;
    const slice = descending ? { start: perm.length - range.end, end: perm.length - range.start } : range;
    if (source.kind !== 'lookup') ordered = walkOrder(whole, slice.start, slice.end, run.acceptAll(), need);
    else {
      // With dictionary lookups as the source, a bit test stands in for their closures; with
      // nothing else to test, the walk may jump to the page by block counts (walk.ts).
      const r = run.rest();
      if (r.ev === null && ctx.sources === undefined) {
        ordered = walkLookupPage(access, source.terms, field, descending, whole, slice, plan.page.skip, plan.page.rows + 1);
      } else {
        const bits = lookupWalk(access, source.terms, field, descending).bits;
        ordered = walkOrder(whole, slice.start, slice.end, (row) => getBit(bits, row) && r.accept(row), need);
      }
    }
  } else {
    const matches = run.collect();
    count = matches.length;
    // one match or none is in order whatever the keys (a key lookup: ListingId eq '...')
    ordered = matches.length <= 1 ? matches : orderRows(matches, run.sortKeys(), access.keyRank, need);
  }
  return { ordered, count: count >= 0 ? count : run, records: run };
}

const NO_ROWS = new Uint32Array(0);

/**
 * What one query compiles as it needs it, on first use (most paths need only part of it): the
 * filter closures, the search results, the geo tests. A class rather than closures made per
 * query: a cache hit then allocates one object, and the envelope asks it for the count and the
 * records (page.ts `Counter`, `Projector`).
 */
class QueryRun {
  private searchResults: SearchResults | null = null;
  private geoTests: Map<Bound, (row: number) => boolean> | null = null;
  /** Visibility and the whole filter (walks over permutations, which answer nothing themselves). */
  private all: ((row: number) => boolean) | null = null;
  /** Visibility and the residual filter (what the access path leaves). */
  private residual: { ev: Evaluator | null; accept: (row: number) => boolean } | null = null;

  constructor(
    private readonly plan: Plan,
    private readonly gen: Generation,
    private readonly compiled: Compiled,
    private readonly ctx: ExecContext,
  ) {}

  get searches(): SearchResults {
    return (this.searchResults ??= new SearchResults(this.gen, this.compiled.table.rowCount, this.compiled.calls));
  }

  /**
   * The closures of a filter. The plan's own filter and residual (`kept`) are compiled once per
   * generation when nothing in them depends on the run; else (the clock, search results, geo
   * tests) they are compiled for this run.
   */
  compileFilter(expr: Bound | null, kept = false): Evaluator | null {
    if (expr === null) return null;
    const { filters, table } = this.compiled;
    if (kept) {
      let ev = filters.get(expr);
      if (ev === undefined) {
        ev = runIndependent(expr, table) ? compile(expr, { table, nowMs: NaN, searchHit: unreachableTest, geoTest: unreachableTest }) : null;
        filters.set(expr, ev);
      }
      if (ev !== null) return ev;
    }
    return compile(expr, {
      table: this.compiled.table,
      nowMs: this.ctx.nowMs,
      searchHit: (ordinal, row) => this.searches.hit(ordinal, row),
      geoTest: (node) => this.geoTest(node),
    });
  }

  private geoTest(node: Extract<Bound, { kind: 'geo' }>): (row: number) => boolean {
    const tests = (this.geoTests ??= new Map<Bound, (row: number) => boolean>());
    let test = tests.get(node);
    if (!test) tests.set(node, (test = geoResidual(this.gen, this.compiled.table, node)));
    return test;
  }

  acceptWith(ev: Evaluator | null): (row: number) => boolean {
    const visible = this.ctx.visible;
    const accept =
      ev === null ? (visible ?? acceptEvery) : visible === null ? (row: number) => ev(row) === true : (row: number) => visible(row) && ev(row) === true;
    const stats = this.ctx.stats;
    if (stats === undefined) return accept;
    return (row) => {
      stats.rowsScanned++;
      return accept(row);
    };
  }

  acceptAll(): (row: number) => boolean {
    return (this.all ??= this.acceptWith(this.compileFilter(this.plan.filter, true)));
  }

  rest(): { ev: Evaluator | null; accept: (row: number) => boolean } {
    if (this.residual === null) {
      const ev = this.compileFilter(this.plan.residual, true);
      this.residual = { ev, accept: this.acceptWith(ev) };
    }
    return this.residual;
  }

  /** Every matching row, ascending. */
  collect(): Uint32Array {
    const keep = this.rest().accept;
    const { plan, gen } = this;
    const { table, access, calls } = this.compiled;
    const source = plan.access;
    switch (source.kind) {
      case 'search':
        return collectSearch(gen, calls.get(source.node.ordinal)!, keep);
      case 'geo':
        return collectGeo(gen, source.node, keep);
      case 'lookup':
        return collectBits(lookupBits(access, source.terms), keep);
      case 'text':
        return collectText(gen.access, table, source.field, source.value, keep);
      case 'range': {
        const perm = access.sortedBy(source.field)!;
        return collectRange(perm, rangeOf(perm, table, source.field, conjuncts(plan.filter)), keep);
      }
      case 'scan':
        return collectScan(table.rowCount, keep);
      case 'children':
        throw new Error('a navigation path is run by executeChildren');
    }
  }

  /** The number of matches (page.ts asks only under $count=true). */
  count(): number {
    const source = this.plan.access;
    const { table, access } = this.compiled;
    if (source.kind === 'lookup' && this.rest().ev === null) {
      // every condition is a dictionary lookup: count an AND of bitsets (visibility folded in;
      // lookup bitsets leave dead rows out themselves)
      const sources = this.ctx.sources;
      const terms =
        sources !== undefined && table === this.gen.store.Property ? [...source.terms, { field: 'OriginatingSystemName', values: sources }] : source.terms;
      if (sources === undefined || terms !== source.terms) return lookupCount(access, terms);
    }
    return this.collect().length;
  }

  sortKeys(): SortKey[] {
    return this.plan.order.map((k) =>
      k.kind === 'relevance'
        ? { read: (row: number) => this.searches.relevance(row), descending: true }
        : {
            read: compile(k.expr, { table: this.compiled.table, nowMs: this.ctx.nowMs, searchHit: () => false, geoTest: () => () => false }),
            descending: k.descending,
          },
    );
  }

  /** The table and field list when a record is just the row's fields (page.ts `Projector`). */
  get plainRecords(): { table: Table; fields: readonly string[] | undefined; nowMs: number } | null {
    const { plan, compiled } = this;
    if (plan.ignoreNulls || plan.links.length > 0 || compiled.expansions !== null) return null;
    return { table: compiled.table, fields: plan.select ?? undefined, nowMs: this.ctx.nowMs };
  }

  /** The record of a row of the page. */
  record(row: number): Record<string, JsonValue> {
    const { plan, ctx } = this;
    return project(plan, this.compiled.table, row, ctx.nowMs, this.compiled.expansions, ctx.visible, ctx.visibleOf, ctx.base);
  }
}

const acceptEvery = (): boolean => true;

/** A navigation path's plan: one listing's children (src/exec/navigate.ts). */
function childrenOutcome(
  plan: Plan,
  access: Extract<Plan['access'], { kind: 'children' }>,
  gen: Generation,
  table: Table,
  ctx: ExecContext,
  need: number,
): Outcome {
  const { visible, nowMs } = ctx;
  const children = new NavigationRows(plan, access, gen, visible, nowMs);
  if (plan.grouping) {
    const groups = runApply(table, children.all(), plan.grouping, { nowMs, limit: need, ignoreNulls: plan.ignoreNulls });
    return { ordered: groups.order, count: groups.count, records: groups };
  }
  return { ordered: children.ordered(need), count: { count: () => children.all().length }, records: childRecords(plan, table, ctx) };
}

/** The records of a navigation path's children: the rows' fields unless shaped (project, without expansions here). */
function childRecords(plan: Plan, table: Table, ctx: ExecContext): Projector {
  const nowMs = ctx.nowMs;
  return {
    record: (row) => project(plan, table, row, nowMs, null, null, ctx.visibleOf, ctx.base),
    get plainRecords() {
      return plan.ignoreNulls || plan.links.length > 0 || plan.expand ? null : { table, fields: plan.select ?? undefined, nowMs };
    },
  };
}

/** One record of a plan's resource by row (an entity read by key): the plan's projection and expansions. */
export function executeRecord(
  plan: Plan,
  gen: Generation,
  row: number,
  ctx: Pick<ExecContext, 'visible' | 'visibleOf' | 'nowMs' | 'base'>,
): Record<string, JsonValue> {
  const { table, expansions } = compiledOf(plan, gen);
  return project(plan, table, row, ctx.nowMs, expansions, ctx.visible, ctx.visibleOf, ctx.base);
}
