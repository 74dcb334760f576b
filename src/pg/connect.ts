/**
 * Connections to PostgreSQL: one node-postgres pool per engine, and the line between a request's
 * own errors and the backend being unavailable. Connection loss, a server shutting down or
 * restarting, a statement timeout and no free connection become a BackendUnavailableError (the
 * service answers 503 with Retry-After); everything else is the caller's to handle unchanged.
 * The pool reconnects by itself: a broken client is dropped, the next checkout opens a new one.
 */
import pg from 'pg';
import { BackendUnavailableError } from '../errors.js';

export interface PoolOptions {
  /** Connections at most (default 10). */
  readonly max?: number;
  /** A statement running longer is cancelled by the server (SQLSTATE 57014); default: none. */
  readonly statementTimeoutMs?: number;
  /** How long a checkout waits for a connection before it fails (default 10 s), so exhaustion never hangs a request. */
  readonly connectTimeoutMs?: number;
}

export const APPLICATION_NAME = 'reso-engine';

/** A connection URL for messages: the password hidden. */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return 'the database';
  }
}

export function openPool(url: string, options: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 10,
    application_name: APPLICATION_NAME,
    statement_timeout: options.statementTimeoutMs ?? false,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    // Statements are named and prepared once per connection (src/pg/sql.ts), but planned at every
    // run with its literals: a shape's generic plan cannot know how selective a literal is, and
    // PostgreSQL's switch to it after five runs made Q1 of the benchmark 10.8 ms where a custom
    // plan takes 1.8 ms (100k listings).
    // Partitionwise join and aggregation (off by default: they cost planning time) let a
    // partitioned layout's joins and groups run per partition, on the partition's worker
    // (src/pg/distribution.ts); on a table that is not partitioned they change nothing.
    options: '-c plan_cache_mode=force_custom_plan -c enable_partitionwise_join=on -c enable_partitionwise_aggregate=on',
  });
  // An idle client whose connection breaks (server restart) emits 'error' on the pool; unheard, it
  // would crash the process. The pool drops that client already; the next checkout connects anew.
  pool.on('error', () => undefined);
  // A checked-out client (a transaction, a read snapshot) has no pool listener: its connection
  // breaking emits 'error' on the client itself, which would crash the process too. Its queries
  // fail with that error anyway (they become BackendUnavailable), so the event needs no handling.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** SQLSTATEs of a server that cannot answer now: shutdown, crash, starting up, too many connections. */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300']);

/** Node's socket errors of a lost or refused connection. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED']);

/** Messages node-postgres throws (no code) when a connection is lost, broken, or not to be had in time. */
const CLIENT_MESSAGES: ReadonlyArray<readonly [RegExp, string]> = [
  [/^timeout exceeded when trying to connect/i, 'no database connection became free in time'],
  [/^Connection terminated/i, 'the database connection was lost'],
  [/is not queryable$/i, 'the database connection was lost'],
];

type Unavailability = { readonly reason: string; readonly connectionBroken: boolean };

function classify(error: unknown): Unavailability | null {
  if (error instanceof BackendUnavailableError) return { reason: error.message, connectionBroken: false };
  if (typeof error !== 'object' || error === null) return null;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    // 08P01 (protocol violation) is a statement the client got wrong, not a lost connection
    if (code.startsWith('08') && code !== '08P01') return { reason: 'the database connection failed', connectionBroken: true };
    if (UNAVAILABLE_STATES.has(code)) return { reason: 'the database server is shutting down, restarting or full', connectionBroken: true };
    // statement_timeout (or a cancel): the connection itself is fine
    if (code === '57014') return { reason: 'the statement took too long and was cancelled', connectionBroken: false };
    if (SOCKET_CODES.has(code)) return { reason: 'the database server cannot be reached', connectionBroken: true };
  }
  // a connection to a name with several addresses fails with every address's error at once
  if (error instanceof AggregateError) for (const e of error.errors) if (classify(e) !== null) return classify(e);
  const message = (error as { message?: unknown }).message;
  if (typeof message === 'string') for (const [pattern, reason] of CLIENT_MESSAGES) if (pattern.test(message)) return { reason, connectionBroken: true };
  return null;
}

/** The BackendUnavailableError an error of PostgreSQL or the connection amounts to, or null when it is something else. */
export function unavailable(error: unknown): BackendUnavailableError | null {
  if (error instanceof BackendUnavailableError) return error;
  const u = classify(error);
  return u === null ? null : new BackendUnavailableError(`The database is unavailable: ${u.reason}. Retry shortly.`, { cause: error });
}

/** Runs `fn` with a checked-out client and releases it (dropping it when its connection broke); unavailability errors are classified. */
export async function withClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw unavailable(err) ?? err;
  }
  let broken = false;
  try {
    return await fn(client);
  } catch (err) {
    broken = classify(err)?.connectionBroken === true;
    throw unavailable(err) ?? err;
  } finally {
    client.release(broken);
  }
}

export interface TransactionOptions {
  readonly isolation?: 'read committed' | 'repeatable read' | 'serializable';
  readonly readOnly?: boolean;
}

/** Runs `fn` in one transaction (BEGIN ... COMMIT; ROLLBACK when it throws) on a checked-out client. */
export function transaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
  const begin = `BEGIN${options.isolation === undefined ? '' : ` ISOLATION LEVEL ${options.isolation.toUpperCase()}`}${options.readOnly ? ' READ ONLY' : ''}`;
  return withClient(pool, async (client) => {
    await client.query(begin);
    let result: T;
    try {
      result = await fn(client);
    } catch (err) {
      // a broken connection cannot roll back; the server does when the session ends
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    await client.query('COMMIT');
    return result;
  });
}
