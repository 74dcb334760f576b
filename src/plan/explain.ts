/**
 * A Plan as the text `engine.explain(...)` returns: one line per decision (resource, visibility,
 * access path, residual filter, order, grouping, page), then the planner's estimates and, where
 * the backend counted them, the actual rows of the access path and matches.
 */
import type { BoundOrderKey } from './bind.js';
import type { BoundGrouping } from './bind-apply.js';
import type { AccessPath, OrderStrategy, Plan, PlanEstimates } from './plan.js';

export interface ExplainContext {
  /** The caller's sources (undefined: all). */
  readonly sources: readonly string[] | undefined;
  /** Rows the access path reads where that is known without running the query, or null. */
  readonly accessRows: number | null;
  /** What running the plan found, where the backend counted it. */
  readonly actual?: ActualCounts;
}

/** Counted on the data, beside the plan's estimates. */
export interface ActualCounts {
  /** Rows the access path yields (before visibility and the residual filter). */
  readonly access: number;
  /** Rows matching the whole filter that the caller sees. */
  readonly matches: number;
}

export function explainText(plan: Plan, ctx: ExplainContext): string {
  const lines = [
    `resource: ${plan.resource}`,
    `visibility: ${ctx.sources ? `sources ${ctx.sources.join(', ') || '(none)'}` : 'all sources'}`,
    `candidates: ${describeAccess(plan.access, ctx.accessRows)}`,
    `residual filter: ${plan.filter ? 'yes' : 'none'}`,
    `order: ${describeOrder(plan.strategy, plan.order)}`,
    ...(plan.grouping ? [`apply: ${describeGrouping(plan.grouping)}`] : []),
    `page: skip ${plan.page.skip}, up to ${plan.page.rows} rows`,
    ...(plan.estimates ? [`estimates: ${describeEstimates(plan.estimates)}`] : []),
    ...(ctx.actual ? [`actual: access path ${ctx.actual.access} rows, ${ctx.actual.matches} matches`] : []),
  ];
  return lines.join('\n');
}

/** The planner's estimates: each sized conjunct, the access path, the matches, and the order's weighing. */
function describeEstimates(e: PlanEstimates): string {
  const conjuncts = e.conjuncts.map((c) => `${c.what} ≤ ${c.rows}`).join(', ');
  const order = e.order ? `; ordered walk ~${e.order.walk} rows visited, collect + heap ~${e.order.collect}` : '';
  return `${conjuncts ? `${conjuncts}; ` : ''}access path ≤ ${Math.round(e.access)} rows, ~${e.matches} matches of ${e.rows}${order}`;
}

function describeAccess(s: AccessPath, size: number | null): string {
  const n = size === null ? '' : ` (${size} rows)`;
  switch (s.kind) {
    case 'scan':
      return `scan all rows${n}`;
    case 'search':
      return `search.text(${s.node.field}, '${s.node.text}') postings${n}`;
    case 'geo':
      return `kd-tree ${s.node.field.name} within ${s.node.meters} m of (${s.node.lon} ${s.node.lat})${n}`;
    case 'lookup':
      return `lookup ${s.terms.map((t) => `${t.field} in (${t.values.map((v) => `'${v}'`).join(',')})`).join(' and ')} (value bitsets)${n}`;
    case 'range':
      return `range of ${s.field} (sorted permutation, ${size ?? '?'} rows)`;
    case 'text':
      return `hash lookup ${s.field} eq '${s.value}'${n}`;
    case 'children':
      return `children of ${s.parent}('${s.key.replace(/'/g, "''")}') through ${s.navigation} (child index)`;
  }
}

function describeOrder(s: OrderStrategy, order: readonly BoundOrderKey[]): string {
  switch (s.kind) {
    case 'key':
      return 'key ascending';
    case 'ranked':
      return `ranked top-k by relevance (impact-ordered postings, early stop)`;
    case 'walk':
      return `ordered walk of ${s.field} ${s.descending ? 'desc' : 'asc'} (sorted permutation, stops at the page)`;
    case 'siblings':
      return order.length ? `the children's ${describeKeys(order)}, key (among the siblings)` : "the navigation property's default order (child index)";
    case 'heap':
      return `all matches, then top-k heap on ${describeKeys(order)}, key`;
  }
}

function describeKeys(order: readonly BoundOrderKey[]): string {
  return order
    .map((k) => (k.kind === 'relevance' ? 'relevance desc' : `${k.expr.kind === 'field' ? k.expr.field.name : 'expression'} ${k.descending ? 'desc' : 'asc'}`))
    .join(', ');
}

/** The grouping as explain() reports it. */
export function describeGrouping(g: BoundGrouping): string {
  const by = g.groupBy.length ? `group by ${g.groupBy.map((f) => f.name).join(', ')}` : 'one group (aggregate)';
  const aggs = g.aggregates.map((a) => `${a.alias} = ${a.op === 'count' ? '$count' : `${a.op === 'percentile' ? `p${a.p}` : a.op}(${a.field!.name})`}`);
  const order = g.order.length
    ? `${g.order.map((k) => `${k.property} ${k.descending ? 'desc' : 'asc'}`).join(', ')}, then group values`
    : 'group values ascending';
  return `${by}${aggs.length ? `; ${aggs.join(', ')}` : ''}; order ${order}`;
}
