/**
 * The load's initial EntityEvent log written straight from the loaded rows' bytes (keys and
 * sources) into its columns: no record object, no JSON text, no decoded string, no builder per
 * event. At 1M listings the log has 19M events; as JSON records it cost more CPU than parsing
 * Property, through a TableBuilder a third of parsing Media.
 * What it needs of each resource (`EventRows`) is plain arrays, so that the parallel loader's
 * worker thread can write the log from its Media segment and the main thread's keys and sources.
 * Gives the same table as the JSON records of `eventRecord` (a test compares both).
 */
import { QueryError } from '../errors.js';
import { CATALOG, ENTITY_EVENT_KEY, ENTITY_EVENT_TIME } from '../schema/catalog.js';
import { TableSchema } from '../schema/table-schema.js';
import type { EventSourcedName, FieldDef } from '../schema/types.js';
import { newBitmap } from '../util/bits.js';
import { ByteIndex } from './byte-index.js';
import { Dictionary, DictBuilder, TextBuilder } from './builders.js';
import { DictionaryColumn, NumberColumn, ParentKeyColumn, TimestampColumn, Utf8TextColumn, type Column } from './columns.js';
import { Table } from './table.js';
import { CANONICAL_STYLE } from './temporal.js';

/** A column of OriginatingSystemName values as arrays (what `sourceOf` reads as strings). */
export type SourceValues =
  | { readonly kind: 'dictionary'; readonly codes: Uint16Array | Uint32Array; readonly dictionary: ReadonlyArray<string | null> }
  | { readonly kind: 'text'; readonly bytes: Uint8Array; readonly offsets: Uint32Array; readonly validity: Uint32Array };

/** What the log needs of one event-sourced resource's loaded rows. */
export interface EventRows {
  readonly resource: EventSourcedName;
  readonly rowCount: number;
  /** The key column's bytes: row r's key is bytes[offsets[r], offsets[r + 1]). */
  readonly keys: { readonly bytes: Uint8Array; readonly offsets: Uint32Array };
  /** Per row, the row of `sources` holding its source (a child's listing; -1: none); null: the row itself. */
  readonly sourceRows: Int32Array | null;
  /** null: no row has a source. */
  readonly sources: SourceValues | null;
}

/** A table's OriginatingSystemName as arrays (any column kind but text becomes a dictionary of its strings). */
export function sourceValuesOf(table: Table): SourceValues | null {
  const c = table.column('OriginatingSystemName');
  if (c === undefined) return null;
  if (c.kind === 'dictionary') return { kind: 'dictionary', codes: c.codes, dictionary: c.dictionary };
  if (c instanceof Utf8TextColumn) return { kind: 'text', bytes: c.bytes, offsets: c.offsets, validity: c.validity };
  const dictionary: Array<string | null> = [null];
  const codes = new Uint32Array(table.rowCount);
  const seen = new Map<string, number>();
  for (let row = 0; row < table.rowCount; row++) {
    const v = table.value(row, 'OriginatingSystemName');
    if (typeof v !== 'string') continue;
    let code = seen.get(v);
    if (code === undefined) seen.set(v, (code = dictionary.push(v) - 1));
    codes[row] = code;
  }
  return { kind: 'dictionary', codes, dictionary };
}

/** The event rows of a loaded table (a child's sources are its listing's, in `property`). */
export function eventRowsOf(table: Table, property: Table): EventRows {
  const resource = table.resource as EventSourcedName;
  const keys = { bytes: table.keyColumn.bytes, offsets: table.keyColumn.offsets };
  const parent = CATALOG[resource].parent;
  if (parent === null) return { resource, rowCount: table.rowCount, keys, sourceRows: null, sources: sourceValuesOf(table) };
  const link = table.column(parent.field);
  if (!(link instanceof ParentKeyColumn)) return { resource, rowCount: table.rowCount, keys, sourceRows: null, sources: null };
  return { resource, rowCount: table.rowCount, keys, sourceRows: link.parentRow, sources: sourceValuesOf(property) };
}

