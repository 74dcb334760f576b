/**
 * The six search-field indexes of a listing table, built from each row's source values in the
 * order SERVICE.md §2 lists them (collections element by element; agent names fall back to
 * FirstName + LastName where a FullName is absent).
 */
import { isAscii } from 'node:buffer';
import { getBit } from '../util/bits.js';
import type { Table } from '../store/table.js';
import { Utf8TextColumn } from '../store/columns.js';
import { buildFieldIndex, buildFieldIndexOfSteps, type FieldIndex, type TermLookup } from './postings.js';
import type { TermRoom } from './terms.js';
import { runNow, type Steps } from '../util/steps.js';
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

/** Adds a row's tokens (of one source field, or of a whole search field) to a term lookup (an index builder, or a live view's appended rows), as term ids where it can. */
type TermSource = (row: number, lookup: TermLookup) => void;

/**
 * A token emitter reading the column directly. Lookup and collection values repeat across rows, so
 * their tokens are computed once per dictionary entry; free text is tokenized per row. Null when the
 * table has no such column.
 */
function tokenSource(table: Table, field: string): TokenSource | null {
  return columnSource<string[], readonly string[]>(
    table,
    field,
    (value) => (value === null ? [] : tokenize(value)),
    (tokens, out) => {
      for (const t of tokens) out.push(t);
    },
    (text, out) => tokenizeInto(text, out),
  );
}

/**
 * What tokenSource emits, added to `lookup`: a dictionary entry's tokens are looked up once, as
 * term ids of its index, and free text is tokenized into it without a string per token (through a
 * token table of the column's own); `fewRows` as for columnSource.
 */
function termSource(table: Table, field: string, lookup: TermLookup, fewRows = false): TermSource | null {
  const tokens = lookup.tokenTable();
  return columnSource<TermLookup, Int32Array>(
    table,
    field,
    (value) => lookup.termsOfText(value),
    (ids, b) => b.addTerms(ids),
    (text, b) => b.addText(text, tokens),
    (bytes, start, end, b, ascii) => (ascii ? b.addAscii(bytes, start, end, tokens) : b.addUtf8(bytes, start, end, tokens)),
    fewRows,
  );
}

/**
 * One search field's row source adding each row's terms to `lookup` (an index builder, or a live
 * view's appended rows: `fewRows`, see columnSource).
 */
export function searchTermSource(table: Table, field: SearchFieldName, lookup: TermLookup, fewRows = false): (row: number) => void {
  const source = fieldSource(table, field, (column) => termSource(table, column, lookup, fewRows));
  return (row) => source(row, lookup);
}

/**
 * A row source over one column, generic in what it emits into (`S`): `ofValue` turns a dictionary
 * entry into what `emitValue` adds (computed once per entry, when first met, and kept in an array
 * as long as the dictionary, or in a Map with `fewRows`: a change reads its own few rows of a
 * table whose dictionaries have thousands of entries), `emitText` adds a free text, `emitUtf8`
 * (when given) the UTF-8 bytes of one in a column that stores them (`ascii` when the whole column
 * is ASCII).
 */
