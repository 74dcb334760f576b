/**
 * The engine's side of snapshots: what `engine.save(path)` puts in the container of file.ts and
 * how `Engine.open({ snapshot })` turns it back into a Store and its indexes, without loading,
 * deriving, sorting, tokenizing or building anything.
 *
 * Stored (content format ENGINE_SNAPSHOT_VERSION): every table's schema (field definitions in
 * schema order), its columns (typed arrays as they are in memory; dictionaries, timestamp style
 * tables and the sparse maps of rare values in `meta`), its key index (the hash table's slots);
 * the child groupings (offsets + rows per child resource); the six search-field indexes (term lists
 * as UTF-8 bytes and offsets, CSR postings, frequencies, field lengths, the mean length); the Location and RawLocation
 * KD-trees (kdbush's buffer, tree item → row, cosines of latitude); the load report, accounts.json
 * and mls_profiles.json. An array shared by two columns (Latitude and the points, the DaysOnMarket
 * reference) is stored once and shared again when read.
 *
 * Rebuilt when read: only the term → id Map of each search index (from its stored term list).
 * Left to be built on first use as after a load: key order and ranks, sorted permutations,
 * per-value bitsets, dictionary ranks, lexicons, impact orders, plans.
 *
 * Reading validates what the engine relies on, so that a file that passed the container's
 * checksums but does not describe a consistent engine (a bug, a forged file, another build) is a
 * SnapshotError here and never a crash or hang in a query: the meta's shape; the content format
 * (SnapshotVersion, also when this build's catalog declares a field differently); every array's
 * element type and length against the row counts; dictionary, collection and style codes in
 * range; offsets starting at 0, never decreasing and ending within (or exactly at) what they
 * index; parent rows, child rows, posting rows and tree rows in range, postings ascending per
 * term; key index slots in range with as many entries as rows and at least one empty slot; the
 * column kind each field type needs; no array left unused. Not checked (a checksum guards against
 * accidents, and none of these can crash): that hashes, child order, the KD-tree's order or the
 * postings agree with the column values they were built from.
 */
import { CATALOG, DERIVED_PROPERTY_FIELDS, makeField } from '../schema/catalog.js';
import { TableSchema } from '../schema/table-schema.js';
import { CHILD_RESOURCES, RESOURCE_NAMES, ROSTER_RESOURCES, type ChildResourceName, type EdmType, type FieldDef, type ResourceName } from '../schema/types.js';
import { PointIndex } from '../geo/point-index.js';
import { POINT_FIELDS, type PointField, type StoreIndexes } from '../access/access.js';
import type { FieldIndex } from '../search/postings.js';
import { TermDictionary } from '../search/terms.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../schema/search-fields.js';
import { ByteIndex } from '../store/byte-index.js';
import { ChildIndex, type ChildOverlay } from '../store/children.js';
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
} from '../store/columns.js';
import { checkAccounts, checkProfiles } from '../store/load.js';
import { Store, type LoadReport } from '../store/store.js';
import { Table } from '../store/table.js';
import { wordsFor } from '../util/bits.js';
import { bufferOf, withRoom, type ArrayMaker } from '../store/append/growable.js';
import {
  readSnapshotFile,
  SnapshotError,
  writeSnapshotFile,
  type SnapshotAllocator,
  type SnapshotArray,
  type SnapshotContents,
  type SnapshotErrorCode,
  type SnapshotProgress,
} from './file.js';

/** Names what wrote the meta (a container file from elsewhere is SnapshotForeign). */
export const ENGINE_SNAPSHOT_KIND = 'reso-engine';
/** The content format: bumped whenever what `meta` and the arrays mean changes. */
export const ENGINE_SNAPSHOT_VERSION = 5;

/** A column in `meta`: its kind, array names for its typed arrays, and its small non-array parts. */
type ColumnMeta =
  | { kind: 'number' | 'date'; values: string; validity: string }
  | { kind: 'timestamp'; values: string; validity: string; styles: string | null; styleTable: number[]; exceptions: Array<[number, string]> | null }
  | { kind: 'boolean'; bits: string; validity: string }
  | { kind: 'dictionary'; codes: string; dictionary: Array<string | null> }
  | { kind: 'text'; bytes: string; offsets: string; validity: string }
  | { kind: 'parentKey'; parentRow: string; unlinked: Array<[number, string]> | null }
  | { kind: 'collection'; offsets: string; codes: string; dictionary: string[]; validity: string }
  | { kind: 'point'; lat: string; lon: string; validity: string }
  | { kind: 'daysOnMarket'; reference: string; validity: string };

