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
