/**
 * Throwaway PostgreSQL 15 + PostGIS 3 clusters for the tests and the benchmark: initdb in a
 * temporary directory, a free port on 127.0.0.1, started with pg_ctl (as the `postgres` user when
 * this process runs as root, since PostgreSQL refuses to run as root) and stopped by the
 * postmaster's PID at the end. Nothing here is used by src/.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

export const PG_BIN = process.env.RESO_PG_BIN ?? '/usr/lib/postgresql/15/bin';
const POSTGIS_CONTROL = process.env.RESO_POSTGIS_CONTROL ?? '/usr/share/postgresql/15/extension/postgis.control';

/** Why PostgreSQL suites cannot run here, or null when the binaries and PostGIS are installed. */
export function unavailableReason(): string | null {
  if (!existsSync(path.join(PG_BIN, 'initdb'))) return `PostgreSQL 15 is not installed (no ${path.join(PG_BIN, 'initdb')}; Debian package postgresql-15)`;
  if (!existsSync(POSTGIS_CONTROL)) return `PostGIS 3 is not installed (no ${POSTGIS_CONTROL}; Debian package postgresql-15-postgis-3)`;
  return null;
}

export interface Cluster {
  /** A connection URL for the `postgres` database (superuser `postgres`, no password). */
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** The postmaster's PID. */
  readonly pid: number;
  /** A URL for another database of this cluster. */
  urlOf(database: string): string;
  /** Fast shutdown by PID (SIGINT), waits for the postmaster to exit, removes the directory. */
  stop(): Promise<void>;
  /** Stops the server without removing its directory (a test restarts it with `start`). */
  kill(): Promise<void>;
  /** Starts the server again on the same port and directory. */
  start(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** Runs a PostgreSQL binary, as `postgres` when this process is root. */
function run(binary: string, args: readonly string[]): string {
  const file = path.join(PG_BIN, binary);
  const [cmd, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, [...args]];
  return execFileSync(cmd, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function postmasterPid(dir: string): number {
  const file = path.join(dir, 'postmaster.pid');
  return existsSync(file) ? Number(readFileSync(file, 'utf8').split('\n')[0]) : 0;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitFor(test: () => boolean | Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await test())) {
    if (Date.now() > until) throw new Error(`PostgreSQL test cluster: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Starts a new cluster with PostGIS available (the extension is created in `template1`, so every
 * database created afterwards has it). `settings` are extra `postgres -c` settings.
 */
export async function startCluster(settings: Readonly<Record<string, string>> = {}): Promise<Cluster> {
  const reason = unavailableReason();
  if (reason !== null) throw new Error(reason);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-pg-'));
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  const data = path.join(dir, 'data');
  run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--encoding=UTF8', '--locale=C', '--no-sync']);
  const port = await freePort();
  const conf = {
    listen_addresses: "'127.0.0.1'",
    port: String(port),
    unix_socket_directories: `'${dir}'`,
    fsync: 'off',
    synchronous_commit: 'off',
    full_page_writes: 'off',
    max_connections: '100',
    shared_buffers: '128MB',
    log_min_messages: 'warning',
    ...settings,
  };
  writeFileSync(
    path.join(data, 'postgresql.auto.conf'),
    Object.entries(conf)
      .map(([k, v]) => `${k} = ${v}\n`)
      .join(''),
  );
  if (asRoot) execFileSync('chown', ['postgres:postgres', path.join(data, 'postgresql.auto.conf')]);
  const log = path.join(dir, 'server.log');
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const urlOf = (database: string): string => `postgres://postgres@127.0.0.1:${port}/${encodeURIComponent(database)}`;

  const start = async (): Promise<void> => {
    run('pg_ctl', ['start', '-D', data, '-l', log, '-w', '-t', '60', '-s']);
    await waitFor(async () => {
      const client = new pg.Client({ connectionString: url });
      try {
        await client.connect();
        await client.query('SELECT 1');
        return true;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => undefined);
      }
    }, 'connections');
  };
  const kill = async (): Promise<void> => {
    const pid = postmasterPid(data);
    if (pid > 0 && alive(pid)) {
      process.kill(pid, 'SIGINT');
      await waitFor(() => !alive(pid), `postmaster ${pid} to exit`);
    }
  };
  await start();
  const pid = postmasterPid(data);
  const onExit = (): void => {
    const p = postmasterPid(data);
    if (p > 0 && alive(p)) process.kill(p, 'SIGQUIT');
  };
  process.once('exit', onExit);
  const client = new pg.Client({ connectionString: urlOf('template1') });
  await client.connect();
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS postgis');
  } finally {
    await client.end();
  }
  return {
    url,
    port,
    dir,
    pid,
    urlOf,
    kill,
    start,
    stop: async () => {
      await kill();
      process.removeListener('exit', onExit);
      if (existsSync(dir) && statSync(dir).isDirectory()) rmSync(dir, { recursive: true, force: true });
    },
  };
}

let databases = 0;

/** A database name no other call of this process makes: `prefix`, the PID, a counter and the time. */
export function databaseName(prefix = 'test'): string {
  return `${prefix}_${process.pid}_${++databases}_${Date.now().toString(36)}`;
}

/**
 * Creates a fresh database on the cluster (PostGIS included) and returns its URL. `name` (from
 * `databaseName`) lets the same database name be made on several clusters: a partitioned layout's
 * coordinator and workers.
 */
export async function createDatabase(cluster: Pick<Cluster, 'url' | 'urlOf'>, prefix = 'test', name = databaseName(prefix)): Promise<string> {
  const client = new pg.Client({ connectionString: cluster.url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  return cluster.urlOf(name);
}
