/**
 * Compiles a bound expression to closures over a table's columns (no eval, no new Function).
 * Values follow OData 4.01 null rules (SERVICE.md §3): comparisons are two-valued (`null eq null`
 * is true, `gt`/`lt` with a null are false, `ge`/`le` are true only for two nulls), functions and
 * arithmetic of a null give null, and/or/not are three-valued. A row matches only when the filter
 * evaluates to true.
 */
import { getBit } from '../util/bits.js';
import type { Column } from '../store/columns.js';
import type { Table } from '../store/table.js';
import type { Bound, Value } from '../plan/bound.js';

const DAY_MS = 86_400_000;

export type Evaluator = (row: number) => Value;

export interface CompileContext {
  readonly table: Table;
  /** The engine clock's now for this query (DaysOnMarket, now()). */
  readonly nowMs: number;
  /** Membership of each search.text call (by ordinal), precomputed. */
  readonly searchHit: (ordinal: number, row: number) => boolean;
  /** The test of one geo predicate, asked for once per compiled node. */
  readonly geoTest: (node: Extract<Bound, { kind: 'geo' }>) => (row: number) => boolean;
}

/** Reads a scalar column as runtime values. */
export function columnReader(column: Column, nowMs: number): Evaluator {
  switch (column.kind) {
    case 'number':
    case 'date':
    case 'timestamp': {
      const { values, validity } = column;
      return (row) => (getBit(validity, row) ? values[row] : null);
    }
    case 'boolean':
      return (row) => column.get(row);
    case 'dictionary': {
      const { codes, dictionary } = column;
      return (row) => dictionary[codes[row]];
    }
    case 'text':
      return (row) => column.get(row);
    case 'daysOnMarket':
      return (row) => column.get(row, nowMs);
    case 'collection':
    case 'point':
      throw new Error(`a ${column.kind} column has no scalar value`);
  }
}

/** Two-valued comparison with OData's null rules. */
export function compareValues(op: string, a: Value, b: Value): boolean {
  if (a === null || b === null) {
    const both = a === null && b === null;
    switch (op) {
      case 'eq':
      case 'ge':
      case 'le':
        return both;
      case 'ne':
        return !both;
      default:
        return false;
    }
  }
  switch (op) {
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
    default:
      return a <= b;
  }
}

function utcPart(fn: string, value: number, isDate: boolean): number {
  const d = new Date(isDate ? value * DAY_MS : value);
  switch (fn) {
    case 'year':
      return d.getUTCFullYear();
    case 'month':
      return d.getUTCMonth() + 1;
    case 'day':
      return d.getUTCDate();
    case 'hour':
      return d.getUTCHours();
    case 'minute':
      return d.getUTCMinutes();
    default:
      return d.getUTCSeconds();
  }
}

/** Characters as code points (OData counts characters, not UTF-16 units). */
const hasSurrogates = (s: string): boolean => /[\ud800-\udfff]/.test(s);
const codePoints = (s: string): string[] => Array.from(s);

