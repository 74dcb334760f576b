/**
 * Column builders: the write side of columns.ts, used while a segment is loaded. Each builder
 * grows its own arrays geometrically as rows arrive (rows never written stay null) and `freeze(n)`
 * returns the immutable column sized to exactly n rows. Values arrive as byte ranges of the input
 * (or of the loader's scratch arena), so strings are copied or matched as bytes, never decoded.
 */
import { QueryError } from '../errors.js';
import { getBit, newBitmap, resizeBitmap, setBit } from '../util/bits.js';
import { ByteIndex, type ByteStore } from './byte-index.js';
import { allocBytes, copyBytes, decodeUtf8, growBytes, hashBytes, writeUtf8 } from './bytes.js';
import {
  BooleanColumn,
  CollectionColumn,
  DateColumn,
  DictionaryColumn,
  NumberColumn,
  ParentKeyColumn,
  TimestampColumn,
  Utf8TextColumn,
  type TextColumn,
} from './columns.js';
import { CANONICAL_STYLE, formatDate, formatTimestamp } from './temporal.js';

const MAX_BYTES = 0xffff_ffff;

function nextCapacity(cap: number, needed: number): number {
  return Math.max(needed, Math.ceil(cap * 1.5), 1024);
}

/**
 * `a` sized to n elements: a view when the spare capacity is small (at most 1/16), else a copy,
 * so that freezing does not copy every column of a large segment once more.
 */
function fit<T extends Float64Array | Uint32Array | Uint16Array | Int32Array>(a: T, n: number, make: (n: number) => T): T {
  if (a.length === n) return a;
  if (a.length > n && a.length - n <= a.length >>> 4) return a.subarray(0, n) as T;
  const out = make(n);
  out.set(a.length > n ? a.subarray(0, n) : a);
  return out;
}

function fitF64(a: Float64Array, n: number): Float64Array {
  return fit(a, n, (k) => new Float64Array(k));
}

function fitU32(a: Uint32Array, n: number): Uint32Array {
  return fit(a, n, (k) => new Uint32Array(k));
}

function fitCodes(a: Uint16Array | Uint32Array, n: number): Uint16Array | Uint32Array {
  return a instanceof Uint16Array ? fit(a, n, (k) => new Uint16Array(k)) : fit(a, n, (k) => new Uint32Array(k));
}

/** Numbers, dates (days) and the numeric part of timestamps. */
export class NumberBuilder {
  values: Float64Array;
  validity: Uint32Array;

  constructor(capacity: number) {
    this.values = new Float64Array(capacity);
    this.validity = newBitmap(capacity);
  }

  protected resize(cap: number): void {
    const values = new Float64Array(cap);
    values.set(this.values);
    this.values = values;
    this.validity = resizeBitmap(this.validity, cap);
  }

  private grow(needed: number): void {
    this.resize(nextCapacity(this.values.length, needed));
  }

  /** Room for `rows` rows, so that a load of known size copies nothing while growing. */
  reserve(rows: number): void {
    if (rows > this.values.length) this.resize(rows);
  }

  write(row: number, value: number): void {
    if (row >= this.values.length) this.grow(row + 1);
    this.values[row] = value;
    setBit(this.validity, row);
  }

  freezeNumbers(n: number): NumberColumn {
    return new NumberColumn(fitF64(this.values, n), resizeBitmap(this.validity, n));
  }

  freezeDates(n: number): DateColumn {
    return new DateColumn(fitF64(this.values, n), resizeBitmap(this.validity, n));
  }
}

export class TimestampBuilder extends NumberBuilder {
  /** Per row an index into styleTable; allocated at the first non-canonical value. */
  styles: Uint16Array | null = null;
  readonly styleTable: number[] = [CANONICAL_STYLE];
  private readonly styleCodes = new Map<number, number>([[CANONICAL_STYLE, 0]]);
  exceptions: Map<number, string> | null = null;

  protected override resize(cap: number): void {
    super.resize(cap);
    if (this.styles !== null) this.growStyles();
  }

  private growStyles(): void {
    const styles = new Uint16Array(this.values.length);
    if (this.styles !== null) styles.set(this.styles);
    this.styles = styles;
  }

  writeStyled(row: number, ms: number, style: number): void {
    this.write(row, ms);
    if (style === CANONICAL_STYLE) {
      if (this.styles !== null) this.styles[row] = 0;
      return;
    }
    let code = this.styleCodes.get(style);
    if (code === undefined) {
      code = this.styleTable.length;
      if (code > 0xffff) throw new QueryError('DataTooLarge', 'A timestamp column holds more than 65,535 distinct written styles.');
      this.styleTable.push(style);
      this.styleCodes.set(style, code);
    }
    if (this.styles === null) this.growStyles();
    this.styles![row] = code;
  }

