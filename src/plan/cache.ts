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

/** Plans kept (the least recently used dropped first); as many shapes again. */
export const PLAN_CACHE_SIZE = 512;

interface Entry extends Recency {
  readonly plan: Plan;
  /** The schemas the plan was bound against: the resource's, then each expansion's. */
  readonly schemas: readonly TableSchema[];
}

interface Shape extends Recency {
  /** Null when the shape cannot be parameterized: its texts are parsed every time. */
  readonly template: QueryTemplate | null;
}

/** What the recency order needs of a cached value. */
interface Recency {
  /** The cache's clock when the value was last used, and when it was last placed at the back of the order. */
  used: number;
  placed: number;
}

/**
 * Entries by a key of the request's other parts (the resource alone for a plain query), then by
 * text: a lookup builds no string. A hit only stamps the entry; a full cache drops by the clock
 * ("second chance") algorithm: the oldest placed entry goes unless it was used since it was
 * placed, in which case it is placed again at the back. Amortized O(1), and a hit moves nothing.
 */
class Recent<V extends Recency> {
  private readonly groups = new Map<string, Map<string, V>>();
  /** Every entry, oldest placed first, with where it is kept. */
  private readonly order = new Map<V, { group: string; texts: Map<string, V>; text: string }>();
  private clock = 0;

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.order.size;
  }

  get(group: string, text: string): V | undefined {
    const v = this.groups.get(group)?.get(text);
    if (v !== undefined) v.used = ++this.clock;
    return v;
  }

  set(group: string, text: string, v: V): void {
    let texts = this.groups.get(group);
    if (texts === undefined) this.groups.set(group, (texts = new Map<string, V>()));
    const old = texts.get(text);
    if (old !== undefined) this.order.delete(old);
    else if (this.order.size >= this.capacity) this.dropOne();
    v.used = v.placed = ++this.clock;
    texts.set(text, v);
    this.order.set(v, { group, texts, text });
  }

  private dropOne(): void {
    for (const [v, at] of this.order) {
      this.order.delete(v);
      if (v.used > v.placed) {
        v.placed = ++this.clock;
        this.order.set(v, at);
      } else {
        at.texts.delete(at.text);
        // a navigation path's group holds one listing's queries: do not keep it empty
        if (at.texts.size === 0) this.groups.delete(at.group);
        return;
      }
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

  /** The plan cached for exactly this request, if any, whatever data it was made on (its schemas are not checked). */
  peek(request: PlanRequest): Plan | undefined {
    return this.plans.get(groupOf(request), request.text)?.plan;
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
    this.plans.set(group, request.text, { plan, schemas, used: 0, placed: 0 });
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
    if (known === undefined) this.shapes.set(group, shape.text, { template: templateOf(request.text), used: 0, placed: 0 });
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
