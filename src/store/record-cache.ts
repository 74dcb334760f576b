/**
 * Whole records of a table segment (`Table.record`): one compiled builder per field list, and the
 * records of rows read again kept, so that a page asked for again is copied rather than rebuilt.
 *
 * A record is built by one object literal compiled per field list (each column read its own
 * monomorphic call site). Building a 69-field listing costs 2-5 µs, most of it decoding its text
 * (remarks ~800 bytes of UTF-8), writing seven timestamps and three dates, and the collections'
 * arrays; a copy of a kept record costs about a fifth of that.
 *
 * Kept records are handed out as copies (callers own what they get and may change it: `project`
 * deletes nulls and adds links and expansions): the copy is an object spread of the kept record
 * (V8 clones its shape whole) with every array and object value made afresh (collections, points)
 * and DaysOnMarket computed at the caller's `now`. Strings, numbers, booleans and null are shared,
 * being immutable. Rows never change, so a kept record can never be stale; the records hang off the
 * field-list entry of the table's lineage (table.ts `TableLineage`: the tables a live change makes
 * by appending rows, which read every older row the same) and serve each generation of it.
 *
 * A record is kept the second time its row is read through a field list (a small direct-mapped
 * table of the rows last read remembers the first): rows read once, as when paging through a table,
 * cost a slot store more than without the cache. Kept records are bounded in all (about 32 MB,
 * estimated from their strings and fields; src/util/kept-rows.ts); past the bound the oldest go first,
 * whatever table they belong to.
 */
import { KeptRows } from '../util/kept-rows.js';
import type { Column, JsonValue } from './columns.js';

export type JsonRecord = Record<string, JsonValue>;

type Build = (columns: readonly Column[], row: number, nowMs: number) => JsonRecord;
type Copy = (columns: readonly Column[], record: JsonRecord, row: number, nowMs: number) => JsonRecord;
type Size = (record: JsonRecord) => number;

/** Slots of the table of rows read once (per field list and table; a power of two). */
const SEEN_SLOTS = 1 << 13;

/** Bytes charged per record beyond its strings (object, map entry, queue slot), and per field. */
const RECORD_CHARGE = 160;
const FIELD_CHARGE = 8;
/** Bytes charged per string beyond its characters (the string's header). */
const STRING_CHARGE = 16;

/** A field list's record builder, copier and kept records, in one table segment. */
export class RecordShape {
  private readonly build: Build;
  private readonly copy: Copy;
  private readonly size: Size;
  /** Kept records by row. */
  readonly kept = new Map<number, JsonRecord>();
  /** The row last read at each slot (`row & (SEEN_SLOTS - 1)`), -1 for none; made on the first read. */
  private seen: Int32Array | null = null;
  /** False when no field is dear to build (numbers, dictionary strings, booleans): such records are never kept. */
  private readonly worthKeeping: boolean;

  constructor(names: readonly string[], columns: readonly Column[], fields: readonly string[] | undefined) {
    const wanted = fields === undefined ? null : new Set(fields);
    const build: string[] = [];
    const copy: string[] = [];
    const size: string[] = [];
    let dear = false;
    const prop = (name: string): string => (name === '__proto__' ? `[${JSON.stringify(name)}]` : JSON.stringify(name));
    names.forEach((name, i) => {
      if (wanted !== null && !wanted.has(name)) return;
      const kind = columns[i].kind;
      const at = `o[${JSON.stringify(name)}]`;
      // a collection is never null in a record (CSDL: it exists and may be empty): an absent one is []
      build.push(`${prop(name)}: c[${i}].${kind === 'daysOnMarket' ? 'get(row, now)' : kind === 'collection' ? 'get(row) ?? []' : 'json(row)'}`);
      switch (kind) {
        case 'daysOnMarket':
          copy.push(`${at} = c[${i}].get(row, now);`);
          break;
        case 'collection':
          dear = true;
          copy.push(`${at} = ${at}.slice();`);
          size.push(`${at}.length * ${FIELD_CHARGE}`);
          break;
        case 'point':
          dear = true;
          copy.push(`if (${at} !== null) ${at} = { type: 'Point', coordinates: [${at}.coordinates[0], ${at}.coordinates[1]] };`);
          size.push(`(${at} === null ? 0 : 64)`);
          break;
        case 'text':
        case 'timestamp':
        case 'date':
          dear = true;
          size.push(`(${at} === null ? 0 : ${at}.length + ${STRING_CHARGE})`);
          break;
      }
    });
    const known = new Set(names);
    let count = build.length;
    for (const f of new Set(fields ?? [])) {
      if (known.has(f)) continue;
      build.push(`${prop(f)}: null`);
      count++;
    }
    size.push(String(RECORD_CHARGE + count * FIELD_CHARGE));
    this.worthKeeping = dear;
    /* eslint-disable @typescript-eslint/no-implied-eval -- field names enter only as JSON string literals (DESIGN.md, 'Records') */
    this.build = new Function('c', 'row', 'now', `return {\n${build.join(',\n')}\n};`) as Build;
    this.copy = new Function('c', 'r', 'row', 'now', `const o = { ...r };\n${copy.join('\n')}\nreturn o;`) as Copy;
    this.size = new Function('o', `return ${size.join(' + ')};`) as Size;
    /* eslint-enable @typescript-eslint/no-implied-eval */
  }

  /** The record of a row, the caller's own (kept records are copied). */
  record(columns: readonly Column[], row: number, nowMs: number, cache: KeptRows<JsonRecord>): JsonRecord {
    const kept = this.kept.get(row);
    if (kept !== undefined) return this.copy(columns, kept, row, nowMs);
    if (!this.worthKeeping || cache.budget <= 0) return this.build(columns, row, nowMs);
    built++;
    const seen = (this.seen ??= new Int32Array(SEEN_SLOTS).fill(-1));
    const slot = row & (SEEN_SLOTS - 1);
    if (seen[slot] !== row) {
      seen[slot] = row;
      return this.build(columns, row, nowMs);
    }
    return this.copy(columns, this.buildAndKeep(columns, row, nowMs, cache), row, nowMs);
  }

  /**
   * Keeps the record of a row now, unless it is kept or not worth keeping (a page warmed before a
   * change publishes: src/live/warm.ts); whether it built one.
   */
  keep(columns: readonly Column[], row: number, nowMs: number, cache: KeptRows<JsonRecord>): boolean {
    if (this.kept.has(row) || !this.worthKeeping || cache.budget <= 0) return false;
    this.buildAndKeep(columns, row, nowMs, cache);
    return true;
  }

  /** The record of a row built and kept. */
  private buildAndKeep(columns: readonly Column[], row: number, nowMs: number, cache: KeptRows<JsonRecord>): JsonRecord {
    const record = this.build(columns, row, nowMs);
    cache.keep(this.kept, row, record, this.size(record));
    return record;
  }

  /** The record built afresh, nothing kept or read from what is kept (tests compare the two). */
  built(columns: readonly Column[], row: number, nowMs: number): JsonRecord {
    return this.build(columns, row, nowMs);
  }
}

/** Records worth keeping built for callers (not copied from kept ones) so far in this process. */
let built = 0;

/** Records built for callers so far: a query that built many read rows whose records were not kept (src/live/warm.ts). */
export function recordsBuilt(): number {
  return built;
}

/** The process's kept records (about 32 MB). */
export const recordCache = new KeptRows<JsonRecord>(32 * 1024 * 1024);
