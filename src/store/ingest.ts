/**
 * Turns records into one table segment. A record goes through two phases:
 *
 * 1. **scan** into a reusable scratch (field slot, value tag, number, byte range per field),
 *    checking every value against its field's type. Records read from files take the *fast path*:
 *    a byte scanner that accepts the plain JSON objects feeds consist of (no exponents, no nested
 *    objects, no fields it does not know yet) and matches keys and values as bytes, so most records
 *    never become JavaScript objects. Anything it does not accept falls back to `JSON.parse` and the
 *    *generic path*, which also serves in-memory records and produces every error message. The two
 *    paths give identical tables (a test loads the same data both ways).
 * 2. **commit**, only for a record that passed: key uniqueness and the parent link are checked,
 *    then every value is written to its column builder. A failed record leaves no trace, so skip
 *    mode needs no rollback.
 */
import { isUtf8 } from 'node:buffer';
import { CATALOG, DERIVED_PROPERTY_FIELDS, makeField } from '../schema/catalog.js';
import { TableSchema } from '../schema/table-schema.js';
import type { FieldDef, ResourceDef, ResourceName } from '../schema/types.js';
import { ByteIndex } from './byte-index.js';
import { bytesEqual, decodeUtf8, hashBytes, writeUtf8 } from './bytes.js';
import {
  BooleanBuilder,
  CollectionBuilder,
  DictBuilder,
  Dictionary,
  LinkBuilder,
  NumberBuilder,
  TextBuilder,
  TimestampBuilder,
  dateTextOf,
} from './builders.js';
import { Utf8TextColumn, type Column } from './columns.js';
import { deriveListingFields } from './derive.js';
import { DataError, describeValue } from './errors.js';
import { Table } from './table.js';
import { runNow, type Steps } from '../util/steps.js';
import {
  B_BOOLEAN,
  B_COLLECTION,
  B_DICT,
  B_LINK,
  B_NUMBER,
  B_TEXT,
  B_TIMESTAMP,
  type Builder,
  C_ESCAPE,
  C_HIGH,
  C_QUOTE,
  CHAR_CLASS,
  E_BOOLEAN,
  E_COLLECTION,
  E_DATE,
  E_IGNORED,
  E_INTEGER,
  E_NUMBER,
  E_PENDING,
  E_STRING,
  E_TIMESTAMP,
  EXPECT_TEXT,
  EXPECT_TYPE,
  expectOf,
  FieldSlot,
  mergeExpect,
  POW10,
  R_COND,
  R_KEY,
  R_LINK,
  R_NONE,
  Scratch,
  type SkipLog,
  T_BOOL,
  T_COLL,
  T_NULL,
  T_NUM,
  T_SKIP,
  T_STR,
  T_TS,
} from './record.js';
import { parseDate, parseTimestamp, TimestampParts } from './temporal.js';

export interface IngestOptions {
  readonly skipBadRecords: boolean;
  readonly skipLog: SkipLog;
  /** Clock for DaysOnMarket. */
  readonly now: () => number;
  /** The loaded Property table, for child resources. */
  readonly parent?: Table;
  /**
   * Child resources without `parent`: keep the link field as text, to be resolved against
   * Property later (a worker thread loading Media while the main thread loads Property).
   */
  readonly deferParent?: boolean;
  /** False sends every record through JSON.parse and the generic path (tests compare both). */
  readonly fastPath?: boolean;
  /**
   * Build the key index once at `finish` (ByteIndex.build: its layout depends only on the keys),
   * rebuilding it there if it was kept per record. The loader sets it for every table, so that
   * whichever thread or path loaded a table, its index has the same bytes.
   */
  readonly canonicalKeyIndex?: boolean;
  /**
   * Keep no key index while rows arrive (no duplicate check per record): `finish` builds it and
   * throws a DuplicateKey DataError if two rows share a key, whatever skipBadRecords says. Only
   * for keys known unique (the EntityEvent log) or a caller that loads the file again the
   * checked way on any error (the loader's worker).
   */
  readonly deferKeyIndex?: boolean;
}

/** Columns frozen between two check points of `TableBuilder.finishSteps`. */
const FREEZE_CHECK_COLUMNS = 8;

/** Field slots made between two check points of `TableBuilder.slotSteps`. */
const SLOT_CHECK = 128;

/** A local field and where it was first seen, for the load report. */
export interface LocalFieldInfo {
  readonly resource: ResourceName;
  readonly name: string;
  /** Inferred OData type, e.g. `Edm.Int64` or `Collection(Edm.String)`. */
  readonly type: string;
  readonly file: string;
  readonly line: number;
}

