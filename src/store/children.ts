/**
 * A child resource grouped by listing: the children of Property row p are
 * rows[offsets[p], offsets[p + 1]) of the child table, already in the resource's default expand
 * order (Media by Order, OpenHouse by OpenHouseStartTime, PropertyChange by ModificationTimestamp
 * descending; nulls lowest; ties by the child's key), so a listing's children cost O(1) to find
 * and nothing to sort when the request names no order. Children of no listing are not grouped.
 */
import type { OrderKey } from '../schema/types.js';
import { getBit } from './bits.js';
import { compareUtf8 } from './bytes.js';
import { ParentKeyColumn } from './columns.js';
import type { Table } from './table.js';

export class ChildIndex {
  constructor(
    /** Per Property row p (plus one): children are rows[offsets[p], offsets[p + 1]). */
    readonly offsets: Uint32Array,
    readonly rows: Uint32Array,
  ) {}

  count(parentRow: number): number {
    return this.offsets[parentRow + 1] - this.offsets[parentRow];
  }

  /** The child rows of a listing (a view; no copy). */
  childrenOf(parentRow: number): Uint32Array {
    return this.rows.subarray(this.offsets[parentRow], this.offsets[parentRow + 1]);
  }

  get byteLength(): number {
    return this.offsets.byteLength + this.rows.byteLength;
  }
}

interface SortKey {
  readonly values: Float64Array | null;
  readonly validity: Uint32Array | null;
  readonly descending: boolean;
}

export function buildChildIndex(child: Table, parentCount: number, linkField: string, order: readonly OrderKey[]): ChildIndex {
  const offsets = new Uint32Array(parentCount + 1);
  const link = child.column(linkField);
  if (!(link instanceof ParentKeyColumn)) return new ChildIndex(offsets, new Uint32Array(0));
  const parentRow = link.parentRow;
  const n = child.rowCount;
  let linked = 0;
  for (let r = 0; r < n; r++) {
    const p = parentRow[r];
    if (p >= 0) {
      offsets[p + 1]++;
      linked++;
    }
  }
  for (let p = 0; p < parentCount; p++) offsets[p + 1] += offsets[p];
  const rows = new Uint32Array(linked);
  const next = offsets.slice(0, parentCount);
  for (let r = 0; r < n; r++) {
    const p = parentRow[r];
    if (p >= 0) rows[next[p]++] = r;
  }

  const keys: SortKey[] = order.map((o) => {
    const c = child.column(o.field);
    const numeric = c !== undefined && (c.kind === 'number' || c.kind === 'timestamp' || c.kind === 'date');
    return { values: numeric ? c.values : null, validity: numeric ? c.validity : null, descending: o.descending };
  });
  const key = child.keyColumn;
  const compare = (a: number, b: number): number => {
    for (const k of keys) {
      if (k.values === null || k.validity === null) continue;
      const na = !getBit(k.validity, a);
      const nb = !getBit(k.validity, b);
      let d: number;
      if (na || nb) d = na === nb ? 0 : na ? -1 : 1;
      else d = k.values[a] < k.values[b] ? -1 : k.values[a] > k.values[b] ? 1 : 0;
      if (d !== 0) return k.descending ? -d : d;
    }
    const ko = key.offsets;
    return compareUtf8(key.bytes, ko[a], ko[a + 1], key.bytes, ko[b], ko[b + 1]);
  };

  for (let p = 0; p < parentCount; p++) {
    const s = offsets[p];
    const e = offsets[p + 1];
    if (e - s < 2) continue;
    if (e - s <= 48) {
      // Insertion sort: feeds usually send children in order already, so this is linear.
      for (let i = s + 1; i < e; i++) {
        const r = rows[i];
        let j = i - 1;
        while (j >= s && compare(rows[j], r) > 0) {
          rows[j + 1] = rows[j];
          j--;
        }
        rows[j + 1] = r;
      }
    } else {
      rows.subarray(s, e).sort(compare);
    }
  }
  return new ChildIndex(offsets, rows);
}
