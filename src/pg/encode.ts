/**
 * Field values as PostgreSQL reads them: the text of each stored column of a record, accepted by
 * the column type's input function, so that the same text serves COPY (src/pg/load.ts, escaped by
 * `copyField`) and a bind parameter `$n::cast` of a write. Two sources give the same text: a
 * loaded table's row (`fieldColumns`, reading the typed columns directly) and a record's JSON
 * value (`encodeField`, `encodeFeedText`, `encodeRecord`); a test checks they agree on every row.
 *
 * | field                   | text                                                                  |
 * |-------------------------|-----------------------------------------------------------------------|
 * | numbers                 | `String(n)`: the shortest text that reads back as the same double; an integer beyond 2^53 in full |
 * | Edm.Boolean             | `t` / `f`                                                             |
 * | Edm.Date                | `YYYY-MM-DD` (year 0000, which PostgreSQL spells `0001-MM-DD BC`, too) |
 * | Edm.DateTimeOffset      | the instant, `YYYY-MM-DDTHH:MM:SS.sssZ`; its `F#text` companion: the feed's text when it differs from that |
 * | Edm.GeographyPoint      | EWKT `SRID=4326;POINT(lon lat)`                                       |
 * | Collection(Edm.String)  | an array literal with every element quoted; absent: `{}`              |
 *
 * A value PostgreSQL cannot hold as the engine does is refused (QueryError `PgUnsupportedValue`):
 * text with a NUL character (PostgreSQL text never holds U+0000) and integers beyond the column's
 * range (an Edm.Int64 beyond bigint's 64 bits).
 */
import { QueryError } from '../errors.js';
import type { EdmType, FieldDef } from '../schema/types.js';
import { isIntegerType } from '../schema/types.js';
import type { TableSchema } from '../schema/table-schema.js';
import type { Column, JsonValue, TimestampColumn } from '../store/columns.js';
import type { Table } from '../store/table.js';
import { CANONICAL_STYLE, DAY_MS, formatDate, formatTimestamp, parseDateString, parseTimestampString } from '../store/temporal.js';
import { getBit } from '../util/bits.js';
import { castType, column, isStored, textColumn } from './layout.js';

/** Days of one 400-year Gregorian cycle: shifting a date by whole cycles keeps its month and day. */
const CYCLE_DAYS = 146_097;
/** Days since 1970-01-01 of 0001-01-01, the first day PostgreSQL writes without `BC`. */
const FIRST_AD_DAY = -719_162;
const INT64_LIMIT = 2 ** 63;
const INT32_LIMIT = 2 ** 31;

function unsupported(where: string, what: string): QueryError {
  return new QueryError(
    'PgUnsupportedValue',
    `${where}: ${what}; PostgreSQL cannot store it as the in-memory engine does, so the data cannot be written there.`,
  );
}

/** Text as PostgreSQL stores it: refused when it holds U+0000 (no PostgreSQL text can). */
function checkedText(text: string, where: string): string {
  if (text.includes('\u0000')) throw unsupported(where, 'the text holds a NUL character (U+0000)');
  return text;
}

/** A number of a field: integer types within their column's range, the rest any finite double. */
function numberText(type: EdmType, n: number, where: string): string {
  if (isIntegerType(type)) {
    const limit = type === 'Edm.Int64' ? INT64_LIMIT : INT32_LIMIT;
    if (!Number.isInteger(n) || n >= limit || n < -limit)
      throw unsupported(where, `${String(n)} is beyond the ${type === 'Edm.Int64' ? 'bigint' : 'integer'} column's range`);
    // beyond 2^53 the shortest text is not the integer itself (String(-(2 ** 63)) is
    // -9223372036854776000, outside bigint): write the double's exact value
    return Number.isSafeInteger(n) ? String(n) : BigInt(n).toString();
  }
  if (!Number.isFinite(n)) throw unsupported(where, `${String(n)} is not a finite number`);
  return String(n);
}

/**
 * The date of a day number (days since 1970-01-01). Years before 1 are written PostgreSQL's way,
 * `YYYY-MM-DD BC` with 1 BC for year 0: the date is moved into year 1 or later by whole 400-year
 * cycles (which keep month and day), formatted, and the year moved back.
 */
