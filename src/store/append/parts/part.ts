/**
 * The base of the column parts: a Part is one column of a table across its generations. It checks
 * a batch's column before anything is written (`prepare`), writes it into its growable arrays, and
 * builds each generation's column object over exact-length views of them. Also the batch context
 * the parts are given and the string view of a batch column that the string-storing parts share.
 */
import type { Steps } from '../../../util/steps.js';
import type { ResourceName } from '../../../schema/types.js';
import type { Column } from '../../columns.js';
import type { DataError } from '../../errors.js';
import type { Table } from '../../table.js';
import { schemaMismatch } from '../schema-fit.js';

export interface Batch {
  readonly resource: ResourceName;
  readonly table: Table;
  readonly rows: number;
  readonly parent: Table | undefined;
}

/**
 * Writes the batch's rows as rows n..n+m-1; cannot fail (everything was checked before).
 * `reserveSteps`, when given, makes the room the write needs beyond what `reserve` could know (a
 * text column's bytes) in steps before it, so a copy of a large array never holds the event loop.
 */
export interface Write {
  (n: number): void;
  reserveSteps?: (n: number) => Steps<void>;
}

/** One column of the table across its generations. */
export abstract class Part {
  private built: Column | null = null;
  private builtRows = -1;

  constructor(readonly field: string) {}

  /**
   * Checks that the batch's column (null: the batch has no values for the field) can go into this
   * one, throwing before anything is written, and returns the write.
   */
  abstract prepare(src: Column | null, batch: Batch): Write;

  /** The column of the generation of n rows (built once, so dependent columns share its views). */
  column(n: number): Column {
    if (this.builtRows !== n) {
      this.built = this.build(n);
      this.builtRows = n;
    }
    return this.built!;
  }

  protected abstract build(n: number): Column;

  /**
   * Makes room in the backing arrays for m rows after the first n, as the write of an append of m
   * rows would (the first time: copying the loaded segment's arrays), writing nothing, in steps
   * (each array copied in slices), so a caller can spread the copies over event-loop turns.
   */
  *reserve(_n: number, _m: number): Steps<void> {}

  /** Saves the state appends change beyond the arrays; the function returned restores it. */
  checkpoint(): () => void {
    return () => {
      this.built = null;
      this.builtRows = -1;
    };
  }

  protected cannotHold(batch: Batch, kind: string, src: Column): DataError {
    return schemaMismatch(batch.resource, this.field, `the table stores ${this.field} as ${kind}; the batch's ${src.kind} values cannot be converted`);
  }
}

/** A batch column's values as strings, for a table column that stores strings; null when it has none. */
export function stringsOf(src: Column): ((row: number) => string | null) | null {
  switch (src.kind) {
    case 'dictionary':
    case 'text':
      return (row) => src.get(row);
    case 'date':
      return (row) => src.json(row) as string | null;
    case 'timestamp':
      return (row) => src.text(row);
    default:
      return null;
  }
}
