/**
 * The text-index operator: rows whose text field equals a value (`ListingKey eq 'k'` through the
 * key index, `ListingId eq 'x'` through a hash of the column), that `accept` allows, ascending.
 */
import type { TableAccess } from '../access/access.js';

export function collectText(access: TableAccess, field: string, value: string, accept: (row: number) => boolean): Uint32Array {
  return Uint32Array.from(access.textRows(field, value)!.filter(accept));
}
