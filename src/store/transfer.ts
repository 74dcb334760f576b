/**
 * Moves a table between threads: its typed arrays go over (transferred when the sender is done
 * with them, shared when they are views of a SharedArrayBuffer, else copied) and the column
 * objects are rebuilt on the other side. Used by the parallel loader (load-worker.ts: frozen
 * segments, transferred) and by compaction on a worker thread (live/compact-thread.ts: a
 * generation's tables there, the compacted tables back, with the room after their arrays).
 */
import { TableSchema } from '../schema/table-schema.js';
import type { FieldDef, ResourceName } from '../schema/types.js';
import { ByteIndex, type ByteIndexState } from './byte-index.js';
import { bufferOf, giveRoom, wholeOf } from './append/growable.js';
import {
  BooleanColumn,
  CollectionColumn,
  DateColumn,
  DaysOnMarketColumn,
  DictionaryColumn,
  NumberColumn,
  ParentKeyColumn,
  PointColumn,
  TimestampColumn,
  Utf8TextColumn,
  type Column,
} from './columns.js';
import { Table } from './table.js';

export type PackedColumn =
  | { readonly kind: 'number' | 'date'; readonly values: Float64Array; readonly validity: Uint32Array }
  | {
      readonly kind: 'timestamp';
      readonly values: Float64Array;
      readonly validity: Uint32Array;
      readonly styles: Uint16Array | null;
      readonly styleTable: readonly number[];
      readonly exceptions: Array<[number, string]> | null;
    }
  | { readonly kind: 'boolean'; readonly bits: Uint32Array; readonly validity: Uint32Array }
  | { readonly kind: 'dictionary'; readonly codes: Uint16Array | Uint32Array; readonly dictionary: ReadonlyArray<string | null> }
  | { readonly kind: 'text'; readonly bytes: Uint8Array; readonly offsets: Uint32Array; readonly validity: Uint32Array }
  | {
      readonly kind: 'collection';
      readonly offsets: Uint32Array;
      readonly codes: Uint16Array | Uint32Array;
      readonly dictionary: readonly string[];
      readonly validity: Uint32Array;
    }
  | { readonly kind: 'parentKey'; readonly parentRow: Int32Array; readonly unlinked: Array<[number, string]> | null }
  | { readonly kind: 'point'; readonly lat: Float64Array; readonly lon: Float64Array; readonly validity: Uint32Array }
  | { readonly kind: 'daysOnMarket'; readonly reference: Float64Array; readonly validity: Uint32Array };

export interface PackedTable {
  readonly resource: ResourceName;
  readonly key: string;
  readonly declared: readonly FieldDef[];
  readonly local: readonly FieldDef[];
  readonly columns: readonly PackedColumn[];
  readonly rowCount: number;
  /** Null: left behind (`packTable(t, { keyIndex: false })`); the table on the other side cannot look keys up. */
  readonly keyIndex: ByteIndexState | null;
  /** Arrays made with room (`withRoom`) and the whole arrays behind them, for the receiver's appender. */
  readonly room: ReadonlyArray<readonly [ArrayBufferView, ArrayBufferView]>;
}

function packColumn(c: Column): PackedColumn {
  switch (c.kind) {
    case 'number':
    case 'date':
      return { kind: c.kind, values: c.values, validity: c.validity };
    case 'timestamp':
      return {
        kind: 'timestamp',
        values: c.values,
        validity: c.validity,
        styles: c.styles,
        styleTable: c.styleTable,
        exceptions: c.exceptions === null ? null : [...c.exceptions],
      };
    case 'boolean':
      return { kind: 'boolean', bits: c.bits, validity: c.validity };
    case 'dictionary':
      return { kind: 'dictionary', codes: c.codes, dictionary: c.dictionary };
    case 'collection':
      return { kind: 'collection', offsets: c.offsets, codes: c.codes, dictionary: c.dictionary, validity: c.validity };
    case 'point':
      return { kind: 'point', lat: c.lat, lon: c.lon, validity: c.validity };
    case 'daysOnMarket':
      return { kind: 'daysOnMarket', reference: c.reference, validity: c.validity };
    case 'text':
      if (c instanceof Utf8TextColumn) return { kind: 'text', bytes: c.bytes, offsets: c.offsets, validity: c.validity };
      if (c instanceof ParentKeyColumn) return { kind: 'parentKey', parentRow: c.parentRow, unlinked: c.unlinked === null ? null : [...c.unlinked] };
  }
  throw new Error(`a ${c.kind} column cannot move between threads`);
}

