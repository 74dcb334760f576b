/**
 * The records of one upsert operation, as the writers read them: a list of values
 * (`{ resource, upsert: [records] }`) or JSON Lines bytes (`{ resource, upsertLines }`, one
 * JSON object per line, as a feed or a request body brings them).
 *
 * Lines are read in steps: each line's byte range found and its key read from its bytes
 * (`topLevelString`: the line checked as JSON, no object made), then the batch reader takes each
 * kept line's bytes with the loader's byte scanner (`BatchReader.addBytes`), so no record becomes
 * a JavaScript object. Parsing a 100-listing change's text whole (261 KB of JSON) held the event
 * loop 1.3 ms at once, and its objects lived until read (BENCHMARKS.md "Live: a change's records
 * read from its bytes in steps").
 *
 * Only the last version of a key is kept (the loader refuses a key twice in one batch as a
 * DuplicateKey); a record or line without a string key stays, for the reader to report.
 */
import { CATALOG } from '../schema/catalog.js';
import type { RecordResourceName } from '../schema/types.js';
import { BatchReader, type BatchOptions } from '../store/append/batch.js';
import { DataError } from '../store/errors.js';
import { topLevelString } from '../store/json-scan.js';
import { LineSplitter } from '../store/read.js';
import type { Table } from '../store/table.js';
import type { Steps } from '../util/steps.js';

export interface UpsertInput {
  /** Records given (blank lines not counted). */
  readonly given: number;
  /** Records kept: the last version of each key, in the order given. */
  readonly count: number;
  /** The records' name in errors: `Property records` (numbered by record) or `Property.jsonl` (by line). */
  readonly label: string;
  /** Kept record k's number in what was given (its record number, or its line). */
  number(k: number): number;
  /** Reads kept record k into `reader` as the batch's record `line`. */
  read(reader: BatchReader, k: number, line: number): void;
  /** Kept record k as a value (a line parsed; undefined for a line that is not JSON). */
  value(k: number): unknown;
}

/** Bytes of JSON Lines split into lines between two check points. */
const SPLIT_SLICE = 64 * 1024;

/** Records keyed between two check points (about a microsecond each in a change: a property read of a large, cold object and a fresh string hashed); a line, scanned, is a check point of its own. */
const KEY_CHECK = 8;

/** The records of an upsert operation, keyed in steps (`key`: the resource's key field). */
export function* upsertInputSteps(
  op:
    | { readonly resource: RecordResourceName; readonly upsert: readonly unknown[] }
    | { readonly resource: RecordResourceName; readonly upsertLines: Uint8Array },
  key: string = CATALOG[op.resource].key,
): Steps<UpsertInput> {
  if ('upsert' in op) {
    const records = op.upsert;
    const keys = new Array<unknown>(records.length);
    for (let i = 0; i < records.length; i++) {
      keys[i] = keyOf(records[i], key);
      if (i % KEY_CHECK === KEY_CHECK - 1) yield;
    }
    const kept = yield* lastOfKeysSteps(keys);
    return {
      given: records.length,
      count: kept.length,
      label: `${op.resource} records`,
      number: (k) => kept[k] + 1,
      read: (reader, k, line) => reader.add(records[kept[k]], line),
      value: (k) => records[kept[k]],
    };
  }
  const bytes = Buffer.from(op.upsertLines.buffer, op.upsertLines.byteOffset, op.upsertLines.byteLength);
  // the lines as the loader splits a .jsonl file (blank lines skipped, a byte order mark dropped),
  // a slice of the bytes at a time; a line that spans two slices is joined into a buffer of its own
  const srcs: Buffer[] = [];
  const starts: number[] = [];
  const ends: number[] = [];
  const lines: number[] = [];
  const splitter = new LineSplitter((b, s, e, line) => {
    srcs.push(b);
    starts.push(s);
    ends.push(e);
    lines.push(line);
  });
  for (let at = 0; at < bytes.length; at += SPLIT_SLICE) {
    splitter.push(bytes.subarray(at, at + SPLIT_SLICE));
    yield;
  }
  splitter.end();
  const keys: unknown[] = [];
  for (let i = 0; i < starts.length; i++) {
    keys.push(topLevelString(srcs[i], starts[i], ends[i], key));
    yield; // a line scanned is a few microseconds between queries: a check point each
  }
  const kept = yield* lastOfKeysSteps(keys);
  const label = `${op.resource}.jsonl`;
  return {
    given: keys.length,
    count: kept.length,
    label,
    number: (k) => lines[kept[k]],
    read: (reader, k, line) => reader.addBytes(srcs[kept[k]], starts[kept[k]], ends[kept[k]], line),
    value: (k) => parsed(srcs[kept[k]], starts[kept[k]], ends[kept[k]]),
  };
}

/**
 * Reads kept records [at, at + size) into a batch Table at once (the PostgreSQL writer's chunks),
 * errors numbered as in what was given.
 */
export function readBatch(input: UpsertInput, resource: RecordResourceName, at: number, size: number, options: BatchOptions): Table {
  const reader = new BatchReader(resource, { ...options, label: input.label });
  return renumbered(
    () => {
      for (let i = 0; i < size; i++) input.read(reader, at + i, i + 1);
      return reader.finish();
    },
    (line) => input.number(at + line - 1),
  );
}

/** Runs a batch read, giving a DataError the record's number in the whole operation (not the chunk's). */
export function renumbered<T>(read: () => T, number: (line: number) => number): T {
  try {
    return read();
  } catch (e) {
    throw renumberedError(e, number);
  }
}

/** `renumbered` for a read in steps. */
export function* renumberedSteps<T>(read: Steps<T>, number: (line: number) => number): Steps<T> {
  try {
    return yield* read;
  } catch (e) {
    throw renumberedError(e, number);
  }
}

function renumberedError(e: unknown, number: (line: number) => number): unknown {
  return e instanceof DataError && e.line > 0 ? new DataError({ code: e.code, file: e.file, line: number(e.line), field: e.field, reason: e.reason }) : e;
}
/** Indexes of the values to keep: each string key's last, and every value without one. */
function* lastOfKeysSteps(keys: readonly unknown[]): Steps<number[]> {
  const last = new Map<string, number>();
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    if (typeof k === 'string') last.set(k, i);
    if (i % KEY_CHECK === KEY_CHECK - 1) yield;
  }
  const kept: number[] = [];
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    if (typeof k !== 'string' || last.get(k) === i) kept.push(i);
    if (i % KEY_CHECK === KEY_CHECK - 1) yield;
  }
  return kept;
}

function keyOf(record: unknown, key: string): unknown {
  return record !== null && typeof record === 'object' ? (record as Record<string, unknown>)[key] : undefined;
}

/** A line's JSON value, or undefined when it is not JSON (the reader reports it). */
function parsed(bytes: Buffer, s: number, e: number): unknown {
  try {
    return JSON.parse(bytes.toString('utf8', s, e)) as unknown;
  } catch {
    return undefined;
  }
}