  /** A value whose text style cannot reproduce (a fraction finer than ms): keep the text. */
  writeException(row: number, ms: number, text: string): void {
    this.write(row, ms);
    (this.exceptions ??= new Map()).set(row, text);
  }

  /** The text of an already written row (used when a local field widens to Edm.String). */
  textOf(row: number): string | null {
    if (!getBit(this.validity, row)) return null;
    const text = this.exceptions?.get(row);
    if (text !== undefined) return text;
    return formatTimestamp(this.values[row], this.styles === null ? CANONICAL_STYLE : this.styleTable[this.styles[row]]);
  }

  freeze(n: number): TimestampColumn {
    let styles = this.styles;
    if (styles !== null && styles.length !== n) {
      const s = new Uint16Array(n);
      s.set(styles.length > n ? styles.subarray(0, n) : styles);
      styles = s;
    }
    return new TimestampColumn(fitF64(this.values, n), resizeBitmap(this.validity, n), styles, this.styleTable.slice(), this.exceptions);
  }
}

/** The text of a date row (used when a local field widens to Edm.String). */
export function dateTextOf(b: NumberBuilder, row: number): string | null {
  return getBit(b.validity, row) ? formatDate(b.values[row]) : null;
}

export class BooleanBuilder {
  bits: Uint32Array;
  validity: Uint32Array;

  constructor(capacity: number) {
    this.bits = newBitmap(capacity);
    this.validity = newBitmap(capacity);
  }

  reserve(rows: number): void {
    if (rows > this.bits.length * 32) {
      this.bits = resizeBitmap(this.bits, rows);
      this.validity = resizeBitmap(this.validity, rows);
    }
  }

  write(row: number, value: boolean): void {
    if (row >>> 5 >= this.bits.length) this.reserve(nextCapacity(this.bits.length * 32, row + 1));
    setBit(this.validity, row);
    if (value) setBit(this.bits, row);
  }

  freeze(n: number): BooleanColumn {
    return new BooleanColumn(resizeBitmap(this.bits, n), resizeBitmap(this.validity, n));
  }
}

/**
 * UTF-8 text, row by row: row r's bytes are bytes[offsets[r], offsets[r + 1]). Rows not written
 * get an empty range and stay null. Also the entry store of a table's key index.
 */
export class TextBuilder implements ByteStore {
  bytes: Buffer;
  offsets: Uint32Array;
  validity: Uint32Array;
  end = 0;
  /** offsets[0, filled) are final. */
  private filled = 1;

  constructor(capacity: number, byteCapacity = capacity * 16) {
    this.bytes = allocBytes(byteCapacity);
    this.offsets = new Uint32Array(capacity + 1);
    this.validity = newBitmap(capacity);
  }

  private resizeRows(cap: number): void {
    const offsets = new Uint32Array(cap + 1);
    offsets.set(this.offsets.subarray(0, this.filled));
    this.offsets = offsets;
    this.validity = resizeBitmap(this.validity, cap);
  }

  private growRows(needed: number): void {
    this.resizeRows(nextCapacity(this.offsets.length - 1, needed));
  }

  /** Room for `rows` rows and, judging by the rows so far, for their text. */
  reserve(rows: number): void {
    if (rows + 1 > this.offsets.length) this.resizeRows(rows);
    const written = this.filled - 1;
    if (written > 0) {
      const bytes = Math.min(MAX_BYTES, Math.ceil((this.end / written) * rows * 1.02));
      if (bytes > this.bytes.length) this.bytes = growBytes(this.bytes, this.end, bytes);
    }
  }

  private ensureBytes(extra: number): void {
    const needed = this.end + extra;
    if (needed > MAX_BYTES) throw new QueryError('DataTooLarge', 'A text column holds more than 4 GiB of text.');
    if (needed > this.bytes.length) this.bytes = growBytes(this.bytes, this.end, Math.min(MAX_BYTES, Math.max(needed, this.bytes.length * 2)));
  }

  private begin(row: number): void {
    if (row + 2 > this.offsets.length) this.growRows(row + 1);
    const offsets = this.offsets;
    for (let r = this.filled; r <= row; r++) offsets[r] = this.end;
  }

  private finish(row: number): void {
    this.offsets[row + 1] = this.end;
    this.filled = row + 2;
    setBit(this.validity, row);
  }

  /** Row `row` (greater than every row written before) gets src[s, e). */
  write(row: number, src: Uint8Array, s: number, e: number): void {
    this.begin(row);
    const len = e - s;
    this.ensureBytes(len);
    const bytes = this.bytes;
    let p = this.end;
    // A loop beats subarray + set (which allocates a view) for short text only.
    if (len < 64) for (let i = s; i < e; i++) bytes[p++] = src[i];
    else bytes.set(src.subarray(s, e), p);
    this.end += len;
    this.finish(row);
  }

