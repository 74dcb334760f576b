/**
 * Plans kept for repeated query texts, least recently used dropped first. A cached plan is data
 * (src/plan/plan.ts) and holds no generation: it is reused on every generation whose schemas it
 * was bound against (a change that adds a field gives its table a new schema, and the plans of
 * that resource are made again), so changes to the data do not re-plan a cached query.
 */
import type { TableSchema } from '../schema/table-schema.js';
import type { Plan } from './plan.js';
import { planQuery, type PlanRequest, type PlanStatistics } from './planner.js';

/** Plans kept (least recently used dropped first). */
export const PLAN_CACHE_SIZE = 512;

interface Entry {
  readonly plan: Plan;
  /** The schemas the plan was bound against: the resource's, then each expansion's. */
  readonly schemas: readonly TableSchema[];
}

export class PlanCache {
  private readonly entries = new Map<string, Entry>();
  /** Lookups answered from the cache, and plans made. */
  hits = 0;
  misses = 0;

  constructor(private readonly capacity = PLAN_CACHE_SIZE) {}

  get size(): number {
    return this.entries.size;
  }

  /** The plan of a request on data with these statistics: the cached one while its schemas hold, else a new one. */
  plan(request: PlanRequest, stats: PlanStatistics): Plan {
    const nav = request.navigation;
    const key = `${request.resource}${nav ? `(${JSON.stringify(nav.key)})/${nav.name}` : ''}${request.countOnly ? '/$count' : ''}\n${request.maxPageSize ?? ''}\n${request.text}`;
    const hit = this.entries.get(key);
    if (hit !== undefined) {
      this.entries.delete(key); // refresh its place in the LRU order
      if (hit.schemas.every((s) => stats.schemaOf(s.resource) === s)) {
        this.entries.set(key, hit);
        this.hits++;
        return hit.plan;
      }
    }
    const plan = planQuery(request, stats);
    this.misses++;
    const schemas = [stats.schemaOf(plan.resource), ...(plan.expand ?? []).map((e) => stats.schemaOf(e.resource))];
    if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { plan, schemas });
    return plan;
  }
}