function dateParts(days: number): { text: string; bc: boolean } {
  if (days >= FIRST_AD_DAY) return { text: formatDate(days), bc: false };
  const cycles = Math.ceil((FIRST_AD_DAY - days) / CYCLE_DAYS);
  const shifted = formatDate(days + cycles * CYCLE_DAYS);
  const at = shifted.indexOf('-');
  const year = Number(shifted.slice(0, at)) - 400 * cycles;
  return { text: `${String(1 - year).padStart(4, '0')}${shifted.slice(at)}`, bc: true };
}

export function dateText(days: number): string {
  const { text, bc } = dateParts(days);
  return bc ? `${text} BC` : text;
}

/** The instant of epoch ms as timestamptz input (UTC, milliseconds). */
export function timestampText(ms: number): string {
  const days = Math.floor(ms / DAY_MS);
  if (days >= FIRST_AD_DAY) return formatTimestamp(ms, CANONICAL_STYLE);
  const { text } = dateParts(days);
  const time = formatTimestamp(ms - days * DAY_MS, CANONICAL_STYLE).slice(10);
  return `${text}${time} BC`;
}

/** The feed's text of a timestamp when the canonical text of its instant is not it, else null. */
function feedText(ms: number, text: string): string | null {
  return text === formatTimestamp(ms, CANONICAL_STYLE) ? null : text;
}

export function pointText(lon: number, lat: number): string {
  return `SRID=4326;POINT(${String(lon)} ${String(lat)})`;
}

/** One element of an array literal: always quoted, so NULL, empty and spaced elements stay text. */
function arrayElement(text: string): string {
  return `"${text.replace(/[\\"]/g, '\\$&')}"`;
}

/** An array literal of strings (`{}` when empty). */
export function arrayText(elements: readonly string[], where: string): string {
  let out = '{';
  for (let i = 0; i < elements.length; i++) out += (i === 0 ? '' : ',') + arrayElement(checkedText(elements[i], where));
  return `${out}}`;
}

function bad(field: FieldDef, value: unknown): never {
  throw new TypeError(`${field.name}: ${JSON.stringify(value)} is not a value of ${field.collection ? `Collection(${field.type})` : field.type}`);
}

/**
 * The text of a field's column from the record's JSON value (as `Table.record` gives it), or null
 * for SQL NULL; an absent collection is `{}` (the column is never null). It reads every value a
 * feed can carry; a derived instant outside years 0-9999 has a canonical text no ISO 8601 parser
 * reads, so rows of a loaded table are encoded by `fieldColumns`, which reads the instant itself.
 */
export function encodeField(field: FieldDef, value: JsonValue | undefined): string | null {
  const where = `field ${field.name}`;
  if (field.collection) {
    if (value === null || value === undefined) return '{}';
    if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) bad(field, value);
    return arrayText(value, where);
  }
  if (value === null || value === undefined) return null;
  switch (field.type) {
    case 'Edm.String':
      return typeof value === 'string' ? checkedText(value, where) : bad(field, value);
    case 'Edm.Boolean':
      return typeof value === 'boolean' ? (value ? 't' : 'f') : bad(field, value);
    case 'Edm.Date': {
      const days = typeof value === 'string' ? parseDateString(value) : NaN;
      return Number.isNaN(days) ? bad(field, value) : dateText(days);
    }
    case 'Edm.DateTimeOffset': {
      const ms = typeof value === 'string' ? parseTimestampString(value) : NaN;
      return Number.isNaN(ms) ? bad(field, value) : timestampText(ms);
    }
    case 'Edm.GeographyPoint': {
      const c = (value as { coordinates?: unknown }).coordinates;
      if (!Array.isArray(c) || c.length !== 2 || typeof c[0] !== 'number' || typeof c[1] !== 'number') bad(field, value);
      return pointText(c[0], c[1]);
    }
    default:
      return typeof value === 'number' ? numberText(field.type, value, where) : bad(field, value);
  }
}

/** The `F#text` companion of a DateTimeOffset field from the record's JSON value: the feed's text, or null when canonical or absent. */
export function encodeFeedText(field: FieldDef, value: JsonValue | undefined): string | null {
  if (typeof value !== 'string') return null;
  const ms = parseTimestampString(value);
  if (Number.isNaN(ms)) bad(field, value);
  return feedText(ms, checkedText(value, `field ${field.name}`));
}

/** Whether a stored field has the `F#text` companion column. */
export function hasFeedText(field: FieldDef): boolean {
  return !field.collection && field.type === 'Edm.DateTimeOffset';
}

