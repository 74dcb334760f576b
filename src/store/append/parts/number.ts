/**
 * Parts of Float64 columns with a validity bitmap: numbers and dates (NumberPart) and timestamps
 * (TimestampPart, which also carries the written styles and the exception texts of its rows).
 * Their base arrays are exposed so that derived parts (parts/derived.ts) can find the part that
 * owns the arrays they share.
 */
import type { Steps } from '../../../util/steps.js';
import { QueryError } from '../../../errors.js';
import { DateColumn, NumberColumn, TimestampColumn, type Column } from '../../columns.js';
import { CANONICAL_STYLE } from '../../temporal.js';
import { Backing, Bits } from '../growable.js';
import { Part, type Batch, type Write } from './part.js';

/** number and date columns. */
export class NumberPart extends Part {
  private readonly numbers: Backing<Float64Array>;
  private readonly validity: Bits;
  readonly baseValues: Float64Array;

  constructor(
    field: string,
    private readonly kind: 'number' | 'date',
    base: NumberColumn | DateColumn,
  ) {
    super(field);
    this.baseValues = base.values;
    this.numbers = new Backing(base.values);
    this.validity = new Bits(base.validity);
  }

  override *reserve(n: number, m: number): Steps<void> {
    yield* this.numbers.roomSteps(n, n + m);
    yield* this.validity.roomSteps(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== this.kind) throw this.cannotHold(batch, this.kind, src);
    const m = batch.rows;
    return (n) => {
      const values = this.numbers.room(n, n + m);
      this.validity.room(n, n + m);
      if (src === null) {
        values.fill(0, n, n + m);
        this.validity.clear(n, m);
      } else {
        const s = src;
        values.set(s.values.subarray(0, m), n);
        this.validity.copy(s.validity, m, n);
      }
    };
  }

  values(n: number): Float64Array {
    return (this.column(n) as NumberColumn | DateColumn).values;
  }

  protected build(n: number): Column {
    const values = this.numbers.array.subarray(0, n);
    return this.kind === 'number' ? new NumberColumn(values, this.validity.view(n)) : new DateColumn(values, this.validity.view(n));
  }
}

export class TimestampPart extends Part {
  private readonly values: Backing<Float64Array>;
  private readonly validity: Bits;
  private styles: Backing<Uint16Array> | null;
  private styleTable: readonly number[];
  private exceptions: ReadonlyMap<number, string> | null;
  readonly baseValues: Float64Array;
  readonly baseValidity: Uint32Array;

  constructor(field: string, base: TimestampColumn) {
    super(field);
    this.baseValues = base.values;
    this.baseValidity = base.validity;
    this.values = new Backing(base.values);
    this.validity = new Bits(base.validity);
    this.styles = base.styles === null ? null : new Backing(base.styles);
    this.styleTable = base.styleTable;
    this.exceptions = base.exceptions;
  }

  override *reserve(n: number, m: number): Steps<void> {
    yield* this.values.roomSteps(n, n + m);
    yield* this.validity.roomSteps(n, n + m);
    if (this.styles) yield* this.styles.roomSteps(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== 'timestamp') throw this.cannotHold(batch, 'timestamp', src);
    const m = batch.rows;
    // The batch's style codes in this column's style table (extended by a copy when needed).
    let table = this.styleTable;
    let remap: Uint16Array | null = null;
    if (src !== null && src.styles !== null) {
      const codes = new Map<number, number>();
      const extended = table.length === 0 ? [CANONICAL_STYLE] : table.slice();
      extended.forEach((style, code) => codes.set(style, code));
      remap = new Uint16Array(src.styleTable.length);
      src.styleTable.forEach((style, i) => {
        let code = codes.get(style);
        if (code === undefined) {
          code = extended.length;
          extended.push(style);
          codes.set(style, code);
        }
        remap![i] = code;
      });
      if (extended.length > 0x10000) throw new QueryError('DataTooLarge', 'A timestamp column holds more than 65,535 distinct written styles.');
      if (extended.length !== table.length) table = extended;
    }
    return (n) => {
      const values = this.values.room(n, n + m);
      this.validity.room(n, n + m);
      if (remap !== null && this.styles === null) this.styles = new Backing(new Uint16Array(0)); // older rows: code 0, canonical
      const styles = this.styles?.room(n, n + m) ?? null;
      if (src === null) {
        values.fill(0, n, n + m);
        this.validity.clear(n, m);
        styles?.fill(0, n, n + m);
        return;
      }
      const s = src;
      values.set(s.values.subarray(0, m), n);
      this.validity.copy(s.validity, m, n);
      if (styles !== null) {
        if (remap === null || s.styles === null) styles.fill(0, n, n + m);
        else for (let r = 0; r < m; r++) styles[n + r] = remap[s.styles[r]];
      }
      this.styleTable = table;
      if (s.exceptions !== null && s.exceptions.size > 0) {
        const exceptions = new Map(this.exceptions ?? []);
        for (const [row, text] of s.exceptions) if (row < m) exceptions.set(n + row, text);
        this.exceptions = exceptions;
      }
    };
  }

  override checkpoint(): () => void {
    const restore = super.checkpoint();
    const { styles, styleTable, exceptions } = this;
    return () => {
      restore();
      Object.assign(this, { styles, styleTable, exceptions });
    };
  }

  protected build(n: number): Column {
    const styles = this.styles === null ? null : this.styles.array.subarray(0, n);
    return new TimestampColumn(this.values.array.subarray(0, n), this.validity.view(n), styles, this.styleTable, this.exceptions);
  }
}
