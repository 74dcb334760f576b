/**
 * Whether a batch fits the table it is appended to, checked before anything is written: the
 * `SchemaMismatch` error, the first row of a batch column that holds a value (a column of nulls
 * imposes no type), and the field types a table's field can take a batch's values of.
 */
import { TableSchema } from '../../schema/table-schema.js';
import type { FieldDef, ResourceName } from '../../schema/types.js';
import { ParentKeyColumn, type Column } from '../columns.js';
import { DataError } from '../errors.js';
import type { Table } from '../table.js';

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

/**
 * The fields a batch of `m` rows carries values of that the schema lacks, in the batch's order
 * (a field of nulls only is not added); SchemaMismatch for a derived or link field, which a batch
 * can never add. The change writer and a PostgreSQL write (src/pg/write.ts) both grow a table by them.
 */
export function addedFields(schema: TableSchema, batch: Table, m: number): FieldDef[] {
  const added: FieldDef[] = [];
  for (const f of batch.schema.fields) {
    if (schema.indexOf(f.name) >= 0) continue;
    const src = batch.column(f.name)!;
    if (firstValue(src, m) < 0) continue;
    if (src.kind === 'point' || src.kind === 'daysOnMarket' || src instanceof ParentKeyColumn) {
      throw schemaMismatch(schema.resource, f.name, `the ${schema.resource} table has no field ${f.name}, and it cannot be added by a batch`);
    }
    added.push(f);
  }
  return added;
}

/** The schema with the fields added, ordered as the loader orders fields (as a data set whose records carried them from the start would have them). */
export function withFields(schema: TableSchema, added: readonly FieldDef[]): TableSchema {
  if (added.length === 0) return schema;
  const fields = [...schema.fields, ...added];
  return new TableSchema(
    schema.resource,
    schema.key,
    fields.filter((f) => f.origin !== 'local'),
    fields.filter((f) => f.origin === 'local'),
  );
}

/**
 * The batch column of the table's field `def` when the batch holds a value of it (null when it
 * holds none), SchemaMismatch when the field cannot hold the batch's values.
 */
export function fittingColumn(resource: ResourceName, def: FieldDef, batch: Table, m: number): Column | null {
  const batchDef = batch.schema.field(def.name);
  const col = batchDef === undefined ? undefined : batch.column(def.name);
  if (col === undefined) return null;
  const row = firstValue(col, m);
  if (row < 0) return null;
  if (!typeFits(def, batchDef!)) {
    throw schemaMismatch(
      resource,
      def.name,
      `${def.name} is ${typeName(def)} in the ${resource} table; the batch's values are ${typeName(batchDef!)} (batch row ${row + 1})`,
    );
  }
  return col;
}