  writeString(row: number, text: string): void {
    this.begin(row);
    this.ensureBytes(text.length * 3);
    this.end = writeUtf8(text, this.bytes, this.end);
    this.finish(row);
  }

  get(row: number): string | null {
    if (row + 1 >= this.filled || !getBit(this.validity, row)) return null;
    return decodeUtf8(this.bytes, this.offsets[row], this.offsets[row + 1]);
  }

  freeze(n: number): Utf8TextColumn {
    if (n + 1 > this.offsets.length) this.growRows(n);
    for (let r = this.filled; r <= n; r++) this.offsets[r] = this.end;
    this.filled = n + 1;
    const spare = this.bytes.length - this.end;
    const bytes = spare <= this.bytes.length >>> 4 ? this.bytes.subarray(0, this.end) : copyBytes(this.bytes, 0, this.end);
    return new Utf8TextColumn(bytes, fitU32(this.offsets, n + 1), resizeBitmap(this.validity, n));
  }
}

/**
 * Distinct strings of a dictionary or collection column, as bytes with a hash index (so values
 * are looked up straight from input bytes) and as decoded strings (decoded once per entry).
 */
export class Dictionary implements ByteStore {
  bytes: Buffer = allocBytes(1024);
  offsets: Uint32Array = new Uint32Array(64);
  strings: string[] = [];
  private end = 0;
  private index = new ByteIndex(this);
  /** The entry matched last: feeds repeat values, and a compare is cheaper than a hash. */
  private last = -1;

  get size(): number {
    return this.strings.length;
  }

  /** A dictionary of the same entries that grows on its own (cheaper than adding them again). */
  copy(): Dictionary {
    const copy = new Dictionary();
    copy.bytes = allocBytes(this.bytes.length);
    this.bytes.copy(copy.bytes, 0, 0, this.end);
    copy.offsets = this.offsets.slice();
    copy.strings = this.strings.slice();
    copy.end = this.end;
    copy.index = this.index.copyFor(copy);
    return copy;
  }

  /** The 0-based entry of src[s, e), or -1. */
  indexOf(src: Uint8Array, s: number, e: number): number {
    return this.index.find(src, s, e, hashBytes(src, s, e));
  }

  /** The 0-based entry of src[s, e), added when new. */
  entryOf(src: Uint8Array, s: number, e: number): number {
    const last = this.last;
    if (last >= 0) {
      const os = this.offsets[last];
      const len = e - s;
      if (this.offsets[last + 1] - os === len) {
        const bytes = this.bytes;
        let j = 0;
        while (j < len && bytes[os + j] === src[s + j]) j++;
        if (j === len) return last;
      }
    }
    const h = hashBytes(src, s, e);
    const found = this.index.find(src, s, e, h);
    if (found >= 0) return (this.last = found);
    const entry = this.strings.length;
    const len = e - s;
    if (this.end + len > this.bytes.length) this.bytes = growBytes(this.bytes, this.end, this.end + len);
    if (entry + 2 > this.offsets.length) {
      const offsets = new Uint32Array(this.offsets.length * 2);
      offsets.set(this.offsets);
      this.offsets = offsets;
    }
    for (let i = 0; i < len; i++) this.bytes[this.end + i] = src[s + i];
    this.offsets[entry] = this.end;
    this.end += len;
    this.offsets[entry + 1] = this.end;
    this.strings.push(decodeUtf8(this.bytes, this.offsets[entry], this.end));
    this.index.add(entry, h);
    return (this.last = entry);
  }
}

/**
 * Strings of a column whose cardinality is not known in advance. Codes start as Uint16 and
 * widen to Uint32; past 65,535 distinct values a non-lookup column whose values repeat less than
 * twice on average is better stored as text, and the caller swaps in `toText()`.
 */
export class DictBuilder {
  codes: Uint16Array | Uint32Array;
  readonly dict = new Dictionary();
  /** Highest row written + 1. */
  rows = 0;

  constructor(
    capacity: number,
    /** Lookups keep their dictionary however many values a feed invents. */
    readonly lookup: boolean,
  ) {
    this.codes = new Uint16Array(capacity);
  }

  reserve(rows: number): void {
    if (rows <= this.codes.length) return;
    const codes = this.codes instanceof Uint16Array ? new Uint16Array(rows) : new Uint32Array(rows);
    codes.set(this.codes);
    this.codes = codes;
  }

  write(row: number, src: Uint8Array, s: number, e: number): void {
    if (row >= this.codes.length) this.reserve(nextCapacity(this.codes.length, row + 1));
    const code = this.dict.entryOf(src, s, e) + 1;
    if (code > 0xffff && this.codes instanceof Uint16Array) this.codes = Uint32Array.from(this.codes);
    this.codes[row] = code;
    this.rows = row + 1;
  }

