/**
 * The text-index operator: rows whose text field equals a value (`ListingKey eq 'k'` through the
 * key index, `ListingId eq 'x'` through an index of the column, a child's link `ResourceRecordKey eq 'k'`
 * through the listing's children), that `accept` allows, ascending.
 */
import type { StoreAccess } from '../access/access.js';
import type { Table } from '../store/table.js';

export function collectText(access: StoreAccess, table: Table, field: string, value: string, accept: (row: number) => boolean): Uint32Array {
  return Uint32Array.from(access.textRows(table, field, value)!.filter(accept));
}
