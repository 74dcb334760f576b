/**
 * The load's initial EntityEvent log written straight from the loaded rows' bytes (keys and
 * sources) into a TableBuilder: no record object, no JSON text, no decoded string per event. At
 * 1M listings the log has 19M events; as JSON records it cost more CPU than parsing Property.
 * What it needs of each resource (`EventRows`) is plain arrays, so that the parallel loader's
 * worker thread can write the log from its Media segment and the main thread's keys and sources.
 * Gives the same table as the JSON records of `eventRecord` (a test compares both).
 */
import { CATALOG, ENTITY_EVENT_KEY, ENTITY_EVENT_TIME } from '../schema/catalog.js';
import type { EventSourcedName } from '../schema/types.js';
import { ParentKeyColumn, Utf8TextColumn } from './columns.js';
import type { TableBuilder } from './ingest.js';
import type { Table } from './table.js';

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
 * Writes one event per row of `resources`, in their order then row order, numbered from 1 (the
 * sequence, line numbers too), as `eventRecord(sequence, { resource, key, source }, null)`.
 */
export function writeEventLog(b: TableBuilder, resources: readonly EventRows[]): void {
  const keySlot = b.slotOf(ENTITY_EVENT_KEY);
  const timeSlot = b.slotOf(ENTITY_EVENT_TIME);
  const sequenceSlot = b.slotOf('EntityEventSequence');
  const nameSlot = b.slotOf('ResourceName');
  const recordKeySlot = b.slotOf('ResourceRecordKey');
  const urlSlot = b.slotOf('ResourceRecordUrl');
  const sourceSlot = b.slotOf('OriginatingSystemName');
  let total = 0;
  for (const r of resources) total += r.rowCount;
  let reserved = false;
  let out = Buffer.allocUnsafe(1024);
  out.fill(48, 0, 16); // the key: the sequence as 16 digits, counted up in place
  let sequence = 0;
  for (const r of resources) {
    const sourceRows = r.sourceRows;
    const source = r.sources === null ? null : sourceBytes(r.sources);
    const name = Buffer.from(r.resource, 'latin1');
    const { bytes: keys, offsets } = r.keys;
    for (let row = 0; row < r.rowCount; row++) {
      const ks = offsets[row];
      const ke = offsets[row + 1];
      const sourceRow = sourceRows === null ? row : sourceRows[row];
      const sourceText = source === null || sourceRow < 0 ? null : source(sourceRow);
      // key (16 digits), name, record key, URL (at most 3 bytes per key byte), source
      const need = 16 + 2 * name.length + 4 * (ke - ks) + 4 + (sourceText === null ? 0 : sourceText.length);
      if (need > out.length) {
        const grown = Buffer.allocUnsafe(Math.max(need, out.length * 2));
        out.copy(grown, 0, 0, 16);
        out = grown;
      }
      sequence++;
      for (let i = 15; out[i]++ === 57; i--) out[i] = 48;
      let p = 16;
      const nameAt = p;
      p = copyInto(name, 0, name.length, out, p);
      const keyAt = p;
      p = copyInto(keys, ks, ke, out, p);
      const urlAt = p;
      p = copyInto(name, 0, name.length, out, p);
      p = writeRecordUrlKey(keys, ks, ke, out, p);
      const sourceAt = p;
      if (sourceText !== null) p = copyInto(sourceText, 0, sourceText.length, out, p);
      b.beginRecord(out);
      b.putString(keySlot, 0, 16);
      b.putNull(timeSlot);
      b.putNumber(sequenceSlot, sequence);
      b.putString(nameSlot, nameAt, keyAt);
      b.putString(recordKeySlot, keyAt, urlAt);
      b.putString(urlSlot, urlAt, sourceAt);
      if (sourceText === null) b.putNull(sourceSlot);
      else b.putString(sourceSlot, sourceAt, p);
      b.endRecord(sequence);
      if (!reserved && sequence === 1024) {
        // Size the columns from the first events, as a file's first MiB sizes them.
        reserved = true;
        b.reserve(total);
      }
    }
  }
}

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
