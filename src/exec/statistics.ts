/**
 * The planner's statistics (src/plan/planner.ts PlanStatistics) of one in-memory generation:
 * posting counts of the search views, value counts of dictionary columns, the key index and text
 * hashes, and slices of sorted permutations. Structures a statistic needs are built on first use
 * and kept by the generation's access structures, where the executor finds them again.
 */
import type { Generation } from '../access/generation.js';
import type { Bound } from '../plan/bound.js';
import type { LookupTerm, QueryResource, SearchNode } from '../plan/plan.js';
import type { PlanStatistics } from '../plan/planner.js';
import type { ResourceName } from '../schema/types.js';
import type { TableSchema } from '../schema/table-schema.js';
import { prepareSearch } from '../search/bm25.js';
import { lookupRows } from './lookup.js';
import { rangeOf } from './range.js';

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
    textRows: (resource, field, value) => accessOf(resource).textRows(field, value)?.length ?? null,
    rangeRows(resource, field, top: readonly Bound[]): number | null {
      const access = accessOf(resource);
      const perm = access.sortedBy(field);
      if (perm === null) return null;
      const slice = rangeOf(perm, access.table, field, top);
      return slice.end - slice.start;
    },
  };
}
