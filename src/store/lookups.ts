/**
 * The rows of the Lookup resource, derived from the other tables: one per LookupName and value
 * that a lookup field of any table carries, and one per standard Data Dictionary value of every
 * lookup some table's schema has a field of. The loader builds the Lookup table from every loaded
 * row; the change writer (src/live/change.ts) appends the rows a change's new rows bring, in the
 * same generation. Rows are never removed (a value stays listed after its last record goes).
 */
import { RECORD_RESOURCES, type RecordResourceName } from '../schema/types.js';
import { compareOrdinal } from '../schema/catalog.js';
import { lookupKey, lookupNameOf, STANDARD_LOOKUP_TIMESTAMP, STANDARD_LOOKUPS } from '../schema/lookups.js';
import { getBit } from '../util/bits.js';
import { runNow, type Steps } from '../util/steps.js';
import type { Table } from './table.js';

/** One Lookup record, as the loader and the change writer read it. */
export interface LookupRecord {
  readonly LookupKey: string;
  readonly LookupName: string;
  readonly LookupValue: string;
  readonly StandardLookupValue: string | null;
  readonly LegacyODataValue: string | null;
  readonly ModificationTimestamp: string | null;
}

interface Seen {
  readonly name: string;
  readonly value: string;
  /** The earliest ModificationTimestamp (epoch ms) of the rows that carry it; Infinity: none had one. */
  modified: number;
}

/**
 * The Lookup records that rows `[before(r).rowCount, tables(r).rowCount)` of each data table bring
 * and `has` (the Lookup table so far) lacks, in (LookupName, LookupValue) order. `before(r)` null:
 * every row is new (a load). A lookup whose field is new to a table's schema brings its standard
 * values too.
 *
 * ModificationTimestamp: a standard value's is STANDARD_LOOKUP_TIMESTAMP (the DD's publication);
 * any other value's is the earliest ModificationTimestamp among the new rows that carry it (null
 * when none has one): the same data gives the same rows, and a value a change brings is dated by
 * the records that brought it.
 */
export function newLookupRecords(
  tables: (r: RecordResourceName) => Table,
  before: (r: RecordResourceName) => Pick<Table, 'rowCount' | 'schema'> | null,
  has: (key: string) => boolean,
): LookupRecord[] {
  return runNow(newLookupRecordSteps(tables, before, has));
}

/** Values looked up in the Lookup table between two check points of `newLookupRecordSteps` (each a key made or found, then a look-up in the table's key index). */
const SEE_CHECK = 16;

/** `newLookupRecords` as steps, a check point after each field and every SEE_CHECK values (a change runs it between queries). */
export function* newLookupRecordSteps(
  tables: (r: RecordResourceName) => Table,
  before: (r: RecordResourceName) => Pick<Table, 'rowCount' | 'schema'> | null,
  has: (key: string) => boolean,
): Steps<LookupRecord[]> {
  const found = new Map<string, Seen>();
  const see = (name: string, value: string, modified: number): void => {
    const key = lookupKey(name, value);
    if (has(key)) return;
    const s = found.get(key);
    if (s === undefined) found.set(key, { name, value, modified });
    else if (modified < s.modified) s.modified = modified;
  };
  for (const r of RECORD_RESOURCES) {
    const table = tables(r);
    const old = before(r);
    const from = old === null ? 0 : old.rowCount;
    const to = table.rowCount;
    const ts = table.columnOf('ModificationTimestamp', 'timestamp');
    const modifiedOf = (row: number): number => (ts !== undefined && getBit(ts.validity, row) ? ts.values[row] : Infinity);
    for (const f of table.schema.fields) {
      const name = lookupNameOf(f);
      if (name === null) continue;
      if (old === null || old.schema.field(f.name) === undefined) {
        for (const v of STANDARD_LOOKUPS.get(name)?.values() ?? []) see(name, v.value, Infinity);
      }
      if (from >= to) continue;
      const column = table.column(f.name);
      if (column?.kind === 'dictionary' || column?.kind === 'collection') {
        // per code: the earliest timestamp of the new rows that use it (NaN: no new row does)
        const earliest = new Float64Array(column.dictionary.length).fill(NaN);
        const use = (code: number, modified: number): void => {
          const was = earliest[code];
          if (Number.isNaN(was) || modified < was) earliest[code] = modified;
        };
        if (column.kind === 'dictionary') {
          for (let row = from; row < to; row++) if (column.codes[row] !== 0) use(column.codes[row], modifiedOf(row));
        } else {
          for (let row = from; row < to; row++) {
            const end = column.offsets[row + 1];
            for (let i = column.offsets[row]; i < end; i++) use(column.codes[i], modifiedOf(row));
          }
        }
        for (let code = 0, seen = 0; code < earliest.length; code++) {
          if (Number.isNaN(earliest[code])) continue;
          see(name, column.dictionary[code]!, earliest[code]);
          if (++seen % SEE_CHECK === 0) yield;
        }
        yield;
        continue;
      }
      // a lookup stored another way (not expected: lookups stay dictionaries), read value by value
      for (let row = from; row < to; row++) {
        const v = table.value(row, f.name);
        for (const s of Array.isArray(v) ? v : [v]) if (typeof s === 'string') see(name, s, modifiedOf(row));
      }
      yield;
    }
  }
  const out: LookupRecord[] = [];
  for (const [key, s] of found) {
    const standard = STANDARD_LOOKUPS.get(s.name)?.get(s.value);
    out.push({
      LookupKey: key,
      LookupName: s.name,
      LookupValue: s.value,
      StandardLookupValue: standard === undefined ? null : standard.value,
      LegacyODataValue: standard === undefined ? null : standard.legacy,
      ModificationTimestamp: standard !== undefined ? STANDARD_LOOKUP_TIMESTAMP : s.modified === Infinity ? null : new Date(s.modified).toISOString(),
    });
  }
  return out.sort((a, b) => compareOrdinal(a.LookupName, b.LookupName) || compareOrdinal(a.LookupValue, b.LookupValue));
}
