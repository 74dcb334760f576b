/**
 * The walk operator: the first rows of an order (the key order, or a sorted permutation) that the
 * filter allows, stopping as soon as the page (plus one row, to know whether more remain) is full.
 */
import type { Bound } from '../plan/bound.js';
import type { Table } from '../store/table.js';
import { partitionPoint } from '../util/binary-search.js';
import { getBit } from '../util/bits.js';

/** The first `need` rows of `order`, from position `from` on, that `keep` allows. */
export function walkOrder(order: Uint32Array, from: number, keep: (row: number) => boolean, need: number): Uint32Array {
  const out: number[] = [];
  for (let i = from; i < order.length && out.length < need; i++) if (keep(order[i])) out.push(order[i]);
  return Uint32Array.from(out);
}

/** The first `need` rows of an order whose bit is set. */
export function walkBits(order: Uint32Array, bits: Uint32Array, need: number): Uint32Array {
  const out: number[] = [];
  for (let i = 0; i < order.length && out.length < need; i++) if (getBit(bits, order[i])) out.push(order[i]);
  return Uint32Array.from(out);
}

/**
 * The first position of the key order that top-level `Key gt 'k'` / `Key ge 'k'` conjuncts allow
 * (their largest bound; rows before it fail them), or 0: keyset paging starts there. The walk
 * still applies the whole filter.
 */
export function keyLowerBound(table: Table, order: Uint32Array, top: readonly Bound[]): number {
  let bound: string | null = null;
  for (const e of top) {
    if (e.kind !== 'compare' || (e.op !== 'gt' && e.op !== 'ge') || e.left.kind !== 'field' || e.left.field.name !== table.schema.key) continue;
    if (e.right.kind !== 'const' || typeof e.right.value !== 'string') continue;
    if (bound === null || e.right.value > bound) bound = e.right.value;
  }
  if (bound === null) return 0;
  const b = bound;
  return partitionPoint(0, order.length, (i) => table.keyOf(order[i]) < b);
}
