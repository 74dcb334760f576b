/**
 * The planner: from a bound query, choose how to find candidate rows and how to order them, and
 * say so (`explain`). Candidate sources, cheapest first by their known result size:
 *
 * - `search`: a top-level search.text conjunct (postings; the result size is known exactly);
 * - `geo`: a top-level geo.distance conjunct (KD-tree walk with the rest of the filter pushed in);
 * - `lookup`: top-level `Field eq 'v'` / `Field in (...)` on dictionary columns (an AND of
 *   per-value bitsets, each built on first use);
 * - `text`: `TextField eq 'v'` (the key index, or a hash of the column built on first use);
 * - `range`: top-level comparisons of a numeric column with constants (a binary-searched slice of
 *   the column's sorted permutation, built on first use);
 * - `scan`: every row.
 *
 * Visibility (the caller's sources) is applied at the root of every plan, before anything else.
 * Ordering: `relevance desc` alone with one search conjunct and no $count → ranked top-k with
 * early stop; a single numeric key with $top and no $count → an ordered walk of the column's
 * sorted permutation that stops after skip+top matches; otherwise all matches, then a heap.
 */
import type { Bound } from './bound.js';
import type { BoundOrderKey } from './bind.js';

export type CandidateSource =
  | { readonly kind: 'scan' }
  | { readonly kind: 'search'; readonly node: Extract<Bound, { kind: 'search' }> }
  | { readonly kind: 'geo'; readonly node: Extract<Bound, { kind: 'geo' }> }
  /** Conjunction of `Field eq 'v'` / `Field in (...)` on dictionary columns: an AND of per-value bitsets. */
  | { readonly kind: 'lookup'; readonly terms: ReadonlyArray<{ readonly field: string; readonly values: readonly string[] }> }
  /** `TextField eq 'v'` through the key index or a hash of the text column. */
  | { readonly kind: 'text'; readonly node: Bound; readonly field: string; readonly value: string }
  /** Positions [start, end) of the field's sorted permutation (range conjuncts, binary-searched). */
  | { readonly kind: 'range'; readonly field: string; readonly start: number; readonly end: number };

export type OrderStrategy =
  | { readonly kind: 'key' }
  | { readonly kind: 'ranked'; readonly node: Extract<Bound, { kind: 'search' }> }
  | { readonly kind: 'walk'; readonly field: string; readonly descending: boolean }
  | { readonly kind: 'heap' };

/** Top-level conjuncts of a filter (a and b and c → [a, b, c]), without recursion on long chains. */
export function conjuncts(expr: Bound | null): Bound[] {
  if (!expr) return [];
  const out: Bound[] = [];
  const stack: Bound[] = [expr];
  while (stack.length) {
    const e = stack.pop()!;
    if (e.kind === 'and') stack.push(e.right, e.left);
    else out.push(e);
  }
  return out;
}

/** Every search.text call of a filter, in ordinal order. */
export function searchCalls(expr: Bound | null): Extract<Bound, { kind: 'search' }>[] {
  const out: Extract<Bound, { kind: 'search' }>[] = [];
  const stack: Bound[] = expr ? [expr] : [];
  while (stack.length) {
    const e = stack.pop()!;
    switch (e.kind) {
      case 'search':
        out.push(e);
        break;
      case 'and':
      case 'or':
        stack.push(e.left, e.right);
        break;
      case 'not':
        stack.push(e.operand);
        break;
      default:
        break;
    }
  }
  return out.sort((a, b) => a.ordinal - b.ordinal);
}

/** `Field eq 'v'` or `Field in ('a','b')` on a string field: a lookup candidate. */
export function lookupOf(e: Bound): { field: string; values: string[] } | null {
  if (e.kind === 'compare' && e.op === 'eq' && e.left.kind === 'field' && e.right.kind === 'const' && typeof e.right.value === 'string') {
    return { field: e.left.field.name, values: [e.right.value] };
  }
  if (e.kind === 'in' && e.left.kind === 'field' && e.values.every((v) => typeof v === 'string')) {
    return { field: e.left.field.name, values: [...new Set(e.values as string[])] };
  }
  return null;
}

export function chooseOrder(
  requested: readonly BoundOrderKey[],
  topLevel: readonly Bound[],
  allSearches: readonly Extract<Bound, { kind: 'search' }>[],
  wantCount: boolean,
  hasTop: boolean,
  numericField: (name: string) => boolean,
): OrderStrategy {
  // A trailing `Key asc` repeats the tie-break every order ends with (`$orderby=T asc,Key asc`,
  // as keyset-paging clients write it, is `$orderby=T asc`): it does not stop a walk.
  const last = requested[requested.length - 1];
  const keyLast = last !== undefined && last.kind === 'expr' && last.expr.kind === 'field' && last.expr.field.key && !last.descending;
  const order = keyLast ? requested.slice(0, -1) : requested;
  if (order.length === 0) return { kind: 'key' };
  const first = order[0];
  if (!wantCount && order.length === 1 && first.kind === 'relevance' && allSearches.length === 1 && topLevel.includes(allSearches[0])) {
    return { kind: 'ranked', node: allSearches[0] };
  }
  if (!wantCount && hasTop && order.length === 1 && first.kind === 'expr' && first.expr.kind === 'field' && numericField(first.expr.field.name)) {
    return { kind: 'walk', field: first.expr.field.name, descending: first.descending };
  }
  return { kind: 'heap' };
}

export function describeSource(s: CandidateSource, size: number | null): string {
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
      return `range of ${s.field} (sorted permutation, ${s.end - s.start} rows)`;
    case 'text':
      return `hash lookup ${s.field} eq '${s.value}'${n}`;
  }
}

/** The top-level conjuncts a candidate source answers exactly (left out of the residual filter). */
export function answeredBy(source: CandidateSource, top: readonly Bound[]): Set<Bound> {
  switch (source.kind) {
    case 'scan':
      return new Set();
    case 'search':
    case 'geo':
    case 'text':
      return new Set([source.node]);
    case 'lookup': {
      const fields = new Set(source.terms.map((t) => t.field));
      return new Set(top.filter((e) => {
        const l = lookupOf(e);
        return l !== null && fields.has(l.field);
      }));
    }
    case 'range':
      return new Set(top.filter((e) => e.kind === 'compare' && e.op !== 'ne' && e.left.kind === 'field' && e.left.field.name === source.field && e.right.kind === 'const' && typeof e.right.value === 'number'));
  }
}

/** `a and b and ...` of the given conjuncts, or null for none. */
export function andOf(parts: readonly Bound[]): Bound | null {
  let out: Bound | null = null;
  for (const e of parts) out = out === null ? e : { kind: 'and', type: 'boolean', left: out, right: e };
  return out;
}
