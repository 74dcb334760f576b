/**
 * Helpers of the PostgreSQL suites: the run's clusters (test/pg/global-setup.ts), a fresh database
 * per suite, and the layouts the distributed suites run on, each fresh per suite: a single node, a
 * coordinator whose tables are partitioned over postgres_fdw foreign tables on the two worker
 * clusters, and a real Citus cluster when RESO_CITUS_URL is set.
 */
import pg from 'pg';
import { inject } from 'vitest';
import type { Distribution } from '../../src/pg/distribution.js';
import { createDatabase, databaseName } from './cluster.js';

/** True when the PostgreSQL suites skip on this machine (the global setup said why, once). */
export const pgSkip = inject('pgUrl') === '';

/** The cluster of `url` (its `postgres` database) as createDatabase wants it. */
function clusterOf(url: string): { url: string; urlOf: (database: string) => string } {
  return {
    url,
    urlOf: (db) => {
      const u = new URL(url);
      u.pathname = `/${encodeURIComponent(db)}`;
      return u.toString();
    },
  };
}

/** A new, empty database on the run's cluster (PostGIS available), as a URL. */
export function freshDatabase(prefix = 'test', name?: string): Promise<string> {
  return createDatabase(clusterOf(inject('pgUrl')), prefix, name);
}

/** A new, empty database of one name on the run's cluster and on each worker cluster: [coordinator, ...workers]. */
export async function freshDatabases(workerUrls: readonly string[], prefix = 'test'): Promise<[string, ...string[]]> {
  const name = databaseName(prefix);
  const [coordinator, ...workers] = await Promise.all([freshDatabase(prefix, name), ...workerUrls.map((w) => createDatabase(clusterOf(w), prefix, name))]);
  return [coordinator, ...workers];
}

export type LayoutKind = 'single' | 'partitioned' | 'citus';

/**
 * The layouts the distributed suites run on: always a single node; the partitioned layout when
 * the worker clusters run (always under CI=true: the global setup fails the run otherwise); Citus
 * when RESO_CITUS_URL is set (the global setup says once when it is not).
 */
export const LAYOUTS: readonly LayoutKind[] = [
  'single',
  ...(inject('pgWorkerUrls').length > 0 ? (['partitioned'] as const) : []),
  ...(inject('citusUrl') !== '' ? (['citus'] as const) : []),
];

/** Where a suite's layout lives and how it is distributed: the options `PostgresEngine.open` and `loadIntoPostgres` take. */
export interface TestLayout {
  readonly kind: LayoutKind;
  /** The coordinator's (or single node's) database. */
  readonly url: string;
  /** The PostgreSQL schema to hold the layout; undefined: the default. */
  readonly schema?: string;
  readonly distribution: Distribution;
  /**
   * Removes what the layout left where it is not throwaway: on a Citus cluster, its schema and the
   * schemas named `<schema>_<anything>` a suite made beside it; nothing elsewhere.
   */
  release(): Promise<void>;
}

let schemas = 0;

/** A fresh place for a layout of `kind`: new databases on the run's clusters, or a new schema on the Citus cluster (its databases are not ours to make). */
export async function freshLayout(kind: LayoutKind, prefix = 'test'): Promise<TestLayout> {
  const none = (): Promise<void> => Promise.resolve();
  switch (kind) {
    case 'single':
      return { kind, url: await freshDatabase(prefix), distribution: { kind: 'single' }, release: none };
    case 'partitioned': {
      const [url, ...workers] = await freshDatabases(inject('pgWorkerUrls'), prefix);
      return { kind, url, distribution: { kind: 'partitioned', workers }, release: none };
    }
    case 'citus': {
      const url = inject('citusUrl');
      // lower case: a plain identifier, as layout.ts wants schema names
      const schema = `${prefix}_${process.pid}_${++schemas}_${Date.now().toString(36)}`.toLowerCase();
      return {
        kind,
        url,
        schema,
        distribution: { kind: 'citus' },
        release: async () => {
          const client = new pg.Client({ connectionString: url });
          await client.connect();
          try {
            // the schema and those a suite named after it (`<schema>_1`, ...)
            const r = await client.query<{ name: string }>('SELECT nspname AS name FROM pg_namespace WHERE nspname = $1 OR left(nspname, $2) = $3', [
              schema,
              schema.length + 1,
              `${schema}_`,
            ]);
            for (const { name } of r.rows) await client.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
          } finally {
            await client.end();
          }
        },
      };
    }
  }
}