export function compile(node: Bound, ctx: CompileContext, vars: Map<string, { value: Value }> = new Map()): Evaluator {
  const c = (n: Bound): Evaluator => compile(n, ctx, vars);
  switch (node.kind) {
    case 'const': {
      const v = node.value;
      return () => v;
    }
    case 'field': {
      const column = ctx.table.column(node.field.name);
      if (!column) return () => null; // declared in the catalog but absent from this data set
      return columnReader(column, ctx.nowMs);
    }
    case 'var': {
      const slot = vars.get(node.name)!;
      return () => slot.value;
    }
    case 'not': {
      const f = c(node.operand);
      return (row) => {
        const v = f(row);
        return v === null ? null : !v;
      };
    }
    case 'and': {
      const l = c(node.left);
      const r = c(node.right);
      return (row) => {
        const a = l(row);
        if (a === false) return false;
        const b = r(row);
        if (b === false) return false;
        return a === null || b === null ? null : true;
      };
    }
    case 'or': {
      const l = c(node.left);
      const r = c(node.right);
      return (row) => {
        const a = l(row);
        if (a === true) return true;
        const b = r(row);
        if (b === true) return true;
        return a === null || b === null ? null : false;
      };
    }
    case 'compare':
      return compileCompare(node, ctx, c);
    case 'in': {
      const l = c(node.left);
      const values = node.values;
      const set = new Set(values.filter((v) => v !== null));
      const hasNull = values.includes(null);
      return (row) => {
        const v = l(row);
        return v === null ? hasNull : set.has(v);
      };
    }
    case 'member': {
      const value = c(node.value);
      const column = ctx.table.column(node.collection.name);
      if (!column || column.kind !== 'collection') return () => false;
      const { offsets, codes, dictionary, validity } = column;
      return (row) => {
        const v = value(row);
        if (v === null || !getBit(validity, row)) return false;
        for (let i = offsets[row]; i < offsets[row + 1]; i++) if (dictionary[codes[i]] === v) return true;
        return false;
      };
    }
    case 'lambda': {
      const column = ctx.table.column(node.collection.name);
      const any = node.op === 'any';
      if (!column || column.kind !== 'collection') return () => !any;
      const { offsets, codes, dictionary, validity } = column;
      if (node.predicate === null || node.variable === null) {
        return (row) => getBit(validity, row) && offsets[row + 1] > offsets[row];
      }
      const slot = { value: null as Value };
      const inner = new Map(vars);
      inner.set(node.variable, slot);
      const pred = compile(node.predicate, ctx, inner);
      return (row) => {
        let sawNull = false;
        if (getBit(validity, row)) {
          for (let i = offsets[row]; i < offsets[row + 1]; i++) {
            slot.value = dictionary[codes[i]];
            const v = pred(row);
            if (v === null) sawNull = true;
            else if (v === any) return any;
          }
        }
        return sawNull ? null : !any;
      };
    }
    case 'search': {
      const ordinal = node.ordinal;
      return (row) => ctx.searchHit(ordinal, row);
    }
    case 'geo':
      return ctx.geoTest(node);
    case 'negate': {
      const f = c(node.operand);
      return (row) => {
        const v = f(row);
        return v === null ? null : -(v as number);
      };
    }
    case 'arith': {
      const l = c(node.left);
      const r = c(node.right);
      const integer = node.type === 'integer';
      switch (node.op) {
        case 'add':
          return (row) => {
            const a = l(row);
            const b = r(row);
            return a === null || b === null ? null : (a as number) + (b as number);
          };
        case 'sub':
          return (row) => {
            const a = l(row);
            const b = r(row);
            return a === null || b === null ? null : (a as number) - (b as number);
          };
        case 'mul':
          return (row) => {
            const a = l(row);
            const b = r(row);
            return a === null || b === null ? null : (a as number) * (b as number);
          };
        case 'div':
          return (row) => {
            const a = l(row);
            const b = r(row);
            if (a === null || b === null || b === 0) return null;
            const q = (a as number) / (b as number);
            return integer ? Math.trunc(q) : q;
          };
        case 'mod':
          return (row) => {
            const a = l(row);
            const b = r(row);
            if (a === null || b === null || b === 0) return null;
            return (a as number) % (b as number);
          };
      }
      break;
    }
    case 'call':
      return compileCall(node, ctx, c);
  }
  throw new Error('unreachable');
}

/** The table of `constantValue`: an expression that reads no row never asks it for a column. */
const NO_TABLE = { column: () => undefined } as unknown as Table;

/**
 * The value of an expression that reads no row (literals, and functions and operators over them,
 * now()), exactly as the evaluator computes it: the PostgreSQL backend (src/pg/filter.ts) sends
 * such a subtree as one bind parameter instead of restating the arithmetic in SQL.
 */
export function constantValue(node: Bound, nowMs: number): Value {
  return compile(node, { table: NO_TABLE, nowMs, searchHit: () => false, geoTest: () => () => false })(0);
}

