/**
 * The vocabulary of one record on its way into a segment (ingest.ts): what a field's values must
 * be, how its column is built, the scratch a record is scanned into before it is committed, and
 * the log of records skipped.
 */
import type { EdmType, FieldDef } from '../schema/types.js';
import { isIntegerType } from '../schema/types.js';
import type { BooleanBuilder, CollectionBuilder, DictBuilder, LinkBuilder, NumberBuilder, TextBuilder, TimestampBuilder } from './builders.js';
import { writeUtf8 } from './bytes.js';
import type { DataError, DataErrorInfo } from './errors.js';

// What a field's values must be (slot.expect).
export const E_STRING = 1;
export const E_NUMBER = 2;
export const E_INTEGER = 3;
export const E_BOOLEAN = 4;
export const E_DATE = 5;
export const E_TIMESTAMP = 6;
export const E_COLLECTION = 7;
/** Derived fields: input values are ignored (and counted). */
export const E_IGNORED = 8;
/** A local field that has carried only nulls so far. */
export const E_PENDING = 9;

// Builder kinds (slot.kind).
const B_NONE = 0;
export const B_NUMBER = 1;
export const B_TIMESTAMP = 2;
export const B_BOOLEAN = 3;
export const B_TEXT = 4;
export const B_DICT = 5;
export const B_COLLECTION = 6;
export const B_LINK = 7;

// Value tags in the scratch.
export const T_NULL = 0;
export const T_NUM = 1;
export const T_BOOL = 2;
export const T_STR = 3;
export const T_TS = 4;
export const T_COLL = 5;
export const T_SKIP = 6;

// Slot roles the record-level checks look for.
export const R_NONE = 0;
export const R_KEY = 1;
export const R_LINK = 2;
export const R_COND = 3;

export const EXPECT_TEXT: Record<number, string> = {
  [E_STRING]: 'a string',
  [E_NUMBER]: 'a number',
  [E_INTEGER]: 'an integer',
  [E_BOOLEAN]: 'true or false',
  [E_DATE]: 'a date (YYYY-MM-DD)',
  [E_TIMESTAMP]: 'an ISO 8601 timestamp with Z or an offset (e.g. 2024-05-01T10:00:00Z)',
  [E_COLLECTION]: 'an array of strings',
};

// Byte classes inside a JSON string on the fast path.
export const C_QUOTE = 1;
export const C_ESCAPE = 2;
const C_CONTROL = 3;
export const C_HIGH = 4;
export const CHAR_CLASS = new Uint8Array(256);
for (let c = 0; c < 32; c++) CHAR_CLASS[c] = C_CONTROL;
for (let c = 128; c < 256; c++) CHAR_CLASS[c] = C_HIGH;
CHAR_CLASS[34] = C_QUOTE;
CHAR_CLASS[92] = C_ESCAPE;

export const POW10 = [1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];

export type Builder = NumberBuilder | TimestampBuilder | BooleanBuilder | TextBuilder | DictBuilder | CollectionBuilder | LinkBuilder;

export function expectOf(def: FieldDef): number {
  if (def.origin === 'derived') return E_IGNORED;
  if (def.collection) return E_COLLECTION;
  switch (def.type) {
    case 'Edm.String':
      return E_STRING;
    case 'Edm.Boolean':
      return E_BOOLEAN;
    case 'Edm.Date':
      return E_DATE;
    case 'Edm.DateTimeOffset':
      return E_TIMESTAMP;
    default:
      return isIntegerType(def.type) ? E_INTEGER : E_NUMBER;
  }
}

export const EXPECT_TYPE: Record<number, EdmType> = {
  [E_STRING]: 'Edm.String',
  [E_NUMBER]: 'Edm.Decimal',
  [E_INTEGER]: 'Edm.Int64',
  [E_BOOLEAN]: 'Edm.Boolean',
  [E_DATE]: 'Edm.Date',
  [E_TIMESTAMP]: 'Edm.DateTimeOffset',
  [E_COLLECTION]: 'Edm.String',
  [E_PENDING]: 'Edm.String',
};

export class FieldSlot {
  builder: Builder | null = null;
  kind = B_NONE;
  /** Record number of the last fast scan that saw this field (duplicate names in one object). */
  stamp = -1;
  /** Carried by at least one committed record. */
  seen = false;
  /** Input values dropped because the field is derived. */
  ignored = 0;
  /** Local fields: where the data first carried it, and in which order. */
  firstLine = 0;
  /** The slot whose name followed this one in the last record (feeds keep their field order). */
  next = -1;

