/**
 * Vitest global setup: one throwaway PostgreSQL cluster for the whole run (each PostgreSQL test
 * file makes its own databases on it; test/pg/helpers.ts). Without the binaries the PostgreSQL
 * suites skip, saying why in one line, except in CI (`CI=true`), where that fails the run.
 */
import type { TestProject } from 'vitest/node';
import { startCluster, unavailableReason, type Cluster } from './cluster.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The cluster's `postgres` database URL, or '' when PostgreSQL suites skip. */
    pgUrl: string;
    /** Why the PostgreSQL suites skip ('' when they run). */
    pgSkipReason: string;
  }
}

let cluster: Cluster | null = null;

export async function setup(project: TestProject): Promise<void> {
  const reason = unavailableReason();
  if (reason !== null) {
    if (process.env.CI === 'true') throw new Error(`CI=true but the PostgreSQL suites cannot run: ${reason}`);
    console.warn(`PostgreSQL suites skipped: ${reason}.`);
    project.provide('pgUrl', '');
    project.provide('pgSkipReason', reason);
    return;
  }
  cluster = await startCluster();
  project.provide('pgUrl', cluster.url);
  project.provide('pgSkipReason', '');
}

export async function teardown(): Promise<void> {
  await cluster?.stop();
  cluster = null;
}