function compileCompare(node: Extract<Bound, { kind: 'compare' }>, ctx: CompileContext, c: (n: Bound) => Evaluator): Evaluator {
  const { op } = node;
  if (node.left.type === 'point') {
    // a point compares only with null (the binder puts it on the left): its validity bit
    const column = node.left.kind === 'field' ? ctx.table.column(node.left.field.name) : undefined;
    const present = op === 'ne';
    if (!column || column.kind !== 'point') return () => !present; // absent from this data set: null everywhere
    const { validity } = column;
    return (row) => getBit(validity, row) === present;
  }
  // Fast path: a column against a constant, reading typed arrays directly.
  if (node.left.kind === 'field' && node.right.kind === 'const' && node.right.value !== null) {
    const column = ctx.table.column(node.left.field.name);
    const k = node.right.value;
    if (column && (column.kind === 'number' || column.kind === 'date' || column.kind === 'timestamp') && typeof k === 'number') {
      const { values, validity } = column;
      switch (op) {
        case 'eq':
          return (row) => getBit(validity, row) && values[row] === k;
        case 'ne':
          return (row) => !getBit(validity, row) || values[row] !== k;
        case 'gt':
          return (row) => getBit(validity, row) && values[row] > k;
        case 'ge':
          return (row) => getBit(validity, row) && values[row] >= k;
        case 'lt':
          return (row) => getBit(validity, row) && values[row] < k;
        case 'le':
          return (row) => getBit(validity, row) && values[row] <= k;
      }
    }
    if (column && column.kind === 'dictionary' && typeof k === 'string' && (op === 'eq' || op === 'ne')) {
      const code = column.dictionary.indexOf(k);
      const { codes } = column;
      if (code < 0) return op === 'eq' ? () => false : () => true;
      return op === 'eq' ? (row) => codes[row] === code : (row) => codes[row] !== code;
    }
  }
  const l = c(node.left);
  const r = c(node.right);
  return (row) => compareValues(op, l(row), r(row));
}

function compileCall(node: Extract<Bound, { kind: 'call' }>, ctx: CompileContext, c: (n: Bound) => Evaluator): Evaluator {
  const args = node.args.map(c);
  const a0 = args[0];
  const a1 = args[1];
  const str2 =
    (f: (s: string, t: string) => Value): Evaluator =>
    (row) => {
      const s = a0(row);
      const t = a1(row);
      return s === null || t === null ? null : f(s as string, t as string);
    };
  const str1 =
    (f: (s: string) => Value): Evaluator =>
    (row) => {
      const s = a0(row);
      return s === null ? null : f(s as string);
    };
  switch (node.fn) {
    case 'contains':
      return str2((s, t) => s.includes(t));
    case 'startswith':
      return str2((s, t) => s.startsWith(t));
    case 'endswith':
      return str2((s, t) => s.endsWith(t));
    case 'concat':
      return str2((s, t) => s + t);
    case 'indexof':
      return str2((s, t) => {
        const unit = s.indexOf(t);
        return unit <= 0 || !hasSurrogates(s) ? unit : codePoints(s.slice(0, unit)).length;
      });
    case 'tolower':
      return str1((s) => s.toLowerCase());
    case 'toupper':
      return str1((s) => s.toUpperCase());
    case 'trim':
      return str1((s) => s.trim());
    case 'length':
      return str1((s) => (hasSurrogates(s) ? codePoints(s).length : s.length));
    case 'substring': {
      const a2 = args[2];
      return (row) => {
        const s = a0(row);
        const start = a1(row);
        const len = a2 ? a2(row) : undefined;
        if (s === null || start === null || len === null) return null;
        const chars = hasSurrogates(s as string) ? codePoints(s as string) : null;
        const from = Math.max(0, start as number);
        if (chars) return chars.slice(from, len === undefined ? undefined : from + Math.max(0, len as number)).join('');
        return len === undefined ? (s as string).slice(from) : (s as string).slice(from, from + Math.max(0, len as number));
      };
    }
    case 'year':
    case 'month':
    case 'day':
    case 'hour':
    case 'minute':
    case 'second': {
      const isDate = node.args[0].type === 'date';
      const fn = node.fn;
      return (row) => {
        const v = a0(row);
        return v === null ? null : utcPart(fn, v as number, isDate);
      };
    }
    case 'date':
      return (row) => {
        const v = a0(row);
        return v === null ? null : Math.floor((v as number) / DAY_MS);
      };
    case 'now': {
      const now = ctx.nowMs;
      return () => now;
    }
  }
}
