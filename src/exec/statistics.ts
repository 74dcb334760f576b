/**
 * The planner's statistics (src/plan/planner.ts PlanStatistics) of one in-memory generation:
 * posting counts of the search views, value counts of dictionary columns, the key index and text
 * hashes, and slices of sorted permutations. Structures a statistic needs are built on first use
 * and kept by the generation's access structures, where the executor finds them again.
 */
import type { PointField } from '../access/access.js';
import type { Generation } from '../access/generation.js';
import type { Bound } from '../plan/bound.js';
import type { GeoNode, LookupTerm, QueryResource, SearchNode } from '../plan/plan.js';
import type { PlanStatistics } from '../plan/planner.js';
import type { ResourceName } from '../schema/types.js';
import type { TableSchema } from '../schema/table-schema.js';
import { prepareSearch } from '../search/bm25.js';
import type { ActualCounts } from '../plan/explain.js';
import type { Plan } from '../plan/plan.js';
import { conjuncts } from '../plan/planner.js';
import { execute, type ExecContext } from './execute.js';
import { collectGeo } from './geo.js';
import { lookupCount, lookupRows } from './lookup.js';
import { rangeOf } from './range.js';
import { collectSearch } from './search.js';

const statistics = new WeakMap<Generation, PlanStatistics>();

/** The statistics of a generation, made once per generation (every query asks for them; few plan). */
export function statisticsOf(gen: Generation): PlanStatistics {
  let stats = statistics.get(gen);
  if (stats === undefined) statistics.set(gen, (stats = makeStatistics(gen)));
  return stats;
}

function makeStatistics(gen: Generation): PlanStatistics {
  const accessOf = (resource: QueryResource) => gen.access.of(gen.store.table(resource));
  return {
    schemaOf: (resource: ResourceName): TableSchema => gen.store.table(resource).schema,
    rowCount: (resource) => gen.store.table(resource).rowCount,
    searchRows(node: SearchNode): number {
      // an upper bound: the postings of every term and expansion
      const view = gen.access.search[node.field];
      let size = 0;
      for (const t of prepareSearch(view, node.text, node.minMatches).terms) {
        if (t.exact >= 0) size += view.postingCount(t.exact);
        for (const id of t.inexact) size += view.postingCount(id);
      }
      return size;
    },
    lookupRows: (resource, term: LookupTerm) => lookupRows(accessOf(resource), term),
    textRows: (resource, field, value) => gen.access.textRows(gen.store.table(resource), field, value)?.length ?? null,
    rangeRows(resource, field, top: readonly Bound[]): number | null {
      const access = accessOf(resource);
      const perm = access.sortedBy(field);
      if (perm === null) return null;
      const slice = rangeOf(perm, access.table, field, top);
      return slice.end - slice.start;
    },
    geoRows(resource, node: GeoNode): number | null {
      // points are Property's (Location, RawLocation)
      const points = resource === 'Property' ? gen.access.points[node.field.name as PointField] : undefined;
      return points ? points.count(node.lon, node.lat, node.meters) : null;
    },
  };
}

/**
 * What running a plan finds, for explain beside the estimates: the rows its access path yields
 * (live rows, before visibility and the residual filter) and the matches the caller sees (the
 * plan run as a count). Undefined for a navigation path (one listing's children).
 */
export function actualCounts(plan: Plan, gen: Generation, ctx: ExecContext): ActualCounts | undefined {
  const a = plan.access;
  if (a.kind === 'children') return undefined;
  const access = gen.access.of(gen.store.table(plan.resource));
  const live = (row: number): boolean => !access.isDead(row);
  let rows: number;
  switch (a.kind) {
    case 'scan':
      rows = access.table.rowCount - access.deadCount;
      break;
    case 'search':
      rows = collectSearch(gen, { node: a.node, prepared: prepareSearch(gen.access.search[a.node.field], a.node.text, a.node.minMatches) }, live).length;
      break;
    case 'geo':
      rows = collectGeo(gen, a.node, live).length;
      break;
    case 'lookup':
      rows = lookupCount(access, a.terms);
      break;
    case 'text':
      rows = (gen.access.textRows(access.table, a.field, a.value) ?? []).filter(live).length;
      break;
    case 'range': {
      const perm = access.sortedBy(a.field)!;
      const slice = rangeOf(perm, access.table, a.field, conjuncts(plan.filter));
      rows = 0;
      const c = perm.cursor(slice.start);
      for (let i = slice.start; i < slice.end; i++) if (live(c.next())) rows++;
      break;
    }
  }
  const counted: Plan = { ...plan, count: true, page: { skip: 0, rows: 0, top: 0 }, grouping: null, expand: null };
  return { access: rows, matches: execute(counted, gen, ctx)['@odata.count']! };
}
