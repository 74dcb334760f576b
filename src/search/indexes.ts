/**
 * The six search-field indexes of a listing table, built from each row's source values in the
 * order SERVICE.md §2 lists them (collections element by element; agent names fall back to
 * FirstName + LastName where a FullName is absent).
 */
import { getBit } from '../util/bits.js';
import type { Table } from '../store/table.js';
import { buildFieldIndex, type FieldIndex } from './postings.js';
import { SEARCH_FIELDS, SEARCH_FIELD_SOURCES, type SearchFieldName } from '../schema/search-fields.js';
import { tokenize, tokenizeInto } from './tokenize.js';

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

/** Appends a row's tokens (of one source field, or of a whole search field). */
export type TokenSource = (row: number, out: string[]) => void;

/**
 * A token emitter reading the column directly. Lookup and collection values repeat across rows, so
 * their tokens are computed once per dictionary entry; free text is tokenized per row. Null when the
 * table has no such column.
 */
function tokenSource(table: Table, field: string): TokenSource | null {
  const c = table.column(field);
  if (!c) return null;
  const cached = (dictionary: ReadonlyArray<string | null>): ((code: number) => readonly string[]) => {
    const tokens = new Array<readonly string[] | undefined>(dictionary.length);
    return (code) => (tokens[code] ??= dictionary[code] === null ? [] : tokenize(dictionary[code]));
  };
  switch (c.kind) {
    case 'dictionary': {
      const { codes } = c;
      const of = cached(c.dictionary);
      return (row, out) => {
        for (const t of of(codes[row])) out.push(t);
      };
    }
    case 'collection': {
      const { codes, offsets, validity } = c;
      const of = cached(c.dictionary);
      return (row, out) => {
        if (!getBit(validity, row)) return;
        for (let i = offsets[row]; i < offsets[row + 1]; i++) for (const t of of(codes[i])) out.push(t);
      };
    }
    case 'text':
      return (row, out) => {
        const v = c.get(row);
        if (v !== null) tokenizeInto(v, out);
      };
    default:
      return (row, out) => {
        const v = table.value(row, field);
        if (v !== null) tokenizeInto(String(v), out);
      };
  }
}

/**
 * Per search field, the emitter of a row's tokens (not yet address-normalized), read straight from
 * the table's columns: what buildSearchIndexesOfTable indexes, and what a live update passes as
 * `tokensOf` for a new generation's table (src/search/live.ts).
 */
export function searchTokenSources(table: Table): Record<SearchFieldName, TokenSource> {
  const out = {} as Record<SearchFieldName, TokenSource>;
  const none: TokenSource = () => {};
  for (const field of SEARCH_FIELDS) {
    const emitters: TokenSource[] = SEARCH_FIELD_SOURCES[field].map((source) => {
      if (typeof source === 'string') return tokenSource(table, source) ?? none;
      const full = tokenSource(table, source.fullName);
      const first = tokenSource(table, source.firstName) ?? none;
      const last = tokenSource(table, source.lastName) ?? none;
      const fullColumn = table.column(source.fullName);
      return (row, tokens) => {
        const value = fullColumn ? fullColumn.json(row, 0) : null;
        if (full && value !== null && value !== '') full(row, tokens);
        else {
          first(row, tokens);
          last(row, tokens);
        }
      };
    });
    out[field] = (row, tokens) => {
      for (const emit of emitters) emit(row, tokens);
    };
  }
  return out;
}

/** The same indexes as buildSearchIndexes, read straight from a table's columns (faster). */
export function buildSearchIndexesOfTable(table: Table): SearchIndexes {
  const sources = searchTokenSources(table);
  const out = {} as Record<SearchFieldName, FieldIndex>;
  for (const field of SEARCH_FIELDS) {
    out[field] = buildFieldIndex(table.rowCount, sources[field], { address: field === 'RawAddressSearchText', tokenized: true });
  }
  return out;
}
