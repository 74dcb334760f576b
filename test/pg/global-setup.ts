/**
 * Vitest global setup: the throwaway PostgreSQL clusters of the whole run. One is the run's
 * cluster, where each PostgreSQL test file makes its own databases (test/pg/helpers.ts); it is also
 * the coordinator of the partitioned layout, whose partitions are postgres_fdw foreign tables on
 * the two other clusters, the workers. Without the binaries the PostgreSQL suites skip, saying why
 * in one line, except in CI (`CI=true`), where that fails the run; so does a partitioned layout
 * that cannot be set up. The suites on a real Citus cluster run when RESO_CITUS_URL is set, and
 * skip saying so in one line when it is not.
 */
import { existsSync } from 'node:fs';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startCluster, unavailableReason, type Cluster } from './cluster.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The cluster's `postgres` database URL, or '' when PostgreSQL suites skip. */
    pgUrl: string;
    /** Why the PostgreSQL suites skip ('' when they run). */
    pgSkipReason: string;
    /** The `postgres` database URLs of the two worker clusters, or none when the partitioned suites skip. */
    pgWorkerUrls: string[];
    /** A Citus coordinator's URL (RESO_CITUS_URL), or '' when the Citus suites skip. */
    citusUrl: string;
  }
}

const FDW_CONTROL = process.env.RESO_POSTGRES_FDW_CONTROL ?? '/usr/share/postgresql/15/extension/postgres_fdw.control';

let clusters: Cluster[] = [];

/** Fails the run under CI, else says in one line which suites skip and why. */
function skip(suites: string, reason: string): void {
  if (process.env.CI === 'true') throw new Error(`CI=true but the ${suites} suites cannot run: ${reason}`);
  console.warn(`${suites} suites skipped: ${reason}.`);
}

/** The Citus coordinator's URL after checking it answers and has Citus, or '' (said once) when RESO_CITUS_URL is unset. */
async function citus(): Promise<string> {
  const url = process.env.RESO_CITUS_URL ?? '';
  if (url === '') {
    console.warn('Citus suites skipped: RESO_CITUS_URL is not set');
    return '';
  }
  // set on purpose, so a cluster that cannot be used fails the run rather than skipping quietly
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    const r = await client.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_extension WHERE extname = 'citus'");
    if (r.rows[0].n === 0) throw new Error('the database has no citus extension');
  } catch (e) {
    throw new Error(`RESO_CITUS_URL is set but cannot be used for the Citus suites: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  } finally {
    await client.end().catch(() => undefined);
  }
  return url;
}

export async function setup(project: TestProject): Promise<void> {
  project.provide('citusUrl', await citus());
  const reason = unavailableReason();
  if (reason !== null) {
    skip('PostgreSQL', reason);
    project.provide('pgUrl', '');
    project.provide('pgSkipReason', reason);
    project.provide('pgWorkerUrls', []);
    return;
  }
  const fdw = existsSync(FDW_CONTROL) ? null : `postgres_fdw is not installed (no ${FDW_CONTROL}; Debian package postgresql-15)`;
  if (fdw !== null) skip('Partitioned (postgres_fdw)', fdw);
  // the three start side by side: initdb and PostGIS in template1 take most of a second each
  const started = await Promise.allSettled([startCluster(), ...(fdw === null ? [startCluster(), startCluster()] : [])]);
  clusters = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (started[0].status === 'rejected') {
    await teardown();
    throw started[0].reason;
  }
  const [coordinator, ...workers] = clusters;
  if (failed !== undefined) {
    await Promise.all(workers.map((w) => w.stop()));
    clusters = [coordinator];
    try {
      skip('Partitioned (postgres_fdw)', `a worker cluster did not start: ${failed.reason instanceof Error ? failed.reason.message : String(failed.reason)}`);
    } catch (e) {
      await teardown();
      throw e;
    }
  }
  project.provide('pgUrl', coordinator.url);
  project.provide('pgSkipReason', '');
  project.provide(
    'pgWorkerUrls',
    clusters.slice(1).map((w) => w.url),
  );
}

export async function teardown(): Promise<void> {
  await Promise.all(clusters.map((c) => c.stop()));
  clusters = [];
}
