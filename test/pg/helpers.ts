/**
 * Helpers of the PostgreSQL suites: the run's cluster (test/pg/global-setup.ts) and a fresh
 * database per suite.
 */
import { inject } from 'vitest';
import { createDatabase } from './cluster.js';

/** True when the PostgreSQL suites skip on this machine (the global setup said why, once). */
export const pgSkip = inject('pgUrl') === '';

/** A new, empty database on the run's cluster (PostGIS available), as a URL. */
export function freshDatabase(prefix = 'test'): Promise<string> {
  const url = inject('pgUrl');
  const base = new URL(url);
  return createDatabase(
    {
      url,
      urlOf: (db) => {
        const u = new URL(base);
        u.pathname = `/${encodeURIComponent(db)}`;
        return u.toString();
      },
    },
    prefix,
  );
}
