/**
 * Bind parameters of one SQL statement: every literal of a query reaches PostgreSQL as `$n`, never
 * as text in the statement. `add` returns the placeholder (with a cast when given, so the
 * statement's text, and so its prepared plan, depends only on the query's shape).
 */
export class Params {
  readonly values: unknown[] = [];

  /** Adds a value and returns its placeholder, `$n` or `$n::cast`. */
  add(value: unknown, cast?: string): string {
    this.values.push(value);
    const placeholder = `$${this.values.length}`;
    return cast === undefined ? placeholder : `${placeholder}::${cast}`;
  }
}

/** Anything that runs a parameterized statement: a pg Pool or a checked-out PoolClient. */
export interface Queryable {
  query<R extends Record<string, unknown> = Record<string, unknown>>(text: string, values?: readonly unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
}
