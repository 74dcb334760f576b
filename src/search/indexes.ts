/**
 * The six search-field indexes of a listing table, built from each row's source values in the
 * order SERVICE.md §2 lists them (collections element by element; agent names fall back to
 * FirstName + LastName where a FullName is absent).
 */
import { buildFieldIndex, type FieldIndex } from './postings.js';
import { SEARCH_FIELDS, SEARCH_FIELD_SOURCES, type SearchFieldName } from './fields.js';

export type SearchIndexes = Readonly<Record<SearchFieldName, FieldIndex>>;

/** Reads one field of one row as its JSON value (null or undefined when absent). */
export type ValueReader = (row: number, field: string) => unknown;

function pushValue(value: unknown, out: string[]): void {
  if (value === null || value === undefined) return;
  if (Array.isArray(value)) for (const v of value) pushValue(v, out);
  else out.push(String(value));
}

export function searchTextsOf(field: SearchFieldName, row: number, read: ValueReader, out: string[]): string[] {
  for (const source of SEARCH_FIELD_SOURCES[field]) {
    if (typeof source === 'string') pushValue(read(row, source), out);
    else {
      const full = read(row, source.fullName);
      if (full !== null && full !== undefined && full !== '') pushValue(full, out);
      else {
        pushValue(read(row, source.firstName), out);
        pushValue(read(row, source.lastName), out);
      }
    }
  }
  return out;
}

export function buildSearchIndexes(rowCount: number, read: ValueReader): SearchIndexes {
  const out = {} as Record<SearchFieldName, FieldIndex>;
  for (const field of SEARCH_FIELDS) {
    out[field] = buildFieldIndex(rowCount, (row, texts) => searchTextsOf(field, row, read, texts), {
      address: field === 'RawAddressSearchText',
    });
  }
  return out;
}