interface TableMeta {
  rowCount: number;
  fields: FieldDef[];
  /** Aligned with fields. */
  columns: ColumnMeta[];
  keyIndex: { table: string; mask: number; size: number };
}

interface FieldIndexMeta {
  rowCount: number;
  address: boolean;
  /** The term list as UTF-8 bytes and offsets, as `TermDictionary` holds it. */
  terms: { bytes: string; offsets: string };
  offsets: string;
  rows: string;
  tfs: string;
  lengths: string;
  avgLength: number;
}

interface EngineMeta {
  kind: typeof ENGINE_SNAPSHOT_KIND;
  version: number;
  tables: Record<ResourceName, TableMeta>;
  children: Record<ChildResourceName, { offsets: string; rows: string }>;
  search: Record<SearchFieldName, FieldIndexMeta>;
  points: Record<PointField, { tree: string; rowOf: string; cosAt: string }>;
  report: LoadReport;
  accounts: unknown;
  profiles: unknown;
  /**
   * The ModificationTimestamp of the first version of each listing replaced or removed since it
   * was loaded (null: it had none), which service_OriginalEntryTimestamp of a later version uses
   * (DESIGN.md, "Change"). Absent in snapshots of unchanged engines.
   */
  firstVersions?: Array<[string, number | null]>;
}

// ---- writing ------------------------------------------------------------------------------------

/** Collects the arrays under unique names; an array met again (shared) keeps its first name. */
class ArrayCollector {
  readonly arrays = new Map<string, SnapshotArray>();
  private readonly names = new Map<SnapshotArray, string>();

  put(name: string, a: SnapshotArray): string {
    const had = this.names.get(a);
    if (had !== undefined) return had;
    if (this.arrays.has(name)) throw new Error(`two arrays named ${name}`);
    this.arrays.set(name, a);
    this.names.set(a, name);
    return name;
  }
}

function encodeColumn(c: Column, at: string, out: ArrayCollector): ColumnMeta {
  const put = (part: string, a: SnapshotArray): string => out.put(`${at}.${part}`, a);
  switch (c.kind) {
    case 'number':
    case 'date':
      return { kind: c.kind, values: put('values', c.values), validity: put('validity', c.validity) };
    case 'timestamp':
      return {
        kind: 'timestamp',
        values: put('values', c.values),
        validity: put('validity', c.validity),
        styles: c.styles === null ? null : put('styles', c.styles),
        styleTable: [...c.styleTable],
        exceptions: c.exceptions === null ? null : [...c.exceptions],
      };
    case 'boolean':
      return { kind: 'boolean', bits: put('bits', c.bits), validity: put('validity', c.validity) };
    case 'dictionary':
      return { kind: 'dictionary', codes: put('codes', c.codes), dictionary: [...c.dictionary] };
    case 'collection':
      return {
        kind: 'collection',
        offsets: put('offsets', c.offsets),
        codes: put('codes', c.codes),
        dictionary: [...c.dictionary],
        validity: put('validity', c.validity),
      };
    case 'point':
      return { kind: 'point', lat: put('lat', c.lat), lon: put('lon', c.lon), validity: put('validity', c.validity) };
    case 'daysOnMarket':
      return { kind: 'daysOnMarket', reference: put('reference', c.reference), validity: put('validity', c.validity) };
    case 'text':
      if (c instanceof Utf8TextColumn)
        return { kind: 'text', bytes: put('bytes', c.bytes), offsets: put('offsets', c.offsets), validity: put('validity', c.validity) };
      if (c instanceof ParentKeyColumn)
        return { kind: 'parentKey', parentRow: put('parentRow', c.parentRow), unlinked: c.unlinked === null ? null : [...c.unlinked] };
  }
  throw new Error(`${at}: a ${c.kind} column of an unknown class cannot be saved`);
}