/** Per row of `values`, its UTF-8 bytes or null (a dictionary's entries encoded once). */
function sourceBytes(values: SourceValues): (row: number) => Uint8Array | null {
  if (values.kind === 'dictionary') {
    const entries = values.dictionary.map((v) => (v === null ? null : Buffer.from(v, 'utf8')));
    const codes = values.codes;
    return (row) => entries[codes[row]];
  }
  const { bytes, offsets, validity } = values;
  return (row) => ((validity[row >>> 5] & (1 << (row & 31))) === 0 ? null : bytes.subarray(offsets[row], offsets[row + 1]));
}

/**
 * The log as a table with its columns written whole, as `writeEventLog` into a loader's builder
 * would leave them (the same bytes; a test compares both): the keys and sequence numbers counted,
 * each resource's record keys copied as one block of bytes, the URLs written row by row, the
 * names and sources as dictionary codes filled per resource and per source. About a fifth of the
 * builder's time: no record is assembled, no per-row dictionary probe, no per-row key index probe
 * (the index is built at once).
 */
export function eventLogTable(resources: readonly EventRows[], now: () => number): Table {
  let n = 0;
  for (const r of resources) n += r.rowCount;
  const def = CATALOG.EntityEvent;
  const columns = new Map<string, Column>();

  // the key: the sequence as 16 digits, counted up in place; the sequence number
  const keyBytes = Buffer.allocUnsafe(16 * n);
  const keyOffsets = new Uint32Array(n + 1);
  const sequence = new Float64Array(n);
  const digits = Buffer.alloc(16, 48);
  for (let row = 0, p = 0; row < n; row++) {
    for (let i = 15; digits[i]++ === 57; i--) digits[i] = 48;
    for (let i = 0; i < 16; i++) keyBytes[p++] = digits[i];
    keyOffsets[row + 1] = p;
    sequence[row] = row + 1;
  }
  const keyColumn = new Utf8TextColumn(keyBytes, keyOffsets, allSet(n));
  columns.set(ENTITY_EVENT_KEY, keyColumn);
  // no events: the key column alone, as a builder that saw no record keeps it
  if (n > 0) fill(columns, resources, n, sequence);
  const schema = new TableSchema(
    'EntityEvent',
    def.key,
    def.fields.filter((f) => columns.has(f.name)),
    [],
  );
  const index = ByteIndex.build(keyColumn, n);
  if (!(index instanceof ByteIndex)) throw new Error('the event log has a duplicate key');
  return new Table(
    'EntityEvent',
    schema,
    schema.fields.map((f) => columns.get(f.name)!),
    index,
    n,
    now,
  );
}

/**
 * OriginatingSystemName as the loader's builder keeps it: a dictionary in order of first use (or
 * text, past 65,535 sources that repeat less than twice on average). With the sources as a
 * dictionary of at most 65,536 entries, the log's code of each source code is looked up once;
 * otherwise each row goes through the builders themselves.
 */