function columnSource<S, V>(
  table: Table,
  field: string,
  ofValue: (value: string | null) => V,
  emitValue: (value: V, sink: S) => void,
  emitText: (text: string, sink: S) => void,
  emitUtf8?: (bytes: Uint8Array, start: number, end: number, sink: S, ascii: boolean) => void,
  fewRows = false,
): ((row: number, sink: S) => void) | null {
  const c = table.column(field);
  if (!c) return null;
  const cached = (dictionary: ReadonlyArray<string | null>): ((code: number) => V) => {
    if (fewRows) {
      const values = new Map<number, V>();
      return (code) => {
        let value = values.get(code);
        if (value === undefined) values.set(code, (value = ofValue(dictionary[code])));
        return value;
      };
    }
    const values = new Array<V | undefined>(dictionary.length);
    return (code) => (values[code] ??= ofValue(dictionary[code]));
  };
  switch (c.kind) {
    case 'dictionary': {
      const { codes } = c;
      const of = cached(c.dictionary);
      return (row, sink) => emitValue(of(codes[row]), sink);
    }
    case 'collection': {
      const { codes, offsets, validity } = c;
      const of = cached(c.dictionary);
      return (row, sink) => {
        if (!getBit(validity, row)) return;
        for (let i = offsets[row]; i < offsets[row + 1]; i++) emitValue(of(codes[i]), sink);
      };
    }
    case 'text':
      if (c instanceof Utf8TextColumn && emitUtf8) {
        const { bytes, offsets, validity } = c;
        // One check of the whole column (fast in node:buffer) spares one per row in the common case;
        // not for a change's few rows of a large table (each row is checked as it is read)
        const ascii = !fewRows && isAscii(bytes.subarray(0, offsets[table.rowCount]));
        return (row, sink) => {
          if (getBit(validity, row)) emitUtf8(bytes, offsets[row], offsets[row + 1], sink, ascii);
        };
      }
      return (row, sink) => {
        const v = c.get(row);
        if (v !== null) emitText(v, sink);
      };
    default:
      return (row, sink) => {
        const v = table.value(row, field);
        if (v !== null) emitText(String(v), sink);
      };
  }
}

/**
 * One search field's row source: its sources in order, a full name falling back to first and last
 * name where it is absent or empty (`of` makes the source of one column, null without the column).
 */
function fieldSource<S>(table: Table, field: SearchFieldName, of: (column: string) => ((row: number, sink: S) => void) | null): (row: number, sink: S) => void {
  const none = (): void => {};
  const emitters = SEARCH_FIELD_SOURCES[field].map((source): ((row: number, sink: S) => void) => {
    if (typeof source === 'string') return of(source) ?? none;
    const full = of(source.fullName);
    const first = of(source.firstName) ?? none;
    const last = of(source.lastName) ?? none;
    const fullColumn = table.column(source.fullName);
    return (row, sink) => {
      const value = fullColumn ? fullColumn.json(row, 0) : null;
      if (full && value !== null && value !== '') full(row, sink);
      else {
        first(row, sink);
        last(row, sink);
      }
    };
  });
  return (row, sink) => {
    for (const emit of emitters) emit(row, sink);
  };
}

/**
 * Per search field, the emitter of a row's tokens as strings (not yet address-normalized), read
 * straight from the table's columns: the tokens buildSearchIndexesOfTable indexes, for callers that
 * want them as text (the PostgreSQL backend's term tables). The index builders and a live change
 * take term ids (searchTermSource).
 */
export function searchTokenSources(table: Table): Record<SearchFieldName, TokenSource> {
  const out = {} as Record<SearchFieldName, TokenSource>;
  for (const field of SEARCH_FIELDS) out[field] = fieldSource(table, field, (column) => tokenSource(table, column));
  return out;
}

/**
 * The same indexes as buildSearchIndexes, read straight from a table's columns (faster): each
 * field's tokens as searchTokenSources emits them, added to its builder as term ids.
 */
export function buildSearchIndexesOfTable(table: Table): SearchIndexes {
  const out = {} as Record<SearchFieldName, FieldIndex>;
  for (const field of SEARCH_FIELDS) out[field] = runNow(searchIndexOfTableSteps(table, field));
  return out;
}

/**
 * One field's index as buildSearchIndexesOfTable builds it, in steps (compaction), with room for
 * `pairs` (term, row) pairs and for `terms` made at the start when given.
 */
export function searchIndexOfTableSteps(table: Table, field: SearchFieldName, pairs?: number, terms?: TermRoom): Steps<FieldIndex> {
  return buildFieldIndexOfSteps(table.rowCount, (builder) => searchTermSource(table, field, builder), {
    address: field === 'RawAddressSearchText',
    pairs,
    terms,
  });
}
