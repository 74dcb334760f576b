/**
 * Plans kept for repeated queries, by query text and by query shape (the text with its literals
 * lifted out, src/odata/shape.ts), least recently used dropped first.
 *
 * A query text seen before gets its plan back as it is. A new text whose shape was seen before is
 * not parsed: the shape's template (src/plan/template.ts: one parse with the literals as places)
 * takes the new literals and is bound and planned with them, so `ListingId eq 'A'` and
 * `ListingId eq 'B'` share the parse but each plan is made with its own values (the lookup value,
 * the range, the selectivity the access path is chosen by). Only a text whose shape is new is
 * parsed, and then once more with spans to make the shape's template.
 *
 * A cached plan is data (src/plan/plan.ts) and holds no generation: it is reused on every
 * generation whose schemas it was bound against (a change that adds a field gives its table a new
 * schema, and the plans of that resource are made again), so changes to the data do not re-plan a
 * cached query. Templates are syntax only and hold for every generation.
 */
import { QueryError } from '../errors.js';
import { queryShape } from '../odata/shape.js';
import type { TableSchema } from '../schema/table-schema.js';
import type { Plan } from './plan.js';
import { planParsedQuery, planQuery, type PlanRequest, type PlanStatistics } from './planner.js';
import { instantiate, templateOf, type QueryTemplate } from './template.js';

/** Plans kept (least recently used dropped first); as many shapes again. */
export const PLAN_CACHE_SIZE = 512;

interface Entry {
  readonly plan: Plan;
  /** The schemas the plan was bound against: the resource's, then each expansion's. */
  readonly schemas: readonly TableSchema[];
  /** When it was last used (the cache's clock), for dropping the least recently used. */
  used: number;
}

interface Shape {
  /** Null when the shape cannot be parameterized: its texts are parsed every time. */
  readonly template: QueryTemplate | null;
  used: number;
}

/**
 * Entries by a key of the request's other parts (the resource alone for a plain query), then by
 * text: a lookup builds no string. Recency is a counter stamped on use, so a hit moves nothing;
 * the least recently used is found by a scan only when a full cache takes a new entry.
 */
class Recent<V extends { used: number }> {
  private readonly groups = new Map<string, Map<string, V>>();
  private count = 0;
  private clock = 0;

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.count;
  }

  get(group: string, text: string): V | undefined {
    const v = this.groups.get(group)?.get(text);
    if (v !== undefined) v.used = ++this.clock;
    return v;
  }

  set(group: string, text: string, v: V): void {
    let texts = this.groups.get(group);
    if (texts === undefined) this.groups.set(group, (texts = new Map<string, V>()));
    if (!texts.has(text)) {
      if (this.count >= this.capacity) this.dropOldest();
      this.count++;
    }
    v.used = ++this.clock;
    texts.set(text, v);
  }

  private dropOldest(): void {
    let oldest: { texts: Map<string, V>; text: string; used: number } | null = null;
    for (const texts of this.groups.values()) {
      for (const [text, v] of texts) if (oldest === null || v.used < oldest.used) oldest = { texts, text, used: v.used };
    }
    if (oldest !== null) {
      oldest.texts.delete(oldest.text);
      this.count--;
    }
  }
}

export class PlanCache {
  private readonly plans: Recent<Entry>;
  private readonly shapes: Recent<Shape>;
  /** Plans answered from the cache, plans made from a cached shape (no parse), and plans made from the text. */
  hits = 0;
  shapeHits = 0;
  misses = 0;

  constructor(capacity = PLAN_CACHE_SIZE) {
    this.plans = new Recent(capacity);
    this.shapes = new Recent(capacity);
  }

  get size(): number {
    return this.plans.size;
  }

  /** The plan of a request on data with these statistics: the cached one while its schemas hold, else a new one. */
  plan(request: PlanRequest, stats: PlanStatistics): Plan {
    const group = groupOf(request);
    const hit = this.plans.get(group, request.text);
    if (hit !== undefined && current(hit.schemas, stats)) {
      this.hits++;
      return hit.plan;
    }
    const plan = this.make(request, group, stats);
    const schemas = [stats.schemaOf(plan.resource), ...(plan.expand ?? []).map((e) => stats.schemaOf(e.resource))];
    this.plans.set(group, request.text, { plan, schemas, used: 0 });
    return plan;
  }

  /** A new plan: from the shape's template when the shape was seen, else from the text (and the shape remembered). */
  private make(request: PlanRequest, group: string, stats: PlanStatistics): Plan {
    const shape = queryShape(request.text);
    if (shape === null) {
      this.misses++;
      return planQuery(request, stats);
    }
    const known = this.shapes.get(group, shape.text);
    if (known?.template) {
      const parsed = instantiate(known.template, shape);
      if (parsed !== null) {
        try {
          const plan = planParsedQuery(request, parsed, stats);
          this.shapeHits++;
          return plan;
        } catch (err) {
          // the error as planQuery reports it (with its position), below
          if (!(err instanceof QueryError)) throw err;
        }
      }
    }
    this.misses++;
    const plan = planQuery(request, stats);
    if (known === undefined) this.shapes.set(group, shape.text, { template: templateOf(request.text), used: 0 });
    return plan;
  }
}

/** Whether a plan's schemas are those of the data with these statistics. */
function current(schemas: readonly TableSchema[], stats: PlanStatistics): boolean {
  for (const s of schemas) if (stats.schemaOf(s.resource) !== s) return false;
  return true;
}

/** What besides the text a plan depends on: the resource, a navigation path, a count, the page size. */
function groupOf(request: PlanRequest): string {
  const nav = request.navigation;
  if (nav === undefined && request.countOnly !== true && request.maxPageSize === undefined) return request.resource;
  return `${request.resource}${nav ? `(${JSON.stringify(nav.key)})/${nav.name}` : ''}${request.countOnly ? '/$count' : ''}\n${request.maxPageSize ?? ''}`;
}
