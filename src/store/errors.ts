/**
 * Load errors: a QueryError with the file, line, field and reason of the bad record, in the
 * message and as properties. Codes:
 *
 * | code               | cause                                                             |
 * |--------------------|-------------------------------------------------------------------|
 * | BadDataLine        | the line (or array element) is not valid JSON, or not an object   |
 * | BadFieldValue      | a value does not fit its field's type                             |
 * | MissingKey         | the record has no key (ListingKey, MediaKey, ...)                 |
 * | DuplicateKey       | a key already loaded                                              |
 * | MissingParent      | a child record whose listing is not in Property                   |
 * | BadDataFile        | a file that cannot be read or split into records                  |
 * | MissingDataFile    | a data directory without Property records                         |
 * | AmbiguousDataFile  | two files for one resource (e.g. Property.jsonl and .jsonl.gz)    |
 * | UnknownResource    | records for a resource the engine does not know                   |
 * | DataTooLarge       | a column beyond the store's limits (4 GiB of text per column)     |
 */
import { QueryError } from '../errors.js';

export interface DataErrorInfo {
  readonly code: string;
  /** The file name (e.g. `Property.jsonl`), or `Property records` for in-memory records. */
  readonly file: string;
  /**
   * 1-based line (JSON Lines), line of the element's start (JSON arrays) or record number
   * (in-memory records); 0 for a problem with the file as a whole.
   */
  readonly line: number;
  readonly field: string | null;
  readonly reason: string;
}

export class DataError extends QueryError {
  readonly file: string;
  readonly line: number;
  readonly field: string | null;
  readonly reason: string;

  constructor(info: DataErrorInfo) {
    const unit = info.file.endsWith(' records') ? 'record' : 'line';
    const where = `${info.file}${info.line > 0 ? ` ${unit} ${info.line}` : ''}${info.field ? `${info.line > 0 ? ',' : ''} field ${info.field}` : ''}`;
    super(info.code, `${where}: ${info.reason}.`, {
      details: [{ code: info.code, message: info.reason, target: `${info.file}:${info.line}${info.field ? `:${info.field}` : ''}` }],
    });
    this.file = info.file;
    this.line = info.line;
    this.field = info.field;
    this.reason = info.reason;
  }

  toJSON(): DataErrorInfo {
    return { code: this.code, file: this.file, line: this.line, field: this.field, reason: this.reason };
  }
}

/** A short description of a JSON value for error messages. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value)}`;
  if (typeof value === 'number') return `the number ${String(value)}`;
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}
