/**
 * The one place where an error becomes an HTTP status (SERVICE.md §5). Throw sites raise a
 * QueryError (the engine) or a ServiceError (this layer) with a stable code and never pick a
 * status; `statusOf` reads it from STATUS_BY_CODE. A QueryError whose code the table does not
 * list is bad input (400); anything that is not a QueryError is a defect (500).
 */
import { BackendUnavailableError, QueryError, type QueryErrorDetail, type QueryErrorInit } from '../errors.js';

/**
 * Status per error code. Engine codes not listed here (parser, binder and search codes such as
 * InvalidSyntax, UnknownField, TypeMismatch, TopTooLarge, ...) are 400 through the QueryError
 * default; they are listed only where the status is something else or the code is the service's.
 */
export const STATUS_BY_CODE: Readonly<Record<string, number>> = Object.freeze({
  // 400: the request is malformed (the service's own codes; every engine code defaults here)
  InvalidRequest: 400,
  InvalidContentType: 400,
  InvalidCredentials: 400,
  InvalidPercentEncoding: 400,
  InvalidKey: 400,
  UnknownKeyProperty: 400,
  UnsupportedODataVersion: 400,
  InvalidHttp: 400,
  QueryOptionNotAllowed: 400,
  UnsupportedFormat: 400,
  // 400: a write of an admin account (handler.ts) that is malformed or outside its sources
  InvalidJson: 400,
  InvalidBody: 400,
  SourceNotAllowed: 400,
  // 401: no usable credentials
  MissingToken: 401,
  InvalidToken: 401,
  // 403: the client may not use this path (/metrics from another host)
  Forbidden: 403,
  // 404: no such path or entity
  NotFound: 404,
  EntityNotFound: 404,
  UnknownResource: 404,
  UnknownNavigationProperty: 404,
  // 405
  MethodNotAllowed: 405,
  // 413, 414, 431: too large
  PayloadTooLarge: 413,
  QueryStringTooLong: 414,
  HeadersTooLarge: 431,
  // 429: slow down (with Retry-After)
  TooManyLoginAttempts: 429,
  RateLimited: 429,
  // 503: the storage backend cannot answer now (the PostgreSQL backend: connection lost, server
  // restarting, statement timeout, no free connection); the same request may succeed later (Retry-After)
  BackendUnavailable: 503,
  // 500: a defect
  InternalError: 500,
  // 501: an engine handed to the service without `explain` (both built-in engines have it)
  ExplainUnavailable: 501,
  // 500: snapshot errors happen when an engine is opened or saved, never in a request; should one
  // reach a handler, it is the server's failure (logged by onError; the client learns no path)
  SnapshotNotFound: 500,
  SnapshotForeign: 500,
  SnapshotVersion: 500,
  SnapshotTruncated: 500,
  SnapshotCorrupt: 500,
  SnapshotUnreadable: 500,
  SnapshotWriteFailed: 500,
  SnapshotUnsupportedHost: 500,
});

/** An error of the HTTP layer: a stable code (status from STATUS_BY_CODE) plus response headers. */
export class ServiceError extends QueryError {
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: string, message: string, init: QueryErrorInit & { headers?: Record<string, string> } = {}) {
    super(code, message, init);
    this.name = 'ServiceError';
    this.headers = init.headers ?? {};
  }
}

/** The response headers an error asks for: a ServiceError's own, Retry-After of a BackendUnavailableError. */
export function headersOf(error: QueryError): Readonly<Record<string, string>> {
  if (error instanceof ServiceError) return error.headers;
  // Retry-After takes whole seconds
  if (error instanceof BackendUnavailableError) return { 'Retry-After': String(Math.max(1, Math.ceil(error.retryAfterSeconds))) };
  return {};
}

/** The HTTP status of an error: the table, else 400 for any QueryError, else 500. */
export function statusOf(error: unknown): number {
  if (!(error instanceof QueryError)) return 500;
  return STATUS_BY_CODE[error.code] ?? 400;
}

export interface ErrorObject {
  readonly code: string;
  readonly message: string;
  readonly target?: string;
  readonly position?: number;
  readonly details?: readonly QueryErrorDetail[];
}

/** The `error` member of SERVICE.md §5 for a QueryError (never a stack). */
export function errorObject(error: QueryError): ErrorObject {
  const out: { -readonly [K in keyof ErrorObject]: ErrorObject[K] } = { code: error.code, message: error.message };
  if (error.option !== undefined) out.target = error.option;
  if (error.position !== undefined) out.position = error.position;
  if (error.details !== undefined && error.details.length > 0) {
    out.details = error.details.map((d) =>
      d.target === undefined ? { code: d.code, message: d.message } : { code: d.code, message: d.message, target: d.target },
    );
  }
  return out;
}
