/**
 * Replication errors: a QueryError (the project's one error family) with a stable code, the URL
 * of the upstream request it concerns (never the token) and, for HTTP errors, the status. Codes:
 *
 * | code              | cause                                                                      |
 * |-------------------|----------------------------------------------------------------------------|
 * | InvalidArgument   | a bad option: `from` not an http(s) URL, a page size out of range, ...     |
 * | Unauthorized      | the upstream answered 401 or 403: a bad, expired or insufficient token     |
 * | HttpError         | any other non-2xx answer, or 429/502/503/504 still failing after retries   |
 * | NetworkError      | fetch failed (connection refused, reset, DNS), after retries               |
 * | BadResponse       | a body that is not the expected JSON (malformed, no `value` array, rows     |
 * |                   | out of the requested order, a nextLink on a page that did not advance)     |
 * | MissingKey        | a record without its key (ListingKey, MediaKey, OpenHouseKey)              |
 * | BadRecord         | a record the data directory cannot hold (a value of the wrong type, a      |
 * |                   | malformed ModificationTimestamp, a child without its listing's key)        |
 * | UnsupportedUpstream | $metadata does not declare a replicated resource or its key             |
 * | TargetNotReplica  | the target directory holds data that replication did not write            |
 * | TargetMismatch    | the target was replicated from another upstream                            |
 * | TargetLocked      | another replication is running into the same target                      |
 * | BadState          | the target's replication state file is unreadable                          |
 * | WriteFailed       | writing the target failed (disk full, permissions); nothing half-written   |
 */
import { QueryError } from '../errors.js';

export type ReplicationErrorCode =
  | 'InvalidArgument'
  | 'Unauthorized'
  | 'HttpError'
  | 'NetworkError'
  | 'BadResponse'
  | 'MissingKey'
  | 'BadRecord'
  | 'UnsupportedUpstream'
  | 'TargetNotReplica'
  | 'TargetMismatch'
  | 'TargetLocked'
  | 'BadState'
  | 'WriteFailed';

export interface ReplicationErrorInit {
  /** The upstream URL the error concerns. */
  readonly url?: string;
  /** The HTTP status, for Unauthorized and HttpError. */
  readonly status?: number;
  readonly cause?: unknown;
}

export class ReplicationError extends QueryError {
  declare readonly code: ReplicationErrorCode;
  readonly url: string | undefined;
  readonly status: number | undefined;

  constructor(code: ReplicationErrorCode, message: string, init: ReplicationErrorInit = {}) {
    const where = init.url === undefined ? '' : ` (${init.url})`;
    super(code, `${message}${where}`, { details: [{ code, message, ...(init.url === undefined ? {} : { target: init.url }) }] });
    this.name = 'ReplicationError';
    this.url = init.url;
    this.status = init.status;
    if (init.cause !== undefined) this.cause = init.cause;
  }
}
