/**
 * Parts of dictionary-coded columns: single strings (DictionaryPart) and multi-value collections
 * (CollectionPart), and the dictionary both extend (Codes), copied on the first new entry so the
 * published generations keep theirs.
 */
import { runNow, type Steps } from '../../../util/steps.js';
import { CollectionColumn, DictionaryColumn, type Column } from '../../columns.js';
import { Backing, Bits } from '../growable.js';
import { Part, stringsOf, type Batch, type Write } from './part.js';

/** Dictionary entries copied (or mapped) between two check points (a power of two). */
const COPY_ENTRIES = 2048;

/**
 * Codes of a dictionary (dictionary and collection columns): the current generation's entries,
 * a string -> code map built at the first append, and new entries added to a copy of the entries
 * (the published generations keep theirs).
 */
export class Codes {
  private codeOf: Map<string, number> | null = null;
  private added: Array<string | null> | null = null;

  constructor(
    public entries: ReadonlyArray<string | null>,
    /** The code of entries[0] (dictionary columns: 0 is null and entries start at 1). */
    private readonly from: number,
  ) {}

  /**
   * Steps that make the copy new entries go to, before the write, when one of `values` is new to
   * the dictionary: the copy in slices (a check point every COPY_ENTRIES), and the string -> code
   * map of the first append likewise. Copied at once in the write, an agent-name or street-number
   * dictionary of thousands of entries held the event loop 0.05-0.1 ms per column and change.
   */
  *roomSteps(values: Iterable<string | null | undefined>): Steps<void> {
    const map = yield* this.mapSteps();
    if (this.added !== null) return;
    let fresh = false;
    for (const v of values) {
      if (typeof v === 'string' && !map.has(v)) {
        fresh = true;
        break;
      }
    }
    if (!fresh) return;
    const { entries } = this;
    const copy: Array<string | null> = [];
    for (let i = 0; i < entries.length; i++) {
      copy.push(entries[i]);
      if ((i & (COPY_ENTRIES - 1)) === COPY_ENTRIES - 1) yield;
    }
    this.added = copy;
  }

  code(value: string): number {
    const map = this.codeOf ?? runNow(this.mapSteps());
    let code = map.get(value);
    if (code === undefined) {
      this.added ??= this.entries.slice();
      code = this.added.length;
      this.added.push(value);
      map.set(value, code);
    }
    return code;
  }

  /** Codes of the batch's dictionary, looked up as its rows use them: remap[batchCode], -1 until seen. */
  remapper(dictionary: ReadonlyArray<string | null>): (code: number) => number {
    const remap = new Int32Array(dictionary.length).fill(-1);
    return (b) => {
      let c = remap[b];
      if (c < 0) c = remap[b] = this.code(dictionary[b]!);
      return c;
    };
  }

  /** Ends an append: the entries with its additions (a new array when there were any). */
  publish(): number {
    if (this.added !== null) {
      this.entries = this.added;
      this.added = null;
    }
    return this.entries.length;
  }

  /** The string -> code map, made at the first append (a check point every COPY_ENTRIES entries). */
  private *mapSteps(): Steps<Map<string, number>> {
    if (this.codeOf !== null) return this.codeOf;
    const map = new Map<string, number>();
    for (let i = this.from; i < this.entries.length; i++) {
      map.set(this.entries[i]!, i);
      if ((i & (COPY_ENTRIES - 1)) === COPY_ENTRIES - 1) yield;
    }
    this.codeOf = map;
    return map;
  }
}

export class DictionaryPart extends Part {
  private readonly codes: Backing<Uint16Array | Uint32Array>;
  private readonly dict: Codes;

  constructor(field: string, base: DictionaryColumn) {
    super(field);
    this.codes = new Backing<Uint16Array | Uint32Array>(base.codes);
    this.dict = new Codes(base.dictionary, 1);
  }

  override *reserve(n: number, m: number): Steps<void> {
    yield* this.codes.roomSteps(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    const strings = src === null || src.kind === 'dictionary' ? null : stringsOf(src);
    if (src !== null && src.kind !== 'dictionary' && strings === null) throw this.cannotHold(batch, 'strings', src);
    const m = batch.rows;
    const write: Write = (n) => {
      const out = new Uint32Array(m);
      if (src !== null && src.kind === 'dictionary') {
        const code = this.dict.remapper(src.dictionary);
        for (let r = 0; r < m; r++) {
          const b = src.codes[r];
          out[r] = b === 0 ? 0 : code(b);
        }
      } else if (strings !== null) {
        for (let r = 0; r < m; r++) {
          const s = strings(r);
          out[r] = s === null ? 0 : this.dict.code(s);
        }
      }
      if (this.dict.publish() - 1 > 0xffff) this.codes.widen(n, n + m);
      this.codes.room(n, n + m).set(out, n);
    };
    if (src !== null)
      write.reserveSteps = () => this.dict.roomSteps(src.kind === 'dictionary' ? src.dictionary : Array.from({ length: m }, (_, r) => strings!(r)));
    return write;
  }

  protected build(n: number): Column {
    return new DictionaryColumn(this.codes.array.subarray(0, n), this.dict.entries);
  }
}

export class CollectionPart extends Part {
  private readonly offsets: Backing<Uint32Array>;
  private readonly codes: Backing<Uint16Array | Uint32Array>;
  private readonly validity: Bits;
  private readonly dict: Codes;

  constructor(field: string, base: CollectionColumn) {
    super(field);
    this.offsets = new Backing(base.offsets);
    this.codes = new Backing<Uint16Array | Uint32Array>(base.codes);
    this.validity = new Bits(base.validity);
    this.dict = new Codes(base.dictionary, 0);
  }

  override *reserve(n: number, m: number): Steps<void> {
    yield* this.offsets.roomSteps(n + 1, n + m + 1);
    const at = this.offsets.array[n];
    yield* this.validity.roomSteps(n, n + m);
    yield* this.codes.roomSteps(at, at);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== 'collection') throw this.cannotHold(batch, 'collection', src);
    const m = batch.rows;
    const write: Write = (n) => {
      const offsets = this.offsets.room(n + 1, n + m + 1);
      this.validity.room(n, n + m);
      const at = offsets[n];
      if (src === null) {
        offsets.fill(at, n + 1, n + m + 1);
        this.validity.clear(n, m);
        return;
      }
      const s = src;
      const o0 = s.offsets[0];
      const count = s.offsets[m] - o0;
      const out = new Uint32Array(count);
      const code = this.dict.remapper(s.dictionary);
      for (let i = 0; i < count; i++) out[i] = code(s.codes[o0 + i]);
      if (this.dict.publish() - 1 > 0xffff) this.codes.widen(at, at + count);
      this.codes.room(at, at + count).set(out, at);
      for (let r = 0; r < m; r++) offsets[n + 1 + r] = at + s.offsets[r + 1] - o0;
      this.validity.copy(s.validity, m, n);
    };
    if (src !== null) write.reserveSteps = () => this.dict.roomSteps(src.dictionary);
    return write;
  }

  protected build(n: number): Column {
    const offsets = this.offsets.array.subarray(0, n + 1);
    return new CollectionColumn(offsets, this.codes.array.subarray(0, offsets[n]), this.dict.entries as string[], this.validity.view(n));
  }
}
