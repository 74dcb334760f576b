/**
 * A query shape's template: one parse of a query whose literals are parameters. The plan cache
 * (cache.ts) keeps one per shape (src/odata/shape.ts); a later query of that shape gets its parse
 * by putting its own literals into the template's places (`instantiate`), read exactly as the
 * grammar reads them, instead of parsing again, and is then bound and planned with its values, so
 * every literal-dependent choice (which lookup value, which range, how selective) is its own.
 *
 * A template is made only from a text that parsed, and only when every lifted literal is a
 * literal node of the parse at the same place (a number the grammar reads otherwise, or a literal
 * the parse copies elsewhere, makes the shape unparameterized: its texts are parsed every time).
 * As a check of the whole substitution, the text is also parsed once with other values in every
 * string and number, and that parse must equal the template's instantiation with them.
 */
import type { LiteralExpr, ParsedQuery } from '../odata/ast.js';
import { spanOf } from '../odata/ast.js';
import { nonNegativeInteger } from '../odata/grammar.js';
import { isLiteralFailure, literalOfToken, type ValueTokenKind } from '../odata/literals.js';
import { parseQuery } from '../odata/parse-query.js';
import { queryShape, type LiftedLiteral, type QueryShape } from '../odata/shape.js';

/** Where a lifted literal goes: a literal node of the parse, or the top-level $top/$skip. */
type Slot = { readonly kind: ValueTokenKind; readonly node: LiteralExpr } | { readonly kind: 'count'; readonly option: 'top' | 'skip' };

export interface QueryTemplate {
  readonly query: ParsedQuery;
  /** One per lifted literal, in text order. */
  readonly slots: readonly Slot[];
}

const EXPRESSION_OPTIONS = { $filter: 'filter', $orderby: 'orderby', $expand: 'expand', $apply: 'apply' } as const;

/** The template of a text that parsed, or null when its shape cannot be a parameterized one. */
export function templateOf(text: string): QueryTemplate | null {
  const lifted: LiftedLiteral[] = [];
  const shape = queryShape(text, lifted);
  if (shape === null) return null;
  const parsed = parseQuery(text, { spans: true });
  const slots: Slot[] = [];
  const seen = new Set<object>();
  for (const l of lifted) {
    if (l.kind === 'count') {
      slots.push({ kind: 'count', option: l.option === '$top' ? 'top' : 'skip' });
      continue;
    }
    const key = EXPRESSION_OPTIONS[l.option as keyof typeof EXPRESSION_OPTIONS];
    const node = literalAt(parsed, parsed[key], l.offset, l.offset + l.image.length);
    if (node === null || seen.has(node)) return null;
    seen.add(node);
    slots.push({ kind: l.kind, node });
  }
  const template: QueryTemplate = { query: parsed, slots };
  // the check: other strings and numbers, parsed and substituted, give one query
  const variant = variantText(text, lifted);
  let expected: ParsedQuery;
  try {
    expected = parseQuery(variant, { spans: false });
  } catch {
    return null;
  }
  const varied = queryShape(variant);
  const got = varied === null ? null : instantiate(template, varied);
  return got !== null && sameTree(got, expected) ? template : null;
}

/**
 * The parse of a text of the template's shape: the template with the shape's literals in their
 * places, or null when one of them is not a valid literal (the caller parses the text in full,
 * which reports the error as it always has).
 */
export function instantiate(template: QueryTemplate, shape: QueryShape): ParsedQuery | null {
  const { slots } = template;
  const images = shape.images;
  if (images.length !== slots.length) return null;
  const nodes = new Map<object, LiteralExpr>();
  let top: number | undefined;
  let skip: number | undefined;
  for (let i = 0; i < slots.length; i++) {
    const slot = slots[i];
    if (slot.kind === 'count') {
      const n = nonNegativeInteger(images[i]);
      if (typeof n !== 'number') return null;
      if (slot.option === 'top') top = n;
      else skip = n;
    } else {
      const lit = literalOfToken(slot.kind, images[i]);
      if (isLiteralFailure(lit)) return null;
      nodes.set(slot.node, lit);
    }
  }
  const q = template.query;
  const out: Record<string, unknown> = {};
  for (const key in q) {
    const v = q[key as keyof ParsedQuery];
    out[key] = key === 'top' && top !== undefined ? top : key === 'skip' && skip !== undefined ? skip : nodes.size ? substitute(v, nodes) : v;
  }
  return out;
}

/** The literal node of `tree` at exactly [start, end) of its option's value, or null. */
function literalAt(query: ParsedQuery, tree: unknown, start: number, end: number): LiteralExpr | null {
  let found: LiteralExpr | null = null;
  const visit = (v: unknown): void => {
    if (typeof v !== 'object' || v === null || found !== null) return;
    if (Array.isArray(v)) {
      for (const x of v) visit(x);
      return;
    }
    if ((v as { kind?: unknown }).kind === 'literal') {
      const span = spanOf(query, v);
      if (span !== undefined && span.start === start && span.end === end) found = v as LiteralExpr;
      return;
    }
    for (const x of Object.values(v)) visit(x);
  };
  visit(tree);
  return found;
}

/** `v` with the mapped nodes replaced, sharing every subtree that holds none of them. */
function substitute(v: unknown, nodes: ReadonlyMap<object, LiteralExpr>): unknown {
  if (typeof v !== 'object' || v === null) return v;
  const replaced = nodes.get(v);
  if (replaced !== undefined) return replaced;
  if (Array.isArray(v)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < v.length; i++) {
      const x = substitute(v[i], nodes);
      if (x !== v[i]) (out ??= v.slice())[i] = x;
    }
    return out ?? v;
  }
  let out: Record<string, unknown> | null = null;
  for (const key in v) {
    const before = (v as Record<string, unknown>)[key];
    const x = substitute(before, nodes);
    if (x !== before) (out ??= { ...(v as Record<string, unknown>) })[key] = x;
  }
  return out ?? v;
}

/** The text with another value in every lifted string and number (dates and points kept). */
function variantText(text: string, lifted: readonly LiftedLiteral[]): string {
  let out = '';
  let copied = 0;
  for (const l of lifted) {
    const other = l.kind === 'string' ? `${l.image.slice(0, -1)}x'` : l.kind === 'number' || l.kind === 'count' ? `${l.image}1` : l.image;
    out += text.slice(copied, l.at) + other;
    copied = l.at + l.image.length;
  }
  return out + text.slice(copied);
}

/** Structural equality of two parse trees (plain objects, arrays and primitives). */
function sameTree(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return Number.isNaN(a) && Number.isNaN(b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    if (!Object.hasOwn(b, k) || !sameTree((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  }
  return true;
}