export class TableBuilder {
  readonly def: ResourceDef;
  /** Label of the current source in error messages, e.g. `Property.jsonl`. */
  file: string;
  rowCount = 0;
  /** Records rejected in skip mode. */
  skipped = 0;
  /** Records from bytes that the fast path left to JSON.parse (a measure of load speed). */
  fallbacks = 0;
  private readonly slots: FieldSlot[] = [];
  private readonly byName = new Map<string, FieldSlot>();
  /** Field names as bytes: entry i is slot i. */
  private names!: Dictionary;
  private readonly scratch = new Scratch();
  private readonly parts = new TimestampParts();
  private keySlot!: FieldSlot;
  private keyText!: TextBuilder;
  private keyIndex!: ByteIndex;
  private readonly deferKeys: boolean;
  private lines = new Uint32Array(1024);
  private recordNo = 0;
  /** Rows the load expects in all (see reserve). */
  private expected = 0;
  /** The slot of the first name in the last fast-scanned record. */
  private firstSlot = -1;
  private readonly fast: boolean;
  private readonly strict: boolean;
  private readonly localFiles = new Map<FieldSlot, string>();
  // Parent link state (child resources).
  private readonly parent: Table | null;
  private readonly condBytes: Buffer | null;
  private lastParentKey = Buffer.alloc(256);
  private lastParentLen = -1;
  private lastParentRow = -1;
  private linkParent = -1;

  constructor(
    readonly resource: ResourceName,
    private readonly options: IngestOptions,
    /** 'later': the caller runs `slotSteps` before the first record (a change's batch reader, between queries). */
    slots: 'now' | 'later' = 'now',
  ) {
    this.def = CATALOG[resource];
    this.file = `${resource} records`;
    this.fast = options.fastPath !== false;
    this.strict = !options.skipBadRecords;
    if (this.def.parent && !options.parent && !options.deferParent) throw new Error(`${resource} records need the Property table to link to`);
    this.parent = this.def.parent && options.parent ? options.parent : null;
    this.condBytes = this.def.parent?.when ? Buffer.from(this.def.parent.when.equals) : null;
    this.deferKeys = options.deferKeyIndex === true;
    if (slots === 'now') runNow(this.slotSteps());
  }

  /**
   * Makes a slot per catalog field, from a layout made once per resource (a Property builder has
   * 636: 0.06-0.1 ms at once), a check point every SLOT_CHECK.
   */
  *slotSteps(): Steps<void> {
    const layout = layoutOf(this.resource);
    this.names = layout.names.copy();
    const fields = this.def.fields;
    for (let i = 0; i < fields.length; i++) {
      const slot = new FieldSlot(fields[i], layout.expects[i], i, layout.roles[i], layout.nameBytes[i]);
      this.slots.push(slot);
      this.byName.set(fields[i].name, slot);
      if (i % SLOT_CHECK === SLOT_CHECK - 1) yield;
    }
    this.keySlot = this.byName.get(this.def.key)!;
    this.keyText = new TextBuilder(1024);
    this.keySlot.builder = this.keyText;
    this.keySlot.kind = B_TEXT;
    this.keyIndex = new ByteIndex(this.keyText, 1024);
  }

  /** A field the catalog does not name (a local field), found in the data. */
  private addLocalSlot(def: FieldDef): FieldSlot {
    const bytes = Buffer.from(def.name, 'utf8');
    const slot = new FieldSlot(def, expectOf(def), this.slots.length, R_NONE, bytes);
    this.slots.push(slot);
    this.byName.set(def.name, slot);
    if (this.names.entryOf(bytes, 0, bytes.length) !== slot.index) throw new Error(`duplicate field ${def.name}`);
    return slot;
  }

  /** One record as the bytes src[s, e) of a JSON object; `line` is for error messages. */
  addBytes(src: Buffer, s: number, e: number, line: number): void {
    this.recordNo++;
    this.scratch.reset(src);
    if (this.fast && this.scan(src, s, e)) {
      this.finishRecord(line);
      return;
    }
    this.fallbacks++;
    let value: unknown;
    try {
      value = JSON.parse(decodeUtf8(src, s, e));
    } catch (err) {
      this.fail('BadDataLine', line, null, `malformed JSON (${err instanceof Error ? err.message : String(err)})`);
      return;
    }
    this.addValue(value, line);
  }

