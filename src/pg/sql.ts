import { createHash } from 'node:crypto';

/**
 * Bind parameters of one SQL statement: every literal of a query reaches PostgreSQL as `$n`, never
 * as text in the statement. `add` returns the placeholder (with a cast when given, so the
 * statement's text, and so its prepared plan, depends only on the query's shape).
 */
export class Params {
  readonly values: unknown[] = [];

  /**
   * The values a statement's text refers to: the first n, n its highest placeholder. A statement
   * built from some of a scope's pieces (a count without the relevance) may use fewer than were
   * added, but never skips one, since pieces add theirs in the order statements use them.
   */
  valuesOf(text: string): unknown[] {
    let highest = 0;
    for (const m of text.matchAll(/\$(\d+)/g)) highest = Math.max(highest, Number(m[1]));
    return this.values.slice(0, highest);
  }

  /** Adds a value and returns its placeholder, `$n` or `$n::cast`. */
  add(value: unknown, cast?: string): string {
    this.values.push(value);
    const placeholder = `$${this.values.length}`;
    return cast === undefined ? placeholder : `${placeholder}::${cast}`;
  }
}

/** Anything that runs a parameterized statement: a pg Pool or a checked-out PoolClient. */
export interface Queryable {
  query<R extends Record<string, unknown> = Record<string, unknown>>(
    text: string,
    values?: readonly unknown[],
  ): Promise<{ rows: R[]; rowCount: number | null }>;
}

/**
 * A Queryable that also gives rows as arrays (`rowMode: 'array'`), as record readers
 * (src/pg/records.ts) decode them: by position, since a statement's column names may repeat.
 * A pg Pool or PoolClient is one.
 */
export type ArrayQueryable = Queryable & {
  query(config: { readonly name?: string; readonly text: string; readonly values?: unknown[]; readonly rowMode: 'array' }): Promise<{ rows: unknown[][] }>;
};

/**
 * The rows of a statement as arrays. The statement is prepared once per connection under a name
 * derived from its text (node-postgres parses a named statement only the first time a connection
 * runs it), and its text depends only on the query's shape: one preparation per shape.
 */
export async function arrayRows(db: ArrayQueryable, text: string, values: readonly unknown[]): Promise<unknown[][]> {
  const name = `reso_${createHash('sha1').update(text).digest('base64url').slice(0, 24)}`;
  return (await db.query({ name, text, values: [...values], rowMode: 'array' })).rows;
}
