/**
 * Batches for `TableAppender.append`: `loadBatch` reads one resource's records with the loader's
 * own code into a Table, and remembers which Property table a child batch was linked to as it was
 * read, so that `LinkPart` (parts/link.ts) can take the links as they are when `append` is given
 * the same parent.
 */
import { CATALOG } from '../../schema/catalog.js';
import type { ResourceName } from '../../schema/types.js';
import { TableBuilder } from '../ingest.js';
import { SkipLog } from '../record.js';
import type { Table } from '../table.js';
import { runNow, type Steps } from '../../util/steps.js';

export interface BatchOptions {
  /**
   * Child resources: the Property table to link to as the records are read (rows of it end up in
   * the batch's link column, and `append` with the same `parent` takes them as they are). Without
   * it the link is kept as text and resolved by `append`.
   */
  readonly parent?: Table;
  /** The clock for the batch's DaysOnMarket (the appended generations use the table's clock). */
  readonly now?: () => number;
  /** The records' name in errors (default `<Resource> records`, numbered by record; a name like `Property.jsonl` numbers by line). */
  readonly label?: string;
}

/** Batches loaded by `loadBatch` against a parent: batch -> that Property table. */
export const linkedTo = new WeakMap<Table, Table>();

/**
 * Reads one resource's batch records into a Table a record at a time (`add`), so that a caller can
 * give the event loop turns between records, then `finish` makes the Table; see `loadBatch`.
 */
export class BatchReader {
  private readonly builder: TableBuilder;
  private readonly parent: Table | undefined;
  /** Records added so far. */
  count = 0;

  constructor(
    readonly resource: ResourceName,
    options: BatchOptions = {},
    slots: 'now' | 'later' = 'now',
  ) {
    const child = CATALOG[resource].parent !== null;
    this.parent = child ? options.parent : undefined;
    this.builder = new TableBuilder(
      resource,
      {
        skipBadRecords: false,
        skipLog: new SkipLog(),
        now: options.now ?? (() => Date.now()),
        parent: this.parent,
        deferParent: child && options.parent === undefined,
      },
      slots,
    );
    if (options.label !== undefined) this.builder.file = options.label;
  }

  /** A reader made in steps (its builder's field slots a few at a time: a change makes one per chunk between queries). */
  static *steps(resource: ResourceName, options: BatchOptions = {}): Steps<BatchReader> {
    const reader = new BatchReader(resource, options, 'later');
    yield* reader.builder.slotSteps();
    return reader;
  }

  /** Reads the next record (`line`: its 1-based number, for errors). */
  add(record: unknown, line: number): void {
    this.builder.addValue(record, line);
    this.count++;
  }

  /** Reads the next record from the bytes src[s, e) of a JSON object (the loader's byte scanner; `line` as for `add`). */
  addBytes(src: Buffer, s: number, e: number, line: number): void {
    this.builder.addBytes(src, s, e, line);
    this.count++;
  }

  finish(): Table {
    return runNow(this.finishSteps());
  }

  /** `finish` in steps (a check point every few columns). */
  *finishSteps(): Steps<Table> {
    const table = yield* this.builder.finishSteps();
    if (this.parent !== undefined) linkedTo.set(table, this.parent);
    return table;
  }
}

/**
 * Loads one resource's batch records into a Table for `TableAppender.append` (errors as the
 * loader reports them: DataError with the record number). A child batch needs no Property
 * records: its listing keys are resolved against `options.parent`, or later by `append`.
 */
export function loadBatch(resource: ResourceName, records: readonly unknown[], options: BatchOptions = {}): Table {
  const reader = new BatchReader(resource, options);
  for (let i = 0; i < records.length; i++) reader.add(records[i], i + 1);
  return reader.finish();
}
