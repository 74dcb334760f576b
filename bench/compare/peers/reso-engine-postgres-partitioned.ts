/**
 * reso-engine's PostgreSQL backend spread over three servers (DESIGN.md, "Scale-out"): a
 * coordinator whose Property, Media, OpenHouse and PropertyChange are hash-partitioned on the
 * listing key, each partition a postgres_fdw foreign table on one of two worker servers. All three
 * are throwaway PostgreSQL 15 + PostGIS 3 clusters on 127.0.0.1, initdb'd by `setup` outside the
 * timed load and stopped at exit. The load is `PostgresEngine.open({ postgres: { url,
 * distribution: { kind: 'partitioned', workers } }, data })`, which COPYs each partition's rows
 * straight into its worker; the families are the same OData strings as every reso-engine column,
 * through `engine.query` on the coordinator, which sends each partition's part to its worker.
 * "Remote" is the loopback here, so the network cost measured is the protocol's, not a wire's.
 * The resident memory column is this Node.js process only: no server's memory is in it.
 */
import { PostgresEngine } from '../../../src/pg/engine.js';
import { createDatabase, startCluster, type Cluster } from '../../../test/pg/cluster.js';
import type { Answer, Families, FamilyId, FamilyParams } from '../families.js';
import type { Peer } from '../peer.js';
import { familyOnPostgres } from './reso-engine-postgres.js';

const NOW = new Date('2025-06-01T00:00:00Z');

/**
 * The single-node peer gives its one server 1 GB of shared_buffers. Here the listings live on the
 * workers, each holding half of them, so each worker gets that 1 GB (its half of the data set stays
 * in memory at 100k, as the single-node server's whole does) and builds its indexes with its own
 * maintenance_work_mem, both at once. The coordinator keeps only the small tables (Member, Office,
 * term statistics) and sorts, merges and aggregates what the workers send, so it gets less shared
 * memory and the same work_mem. Together about 2.5 GB of the 24 GiB, leaving the rest to the
 * loader's in-memory store and the page cache.
 */
const COORDINATOR = { shared_buffers: "'512MB'", work_mem: "'64MB'", maintenance_work_mem: "'256MB'", max_wal_size: "'2GB'" };
const WORKER = { shared_buffers: "'1GB'", work_mem: "'64MB'", maintenance_work_mem: "'512MB'", max_wal_size: "'4GB'" };

class PartitionedPostgresPeer implements Peer {
  readonly name = 'reso-engine on PostgreSQL, partitioned (coordinator + 2 workers)';
  readonly loads = 'Property + Media + OpenHouse hash-partitioned (4 partitions) over 2 postgres_fdw workers; server memory not counted';
  private clusters: Cluster[] = [];
  private workers: string[] = [];
  private engine!: PostgresEngine;

  async setup(): Promise<void> {
    process.once('exit', () => void Promise.all(this.clusters.map((c) => c.stop())));
    this.clusters.push(await startCluster(COORDINATOR));
    for (let w = 0; w < 2; w++) {
      const worker = await startCluster(WORKER);
      this.clusters.push(worker);
      this.workers.push(await createDatabase(worker, `worker${w}`));
    }
  }

  async load(dir: string): Promise<void> {
    this.engine = await PostgresEngine.open({
      postgres: { url: this.clusters[0].url, distribution: { kind: 'partitioned', workers: this.workers } },
      data: dir,
      now: () => NOW,
    });
  }

  prepare<F extends FamilyId>(family: F, _params: FamilyParams[F], families: Families): () => Promise<Answer> {
    return familyOnPostgres(this.engine, family, families);
  }

  async teardown(): Promise<void> {
    await this.engine?.close();
    for (const c of this.clusters) await c.stop();
    this.clusters = [];
  }
}

export default (): Peer => new PartitionedPostgresPeer();