  constructor(
    public def: FieldDef,
    public expect: number,
    readonly index: number,
    readonly role: number,
    readonly nameBytes: Buffer,
  ) {}
}

/** Per-record values, reused for every record. */
export class Scratch {
  n = 0;
  slot = new Int32Array(128);
  tag = new Uint8Array(128);
  inArena = new Uint8Array(128);
  widen = new Uint8Array(128);
  num = new Float64Array(128);
  aux = new Int32Array(128);
  s = new Int32Array(128);
  e = new Int32Array(128);
  elems = 0;
  elemS = new Int32Array(256);
  elemE = new Int32Array(256);
  elemInArena = new Uint8Array(256);
  /** Strings the generic path encoded, and unescaped strings of the fast path. */
  arena: Buffer = Buffer.allocUnsafeSlow(64 * 1024);
  arenaEnd = 0;
  src: Buffer = this.arena;
  readonly roleAt = new Int32Array(4);

  reset(src: Buffer): void {
    this.n = 0;
    this.elems = 0;
    this.arenaEnd = 0;
    this.src = src;
    this.roleAt.fill(-1);
  }

  push(slot: number): number {
    const k = this.n++;
    if (k === this.slot.length) this.growFields();
    this.slot[k] = slot;
    this.inArena[k] = 0;
    this.widen[k] = 0;
    return k;
  }

  pushElem(s: number, e: number, inArena: number): void {
    const j = this.elems++;
    if (j === this.elemS.length) {
      this.elemS = grow32(this.elemS);
      this.elemE = grow32(this.elemE);
      const a = new Uint8Array(this.elemInArena.length * 2);
      a.set(this.elemInArena);
      this.elemInArena = a;
    }
    this.elemS[j] = s;
    this.elemE[j] = e;
    this.elemInArena[j] = inArena;
  }

  /** Copies `text` as UTF-8 into the arena; returns its start (end is arenaEnd). */
  putString(text: string): number {
    const need = this.arenaEnd + text.length * 3;
    if (need > this.arena.length) {
      const next = Buffer.allocUnsafeSlow(Math.max(need, this.arena.length * 2));
      this.arena.copy(next, 0, 0, this.arenaEnd);
      if (this.src === this.arena) this.src = next;
      this.arena = next;
    }
    const start = this.arenaEnd;
    this.arenaEnd = writeUtf8(text, this.arena, start);
    return start;
  }

  private growFields(): void {
    const n = this.slot.length * 2;
    this.slot = grow32(this.slot);
    this.s = grow32(this.s);
    this.e = grow32(this.e);
    this.aux = grow32(this.aux);
    const num = new Float64Array(n);
    num.set(this.num);
    this.num = num;
    for (const key of ['tag', 'inArena', 'widen'] as const) {
      const a = new Uint8Array(n);
      a.set(this[key]);
      this[key] = a;
    }
  }
}

function grow32(a: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> {
  const out = new Int32Array(a.length * 2);
  out.set(a);
  return out;
}

/** Skipped records of a load (skip mode). */
export class SkipLog {
  total = 0;
  readonly byCode: Record<string, number> = {};
  readonly samples: DataErrorInfo[] = [];

  constructor(private readonly maxSamples = 100) {}

  add(err: DataError): void {
    this.total++;
    this.byCode[err.code] = (this.byCode[err.code] ?? 0) + 1;
    if (this.samples.length < this.maxSamples) this.samples.push(err.toJSON());
  }

  /** Appends another log (a later resource's). */
  merge(other: { readonly total: number; readonly byCode: Readonly<Record<string, number>>; readonly samples: readonly DataErrorInfo[] }): void {
    this.total += other.total;
    for (const [code, n] of Object.entries(other.byCode)) this.byCode[code] = (this.byCode[code] ?? 0) + n;
    for (const s of other.samples) if (this.samples.length < this.maxSamples) this.samples.push(s);
  }
}

/** The merged expectation of a local field, or -1 when the two cannot share a column. */
export function mergeExpect(current: number, incoming: number): number {
  if (current === E_PENDING || current === incoming) return incoming;
  const numeric = (x: number) => x === E_INTEGER || x === E_NUMBER;
  const stringy = (x: number) => x === E_STRING || x === E_DATE || x === E_TIMESTAMP;
  if (numeric(current) && numeric(incoming)) return E_NUMBER;
  if (stringy(current) && stringy(incoming)) return E_STRING;
  return -1;
}