/** The container contents of an engine's store and indexes (views of the live arrays, no copies). */
export function encodeEngine(
  store: Store,
  indexes: StoreIndexes,
  firstVersions?: ReadonlyMap<string, number>,
): { meta: EngineMeta; arrays: Map<string, SnapshotArray> } {
  const out = new ArrayCollector();
  const tables = {} as Record<ResourceName, TableMeta>;
  for (const r of RESOURCE_NAMES) {
    const t = store.table(r);
    const state = t.keyIndex.state;
    tables[r] = {
      rowCount: t.rowCount,
      fields: [...t.schema.fields],
      columns: t.columns.map((c, i) => encodeColumn(c, `${r}.${t.schema.fields[i].name}`, out)),
      keyIndex: { table: out.put(`${r}#key-index`, state.table), mask: state.mask, size: state.size },
    };
  }
  const children = {} as EngineMeta['children'];
  for (const r of CHILD_RESOURCES) {
    const grouped = store.children[r];
    const c = grouped instanceof ChildIndex ? grouped : (grouped as ChildOverlay).toIndex(store.Property.rowCount);
    children[r] = { offsets: out.put(`children.${r}.offsets`, c.offsets), rows: out.put(`children.${r}.rows`, c.rows) };
  }
  const search = {} as EngineMeta['search'];
  for (const f of SEARCH_FIELDS) {
    const x = indexes.search[f];
    const put = (part: string, a: SnapshotArray): string => out.put(`search.${f}.${part}`, a);
    const { terms } = x;
    search[f] = {
      rowCount: x.rowCount,
      address: x.address,
      terms: { bytes: put('terms.bytes', terms.bytes), offsets: put('terms.offsets', terms.offsets) },
      offsets: put('offsets', x.offsets),
      rows: put('rows', x.rows),
      tfs: put('tfs', x.tfs),
      lengths: put('lengths', x.lengths),
      avgLength: x.avgLength,
    };
  }
  const points = {} as EngineMeta['points'];
  for (const f of POINT_FIELDS) {
    const s = indexes.points[f].state;
    points[f] = {
      tree: out.put(`points.${f}.tree`, new Uint8Array(s.tree)),
      rowOf: out.put(`points.${f}.rowOf`, s.rowOf),
      cosAt: out.put(`points.${f}.cosAt`, s.cosAt),
    };
  }
  const meta: EngineMeta = {
    kind: ENGINE_SNAPSHOT_KIND,
    version: ENGINE_SNAPSHOT_VERSION,
    tables,
    children,
    search,
    points,
    report: store.report,
    accounts: store.accounts,
    profiles: store.profiles,
    ...(firstVersions !== undefined && firstVersions.size > 0
      ? { firstVersions: [...firstVersions].map(([k, v]): [string, number | null] => [k, v === v ? v : null]) }
      : {}),
  };
  return { meta, arrays: out.arrays };
}

/** Writes the engine's state to `file` atomically (file.ts); returns the file's size in bytes. */
export function writeEngineSnapshot(
  file: string,
  store: Store,
  indexes: StoreIndexes,
  firstVersions?: ReadonlyMap<string, number>,
  onProgress?: SnapshotProgress,
): { bytes: number } {
  let contents: ReturnType<typeof encodeEngine>;
  try {
    contents = encodeEngine(store, indexes, firstVersions);
  } catch (e) {
    throw new SnapshotError('SnapshotWriteFailed', file, `cannot describe the engine (${e instanceof Error ? e.message : String(e)}); nothing was written`, e);
  }
  return writeSnapshotFile(file, contents, onProgress);
}

// ---- reading ------------------------------------------------------------------------------------

/** Thrown inside decoding; becomes a SnapshotError naming the file. */
class Reject extends Error {
  constructor(
    readonly code: SnapshotErrorCode,
    reason: string,
  ) {
    super(reason);
  }
}

const corrupt = (reason: string): never => {
  throw new Reject('SnapshotCorrupt', reason);
};

type Obj = Record<string, unknown>;

function obj(v: unknown, what: string): Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) corrupt(`${what} is not an object`);
  return v as Obj;
}

function int(v: unknown, what: string, max = 2 ** 32): number {
  if (!Number.isSafeInteger(v) || (v as number) < 0 || (v as number) > max) corrupt(`${what} is ${JSON.stringify(v)}, not an integer from 0 to ${max}`);
  return v as number;
}

function str(v: unknown, what: string): string {
  if (typeof v !== 'string') corrupt(`${what} is not a string`);
  return v as string;
}

function strings(v: unknown, what: string): string[] {
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) corrupt(`${what} is not an array of strings`);
  return v as string[];
}

/** `[[row, text], ...]` with rows below n, or null. */
function sparse(v: unknown, n: number, what: string): Map<number, string> | null {
  if (v === null) return null;
  if (!Array.isArray(v)) return corrupt(`${what} is not an array`);
  const map = new Map<number, string>();
  for (const e of v) {
    if (!Array.isArray(e) || e.length !== 2 || typeof e[1] !== 'string') corrupt(`${what} has an entry that is not [row, text]`);
    const pair = e as [unknown, string];
    const row = int(pair[0], `${what} row`, n - 1);
    map.set(row, pair[1]);
  }
  return map;
}

/** Offsets into something of `size` elements: from `first` on, never decreasing, ending at or below (exact: at) size. */
/**
 * A list of strings as UTF-8 bytes and offsets (string i is bytes [offsets[i], offsets[i + 1])).
 * The search indexes' term lists are stored so, not as JSON strings in `meta`: JSON.parse
 * internalizes every string value of up to 10 characters, and V8 walks its whole table of
 * internalized strings in every full collection, so a million terms read from a snapshot cost
 * each mark-compact about 20 ms (DESIGN.md, "Garbage and pauses"). Strings decoded from bytes are
 * ordinary heap strings.
 */
function checkOffsets(offsets: Uint32Array, size: number, exact: boolean, what: string): void {
  let prev = offsets[0];
  for (let i = 1; i < offsets.length; i++) {
    const o = offsets[i];
    if (o < prev) corrupt(`${what} decrease at ${i}`);
    prev = o;
  }
  if (exact ? prev !== size : prev > size) corrupt(`${what} end at ${prev}, ${exact ? 'not at' : 'past'} ${size}`);
}

/** Every code below `limit`. */
function checkCodes(codes: ArrayLike<number>, limit: number, what: string): void {
  let max = 0;
  for (let i = 0; i < codes.length; i++) if (codes[i] > max) max = codes[i];
  if (codes.length > 0 && max >= limit) corrupt(`${what} hold code ${max}, past the ${limit} entries`);
}

type ArrayType<T> = { new (n: number): T; readonly name: string };

/** Hands out the file's arrays by name, checking element type and length, and notes which were used. */
class Arrays {
  private readonly used = new Set<string>();
  constructor(private readonly arrays: ReadonlyMap<string, SnapshotArray>) {}

  take<T extends SnapshotArray>(ref: unknown, types: ReadonlyArray<ArrayType<T>>, length: number | null, what: string): T {
    const name = str(ref, `${what} (array name)`);
    const a = this.arrays.get(name);
    if (a === undefined) return corrupt(`${what}: array ${name} is missing`);
    if (!types.some((t) => a.constructor === t)) corrupt(`${what}: array ${name} is a ${a.constructor.name}, not a ${types.map((t) => t.name).join(' or ')}`);
    if (length !== null && a.length !== length) corrupt(`${what}: array ${name} has ${a.length} elements, not ${length}`);
    this.used.add(name);
    return a as T;
  }

  f64(ref: unknown, length: number, what: string): Float64Array {
    return this.take(ref, [Float64Array], length, what);
  }

  u32(ref: unknown, length: number | null, what: string): Uint32Array {
    return this.take(ref, [Uint32Array], length, what);
  }

  bitmap(ref: unknown, rows: number, what: string): Uint32Array {
    return this.u32(ref, wordsFor(rows), what);
  }

  codes(ref: unknown, length: number | null, what: string): Uint16Array | Uint32Array {
    return this.take<Uint16Array | Uint32Array>(ref, [Uint16Array, Uint32Array], length, what);
  }

  unused(): string[] {
    return [...this.arrays.keys()].filter((n) => !this.used.has(n));
  }
}

/** The column kinds a field can be stored as (see columns.ts and the loader). */
function kindsFor(resource: ResourceName, f: FieldDef): readonly string[] {
  if (f.collection) return ['collection'];
  const types: Record<EdmType, readonly string[]> = {
    'Edm.String': CATALOG[resource].parent?.field === f.name ? ['text', 'dictionary', 'parentKey'] : ['text', 'dictionary'],
    'Edm.Boolean': ['boolean'],
    'Edm.Int16': ['number'],
    'Edm.Int32': ['number'],
    'Edm.Decimal': ['number'],
    'Edm.Double': ['number'],
    'Edm.Int64': f.origin === 'derived' && f.name === 'DaysOnMarket' ? ['daysOnMarket'] : ['number'],
    'Edm.Date': ['date'],
    'Edm.DateTimeOffset': ['timestamp'],
    'Edm.GeographyPoint': ['point'],
  };
  return types[f.type] ?? [];
}

const DEF_KEYS: ReadonlyArray<keyof FieldDef> = ['name', 'type', 'collection', 'lookup', 'origin', 'key', 'selectable', 'filterable', 'sortable', 'freeText'];

function sameDef(a: Obj, b: FieldDef): boolean {
  if (!DEF_KEYS.every((k) => a[k] === b[k])) return false;
  const s = a.searchFields;
  return Array.isArray(s) && s.length === b.searchFields.length && s.every((x, i) => x === b.searchFields[i]);
}

/** The field definition this build has for a stored one: the catalog's (declared) or the inferred local one. */
function fieldDef(resource: ResourceName, v: unknown, what: string): FieldDef {
  const f = obj(v, what);
  const name = str(f.name, `${what}.name`);
  if (f.origin === 'local') {
    const def = makeField({ name, type: f.type as EdmType, collection: f.collection === true, origin: 'local' });
    if (!sameDef(f, def)) corrupt(`${what} (${name}) is not a local field definition`);
    return def;
  }
  const declared = CATALOG[resource].field(name);
  if (declared === undefined || !sameDef(f, declared)) {
    throw new Reject(
      'SnapshotVersion',
      `${resource}.${name} is declared differently by this build of reso-engine (the snapshot was written by another version); write the snapshot again`,
    );
  }
  return declared;
}

function decodeColumn(v: unknown, f: FieldDef, resource: ResourceName, n: number, a: Arrays, parentKeys: Utf8TextColumn | null, parentRows: number): Column {
  const what = `${resource}.${f.name}`;
  const m = obj(v, `${what} column`);
  const kind = str(m.kind, `${what} kind`);
  if (!kindsFor(resource, f).includes(kind)) corrupt(`${what} (${f.collection ? 'collection' : f.type}) is stored as a ${kind} column`);
  switch (kind) {
    case 'number':
      return new NumberColumn(a.f64(m.values, n, what), a.bitmap(m.validity, n, what));
    case 'date':
      return new DateColumn(a.f64(m.values, n, what), a.bitmap(m.validity, n, what));
    case 'timestamp': {
      if (!Array.isArray(m.styleTable)) return corrupt(`${what} style table is not an array`);
      const styleTable = m.styleTable.map((s, i) => int(s, `${what} style ${i}`, 2 ** 31));
      const styles = m.styles === null ? null : a.take(m.styles, [Uint16Array], n, what);
      if (styles !== null) checkCodes(styles, styleTable.length, `${what} styles`);
      return new TimestampColumn(a.f64(m.values, n, what), a.bitmap(m.validity, n, what), styles, styleTable, sparse(m.exceptions, n, `${what} exceptions`));
    }
    case 'boolean':
      return new BooleanColumn(a.bitmap(m.bits, n, what), a.bitmap(m.validity, n, what));
    case 'dictionary': {
      const dictionary = m.dictionary;
      if (!Array.isArray(dictionary) || dictionary[0] !== null || !dictionary.slice(1).every((s) => typeof s === 'string')) {
        return corrupt(`${what} dictionary is not [null, strings...]`);
      }
      const codes = a.codes(m.codes, n, what);
      checkCodes(codes, dictionary.length, `${what} codes`);
      return new DictionaryColumn(codes, dictionary as Array<string | null>);
    }
    case 'text': {
      const bytes = a.take(m.bytes, [Uint8Array], null, what);
      const offsets = a.u32(m.offsets, n + 1, what);
      checkOffsets(offsets, bytes.length, false, `${what} offsets`);
      return new Utf8TextColumn(bufferOf(bytes), offsets, a.bitmap(m.validity, n, what));
    }
    case 'parentKey': {
      if (parentKeys === null) return corrupt(`${what} links to listings, but ${resource} is not a child resource`);
      const parentRow = a.take(m.parentRow, [Int32Array], n, what);
      for (let i = 0; i < n; i++)
        if (parentRow[i] < -1 || parentRow[i] >= parentRows) corrupt(`${what} links row ${i} to listing row ${parentRow[i]} of ${parentRows}`);
      return new ParentKeyColumn(parentRow, parentKeys, sparse(m.unlinked, n, `${what} unlinked values`));
    }
    case 'collection': {
      const dictionary = strings(m.dictionary, `${what} dictionary`);
      const codes = a.codes(m.codes, null, what);
      const offsets = a.u32(m.offsets, n + 1, what);
      checkOffsets(offsets, codes.length, false, `${what} offsets`);
      checkCodes(codes, dictionary.length, `${what} codes`);
      return new CollectionColumn(offsets, codes, dictionary, a.bitmap(m.validity, n, what));
    }
    case 'point':
      return new PointColumn(a.f64(m.lat, n, what), a.f64(m.lon, n, what), a.bitmap(m.validity, n, what));
    case 'daysOnMarket':
      return new DaysOnMarketColumn(a.f64(m.reference, n, what), a.bitmap(m.validity, n, what));
  }
  return corrupt(`${what} has unknown column kind ${kind}`);
}

function decodeTable(resource: ResourceName, v: unknown, a: Arrays, parent: Table | null, clock: () => number): Table {
  const m = obj(v, resource);
  const n = int(m.rowCount, `${resource} row count`, 2 ** 31 - 2);
  if (!Array.isArray(m.fields) || !Array.isArray(m.columns) || m.fields.length !== m.columns.length) {
    return corrupt(`${resource} has no fields, or not one column per field`);
  }
  const defs = m.fields.map((f, i) => fieldDef(resource, f, `${resource} field ${i}`));
  if (new Set(defs.map((f) => f.name)).size !== defs.length) corrupt(`${resource} has a field twice`);
  const key = CATALOG[resource].key;
  const schema = new TableSchema(
    resource,
    key,
    defs.filter((f) => f.origin !== 'local'),
    defs.filter((f) => f.origin === 'local'),
  );
  if (schema.fields.length !== defs.length || schema.fields.some((f, i) => f !== defs[i])) corrupt(`${resource} fields are not in schema order (or repeat)`);
  if (resource === 'Property') {
    for (const d of DERIVED_PROPERTY_FIELDS) if (schema.indexOf(d.name) < 0) corrupt(`Property lacks the derived field ${d.name}`);
  }
  const parentKeys = parent === null ? null : parent.keyColumn;
  const columns = m.columns.map((c, i) => decodeColumn(c, defs[i], resource, n, a, parentKeys, parent?.rowCount ?? 0));
  const keyColumn = columns[0];
  if (!(keyColumn instanceof Utf8TextColumn)) return corrupt(`${resource} key ${key} is not a text column`);
  const k = obj(m.keyIndex, `${resource} key index`);
  const table = a.take(k.table, [Int32Array], null, `${resource} key index`);
  const slots = table.length >>> 1;
  if (slots < 16 || (slots & (slots - 1)) !== 0 || table.length !== slots * 2 || k.mask !== slots - 1)
    corrupt(`${resource} key index has ${table.length} cells and mask ${String(k.mask)}`);
  if (k.size !== n) corrupt(`${resource} key index holds ${String(k.size)} keys for ${n} rows`);
  if (n >= slots) corrupt(`${resource} key index has no empty slot`);
  let entries = 0;
  for (let i = 0; i < table.length; i += 2) {
    const e = table[i];
    if (e === 0) continue;
    if (e < 0 || e > n) corrupt(`${resource} key index slot ${i >>> 1} holds row ${e - 1} of ${n}`);
    entries++;
  }
  if (entries !== n) corrupt(`${resource} key index holds ${entries} entries for ${n} rows`);
  return new Table(resource, schema, columns, ByteIndex.fromState(keyColumn, { table, mask: slots - 1, size: n }), n, clock);
}