  /** One record as a parsed JSON value (in-memory records, and the fallback of addBytes). */
  addValue(value: unknown, line: number): void {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      this.fail('BadDataLine', line, null, `expected a JSON object, found ${describeValue(value)}`);
      return;
    }
    this.scratch.reset(this.scratch.arena);
    if (this.scanObject(value as Record<string, unknown>, line)) this.finishRecord(line);
  }

  // ---- records from other columns -----------------------------------------------------------

  /**
   * The slot of a declared field, for `put*`: a record assembled from values that are already
   * typed (the load's EntityEvent log, made from the loaded tables) skips JSON text altogether.
   */
  slotOf(name: string): number {
    const slot = this.byName.get(name);
    if (slot === undefined || slot.def.origin === 'local') throw new Error(`${this.resource} declares no field ${name}`);
    return slot.index;
  }

  /** Starts a record whose strings are byte ranges of `src`; then `put*` per field and `endRecord`. */
  beginRecord(src: Buffer): void {
    this.recordNo++;
    this.scratch.reset(src);
  }

  private put(slot: number, tag: number): number {
    const sc = this.scratch;
    const k = sc.push(slot);
    const role = this.slots[slot].role;
    if (role !== R_NONE) sc.roleAt[role] = k;
    sc.tag[k] = tag;
    return k;
  }

  /** A string field: the valid UTF-8 bytes src[s, e). */
  putString(slot: number, s: number, e: number): void {
    const k = this.put(slot, T_STR);
    this.scratch.s[k] = s;
    this.scratch.e[k] = e;
  }

  /** A number field (an integer for an integer field: the caller's guarantee). */
  putNumber(slot: number, value: number): void {
    this.scratch.num[this.put(slot, T_NUM)] = value;
  }

  putNull(slot: number): void {
    this.put(slot, T_NULL);
  }

  /** Checks the key (and parent) and commits the record, as for a record read from JSON. */
  endRecord(line: number): void {
    this.finishRecord(line);
  }

  private fail(code: string, line: number, field: string | null, reason: string): false {
    const err = new DataError({ code, file: this.file, line, field, reason });
    if (this.strict) throw err;
    this.options.skipLog.add(err);
    this.skipped++;
    return false;
  }

  // ---- fast path -----------------------------------------------------------------------------

  /** Scans a plain JSON object into the scratch; false when the generic path must decide. */
  private scan(b: Buffer, s: number, e: number): boolean {
    const sc = this.scratch;
    const stamp = this.recordNo;
    let i = s;
    let c: number;
    while (i < e && ((c = b[i]) === 32 || c === 9 || c === 10 || c === 13)) i++;
    if (i >= e || b[i] !== 123) return false;
    i++;
    while (i < e && ((c = b[i]) === 32 || c === 9 || c === 10 || c === 13)) i++;
    let prev: FieldSlot | null = null;
    if (i < e && b[i] === 125) {
      i++;
    } else {
      for (;;) {
        if (i >= e || b[i] !== 34) return false;
        const ks = ++i;
        // Predict the field from the previous record's order: compare the name's bytes (and the
        // closing quote) in place; scan and hash only on a miss.
        let index: number = prev === null ? this.firstSlot : prev.next;
        let ke = -1;
        if (index >= 0) {
          const name = this.slots[index].nameBytes;
          const len = name.length;
          if (ks + len < e && b[ks + len] === 34) {
            let j = 0;
            while (j < len && name[j] === b[ks + j]) j++;
            if (j === len) ke = ks + len;
          }
        }
        if (ke < 0) {
          while (i < e && (c = b[i]) !== 34) {
            if (c === 92 || c < 32) return false;
            i++;
          }
          if (i >= e) return false;
          ke = i;
          index = this.names.indexOf(b, ks, ke);
          if (index < 0) return false;
          if (prev === null) this.firstSlot = index;
          else prev.next = index;
        }
        i = ke + 1;
        while (i < e && ((c = b[i]) === 32 || c === 9 || c === 10 || c === 13)) i++;
        if (i >= e || b[i] !== 58) return false;
        i++;
        while (i < e && ((c = b[i]) === 32 || c === 9 || c === 10 || c === 13)) i++;
        if (i >= e) return false;
        const slot: FieldSlot = this.slots[index];
        prev = slot;
        if (slot.stamp === stamp) return false;
        slot.stamp = stamp;
        const k = sc.push(index);
        if (slot.role !== R_NONE) sc.roleAt[slot.role] = k;
        const expect = slot.expect;
        c = b[i];
        if (c === 34) {
          const vs = ++i;
          let flags = 0;
          for (;;) {
            if (i >= e) return false;
            const cls = CHAR_CLASS[b[i]];
            if (cls === 0) i++;
            else if (cls === C_QUOTE) break;
            else if (cls === C_HIGH) {
              flags |= 2;
              i++;
            } else if (cls === C_ESCAPE) {
              flags |= 1;
              i += 2;
            } else return false;
          }
          const ve = i++;
          if (expect === E_STRING) {
            if (!this.fastString(k, b, vs, ve, flags)) return false;
            sc.tag[k] = T_STR;
          } else if (expect === E_TIMESTAMP) {
            if (flags !== 0 || !parseTimestamp(b, vs, ve, this.parts)) return false;
            sc.tag[k] = T_TS;
            sc.num[k] = this.parts.ms;
            sc.aux[k] = this.parts.exact ? this.parts.style : -1;
            sc.s[k] = vs;
            sc.e[k] = ve;
          } else if (expect === E_DATE) {
            if (flags !== 0) return false;
            const days = parseDate(b, vs, ve);
            if (days !== days) return false;
            sc.tag[k] = T_NUM;
            sc.num[k] = days;
          } else if (expect === E_IGNORED && flags === 0) {
            sc.tag[k] = T_SKIP;
          } else {
            return false;
          }
        } else if (c === 110) {
          if (i + 4 > e || b[i + 1] !== 117 || b[i + 2] !== 108 || b[i + 3] !== 108) return false;
          i += 4;
          sc.tag[k] = T_NULL;
        } else if (c === 116) {
          if (i + 4 > e || b[i + 1] !== 114 || b[i + 2] !== 117 || b[i + 3] !== 101) return false;
          i += 4;
          if (expect === E_BOOLEAN) {
            sc.tag[k] = T_BOOL;
            sc.aux[k] = 1;
          } else if (expect === E_IGNORED) sc.tag[k] = T_SKIP;
          else return false;
        } else if (c === 102) {
          if (i + 5 > e || b[i + 1] !== 97 || b[i + 2] !== 108 || b[i + 3] !== 115 || b[i + 4] !== 101) return false;
          i += 5;
          if (expect === E_BOOLEAN) {
            sc.tag[k] = T_BOOL;
            sc.aux[k] = 0;
          } else if (expect === E_IGNORED) sc.tag[k] = T_SKIP;
          else return false;
        } else if (c === 45 || (c >= 48 && c <= 57)) {
          let negative = false;
          if (c === 45) {
            negative = true;
            i++;
          }
          let m = 0;
          let digits = 0;
          let frac = 0;
          c = i < e ? b[i] : 0;
          if (c === 48) {
            i++;
            digits = 1;
            c = i < e ? b[i] : 0;
            if (c >= 48 && c <= 57) return false;
          } else if (c >= 49 && c <= 57) {
            while (i < e && (c = b[i]) >= 48 && c <= 57) {
              m = m * 10 + (c - 48);
              digits++;
              i++;
            }
            c = i < e ? b[i] : 0;
          } else {
            return false;
          }
          if (c === 46) {
            i++;
            while (i < e && (c = b[i]) >= 48 && c <= 57) {
              m = m * 10 + (c - 48);
              digits++;
              frac++;
              i++;
            }
            if (frac === 0) return false;
            c = i < e ? b[i] : 0;
          }
          // Exponents and more than 15 digits: JSON.parse rounds them.
          if (c === 101 || c === 69 || digits > 15) return false;
          // m < 2^53 and 10^frac are exact, so the division is correctly rounded, as JSON.parse is.
          let v = frac === 0 ? m : m / POW10[frac];
          if (negative) v = -v;
          if (expect === E_NUMBER || (expect === E_INTEGER && Number.isInteger(v))) {
            sc.tag[k] = T_NUM;
            sc.num[k] = v;
          } else if (expect === E_IGNORED) sc.tag[k] = T_SKIP;
          else return false;
        } else if (c === 91) {
          if (expect !== E_COLLECTION) return false;
          i++;
          sc.tag[k] = T_COLL;
          sc.s[k] = sc.elems;
          while (i < e && ((c = b[i]) === 32 || c === 9 || c === 10 || c === 13)) i++;
          if (i < e && b[i] === 93) {
            i++;
          } else {
            for (;;) {
              if (i >= e || b[i] !== 34) return false;
              const vs = ++i;
              let flags = 0;
              for (;;) {
                if (i >= e) return false;
                const cls = CHAR_CLASS[b[i]];
                if (cls === 0) i++;
                else if (cls === C_QUOTE) break;
                else if (cls === C_HIGH) {
                  flags |= 2;
                  i++;
                } else if (cls === C_ESCAPE) {
                  flags |= 1;
                  i += 2;
                } else return false;
              }
              const ve = i++;
              if (flags === 0) sc.pushElem(vs, ve, 0);
              else if (flags === 2) {
                if (!isUtf8(b.subarray(vs, ve))) return false;
                sc.pushElem(vs, ve, 0);
              } else {
                const text = unescape(b, vs, ve);
                if (text === null) return false;
                const start = sc.putString(text);
                sc.pushElem(start, sc.arenaEnd, 1);
              }
              while (i < e && ((c = b[i]) === 32 || c === 9 || c === 10 || c === 13)) i++;
              if (i >= e) return false;
              if (b[i] === 44) {
                i++;
                while (i < e && ((c = b[i]) === 32 || c === 9 || c === 10 || c === 13)) i++;
                continue;
              }
              if (b[i] === 93) {
                i++;
                break;
              }
              return false;
            }
          }
          sc.e[k] = sc.elems;
        } else {
          return false;
        }
        while (i < e && ((c = b[i]) === 32 || c === 9 || c === 10 || c === 13)) i++;
        if (i >= e) return false;
        c = b[i++];
        if (c === 44) {
          while (i < e && ((c = b[i]) === 32 || c === 9 || c === 10 || c === 13)) i++;
          continue;
        }
        if (c === 125) break;
        return false;
      }
    }
    while (i < e && ((c = b[i]) === 32 || c === 9 || c === 10 || c === 13)) i++;
    return i === e;
  }

  /** A string value on the fast path: raw bytes when plain, unescaped into the arena otherwise. */
  private fastString(k: number, b: Buffer, vs: number, ve: number, flags: number): boolean {
    const sc = this.scratch;
    if (flags === 0 || (flags === 2 && isUtf8(b.subarray(vs, ve)))) {
      sc.s[k] = vs;
      sc.e[k] = ve;
      return true;
    }
    if (flags === 2) return false;
    const text = unescape(b, vs, ve);
    if (text === null) return false;
    sc.s[k] = sc.putString(text);
    sc.e[k] = sc.arenaEnd;
    sc.inArena[k] = 1;
    return true;
  }

  // ---- generic path --------------------------------------------------------------------------

  private scanObject(obj: Record<string, unknown>, line: number): boolean {
    const sc = this.scratch;
    for (const name of Object.keys(obj)) {
      const value = obj[name];
      if (value === undefined) continue;
      let slot = this.byName.get(name);
      if (slot === undefined) slot = this.addLocal(name, line);
      const k = sc.push(slot.index);
      if (slot.role !== R_NONE) sc.roleAt[slot.role] = k;
      if (value === null) {
        sc.tag[k] = T_NULL;
        continue;
      }
      let expect = slot.expect;
      if (expect === E_IGNORED) {
        sc.tag[k] = T_SKIP;
        continue;
      }
      if (slot.def.origin === 'local') {
        const own = this.localExpect(value, name, line);
        if (own < 0) return false;
        const merged = mergeExpect(expect, own);
        if (merged < 0) {
          return this.fail(
            'BadFieldValue',
            line,
            name,
            `local field ${name} holds ${EXPECT_TEXT[expect]} (inferred from line ${slot.firstLine} of ${this.localFiles.get(slot) ?? this.file}), found ${describeValue(value)}`,
          );
        }
        if (merged !== expect) sc.widen[k] = merged;
        expect = merged;
      }
      if (!this.genericValue(k, expect, value, name, line)) return false;
    }
    return true;
  }

  private genericValue(k: number, expect: number, value: unknown, name: string, line: number): boolean {
    const sc = this.scratch;
    switch (expect) {
      case E_STRING:
        if (typeof value !== 'string') break;
        sc.s[k] = sc.putString(value);
        sc.e[k] = sc.arenaEnd;
        sc.inArena[k] = 1;
        sc.tag[k] = T_STR;
        return true;
      case E_NUMBER:
      case E_INTEGER:
        if (typeof value !== 'number' || !Number.isFinite(value)) break;
        if (expect === E_INTEGER && !Number.isInteger(value)) {
          return this.fail('BadFieldValue', line, name, `expected an integer (${this.slotType(name)}), found ${describeValue(value)}`);
        }
        sc.tag[k] = T_NUM;
        sc.num[k] = value;
        return true;
      case E_BOOLEAN:
        if (typeof value !== 'boolean') break;
        sc.tag[k] = T_BOOL;
        sc.aux[k] = value ? 1 : 0;
        return true;
      case E_DATE: {
        if (typeof value !== 'string') break;
        const s = sc.putString(value);
        const days = parseDate(sc.arena, s, sc.arenaEnd);
        if (days !== days) break;
        sc.tag[k] = T_NUM;
        sc.num[k] = days;
        return true;
      }
      case E_TIMESTAMP: {
        if (typeof value !== 'string') break;
        const s = sc.putString(value);
        if (!parseTimestamp(sc.arena, s, sc.arenaEnd, this.parts)) break;
        sc.tag[k] = T_TS;
        sc.num[k] = this.parts.ms;
        sc.aux[k] = this.parts.exact ? this.parts.style : -1;
        sc.s[k] = s;
        sc.e[k] = sc.arenaEnd;
        sc.inArena[k] = 1;
        return true;
      }
      case E_COLLECTION: {
        if (!Array.isArray(value)) break;
        sc.tag[k] = T_COLL;
        sc.s[k] = sc.elems;
        for (let j = 0; j < value.length; j++) {
          const item: unknown = value[j];
          if (typeof item !== 'string') {
            return this.fail('BadFieldValue', line, name, `expected an array of strings (Collection(Edm.String)), found ${describeValue(item)} at index ${j}`);
          }
          const s = sc.putString(item);
          sc.pushElem(s, sc.arenaEnd, 1);
        }
        sc.e[k] = sc.elems;
        return true;
      }
    }
    const what = expect === E_COLLECTION ? 'an array of strings (Collection(Edm.String))' : EXPECT_TEXT[expect];
    return this.fail('BadFieldValue', line, name, `expected ${what}, found ${describeValue(value)}`);
  }

  private slotType(name: string): string {
    return this.byName.get(name)?.def.type ?? 'Edm.Int64';
  }

  /** The type a local field's value implies on its own, or -1 (reported) when none fits. */
  private localExpect(value: unknown, name: string, line: number): number {
    switch (typeof value) {
      case 'boolean':
        return E_BOOLEAN;
      case 'number':
        if (!Number.isFinite(value)) break;
        return Number.isInteger(value) ? E_INTEGER : E_NUMBER;
      case 'string': {
        const sc = this.scratch;
        const mark = sc.arenaEnd;
        const s = sc.putString(value);
        const kind = parseTimestamp(sc.arena, s, sc.arenaEnd, this.parts)
          ? E_TIMESTAMP
          : !Number.isNaN(parseDate(sc.arena, s, sc.arenaEnd))
            ? E_DATE
            : E_STRING;
        sc.arenaEnd = mark;
        return kind;
      }
      case 'object':
        if (Array.isArray(value)) {
          if (value.every((v) => typeof v === 'string')) return E_COLLECTION;
          this.fail('BadFieldValue', line, name, 'local collection fields must hold strings only');
          return -1;
        }
        this.fail('BadFieldValue', line, name, 'nested objects are not supported in local fields');
        return -1;
    }
    this.fail('BadFieldValue', line, name, `unsupported value ${describeValue(value)}`);
    return -1;
  }

  private addLocal(name: string, line: number): FieldSlot {
    const slot = this.addLocalSlot(makeField({ name, type: 'Edm.String', origin: 'local' }));
    slot.expect = E_PENDING;
    slot.firstLine = line;
    this.localFiles.set(slot, this.file);
    return slot;
  }

  /** A local field's type grows to hold a new value (Int64 -> Decimal; Date/DateTimeOffset -> String). */
  private widenLocal(slot: FieldSlot, expect: number): void {
    const from = slot.expect;
    slot.expect = expect;
    slot.def = makeField({ name: slot.def.name, type: EXPECT_TYPE[expect], collection: expect === E_COLLECTION, origin: 'local' });
    if (slot.builder === null) return;
    if (expect === E_STRING && (from === E_DATE || from === E_TIMESTAMP)) {
      const old = slot.builder as NumberBuilder;
      const dict = new DictBuilder(Math.max(1024, this.rowCount), false);
      const tmp = Buffer.allocUnsafe(256);
      for (let row = 0; row < this.rowCount; row++) {
        const text = from === E_DATE ? dateTextOf(old, row) : (old as TimestampBuilder).textOf(row);
        if (text === null) continue;
        const end = writeUtf8(text, tmp, 0);
        dict.write(row, tmp, 0, end);
      }
      slot.builder = dict;
      slot.kind = B_DICT;
    }
  }

  // ---- record checks and commit --------------------------------------------------------------

  private finishRecord(line: number): void {
    const sc = this.scratch;
    const key = this.def.key;
    const kk = sc.roleAt[R_KEY];
    if (kk < 0 || sc.tag[kk] === T_NULL) {
      this.fail('MissingKey', line, key, `the record has no ${key}`);
      return;
    }
    const keySrc = sc.inArena[kk] ? sc.arena : sc.src;
    const ks = sc.s[kk];
    const ke = sc.e[kk];
    if (ks === ke) {
      this.fail('MissingKey', line, key, `${key} is empty`);
      return;
    }
    const keyHash = this.deferKeys ? 0 : hashBytes(keySrc, ks, ke);
    const existing = this.deferKeys ? -1 : this.keyIndex.find(keySrc, ks, ke, keyHash);
    if (existing >= 0) {
      const what = this.file.endsWith(' records') ? 'record' : 'line';
      this.fail('DuplicateKey', line, key, `duplicate ${key} '${decodeUtf8(keySrc, ks, ke)}' (first at ${what} ${this.lines[existing]})`);
      return;
    }
    this.linkParent = -1;
    if (this.parent !== null && !this.resolveParent(line)) return;

    const row = this.rowCount;
    this.commit(row);
    if (!this.deferKeys) this.keyIndex.add(row, keyHash);
    if (row >= this.lines.length) {
      const lines = new Uint32Array(this.lines.length * 2);
      lines.set(this.lines);
      this.lines = lines;
    }
    this.lines[row] = line;
    this.rowCount = row + 1;
  }

  /** Sets linkParent for a child record; false (reported) when its listing is missing. */
  private resolveParent(line: number): boolean {
    const sc = this.scratch;
    const link = this.def.parent!;
    if (this.condBytes !== null) {
      const kc = sc.roleAt[R_COND];
      if (kc < 0 || sc.tag[kc] !== T_STR) return true;
      const src = sc.inArena[kc] ? sc.arena : sc.src;
      if (!bytesEqual(src, sc.s[kc], sc.e[kc], this.condBytes, 0, this.condBytes.length)) return true;
    }
    const kl = sc.roleAt[R_LINK];
    if (kl < 0 || sc.tag[kl] !== T_STR) {
      const why = this.condBytes !== null ? `a ${link.when!.field} '${link.when!.equals}' record without ${link.field}` : `the record has no ${link.field}`;
      return this.fail('MissingParent', line, link.field, why);
    }
    const src = sc.inArena[kl] ? sc.arena : sc.src;
    const s = sc.s[kl];
    const e = sc.e[kl];
    if (this.lastParentLen === e - s && bytesEqual(src, s, e, this.lastParentKey, 0, this.lastParentLen)) {
      this.linkParent = this.lastParentRow;
    } else {
      this.linkParent = this.parent!.rowOfKeyBytes(src, s, e);
      if (e - s <= this.lastParentKey.length) {
        src.copy(this.lastParentKey, 0, s, e);
        this.lastParentLen = e - s;
        this.lastParentRow = this.linkParent;
      }
    }
    if (this.linkParent < 0) {
      return this.fail('MissingParent', line, link.field, `${link.field} '${decodeUtf8(src, s, e)}' matches no Property record`);
    }
    return true;
  }

  private commit(row: number): void {
    const sc = this.scratch;
    for (let k = 0; k < sc.n; k++) {
      const slot = this.slots[sc.slot[k]];
      if (sc.widen[k] !== 0) this.widenLocal(slot, sc.widen[k]);
      slot.seen = true;
      const tag = sc.tag[k];
      if (tag === T_NULL) continue;
      const src = sc.inArena[k] ? sc.arena : sc.src;
      switch (tag) {
        case T_NUM:
          ((slot.builder ?? this.makeBuilder(slot)) as NumberBuilder).write(row, sc.num[k]);
          break;
        case T_TS: {
          const b = (slot.builder ?? this.makeBuilder(slot)) as TimestampBuilder;
          if (sc.aux[k] >= 0) b.writeStyled(row, sc.num[k], sc.aux[k]);
          else b.writeException(row, sc.num[k], decodeUtf8(src, sc.s[k], sc.e[k]));
          break;
        }
        case T_BOOL:
          ((slot.builder ?? this.makeBuilder(slot)) as BooleanBuilder).write(row, sc.aux[k] === 1);
          break;
        case T_STR:
          if (slot.builder === null) this.makeBuilder(slot);
          if (slot.kind === B_TEXT) {
            (slot.builder as TextBuilder).write(row, src, sc.s[k], sc.e[k]);
          } else if (slot.kind === B_DICT) {
            const d = slot.builder as DictBuilder;
            d.write(row, src, sc.s[k], sc.e[k]);
            if (d.dict.size > 0xffff && d.wantsText) {
              slot.builder = d.toText();
              slot.kind = B_TEXT;
            }
          } else {
            const l = slot.builder as LinkBuilder;
            if (this.linkParent >= 0) l.writeParent(row, this.linkParent);
            else l.writeUnlinked(row, decodeUtf8(src, sc.s[k], sc.e[k]));
          }
          break;
        case T_COLL: {
          const c = (slot.builder ?? this.makeBuilder(slot)) as CollectionBuilder;
          c.begin(row);
          for (let j = sc.s[k]; j < sc.e[k]; j++) c.add(row, sc.elemInArena[j] ? sc.arena : sc.src, sc.elemS[j], sc.elemE[j]);
          break;
        }
        case T_SKIP:
          slot.ignored++;
          break;
      }
    }
  }

  /**
   * Sizes every column for `rows` rows in all (an estimate from the file size): a load then
   * grows nothing, and freezing copies nothing.
   */
  reserve(rows: number): void {
    if (rows <= this.expected) return;
    this.expected = rows;
    for (const slot of this.slots) slot.builder?.reserve(rows);
    if (!this.deferKeys) this.keyIndex.reserve(rows);
    if (rows > this.lines.length) {
      const lines = new Uint32Array(rows);
      lines.set(this.lines);
      this.lines = lines;
    }
  }

  private makeBuilder(slot: FieldSlot): Builder {
    const cap = Math.max(1024, this.rowCount + 1, this.expected);
    let b: Builder;
    switch (slot.expect) {
      case E_STRING:
        if (slot.role === R_LINK && this.parent !== null) {
          b = new LinkBuilder(cap);
          slot.kind = B_LINK;
        } else if (slot.def.freeText) {
          b = new TextBuilder(cap);
          slot.kind = B_TEXT;
        } else {
          b = new DictBuilder(cap, slot.def.lookup !== null);
          slot.kind = B_DICT;
        }
        break;
      case E_TIMESTAMP:
        b = new TimestampBuilder(cap);
        slot.kind = B_TIMESTAMP;
        break;
      case E_BOOLEAN:
        b = new BooleanBuilder(cap);
        slot.kind = B_BOOLEAN;
        break;
      case E_COLLECTION:
        b = new CollectionBuilder(cap);
        slot.kind = B_COLLECTION;
        break;
      default:
        b = new NumberBuilder(cap);
        slot.kind = B_NUMBER;
    }
    slot.builder = b;
    return b;
  }

  // ---- finish --------------------------------------------------------------------------------

  /** The frozen table; the builder must not be used afterwards. */
  finish(): Table {
    return runNow(this.finishSteps());
  }

  /**
   * `finish` in steps, a check point after every few columns frozen (a change reads its records
   * into a batch between queries: the batch's 80 columns frozen at once held the loop 0.05-0.3 ms).
   */
  *finishSteps(): Steps<Table> {
    const n = this.rowCount;
    const fields: FieldDef[] = [];
    const columns = new Map<string, Column>();
    const locals = this.slots.filter((s) => s.def.origin === 'local' && s.seen);
    let frozen = 0;
    for (const slot of this.slots) {
      if (!slot.seen && slot !== this.keySlot) continue;
      if (slot.expect === E_IGNORED) continue;
      if (slot.expect === E_PENDING) slot.expect = E_STRING; // a local field that held only nulls
      if (slot.builder === null) this.makeBuilder(slot);
      columns.set(slot.def.name, this.freezeSlot(slot, n));
      if (slot.def.origin !== 'local') fields.push(slot.def);
      if (++frozen % FREEZE_CHECK_COLUMNS === 0) yield;
    }
    yield;
    if (this.resource === 'Property') {
      const derived = deriveListingFields(columns, n);
      for (const def of DERIVED_PROPERTY_FIELDS) {
        fields.push(def);
        columns.set(def.name, derived[def.name as keyof typeof derived]);
      }
    }
    const schema = new TableSchema(
      this.resource,
      this.def.key,
      fields,
      locals.map((s) => s.def),
    );
    const keyColumn = columns.get(this.def.key);
    if (!(keyColumn instanceof Utf8TextColumn)) throw new Error('key column must be text');
    if (this.deferKeys || this.options.canonicalKeyIndex === true) {
      const built = ByteIndex.build(keyColumn, n);
      if (!(built instanceof ByteIndex)) {
        const key = this.def.key;
        const what = this.file.endsWith(' records') ? 'record' : 'line';
        const text = decodeUtf8(keyColumn.bytes, keyColumn.offsets[built.first], keyColumn.offsets[built.first + 1]);
        throw new DataError({
          code: 'DuplicateKey',
          file: this.file,
          line: this.lines[built.second],
          field: key,
          reason: `duplicate ${key} '${text}' (first at ${what} ${this.lines[built.first]})`,
        });
      }
      this.keyIndex = built;
    } else this.keyIndex.rebind(keyColumn);
    this.lines = new Uint32Array(0);
    return new Table(
      this.resource,
      schema,
      schema.fields.map((f) => columns.get(f.name)!),
      this.keyIndex,
      n,
      this.options.now,
    );
  }

  private freezeSlot(slot: FieldSlot, n: number): Column {
    const b = slot.builder!;
    switch (slot.kind) {
      case B_NUMBER:
        return slot.expect === E_DATE ? (b as NumberBuilder).freezeDates(n) : (b as NumberBuilder).freezeNumbers(n);
      case B_TIMESTAMP:
        return (b as TimestampBuilder).freeze(n);
      case B_BOOLEAN:
        return (b as BooleanBuilder).freeze(n);
      case B_TEXT:
        return (b as TextBuilder).freeze(n);
      case B_DICT:
        return (b as DictBuilder).freeze(n);
      case B_COLLECTION:
        return (b as CollectionBuilder).freeze(n);
      case B_LINK:
        return (b as LinkBuilder).freeze(n, this.parent!.keyColumn);
    }
    throw new Error(`field ${slot.def.name} has no storage`);
  }

  /** Local fields that committed records carried, for the load report. */
  localFields(): LocalFieldInfo[] {
    return this.slots
      .filter((s) => s.def.origin === 'local' && s.seen)
      .map((s) => ({
        resource: this.resource,
        name: s.def.name,
        type: s.expect === E_COLLECTION ? 'Collection(Edm.String)' : EXPECT_TYPE[s.expect],
        file: this.localFiles.get(s) ?? this.file,
        line: s.firstLine,
      }));
  }

  /** Input values of derived fields that were ignored, by field. */
  ignoredFields(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const s of this.slots) if (s.ignored > 0) out[s.def.name] = s.ignored;
    return out;
  }
}