/** A stored column of a table's fields: its quoted name, the cast of a parameter holding its text, and its text per row. */
export interface FieldColumn {
  readonly field: FieldDef;
  readonly column: string;
  readonly cast: string;
  /** The column's text in a row of the table, or null for SQL NULL. */
  readonly text: (row: number) => string | null;
}

/**
 * The stored columns of a loaded table's fields, in schema order (a DateTimeOffset's `F#text`
 * right after it; DaysOnMarket, computed, has none), each reading the table's typed column.
 */
export function fieldColumns(table: Table): FieldColumn[] {
  const out: FieldColumn[] = [];
  const keyOf = (row: number): string => `${table.resource} '${table.keyOf(row)}'`;
  for (const field of table.schema.fields) {
    if (!isStored(field)) continue;
    const c = table.column(field.name)!;
    out.push({ field, column: column(field), cast: castType(field), text: valueOf(field, c, keyOf) });
    if (hasFeedText(field)) {
      const ts = c as TimestampColumn;
      const plain = ts.styles === null && ts.exceptions === null;
      out.push({
        field,
        column: textColumn(field),
        cast: 'text',
        text: plain
          ? () => null
          : (row) => (getBit(ts.validity, row) ? feedText(ts.values[row], checkedText(ts.text(row)!, `${keyOf(row)} field ${field.name}`)) : null),
      });
    }
  }
  return out;
}

function valueOf(field: FieldDef, c: Column, keyOf: (row: number) => string): (row: number) => string | null {
  const where = (row: number): string => `${keyOf(row)} field ${field.name}`;
  switch (c.kind) {
    case 'number': {
      const { values, validity } = c;
      return (row) => (getBit(validity, row) ? numberText(field.type, values[row], where(row)) : null);
    }
    case 'date': {
      const { values, validity } = c;
      return (row) => (getBit(validity, row) ? dateText(values[row]) : null);
    }
    case 'timestamp': {
      const { values, validity } = c;
      return (row) => (getBit(validity, row) ? timestampText(values[row]) : null);
    }
    case 'boolean':
      return (row) => {
        const v = c.get(row);
        return v === null ? null : v ? 't' : 'f';
      };
    case 'point': {
      const { lat, lon, validity } = c;
      return (row) => (getBit(validity, row) ? pointText(lon[row], lat[row]) : null);
    }
    case 'collection': {
      // elements repeat across rows: each dictionary entry is checked and quoted once
      const { offsets, codes, dictionary, validity } = c;
      const quoted = new Array<string | undefined>(dictionary.length);
      return (row) => {
        if (!getBit(validity, row)) return '{}';
        let out = '{';
        for (let i = offsets[row]; i < offsets[row + 1]; i++) {
          const code = codes[i];
          out += (i === offsets[row] ? '' : ',') + (quoted[code] ??= arrayElement(checkedText(dictionary[code], where(row))));
        }
        return `${out}}`;
      };
    }
    case 'dictionary':
    case 'text':
      return (row) => {
        const v = c.get(row);
        return v === null ? null : checkedText(v, where(row));
      };
    case 'daysOnMarket':
      throw new Error(`${field.name} is computed, not stored`);
  }
}

/** The stored columns of a record (every stored field of the schema, as fieldColumns orders them) with their texts and parameter casts. */
export function encodeRecord(
  schema: TableSchema,
  record: Readonly<Record<string, JsonValue>>,
): { columns: string[]; casts: string[]; values: Array<string | null> } {
  const columns: string[] = [];
  const casts: string[] = [];
  const values: Array<string | null> = [];
  for (const field of schema.fields) {
    if (!isStored(field)) continue;
    const value = record[field.name];
    columns.push(column(field));
    casts.push(castType(field));
    values.push(encodeField(field, value));
    if (hasFeedText(field)) {
      columns.push(textColumn(field));
      casts.push('text');
      values.push(encodeFeedText(field, value));
    }
  }
  return { columns, casts, values };
}

/** A column text in COPY's text format: `\N` for NULL; backslash, tab, newline and carriage return escaped. */
export function copyField(text: string | null): string {
  if (text === null) return '\\N';
  return /[\\\t\n\r]/.test(text) ? text.replace(/[\\\t\n\r]/g, (ch) => COPY_ESCAPES[ch]) : text;
}

const COPY_ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };
