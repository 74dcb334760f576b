/**
 * Resolves a child segment loaded with its parent link kept as text (`deferParent`, a worker
 * thread) against the Property segment: the same ParentKeyColumn the sequential loader builds.
 * Returns null when some record's listing is missing; the caller then loads the file again the
 * sequential way, which reports (or skips) those records exactly as a sequential load would.
 */
import { CATALOG } from '../schema/catalog.js';
import { ParentKeyColumn, Utf8TextColumn } from './columns.js';
import type { Table } from './table.js';

/** A child's listing rows (-1: none) and the link text of rows that link to no listing (Media of another resource). */
export interface ParentLinks {
  readonly parentRow: Int32Array;
  readonly unlinked: Map<number, string> | null;
}

export function linkToParent(child: Table, parent: Table): Table | null {
  const link = CATALOG[child.resource].parent;
  if (link === null) return child;
  const links = parentLinks(child, (bytes, s, e) => parent.rowOfKeyBytes(bytes, s, e));
  if (links === 'absent') return child;
  if (links === null) return null;
  return child.withColumn(link.field, new ParentKeyColumn(links.parentRow, parent.keyColumn, links.unlinked));
}

/**
 * The listing row of each child row, by `rowOfKey` (the listing's row for a key's bytes, or -1):
 * null when a row that must link does not; 'absent' when the child has no link column and no row
 * must link (its table then stays as loaded).
 */
export function parentLinks(child: Table, rowOfKey: (bytes: Uint8Array, s: number, e: number) => number): ParentLinks | 'absent' | null {
  const link = CATALOG[child.resource].parent;
  if (link === null) return 'absent';
  const text = child.column(link.field);
  const cond = link.when === null ? null : child.columnOf(link.when.field, 'dictionary');
  const condCode = link.when === null || cond === undefined || cond === null ? -1 : cond.dictionary.indexOf(link.when.equals);
  const linkable = (row: number): boolean => (link.when === null ? true : condCode > 0 && cond!.codes[row] === condCode);
  const n = child.rowCount;
  if (text === undefined) {
    for (let row = 0; row < n; row++) if (linkable(row)) return null;
    return 'absent';
  }
  if (!(text instanceof Utf8TextColumn)) throw new Error(`${child.resource}.${link.field} was not loaded as text`);
  const parentRow = new Int32Array(n).fill(-1);
  let unlinked: Map<number, string> | null = null;
  let lastStart = -1;
  let lastEnd = -1;
  let lastRow = -1;
  const { bytes, offsets } = text;
  for (let row = 0; row < n; row++) {
    const isNull = text.isNull(row);
    if (!linkable(row)) {
      if (!isNull) (unlinked ??= new Map()).set(row, text.get(row)!);
      continue;
    }
    if (isNull) return null;
    const s = offsets[row];
    const e = offsets[row + 1];
    let p: number;
    if (lastStart >= 0 && e - s === lastEnd - lastStart && bytes.compare(bytes, lastStart, lastEnd, s, e) === 0) p = lastRow;
    else {
      p = rowOfKey(bytes, s, e);
      lastStart = s;
      lastEnd = e;
      lastRow = p;
    }
    if (p < 0) return null;
    parentRow[row] = p;
  }
  return { parentRow, unlinked };
}
