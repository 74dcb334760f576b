/**
 * reso-engine's PostgreSQL backend (src/pg): the data set loaded into a throwaway PostgreSQL 15 +
 * PostGIS 3 cluster on 127.0.0.1 (initdb'd by `setup`, outside the timed load; stopped at exit)
 * with `Engine.open({ postgres, data })` (PostgresEngine.open), the same OData strings as the in-memory engine through
 * `engine.query` (plan cache on), each a round trip over the loopback. The resident memory column
 * is this Node.js process only: the server's own memory is not in it.
 */
import { PostgresEngine } from '../../../src/pg/engine.js';
import { startCluster, type Cluster } from '../../../test/pg/cluster.js';
import type { Answer, Families, FamilyId, FamilyParams } from '../families.js';
import type { Peer } from '../peer.js';

const NOW = new Date('2025-06-01T00:00:00Z');

/** A family as its OData string through a PostgresEngine's `engine.query`, mapped to the answer's shape (every PostgreSQL column runs it). */
export function familyOnPostgres(engine: PostgresEngine, family: FamilyId, families: Families): () => Promise<Answer> {
  const q = families.odata[family];
  if (family === 'Q5') return async () => ({ kind: 'groups', groups: (await engine.query('Property', q)).value as never });
  if (family === 'Q9') return async () => ({ kind: 'count', count: (await engine.query('Property', q))['@odata.count']! });
  return async () => ({ kind: 'keys', keys: (await engine.query('Property', q)).value.map((r) => r.ListingKey as string) });
}

class PostgresPeer implements Peer {
  readonly name = 'reso-engine on PostgreSQL';
  readonly loads = 'Property + Media + OpenHouse into PostgreSQL 15 + PostGIS (COPY, B-tree/GiST/GIN); server memory not counted';
  private cluster: Cluster | null = null;
  private engine!: PostgresEngine;

  async setup(): Promise<void> {
    // shared_buffers sized for the data set so that timed runs read from memory, as the other peers do
    this.cluster = await startCluster({ shared_buffers: "'1GB'", work_mem: "'64MB'", maintenance_work_mem: "'512MB'", max_wal_size: "'4GB'" });
    process.once('exit', () => void this.cluster?.stop());
  }

  async load(dir: string): Promise<void> {
    this.engine = await PostgresEngine.open({ postgres: { url: this.cluster!.url }, data: dir, now: () => NOW });
  }

  prepare<F extends FamilyId>(family: F, _params: FamilyParams[F], families: Families): () => Promise<Answer> {
    return familyOnPostgres(this.engine, family, families);
  }

  async teardown(): Promise<void> {
    await this.engine?.close();
    await this.cluster?.stop();
    this.cluster = null;
  }
}

export default (): Peer => new PostgresPeer();