function sourceColumn(resources: readonly EventRows[], n: number, def: FieldDef): Column {
  const few = !def.freeText && resources.every((r) => r.sources === null || (r.sources.kind === 'dictionary' && r.sources.dictionary.length <= 0x10000));
  if (few) {
    const sources = new Dictionary();
    const codes = new Uint16Array(n);
    let at = 0;
    for (const r of resources) {
      const values = r.sources;
      if (values !== null && values.kind === 'dictionary') {
        const codeOf = new Int32Array(values.dictionary.length).fill(-1);
        const { codes: sourceCodes, dictionary } = values;
        const rows = r.sourceRows;
        for (let row = 0; row < r.rowCount; row++) {
          const sourceRow = rows === null ? row : rows[row];
          if (sourceRow < 0) continue;
          const code = sourceCodes[sourceRow];
          let logCode = codeOf[code];
          if (logCode < 0) {
            const text = dictionary[code];
            const bytes = text === null ? null : Buffer.from(text, 'utf8');
            codeOf[code] = logCode = bytes === null ? 0 : sources.entryOf(bytes, 0, bytes.length) + 1;
          }
          codes[at + row] = logCode;
        }
      }
      at += r.rowCount;
    }
    return new DictionaryColumn(codes, [null, ...sources.strings]);
  }
  const dict = def.freeText ? null : new DictBuilder(1024, def.lookup !== null);
  let text = dict === null ? new TextBuilder(1024) : null;
  let at = 0;
  for (const r of resources) {
    if (r.sources !== null) {
      const source = sourceBytes(r.sources);
      const rows = r.sourceRows;
      for (let row = 0; row < r.rowCount; row++) {
        const sourceRow = rows === null ? row : rows[row];
        const bytes = sourceRow < 0 ? null : source(sourceRow);
        if (bytes === null) continue;
        if (text !== null) text.write(at + row, bytes, 0, bytes.length);
        else {
          dict!.write(at + row, bytes, 0, bytes.length);
          if (dict!.dict.size > 0xffff && dict!.wantsText) text = dict!.toText();
        }
      }
    }
    at += r.rowCount;
  }
  return text !== null ? text.freeze(n) : dict!.freeze(n);
}

/** The columns of a log of n > 0 events besides the key. */
function fill(columns: Map<string, Column>, resources: readonly EventRows[], n: number, sequence: Float64Array): void {
  const def = CATALOG.EntityEvent;
  const field = (name: string): FieldDef => def.fields.find((f) => f.name === name)!;
  columns.set('EntityEventSequence', new NumberColumn(sequence, allSet(n)));
  columns.set(ENTITY_EVENT_TIME, new TimestampColumn(new Float64Array(n), newBitmap(n), null, [CANONICAL_STYLE], null));

  // ResourceName: one code per resource, in order of the first event
  const names = new Dictionary();
  const nameCodes = new Uint16Array(n);
  let at = 0;
  for (const r of resources) {
    if (r.rowCount === 0) continue;
    const name = Buffer.from(r.resource, 'latin1');
    nameCodes.fill(names.entryOf(name, 0, name.length) + 1, at, at + r.rowCount);
    at += r.rowCount;
  }
  columns.set('ResourceName', new DictionaryColumn(nameCodes, [null, ...names.strings]));

  columns.set('ResourceRecordKey', recordKeys(resources, n, field('ResourceRecordKey')));
  columns.set('ResourceRecordUrl', recordUrls(resources, n));

  columns.set('OriginatingSystemName', sourceColumn(resources, n, field('OriginatingSystemName')));
}

/** A validity bitmap of n rows, all set. */
function allSet(n: number): Uint32Array {
  const bits = newBitmap(n);
  bits.fill(0xffffffff);
  if ((n & 31) !== 0) bits[bits.length - 1] = (1 << (n & 31)) - 1;
  return bits;
}

/**
 * ResourceRecordKey as the loader's builder keeps it: text (an identifier), every key's bytes
 * copied in blocks; were it not free text, a dictionary until it holds more than 65,535 keys that
 * repeat less than twice on average, then text (the rows until then through the builder itself).
 */
function recordKeys(resources: readonly EventRows[], n: number, def: FieldDef): Column {
  if (def.freeText) return keyText(resources, n);
  const d = new DictBuilder(1024, def.lookup !== null);
  let row = 0;
  for (const r of resources) {
    const { bytes, offsets } = r.keys;
    for (let i = 0; i < r.rowCount; i++, row++) {
      d.write(row, bytes, offsets[i], offsets[i + 1]);
      if (d.dict.size > 0xffff && d.wantsText) return keyText(resources, n);
    }
  }
  return d.freeze(n);
}

