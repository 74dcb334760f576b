/**
 * The bound expression: the AST after the binder resolved names against a resource schema and
 * checked types. Runtime values are numbers (integers, decimals, dates as days since the epoch,
 * timestamps as epoch ms), strings, booleans and null.
 */
import type { ArithmeticOperator, CompareOperator } from '../odata/ast.js';
import type { FieldDef } from '../schema/types.js';
import type { SearchFieldName } from '../schema/search-fields.js';

/** Value types after binding. `null` is the type of the null literal (compatible with any). */
export type ValueType = 'string' | 'integer' | 'decimal' | 'boolean' | 'date' | 'dateTimeOffset' | 'point' | 'null';

export type Value = string | number | boolean | null;

export type BoundFunction =
  | 'contains'
  | 'startswith'
  | 'endswith'
  | 'tolower'
  | 'toupper'
  | 'length'
  | 'indexof'
  | 'substring'
  | 'trim'
  | 'concat'
  | 'year'
  | 'month'
  | 'day'
  | 'hour'
  | 'minute'
  | 'second'
  | 'date'
  | 'now';

export type Bound =
  | { readonly kind: 'const'; readonly type: ValueType; readonly value: Value }
  | { readonly kind: 'field'; readonly type: ValueType; readonly field: FieldDef }
  /** The element of the collection a lambda ranges over. */
  | { readonly kind: 'var'; readonly type: ValueType; readonly name: string }
  | { readonly kind: 'call'; readonly type: ValueType; readonly fn: BoundFunction; readonly args: readonly Bound[] }
  | { readonly kind: 'compare'; readonly type: 'boolean'; readonly op: CompareOperator; readonly left: Bound; readonly right: Bound }
  | { readonly kind: 'and' | 'or'; readonly type: 'boolean'; readonly left: Bound; readonly right: Bound }
  | { readonly kind: 'not'; readonly type: 'boolean'; readonly operand: Bound }
  | { readonly kind: 'arith'; readonly type: ValueType; readonly op: ArithmeticOperator; readonly left: Bound; readonly right: Bound }
  | { readonly kind: 'negate'; readonly type: ValueType; readonly operand: Bound }
  /** `X in (v1, v2)`: the values are constants. */
  | { readonly kind: 'in'; readonly type: 'boolean'; readonly left: Bound; readonly values: readonly Value[] }
  /** `'Dishwasher' in Appliances`: membership of a value in a collection field. */
  | { readonly kind: 'member'; readonly type: 'boolean'; readonly value: Bound; readonly collection: FieldDef }
  | {
      readonly kind: 'lambda';
      readonly type: 'boolean';
      readonly op: 'any' | 'all';
      readonly collection: FieldDef;
      readonly variable: string | null;
      readonly predicate: Bound | null;
    }
  | {
      readonly kind: 'search';
      readonly type: 'boolean';
      readonly field: SearchFieldName;
      readonly text: string;
      readonly minMatches: number | undefined;
      /** Position of this call among the filter's search.text calls (for relevance). */
      readonly ordinal: number;
    }
  | {
      readonly kind: 'geo';
      readonly type: 'boolean';
      readonly field: FieldDef;
      readonly lon: number;
      readonly lat: number;
      readonly meters: number;
    };

export type BoundKind = Bound['kind'];

/** The direct sub-expressions of a bound expression (a lambda's predicate included), for walks over a whole filter. */
export function operandsOf(e: Bound): readonly Bound[] {
  switch (e.kind) {
    case 'and':
    case 'or':
    case 'compare':
    case 'arith':
      return [e.left, e.right];
    case 'not':
    case 'negate':
      return [e.operand];
    case 'call':
      return e.args;
    case 'in':
      return [e.left];
    case 'member':
      return [e.value];
    case 'lambda':
      return e.predicate ? [e.predicate] : [];
    case 'const':
    case 'field':
    case 'var':
    case 'search':
    case 'geo':
      return [];
  }
}
