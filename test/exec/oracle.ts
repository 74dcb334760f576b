/**
 * A deliberately naive reference for $filter and $orderby: walks the parsed AST over plain JSON
 * records with OData 4.01 null rules written out case by case, brute-force haversine, and the
 * textbook BM25 of test/search/oracle.ts. Slow and obvious on purpose.
 */
import type { Expr, MemberExpr, OrderByItem } from '../../src/odata/ast.js';
import type { SearchFieldName } from '../../src/schema/search-fields.js';
import { NaiveSearch } from '../search/oracle.js';

type Rec = Record<string, unknown>;
type V = string | number | boolean | null | V[];

const DAY = 86_400_000;

export class NaiveEngine {
  private readonly searchers = new Map<string, NaiveSearch>();
  private readonly searchCache = new Map<string, Map<number, number>>();

  constructor(
    readonly records: Rec[],
    readonly nowMs: number,
    /** The records' key field (ties and the answer's keys). */
    readonly key = 'ListingKey',
  ) {}

  /** A field's value as the engine sees it: timestamps as ms, dates as days, derived fields. */
  field(r: Rec, name: string): V {
    // a point only ever compares with null (`Location ne null`): [lon, lat] or null
    if (name === 'Location' || name === 'RawLocation') return this.point(r, name);
    if (name === 'DaysOnMarket') {
      const ref = this.field(r, 'service_DaysOnMarketReferenceTimestamp');
      return ref === null ? null : Math.max(0, Math.floor((this.nowMs - (ref as number)) / DAY));
    }
    if (name === 'service_OriginalEntryTimestamp') {
      if (typeof r.OriginalEntryTimestamp === 'string') return Date.parse(r.OriginalEntryTimestamp);
      const c = typeof r.ListingContractDate === 'string' ? Date.parse(`${r.ListingContractDate}T00:00:00Z`) : null;
      const m = typeof r.ModificationTimestamp === 'string' ? Date.parse(r.ModificationTimestamp) : null;
      if (c === null) return m;
      if (m === null) return c;
      return Math.min(c, m);
    }
    if (name === 'service_DaysOnMarketReferenceTimestamp') {
      if (typeof r.OnMarketTimestamp === 'string') return Date.parse(r.OnMarketTimestamp);
      return this.field(r, 'service_OriginalEntryTimestamp');
    }
    const v = r[name];
    if (v === undefined || v === null) return null;
    if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(v) && /Timestamp|Time$/.test(name)) return Date.parse(v);
    if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v) && /Date$/.test(name)) return Date.parse(`${v}T00:00:00Z`) / DAY;
    return v as V;
  }

  point(r: Rec, name: string): [number, number] | null {
    const lat = r.Latitude;
    const lon = r.Longitude;
    if (typeof lat !== 'number' || typeof lon !== 'number' || Math.abs(lat) > 90 || Math.abs(lon) > 180) return null;
    if (name === 'Location' && lat === 0 && lon === 0) return null;
    return [lon, lat];
  }

  search(field: SearchFieldName, text: string, min?: number): Map<number, number> {
    const key = `${field}|${text}|${min}`;
    let res = this.searchCache.get(key);
    if (!res) {
      let s = this.searchers.get(field);
      if (!s) {
        s = new NaiveSearch(this.records, field);
        this.searchers.set(field, s);
      }
      res = s.search(text, min);
      this.searchCache.set(key, res);
    }
    return res;
  }

  eval(e: Expr, r: Rec, row: number, vars: Record<string, V> = {}): V {
    switch (e.kind) {
      case 'literal':
        switch (e.type) {
          case 'null':
            return null;
          case 'date':
            return e.value / DAY;
          case 'geographyPoint':
            throw new Error('bare point');
          default:
            return e.value;
        }
      case 'member':
        if (e.path[0] in vars) return vars[e.path[0]];
        return this.field(r, e.path[0]);
      case 'not': {
        const v = this.eval(e.operand, r, row, vars);
        return v === null ? null : !v;
      }
      case 'and': {
        const a = this.eval(e.left, r, row, vars);
        const b = this.eval(e.right, r, row, vars);
        if (a === false || b === false) return false;
        if (a === null || b === null) return null;
        return true;
      }
      case 'or': {
        const a = this.eval(e.left, r, row, vars);
        const b = this.eval(e.right, r, row, vars);
        if (a === true || b === true) return true;
        if (a === null || b === null) return null;
        return false;
      }
      case 'compare': {
        if (e.left.kind === 'call' && e.left.name === 'geo.distance') {
          const [m, p] = e.left.args;
          const pt = this.point(r, (m as MemberExpr).path[0]);
          if (pt === null) return false;
          const q = p as { lon: number; lat: number };
          return haversine(pt[0], pt[1], q.lon, q.lat) <= (this.eval(e.right, r, row, vars) as number);
        }
        const a = this.eval(e.left, r, row, vars);
        const b = this.eval(e.right, r, row, vars);
        if (a === null && b === null) return e.operator === 'eq' || e.operator === 'ge' || e.operator === 'le';
        if (a === null || b === null) return e.operator === 'ne';
        switch (e.operator) {
          case 'eq':
            return a === b;
          case 'ne':
            return a !== b;
          case 'gt':
            return a > b;
          case 'ge':
            return a >= b;
          case 'lt':
            return a < b;
          case 'le':
            return a <= b;
        }
        break;
      }
      case 'in': {
        const a = this.eval(e.left, r, row, vars);
        if (e.right.kind === 'list') return e.right.items.some((i) => this.eval(i, r, row, vars) === a);
        const coll = r[(e.right as MemberExpr).path[0]];
        return Array.isArray(coll) && a !== null && coll.includes(a);
      }
      case 'lambda': {
        const coll = r[e.collection.path[0]];
        const items = Array.isArray(coll) ? (coll as V[]) : [];
        if (!e.predicate || !e.variable) return items.length > 0;
        const results = items.map((item) => this.eval(e.predicate!, r, row, { ...vars, [e.variable!]: item }));
        if (e.operator === 'any') return results.includes(true) ? true : results.includes(null) ? null : false;
        return results.includes(false) ? false : results.includes(null) ? null : true;
      }
      case 'negate': {
        const v = this.eval(e.operand, r, row, vars);
        return v === null ? null : -(v as number);
      }
      case 'arithmetic': {
        const a = this.eval(e.left, r, row, vars) as number | null;
        const b = this.eval(e.right, r, row, vars) as number | null;
        if (a === null || b === null) return null;
        switch (e.operator) {
          case 'add':
            return a + b;
          case 'sub':
            return a - b;
          case 'mul':
            return a * b;
          case 'div':
            return b === 0 ? null : Number.isInteger(a) && Number.isInteger(b) && isIntExpr(e.left) && isIntExpr(e.right) ? Math.trunc(a / b) : a / b;
          case 'mod':
            return b === 0 ? null : a % b;
        }
        break;
      }
      case 'call': {
        if (e.name === 'search.text') {
          const [f, t, m] = e.args as unknown as [MemberExpr, { value: string }, { value: number } | undefined];
          return this.search(f.path[0] as SearchFieldName, t.value, m?.value).has(row);
        }
        const args = e.args.map((a) => this.eval(a, r, row, vars));
        if (e.name === 'now') return this.nowMs;
        if (args.some((a) => a === null)) return null;
        const [x, y, z] = args as [never, never, never];
        switch (e.name) {
          case 'contains':
            return (x as string).includes(y);
          case 'startswith':
            return (x as string).startsWith(y);
          case 'endswith':
            return (x as string).endsWith(y);
          case 'tolower':
            return (x as string).toLowerCase();
          case 'toupper':
            return (x as string).toUpperCase();
          case 'trim':
            return (x as string).trim();
          case 'length':
            return [...(x as string)].length;
          case 'indexof':
            return (x as string).indexOf(y);
          case 'concat':
            return (x as string) + (y as string);
          case 'substring':
            return z === undefined ? (x as string).slice(y) : (x as string).slice(y, (y as number) + (z as number));
          case 'year':
          case 'month':
          case 'day':
          case 'hour':
          case 'minute':
          case 'second': {
            const arg = e.args[0];
            const isDate = arg.kind === 'member' && /Date$/.test(arg.path[0]);
            const d = new Date(isDate ? (x as number) * DAY : x);
            return {
              year: d.getUTCFullYear(),
              month: d.getUTCMonth() + 1,
              day: d.getUTCDate(),
              hour: d.getUTCHours(),
              minute: d.getUTCMinutes(),
              second: d.getUTCSeconds(),
            }[e.name];
          }
          case 'date':
            return Math.floor((x as number) / DAY);
        }
      }
    }
    throw new Error(`oracle: unsupported ${e.kind}`);
  }

  /** Keys of matching records in the requested order (nulls lowest, then key ascending). */
  query(filter: Expr | undefined, orderby: readonly OrderByItem[] = [], visible: (r: Rec) => boolean = () => true): string[] {
    const rows = this.records.map((r, i) => [r, i] as const).filter(([r, i]) => visible(r) && (!filter || this.eval(filter, r, i) === true));
    const keyOf = (r: Rec): string => r[this.key] as string;
    // relevance: the summed scores of this filter's own search.text calls that hold for the row
    const calls: Array<Map<number, number>> = [];
    // every call, wherever it stands: under and/or/not, compared with true/false/null, in a lambda
    const walk = (e: Expr | undefined | null): void => {
      if (!e) return;
      if (e.kind === 'call' && e.name === 'search.text') {
        const [f, t, m] = e.args as unknown as [MemberExpr, { value: string }, { value: number } | undefined];
        calls.push(this.search(f.path[0] as SearchFieldName, t.value, m?.value));
      } else if (e.kind === 'and' || e.kind === 'or' || e.kind === 'compare' || e.kind === 'arithmetic') {
        walk(e.left);
        walk(e.right);
      } else if (e.kind === 'not' || e.kind === 'negate') walk(e.operand);
      else if (e.kind === 'lambda') walk(e.predicate);
      else if (e.kind === 'call') e.args.forEach(walk);
      else if (e.kind === 'in') walk(e.left);
    };
    walk(filter);
    const relevance = (i: number): number => {
      let s = 0;
      for (const m of calls) s += m.get(i) ?? 0;
      return s;
    };
    const value = (item: OrderByItem, r: Rec, i: number): V => {
      if (item.expr.kind === 'member' && item.expr.path[0] === 'relevance') return relevance(i);
      return this.eval(item.expr, r, i);
    };
    rows.sort(([a, i], [b, j]) => {
      for (const item of orderby) {
        const x = value(item, a, i);
        const y = value(item, b, j);
        let d = x === y ? 0 : x === null ? -1 : y === null ? 1 : (x as number) < (y as number) ? -1 : 1;
        if (item.direction === 'desc') d = -d;
        if (d !== 0) return d;
      }
      return keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0;
    });
    return rows.map(([r]) => keyOf(r));
  }
}

function isIntExpr(e: Expr): boolean {
  return (
    (e.kind === 'literal' && e.type === 'integer') ||
    (e.kind === 'member' && /^(BedroomsTotal|BathroomsTotalInteger|YearBuilt|Stories|PhotosCount|DaysOnMarket)$/.test(e.path[0]))
  );
}

export function haversine(lon1: number, lat1: number, lon2: number, lat2: number): number {
  const toRad = (d: number): number => (d * Math.PI) / 180;
  const a = Math.sin(toRad(lat2 - lat1) / 2) ** 2 + Math.cos(toRad(lat1)) * Math.cos(toRad(lat2)) * Math.sin(toRad(lon2 - lon1) / 2) ** 2;
  return 2 * 6371008.8 * Math.asin(Math.min(1, Math.sqrt(a)));
}