function decodeFieldIndex(field: SearchFieldName, v: unknown, listings: number, a: Arrays): FieldIndex {
  const what = `search index ${field}`;
  const m = obj(v, what);
  if (m.rowCount !== listings) corrupt(`${what} covers ${String(m.rowCount)} listings, not ${listings}`);
  if (m.address !== (field === 'RawAddressSearchText')) corrupt(`${what} has the wrong address flag`);
  const packed = obj(m.terms, `${what} terms`);
  const bytes = bufferOf(a.take(packed.bytes, [Uint8Array], null, what));
  const termOffsets = a.take(packed.offsets, [Uint32Array], null, what);
  if (termOffsets.length === 0) corrupt(`${what} term offsets are empty`);
  checkOffsets(termOffsets, bytes.length, true, `${what} term offsets`);
  const packedTerms = TermDictionary.fromPacked(bytes, termOffsets);
  const terms = packedTerms instanceof TermDictionary ? packedTerms : corrupt(`${what} repeats a term (ids ${packedTerms.first} and ${packedTerms.second})`);
  const offsets = a.u32(m.offsets, terms.size + 1, what);
  const rows = a.u32(m.rows, null, what);
  const tfs = a.take(m.tfs, [Uint16Array], rows.length, what);
  const lengths = a.u32(m.lengths, listings, what);
  if (offsets[0] !== 0) corrupt(`${what} offsets do not start at 0`);
  checkOffsets(offsets, rows.length, true, `${what} offsets`);
  for (let t = 0; t < terms.size; t++) {
    const end = offsets[t + 1];
    let prev = -1;
    for (let i = offsets[t]; i < end; i++) {
      if (rows[i] <= prev) corrupt(`${what} postings of '${terms.term(t)}' are not ascending`);
      prev = rows[i];
    }
    if (prev >= listings) corrupt(`${what} postings of '${terms.term(t)}' hold row ${prev} of ${listings}`);
  }
  const avgLength = m.avgLength;
  if (typeof avgLength !== 'number' || !Number.isFinite(avgLength) || avgLength < 0) corrupt(`${what} mean length is ${JSON.stringify(avgLength)}`);
  return { rowCount: listings, address: m.address as boolean, terms, offsets, rows, tfs, lengths, avgLength: avgLength as number };
}