  /** True when the column should become text (see the class comment). */
  get wantsText(): boolean {
    return !this.lookup && this.dict.size > 0xffff && this.dict.size * 2 > this.rows;
  }

  toText(): TextBuilder {
    const text = new TextBuilder(Math.max(this.codes.length, 1024), this.dict.size * 24);
    for (let row = 0; row < this.rows; row++) {
      const code = this.codes[row];
      if (code !== 0) {
        const d = this.dict;
        text.write(row, d.bytes, d.offsets[code - 1], d.offsets[code]);
      }
    }
    return text;
  }

  get(row: number): string | null {
    return row < this.codes.length && this.codes[row] !== 0 ? this.dict.strings[this.codes[row] - 1] : null;
  }

  freeze(n: number): DictionaryColumn {
    return new DictionaryColumn(fitCodes(this.codes, n), [null, ...this.dict.strings]);
  }
}

/** Collection(Edm.String): per row a run of element codes. */
export class CollectionBuilder {
  offsets: Uint32Array;
  validity: Uint32Array;
  codes: Uint16Array | Uint32Array = new Uint16Array(1024);
  count = 0;
  readonly dict = new Dictionary();
  private filled = 1;

  constructor(capacity: number) {
    this.offsets = new Uint32Array(capacity + 1);
    this.validity = newBitmap(capacity);
  }

  reserve(rows: number): void {
    if (rows + 1 > this.offsets.length) {
      const offsets = new Uint32Array(rows + 1);
      offsets.set(this.offsets.subarray(0, this.filled));
      this.offsets = offsets;
      this.validity = resizeBitmap(this.validity, rows);
    }
    const written = this.filled - 1;
    const elements = written > 0 ? Math.ceil((this.count / written) * rows * 1.02) : 0;
    if (elements > this.codes.length) {
      const codes = this.codes instanceof Uint16Array ? new Uint16Array(elements) : new Uint32Array(elements);
      codes.set(this.codes);
      this.codes = codes;
    }
  }

  /** Starts row `row` (greater than every row before); add its elements with `add`. */
  begin(row: number): void {
    if (row + 2 > this.offsets.length) this.reserve(nextCapacity(this.offsets.length - 1, row + 1));
    for (let r = this.filled; r <= row; r++) this.offsets[r] = this.count;
    this.offsets[row + 1] = this.count;
    this.filled = row + 2;
    setBit(this.validity, row);
  }

  add(row: number, src: Uint8Array, s: number, e: number): void {
    const code = this.dict.entryOf(src, s, e);
    if (this.count === this.codes.length) {
      const codes = this.codes instanceof Uint16Array ? new Uint16Array(this.count * 2) : new Uint32Array(this.count * 2);
      codes.set(this.codes);
      this.codes = codes;
    }
    if (code > 0xffff && this.codes instanceof Uint16Array) this.codes = Uint32Array.from(this.codes);
    this.codes[this.count++] = code;
    this.offsets[row + 1] = this.count;
  }

  freeze(n: number): CollectionColumn {
    if (n + 1 > this.offsets.length) {
      const offsets = new Uint32Array(n + 1);
      offsets.set(this.offsets.subarray(0, this.filled));
      this.offsets = offsets;
    }
    for (let r = this.filled; r <= n; r++) this.offsets[r] = this.count;
    this.filled = n + 1;
    return new CollectionColumn(fitU32(this.offsets, n + 1), fitCodes(this.codes, this.count), this.dict.strings.slice(), resizeBitmap(this.validity, n));
  }
}

/** A child's parent link: the parent row, or the text of a link to no listing. */
export class LinkBuilder {
  parentRow: Int32Array;
  unlinked: Map<number, string> | null = null;

  constructor(capacity: number) {
    this.parentRow = new Int32Array(capacity).fill(-1);
  }

  reserve(rows: number): void {
    if (rows <= this.parentRow.length) return;
    const next = new Int32Array(rows).fill(-1);
    next.set(this.parentRow);
    this.parentRow = next;
  }

  private ensure(row: number): void {
    if (row >= this.parentRow.length) this.reserve(nextCapacity(this.parentRow.length, row + 1));
  }

  writeParent(row: number, parent: number): void {
    this.ensure(row);
    this.parentRow[row] = parent;
  }

  writeUnlinked(row: number, text: string): void {
    this.ensure(row);
    (this.unlinked ??= new Map()).set(row, text);
  }

  freeze(n: number, parentKeys: TextColumn): ParentKeyColumn {
    let parentRow = this.parentRow;
    if (parentRow.length !== n) {
      parentRow = new Int32Array(n).fill(-1);
      parentRow.set(this.parentRow.length > n ? this.parentRow.subarray(0, n) : this.parentRow);
    }
    return new ParentKeyColumn(parentRow, parentKeys, this.unlinked);
  }
}