function unpackColumn(p: PackedColumn, parent: Table | null): Column {
  switch (p.kind) {
    case 'number':
      return new NumberColumn(p.values, p.validity);
    case 'date':
      return new DateColumn(p.values, p.validity);
    case 'timestamp':
      return new TimestampColumn(p.values, p.validity, p.styles, p.styleTable, p.exceptions === null ? null : new Map(p.exceptions));
    case 'boolean':
      return new BooleanColumn(p.bits, p.validity);
    case 'dictionary':
      return new DictionaryColumn(p.codes, p.dictionary);
    case 'collection':
      return new CollectionColumn(p.offsets, p.codes, p.dictionary, p.validity);
    case 'text':
      return new Utf8TextColumn(bufferOf(p.bytes), p.offsets, p.validity);
    case 'parentKey':
      if (parent === null) throw new Error('a parent link without its parent table');
      return new ParentKeyColumn(p.parentRow, parent.keyColumn, p.unlinked === null ? null : new Map(p.unlinked));
    case 'point':
      return new PointColumn(p.lat, p.lon, p.validity);
    case 'daysOnMarket':
      return new DaysOnMarketColumn(p.reference, p.validity);
  }
}

/** What `packTable` leaves behind. */
export interface PackOptions {
  /**
   * False: the key index stays behind (a generation's index over appended rows is made plain only
   * by a pass over every row: 1.5 s at 100k listings with Media).
   */
  readonly keyIndex?: boolean;
  /** False: the dictionaries stay behind, for a receiver that has them (`unpackTable`'s `dictionariesOf`). */
  readonly dictionaries?: boolean;
}

/** The message for postMessage and the buffers to transfer with it. */
export function packTable(t: Table, { keyIndex = true, dictionaries = true }: PackOptions = {}): { packed: PackedTable; transfer: ArrayBuffer[] } {
  const columns = t.columns.map((c) => {
    const packed = packColumn(c);
    return dictionaries || !('dictionary' in packed) ? packed : { ...packed, dictionary: [] };
  });
  const buffers = new Set<ArrayBuffer>();
  const room: Array<readonly [ArrayBufferView, ArrayBufferView]> = [];
  const add = (a: ArrayBufferView): void => {
    const whole = wholeOf(a);
    if (whole !== a) room.push([a, whole]);
    if (whole.buffer instanceof ArrayBuffer) buffers.add(whole.buffer);
  };
  for (const c of columns) for (const v of Object.values(c)) if (ArrayBuffer.isView(v)) add(v);
  const index = keyIndex ? t.keyIndex.state : null;
  if (index !== null) add(index.table);
  const packed: PackedTable = {
    resource: t.resource,
    key: t.schema.key,
    declared: t.schema.fields.filter((f) => f.origin !== 'local'),
    local: t.schema.fields.filter((f) => f.origin === 'local'),
    columns,
    rowCount: t.rowCount,
    keyIndex: index,
    room,
  };
  return { packed, transfer: [...buffers] };
}

/**
 * The table `packTable` packed (`parent`: the Property table its parent links point into, for a
 * child table; `dictionariesOf`: a table whose columns hold the dictionaries left behind, at the
 * same positions).
 */
export function unpackTable(p: PackedTable, clock: () => number, parent: Table | null = null, dictionariesOf: Table | null = null): Table {
  const freeze = (f: FieldDef): FieldDef => Object.freeze({ ...f, searchFields: Object.freeze([...f.searchFields]) });
  const schema = new TableSchema(p.resource, p.key, p.declared.map(freeze), p.local.map(freeze));
  for (const [view, whole] of p.room) giveRoom(view, whole);
  const columns = p.columns.map((c, i) => unpackColumn(withDictionaryOf(c, dictionariesOf?.columns[i]), parent));
  const key = columns[schema.indexOf(p.key)];
  if (!(key instanceof Utf8TextColumn)) throw new Error('key column must be text');
  return new Table(
    p.resource,
    schema,
    columns,
    p.keyIndex === null ? new KeysLeftBehind(key, p.resource) : ByteIndex.fromState(key, p.keyIndex),
    p.rowCount,
    clock,
  );
}

/** `c` with the dictionary of `had` (a column of the same kind), or as it is. */
function withDictionaryOf(c: PackedColumn, had: Column | undefined): PackedColumn {
  if (had?.kind === 'dictionary' && c.kind === 'dictionary') return { ...c, dictionary: had.dictionary };
  if (had?.kind === 'collection' && c.kind === 'collection') return { ...c, dictionary: had.dictionary };
  return c;
}

/** The key index of a table packed without it: any look-up is a defect, said as such. */
class KeysLeftBehind extends ByteIndex {
  constructor(
    keys: Utf8TextColumn,
    private readonly resource: string,
  ) {
    super(keys, 0);
  }

  override find(): never {
    throw new Error(`${this.resource}: the table came over without its key index`);
  }

  override get state(): never {
    return this.find();
  }
}
