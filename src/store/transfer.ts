/**
 * Moves a frozen table segment between threads: its typed arrays are transferred (not copied)
 * and the column objects rebuilt on the other side. Used by the parallel loader (load-worker.ts).
 */
import { TableSchema } from '../schema/table-schema.js';
import type { FieldDef, ResourceName } from '../schema/types.js';
import { ByteIndex, type ByteIndexState } from './byte-index.js';
import { BooleanColumn, CollectionColumn, DateColumn, DictionaryColumn, NumberColumn, TimestampColumn, Utf8TextColumn, type Column } from './columns.js';
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
    };

export interface PackedTable {
  readonly resource: ResourceName;
  readonly key: string;
  readonly declared: readonly FieldDef[];
  readonly local: readonly FieldDef[];
  readonly columns: readonly PackedColumn[];
  readonly rowCount: number;
  readonly keyIndex: ByteIndexState;
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
    case 'text':
      if (c instanceof Utf8TextColumn) return { kind: 'text', bytes: c.bytes, offsets: c.offsets, validity: c.validity };
  }
  throw new Error(`a ${c.kind} column cannot move between threads`);
}

function unpackColumn(p: PackedColumn): Column {
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
      return new Utf8TextColumn(Buffer.from(p.bytes.buffer, p.bytes.byteOffset, p.bytes.byteLength), p.offsets, p.validity);
  }
}

/** The message for postMessage and the buffers to transfer with it. */
export function packTable(t: Table): { packed: PackedTable; transfer: ArrayBuffer[] } {
  const columns = t.columns.map(packColumn);
  const buffers = new Set<ArrayBuffer>();
  const add = (a: ArrayBufferView | null): void => {
    if (a !== null && a.buffer instanceof ArrayBuffer) buffers.add(a.buffer);
  };
  for (const c of columns) for (const v of Object.values(c)) if (ArrayBuffer.isView(v)) add(v);
  const keyIndex = t.keyIndex.state;
  add(keyIndex.table);
  const packed: PackedTable = {
    resource: t.resource,
    key: t.schema.key,
    declared: t.schema.fields.filter((f) => f.origin !== 'local'),
    local: t.schema.fields.filter((f) => f.origin === 'local'),
    columns,
    rowCount: t.rowCount,
    keyIndex,
  };
  return { packed, transfer: [...buffers] };
}

export function unpackTable(p: PackedTable, clock: () => number): Table {
  const freeze = (f: FieldDef): FieldDef => Object.freeze({ ...f, searchFields: Object.freeze([...f.searchFields]) });
  const schema = new TableSchema(p.resource, p.key, p.declared.map(freeze), p.local.map(freeze));
  const columns = p.columns.map(unpackColumn);
  const key = columns[schema.indexOf(p.key)];
  if (!(key instanceof Utf8TextColumn)) throw new Error('key column must be text');
  return new Table(p.resource, schema, columns, ByteIndex.fromState(key, p.keyIndex), p.rowCount, clock);
}