/** The Store and indexes of a snapshot's contents, or a Reject. */
function decodeEngine(contents: { meta: unknown; arrays: ReadonlyMap<string, SnapshotArray> }, clock: () => number): RestoredEngine {
  const meta = contents.meta;
  if (typeof meta !== 'object' || meta === null || (meta as Obj).kind !== ENGINE_SNAPSHOT_KIND) {
    throw new Reject('SnapshotForeign', 'not an engine snapshot (a snapshot container written by something else)');
  }
  const m = meta as Obj;
  if (m.version !== ENGINE_SNAPSHOT_VERSION) {
    throw new Reject('SnapshotVersion', `engine snapshot content version ${JSON.stringify(m.version)}; this build reads version ${ENGINE_SNAPSHOT_VERSION}`);
  }
  const a = new Arrays(contents.arrays);
  const tablesMeta = obj(m.tables, 'tables');
  const tables = {} as Record<ResourceName, Table>;
  tables.Property = decodeTable('Property', tablesMeta.Property, a, null, clock);
  for (const r of CHILD_RESOURCES) tables[r] = decodeTable(r, tablesMeta[r], a, tables.Property, clock);
  for (const r of ROSTER_RESOURCES) tables[r] = decodeTable(r, tablesMeta[r], a, null, clock);
  tables.Lookup = decodeTable('Lookup', tablesMeta.Lookup, a, null, clock);
  tables.EntityEvent = decodeTable('EntityEvent', tablesMeta.EntityEvent, a, null, clock);
  const listings = tables.Property.rowCount;

  const childrenMeta = obj(m.children, 'children');
  const children = {} as Record<ChildResourceName, ChildIndex>;
  for (const r of CHILD_RESOURCES) {
    const c = obj(childrenMeta[r], `${r} children`);
    const offsets = a.u32(c.offsets, listings + 1, `${r} children`);
    const rows = a.u32(c.rows, null, `${r} children`);
    if (offsets[0] !== 0) corrupt(`${r} children offsets do not start at 0`);
    checkOffsets(offsets, rows.length, true, `${r} children offsets`);
    checkCodes(rows, tables[r].rowCount, `${r} children rows`);
    children[r] = new ChildIndex(offsets, rows);
  }

  const searchMeta = obj(m.search, 'search indexes');
  const search = {} as Record<SearchFieldName, FieldIndex>;
  for (const f of SEARCH_FIELDS) search[f] = decodeFieldIndex(f, searchMeta[f], listings, a);

  const pointsMeta = obj(m.points, 'point indexes');
  const points = {} as Record<PointField, PointIndex>;
  for (const f of POINT_FIELDS) {
    const p = obj(pointsMeta[f], `${f} index`);
    const column = tables.Property.columnOf(f, 'point')!;
    const tree = a.take(p.tree, [Uint8Array], null, `${f} index`);
    const rowOf = a.u32(p.rowOf, null, `${f} index`);
    const cosAt = a.f64(p.cosAt, Math.max(1, rowOf.length), `${f} index`);
    const buffer = tree.byteOffset === 0 && tree.byteLength === tree.buffer.byteLength ? tree.buffer : tree.slice().buffer;
    try {
      points[f] = PointIndex.fromState(column.lon, column.lat, { tree: buffer, rowOf, cosAt });
    } catch (e) {
      corrupt(`${f} index: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  const unused = a.unused();
  if (unused.length > 0) corrupt(`arrays nothing refers to: ${unused.slice(0, 5).join(', ')}${unused.length > 5 ? ', ...' : ''}`);

  const report = obj(m.report, 'load report');
  if (!['resources', 'skipped', 'localFields', 'bytesRead', 'parallel'].every((k) => k in report)) corrupt('the load report is incomplete');
  const config = (value: unknown, check: (value: unknown, file: string) => unknown, name: string): unknown => {
    if (value === null) return null;
    try {
      return check(value, name);
    } catch (e) {
      return corrupt(`${name}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  const accounts = config(m.accounts, checkAccounts, 'accounts.json');
  const profiles = config(m.profiles, checkProfiles, 'mls_profiles.json');
  const store = new Store(tables, children, report as unknown as LoadReport, accounts, profiles, clock);
  const firstVersions = new Map<string, number>();
  if (m.firstVersions !== undefined) {
    if (!Array.isArray(m.firstVersions)) corrupt('firstVersions is not a list');
    for (const e of m.firstVersions as unknown[]) {
      if (!Array.isArray(e) || e.length !== 2 || typeof e[0] !== 'string' || !(e[1] === null || Number.isFinite(e[1])))
        corrupt('a firstVersions entry is not [key, timestamp or null]');
      const [key, ms] = e as [string, number | null];
      firstVersions.set(key, ms ?? NaN);
    }
  }
  return { store, indexes: { search, points }, firstVersions };
}

/** What a snapshot holds: the store, its indexes, and the change writer's memory of first versions. */
export interface RestoredEngine {
  readonly store: Store;
  readonly indexes: StoreIndexes;
  readonly firstVersions: ReadonlyMap<string, number>;
}

/**
 * Reads a snapshot written by writeEngineSnapshot: the store (with `clock` as its clock) and its
 * indexes. Throws a SnapshotError for anything wrong with the file or what it describes.
 */
export function readEngineSnapshot(file: string, clock: () => number, onProgress?: SnapshotProgress): RestoredEngine {
  return restoreEngine(file, readSnapshotFile(file, onProgress, withRoomIfLarge), clock);
}

/** Arrays of at least this many bytes are read with room after them (smaller ones are cheap to copy). */
const ROOM_MIN_BYTES = 1 << 16;

/**
 * The allocator of an engine snapshot's arrays: large arrays of the element types columns use
 * get room after them (`withRoom`), so the first change after opening the snapshot appends into
 * them instead of copying every column (5.4 GB at 1M listings with Media).
 */
const withRoomIfLarge: SnapshotAllocator = (ctor, length) => {
  const roomy = ctor === Float64Array || ctor === Uint32Array || ctor === Uint16Array || ctor === Int32Array || ctor === Uint8Array;
  return roomy && length * ctor.BYTES_PER_ELEMENT >= ROOM_MIN_BYTES
    ? withRoom(ctor as ArrayMaker<Float64Array | Uint32Array | Uint16Array | Int32Array | Uint8Array>, length)
    : new ctor(length);
};

/** The engine half of readEngineSnapshot, on contents already read from `file` (benchmarks time the halves). */
export function restoreEngine(file: string, contents: SnapshotContents, clock: () => number): RestoredEngine {
  try {
    return decodeEngine(contents, clock);
  } catch (e) {
    if (e instanceof Reject) throw new SnapshotError(e.code, file, e.message);
    // Anything else a constructor refused is an inconsistency the checks above did not name.
    throw new SnapshotError('SnapshotCorrupt', file, `inconsistent contents (${e instanceof Error ? e.message : String(e)})`, e);
  }
}