/** What every TableBuilder of a resource starts with: its catalog fields' names, as bytes and in a dictionary (entry i is field i), what each expects and its role. */
interface FieldLayout {
  readonly names: Dictionary;
  readonly nameBytes: readonly Buffer[];
  readonly expects: readonly number[];
  readonly roles: readonly number[];
}

const layouts = new Map<ResourceName, FieldLayout>();

function layoutOf(resource: ResourceName): FieldLayout {
  let layout = layouts.get(resource);
  if (layout === undefined) {
    const def = CATALOG[resource];
    const names = new Dictionary();
    const nameBytes = def.fields.map((field, i) => {
      const bytes = Buffer.from(field.name, 'utf8');
      if (names.entryOf(bytes, 0, bytes.length) !== i) throw new Error(`duplicate field ${field.name}`);
      return bytes;
    });
    layout = { names, nameBytes, expects: def.fields.map(expectOf), roles: def.fields.map((field) => roleOf(def, field)) };
    layouts.set(resource, layout);
  }
  return layout;
}

/** A catalog field's role in a resource's records: its key, its link to the listing, the link's condition, or none. */
function roleOf(resource: ResourceDef, def: FieldDef): number {
  return def.key ? R_KEY : def.name === resource.parent?.field ? R_LINK : def.name === resource.parent?.when?.field ? R_COND : R_NONE;
}

/** The string a JSON string literal b[vs - 1, ve + 1] denotes, or null when its escapes are invalid. */
function unescape(b: Buffer, vs: number, ve: number): string | null {
  try {
    return JSON.parse(b.toString('utf8', vs - 1, ve + 1)) as string;
  } catch {
    return null;
  }
}
