/**
 * The range operator: the slice of a numeric field's sorted permutation (ascending, nulls first)
 * that top-level comparisons of the field with constants allow (`X ge 3 and X lt 9`), found by
 * binary search instead of rejecting rows one by one. Nulls never satisfy a range, so they are cut
 * too. An unranged slice (no such comparison) is the whole permutation, nulls included.
 */
import type { SplitOrder } from '../access/split-order.js';
import type { Bound } from '../plan/bound.js';
import type { Table } from '../store/table.js';
import { partitionPoint } from '../util/binary-search.js';
import { getBit } from '../util/bits.js';
import { Uint32List } from '../util/uint32-list.js';

export interface Slice {
  readonly start: number;
  readonly end: number;
}

export function rangeOf(perm: SplitOrder, table: Table, field: string, top: readonly Bound[]): Slice {
  const col = table.column(field) as { values: Float64Array; validity: Uint32Array };
  let lo = -Infinity;
  let hi = Infinity;
  let loOpen = false;
  let hiOpen = false;
  let ranged = false;
  for (const e of top) {
    if (e.kind !== 'compare' || e.left.kind !== 'field' || e.left.field.name !== field || e.right.kind !== 'const' || typeof e.right.value !== 'number')
      continue;
    if (e.op === 'ne') continue; // no bound, and true for a null: it must not cut the nulls
    const v = e.right.value;
    ranged = true;
    if ((e.op === 'ge' || e.op === 'gt') && (v > lo || (v === lo && e.op === 'gt'))) [lo, loOpen] = [v, e.op === 'gt'];
    if ((e.op === 'le' || e.op === 'lt') && (v < hi || (v === hi && e.op === 'lt'))) [hi, hiOpen] = [v, e.op === 'lt'];
    if (e.op === 'eq') {
      if (v > lo) [lo, loOpen] = [v, false];
      if (v < hi) [hi, hiOpen] = [v, false];
    }
  }
  if (!ranged) return { start: 0, end: perm.length };
  // first position whose (valid) value passes `pred`
  const first = (pred: (v: number) => boolean): number =>
    partitionPoint(0, perm.length, (m) => {
      const row = perm.at(m);
      return !getBit(col.validity, row) || !pred(col.values[row]);
    });
  const start = first((v) => (loOpen ? v > lo : v >= lo));
  const end = first((v) => (hiOpen ? v >= hi : v > hi));
  return { start, end: Math.max(start, end) };
}

/** Every row of the slice that `accept` allows, ascending by row. */
export function collectRange(perm: SplitOrder, slice: Slice, accept: (row: number) => boolean): Uint32Array {
  const out = new Uint32List(slice.end - slice.start);
  const c = perm.cursor(slice.start);
  for (let i = slice.start; i < slice.end; i++) {
    const row = c.next();
    if (accept(row)) out.push(row);
  }
  return out.done().sort();
}
