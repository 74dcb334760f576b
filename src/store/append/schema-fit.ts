/**
 * Whether a batch fits the table it is appended to, checked before anything is written: the
 * `SchemaMismatch` error, the first row of a batch column that holds a value (a column of nulls
 * imposes no type), and the field types a table's field can take a batch's values of.
 */
import type { FieldDef, ResourceName } from '../../schema/types.js';
import type { Column } from '../columns.js';
import { DataError } from '../errors.js';

export function schemaMismatch(resource: ResourceName, field: string | null, reason: string): DataError {
  return new DataError({ code: 'SchemaMismatch', file: `${resource} batch`, line: 0, field, reason });
}

/** The first row of a column that holds a value, or -1 (a column of nulls is as good as none). */
export function firstValue(column: Column, rows: number): number {
  for (let r = 0; r < rows; r++) if (!column.isNull(r)) return r;
  return -1;
}

export const typeName = (f: FieldDef): string => (f.collection ? `Collection(${f.type})` : f.type);

/**
 * Whether the table's field can hold the batch's values: the same type, or (local fields, whose
 * batch type was inferred from the batch alone) a type the loader would have widened to the
 * table's: integers into Edm.Decimal, dates and timestamps into Edm.String (kept as written).
 */
export function typeFits(base: FieldDef, batch: FieldDef): boolean {
  if (base.collection !== batch.collection) return false;
  if (base.type === batch.type) return true;
  if (base.origin !== 'local' || base.collection) return false;
  if (base.type === 'Edm.Decimal') return batch.type === 'Edm.Int64';
  if (base.type === 'Edm.String') return batch.type === 'Edm.Date' || batch.type === 'Edm.DateTimeOffset';
  return false;
}
