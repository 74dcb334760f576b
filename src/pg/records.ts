/**
 * Rows back to records: a select list over a table's columns and the decoder of its part of an
 * array-mode row (`rowMode: 'array'`), giving exactly the record the in-memory `Table.record`
 * gives (field order, nulls, `[]` for an empty collection, timestamps as the feed wrote them,
 * dates `YYYY-MM-DD`, GeoJSON points, DaysOnMarket from the clock). Every column comes through an
 * explicit cast to a type node-postgres turns into a JavaScript number, boolean, string or string
 * array by itself (float8, integer, boolean, text, text[]), so no global type parser is changed
 * and nothing is rounded on the way: numeric and bigint values are doubles in the engine already.
 */
import type { TableSchema } from '../schema/table-schema.js';
import type { FieldDef } from '../schema/types.js';
import { daysOnMarket, type JsonValue } from '../store/columns.js';
import { CANONICAL_STYLE, formatDate, formatTimestamp } from '../store/temporal.js';
import { column, isStored, quote, textColumn } from './layout.js';

/** The field DaysOnMarket is computed from (src/store/derive.ts). */
const DAYS_ON_MARKET_REFERENCE = 'service_DaysOnMarketReferenceTimestamp';

export interface RecordReader {
  /** The select list (comma-separated expressions over the table alias). */
  readonly columns: string;
  /** How many values of a row the select list makes. */
  readonly width: number;
  /** The record of the row's values from `offset` on; `nowMs` is the clock for DaysOnMarket. */
  decode(row: readonly unknown[], offset: number, nowMs: number): Record<string, JsonValue>;
}

/** One field's select expressions and the decoder of their values (row[at], row[at + 1], ...). */
interface FieldPart {
  readonly name: string;
  readonly expressions: readonly string[];
  readonly decode: (row: readonly unknown[], at: number, nowMs: number) => JsonValue;
}

/** Epoch milliseconds of a timestamptz, exact (extract gives numeric, and the instants are whole milliseconds). */
const epochMs = (expression: string): string => `(extract(epoch from ${expression}) * 1000)::float8`;

function fieldPart(field: FieldDef, schema: TableSchema, alias: string): FieldPart {
  const name = field.name;
  const col = `${alias}.${column(field)}`;
  if (!isStored(field)) {
    // DaysOnMarket: computed from its reference instant and the caller's clock, as the engine does
    const reference = schema.field(DAYS_ON_MARKET_REFERENCE);
    if (reference === undefined) return { name, expressions: [], decode: () => null };
    return {
      name,
      expressions: [epochMs(`${alias}.${column(reference)}`)],
      decode: (row, at, nowMs) => {
        const ms = row[at] as number | null;
        return ms === null ? null : daysOnMarket(ms, nowMs);
      },
    };
  }
  if (field.collection) return { name, expressions: [`${col}::text[]`], decode: (row, at) => (row[at] as string[] | null) ?? [] };
  switch (field.type) {
    case 'Edm.String':
      return { name, expressions: [`${col}::text`], decode: (row, at) => row[at] as string | null };
    case 'Edm.Boolean':
      return { name, expressions: [col], decode: (row, at) => row[at] as boolean | null };
    case 'Edm.Date':
      // whole days since the epoch, formatted as the engine formats them (year 0000 included)
      return {
        name,
        expressions: [`(${col} - DATE '1970-01-01')`],
        decode: (row, at) => (row[at] === null ? null : formatDate(row[at] as number)),
      };
    case 'Edm.DateTimeOffset':
      return {
        name,
        expressions: [epochMs(col), `${alias}.${textColumn(field)}`],
        decode: (row, at) => {
          const ms = row[at] as number | null;
          if (ms === null) return null;
          return (row[at + 1] as string | null) ?? formatTimestamp(ms, CANONICAL_STYLE);
        },
      };
    case 'Edm.GeographyPoint':
      return {
        name,
        expressions: [`ST_X(${col}::geometry)`, `ST_Y(${col}::geometry)`],
        decode: (row, at) => (row[at] === null ? null : { type: 'Point', coordinates: [row[at] as number, row[at + 1] as number] }),
      };
    default:
      // integers, numeric and float8 alike: the engine holds every number as a double
      return { name, expressions: [`${col}::float8`], decode: (row, at) => row[at] as number | null };
  }
}

/** Sets a record's property; `__proto__` (a possible local field name) as an own property, not the prototype. */
function put(record: Record<string, JsonValue>, name: string, value: JsonValue): void {
  if (name === '__proto__') Object.defineProperty(record, name, { value, enumerable: true, writable: true, configurable: true });
  else record[name] = value;
}

/**
 * The reader of a table's records: every field of the schema (`fields` null) or the given ones, in
 * schema order; names the schema lacks come last, as null (Table.record's rules).
 */
export function recordReader(schema: TableSchema, alias: string, fields: readonly string[] | null): RecordReader {
  const a = quote(alias);
  const wanted = fields === null ? null : new Set(fields);
  const parts: FieldPart[] = [];
  for (const f of schema.fields) if (wanted === null || wanted.has(f.name)) parts.push(fieldPart(f, schema, a));
  const missing = fields === null ? [] : [...new Set(fields)].filter((f) => schema.field(f) === undefined);
  const offsets: number[] = [];
  let width = 0;
  for (const p of parts) {
    offsets.push(width);
    width += p.expressions.length;
  }
  return {
    columns: parts.flatMap((p) => p.expressions).join(', '),
    width,
    decode(row, offset, nowMs) {
      const record: Record<string, JsonValue> = {};
      for (let i = 0; i < parts.length; i++) put(record, parts[i].name, parts[i].decode(row, offset + offsets[i], nowMs));
      for (const name of missing) put(record, name, null);
      return record;
    },
  };
}