function keyText(resources: readonly EventRows[], n: number): Utf8TextColumn {
  let size = 0;
  for (const r of resources) size += r.keys.offsets[r.rowCount] - r.keys.offsets[0];
  if (size > MAX_TEXT) throw new QueryError('DataTooLarge', 'A text column holds more than 4 GiB of text.');
  const bytes = Buffer.allocUnsafe(size);
  const offsets = new Uint32Array(n + 1);
  let row = 0;
  let p = 0;
  for (const r of resources) {
    const { bytes: keys, offsets: from } = r.keys;
    const base = from[0];
    const end = from[r.rowCount];
    bytes.set(keys.subarray(base, end), p);
    const shift = p - base;
    for (let i = 1; i <= r.rowCount; i++) offsets[row + i] = from[i] + shift;
    row += r.rowCount;
    p += end - base;
  }
  return new Utf8TextColumn(bytes, offsets, allSet(n));
}

/** ResourceRecordUrl: `<name>('<key>')` per row, percent-encoded as recordUrl does. */
function recordUrls(resources: readonly EventRows[], n: number): Utf8TextColumn {
  let estimate = 0;
  for (const r of resources) estimate += r.rowCount * (r.resource.length + 4) + (r.keys.offsets[r.rowCount] - r.keys.offsets[0]);
  let out = Buffer.allocUnsafe(Math.min(MAX_TEXT, Math.ceil(estimate * 1.05) + 1024));
  const offsets = new Uint32Array(n + 1);
  let row = 0;
  let p = 0;
  for (const r of resources) {
    const name = Buffer.from(r.resource, 'latin1');
    const { bytes: keys, offsets: from } = r.keys;
    for (let i = 0; i < r.rowCount; i++) {
      const ks = from[i];
      const ke = from[i + 1];
      const need = p + name.length + 3 * (ke - ks) + 4;
      if (need > out.length) {
        if (need > MAX_TEXT) throw new QueryError('DataTooLarge', 'A text column holds more than 4 GiB of text.');
        const grown = Buffer.allocUnsafe(Math.min(MAX_TEXT, Math.max(need, Math.ceil(out.length * 1.5))));
        out.copy(grown, 0, 0, p);
        out = grown;
      }
      p = copyInto(name, 0, name.length, out, p);
      p = writeRecordUrlKey(keys, ks, ke, out, p);
      offsets[++row] = p;
    }
  }
  return new Utf8TextColumn(out.subarray(0, p), offsets, allSet(n));
}

const MAX_TEXT = 0xffff_ffff;

/** Copies src[s, e) to out[p] and returns the end: a loop, as short strings cost a native call more than their bytes. */
function copyInto(src: Uint8Array, s: number, e: number, out: Buffer, p: number): number {
  for (let i = s; i < e; i++) out[p++] = src[i];
  return p;
}

/** Bytes encodeURIComponent leaves as they are: A-Z a-z 0-9 - _ . ! ~ * ' ( ). */
const URI_PLAIN = (() => {
  const plain = new Uint8Array(128);
  for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()") plain[c.charCodeAt(0)] = 1;
  return plain;
})();

const HEX = Buffer.from('0123456789ABCDEF', 'latin1');

/**
 * Writes `('<key>')` of recordUrl for the key's UTF-8 bytes src[s, e) at out[p]; returns the end.
 * Quotes are doubled, then every byte encodeURIComponent escapes is written as %XX: for valid
 * UTF-8 (a key column's bytes) that is exactly what it does per character.
 */
function writeRecordUrlKey(src: Uint8Array, s: number, e: number, out: Buffer, p: number): number {
  out[p++] = 40;
  out[p++] = 39;
  for (let i = s; i < e; i++) {
    const c = src[i];
    if (c < 128 && URI_PLAIN[c] === 1) {
      out[p++] = c;
      if (c === 39) out[p++] = 39;
    } else {
      out[p++] = 37;
      out[p++] = HEX[c >>> 4];
      out[p++] = HEX[c & 15];
    }
  }
  out[p++] = 39;
  out[p++] = 41;
  return p;
}
