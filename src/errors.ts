/**
 * The one error family of reso-engine. Every failure a user can cause (bad query text, unknown
 * field, bad data line) is a QueryError with a stable `code`; HTTP status is derived from the code
 * in exactly one place (the service layer), never chosen at the throw site.
 */
export interface QueryErrorDetail {
  readonly code: string;
  readonly message: string;
  readonly target?: string;
}

export interface QueryErrorInit {
  /** The query option the error occurs in, e.g. `$filter`. */
  readonly option?: string;
  /** 0-based offset into that option's value (syntax errors). */
  readonly position?: number;
  readonly details?: readonly QueryErrorDetail[];
}

export class QueryError extends Error {
  readonly code: string;
  readonly option: string | undefined;
  readonly position: number | undefined;
  readonly details: readonly QueryErrorDetail[] | undefined;

  constructor(code: string, message: string, init: QueryErrorInit = {}) {
    super(message);
    this.name = 'QueryError';
    this.code = code;
    this.option = init.option;
    this.position = init.position;
    this.details = init.details;
  }
}

/**
 * The storage backend cannot answer now (connection lost, server restarting or shutting down, a
 * statement timeout, no free connection): nothing is wrong with the request, and the same request
 * may succeed later. The service answers 503 with `Retry-After: retryAfterSeconds`.
 */
export class BackendUnavailableError extends QueryError {
  readonly retryAfterSeconds: number;

  constructor(message: string, options: { retryAfterSeconds?: number; cause?: unknown } = {}) {
    super('BackendUnavailable', message);
    this.name = 'BackendUnavailableError';
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1;
    if (options.cause !== undefined) this.cause = options.cause;
  }
}
