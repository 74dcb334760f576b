/**
 * `GET /health` and `GET /ready`: liveness and readiness for load balancers and orchestrators,
 * outside /v1, unauthenticated, never cached. /health says only that the process answers.
 * /ready says whether the server should get traffic: the data is loaded (always, once a handler
 * exists), a replicating server has finished a pass, and the PostgreSQL backend answers a
 * `SELECT 1`; otherwise 503 with the same JSON, which says why.
 */
import { Engine } from '../engine.js';
import { ServiceError } from './errors.js';
import { jsonResponse, type ServiceResponse } from './respond.js';

/** What `serve --replicate-from` reports of its background replication (epoch ms throughout). */
export interface ReplicationStatus {
  /** The upstream's service root. */
  readonly from: string;
  /** When the last pass that succeeded started: the data is at least as fresh as that. Null before the first. */
  readonly lastSuccessAt: number | null;
  /** The last failed pass's message, null once a pass succeeded after it. */
  readonly lastError: string | null;
  readonly passes: number;
  readonly failures: number;
}

/** The PostgreSQL backend's pool and whether it answered `SELECT 1` (PostgresEngine.health). */
export interface BackendHealth {
  readonly ok: boolean;
  readonly pool: { readonly total: number; readonly idle: number; readonly waiting: number };
  readonly latencyMs: number;
  readonly error?: string;
}

/** What the operational routes read besides the engine. */
export interface StatusSources {
  /** The background replication, when the server keeps a replica. */
  readonly replication?: () => ReplicationStatus;
  /** How long opening the data took at start, seconds (a metric). */
  readonly loadSeconds?: number;
}

/** How long /ready waits for the database before calling it not ready. */
const BACKEND_TIMEOUT_MS = 2_000;
const NO_STORE = { 'Cache-Control': 'no-store' };

/**
 * The in-memory engine behind a service engine: the engine itself, or the one a wrapper forwards
 * to (the test harness's slot holds it as `engine`, swapped by a reset). Null for PostgreSQL.
 */
export function memoryEngineOf(engine: object): Engine | null {
  if (engine instanceof Engine) return engine;
  const inner = (engine as { engine?: unknown }).engine;
  return inner instanceof Engine ? inner : null;
}

/** The backend's health check, when the engine has one (PostgreSQL's). */
function backendHealthOf(engine: object): (() => Promise<BackendHealth>) | null {
  const health = (engine as { health?: unknown }).health;
  return typeof health === 'function' ? () => (health as () => Promise<BackendHealth>).call(engine) : null;
}

async function backendHealth(check: () => Promise<BackendHealth>): Promise<BackendHealth> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<BackendHealth>((resolve) => {
    timer = setTimeout(
      () => resolve({ ok: false, pool: { total: 0, idle: 0, waiting: 0 }, latencyMs: BACKEND_TIMEOUT_MS, error: 'no answer within 2 s' }),
      BACKEND_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([
      check().catch((e: unknown) => ({ ok: false, pool: { total: 0, idle: 0, waiting: 0 }, latencyMs: 0, error: String((e as Error).message ?? e) })),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export class HealthRoutes {
  private readonly started = Date.now();

  constructor(
    private readonly engine: object,
    private readonly sources: StatusSources,
    private readonly clock: () => number,
  ) {}

  /** The answer to /health or /ready (GET or HEAD; another method is a 405). */
  async answer(path: '/health' | '/ready', method: string): Promise<ServiceResponse> {
    if (method !== 'GET' && method !== 'HEAD') {
      throw new ServiceError('MethodNotAllowed', `${method} is not allowed on ${path}; use GET.`, { headers: { Allow: 'GET, HEAD' } });
    }
    if (path === '/health') return jsonResponse(200, { status: 'ok', uptimeSeconds: Math.round((Date.now() - this.started) / 1000) }, NO_STORE);
    const report = await this.readiness();
    return jsonResponse(report.ready ? 200 : 503, report, report.ready ? NO_STORE : { ...NO_STORE, 'Retry-After': '5' });
  }

  /** The readiness report (also what the metrics read of replication). */
  async readiness(): Promise<Record<string, unknown> & { ready: boolean }> {
    const reasons: string[] = [];
    const out: Record<string, unknown> = {};
    const memory = memoryEngineOf(this.engine);
    if (memory !== null) {
      out.backend = 'memory';
      out.generation = memory.generation;
      out.listings = memory.count('Property', '');
    } else {
      out.backend = 'postgres';
      const check = backendHealthOf(this.engine);
      if (check !== null) {
        const health = await backendHealth(check);
        out.database = health;
        if (!health.ok) reasons.push(`the database does not answer${health.error === undefined ? '' : `: ${health.error}`}`);
      }
    }
    const replication = this.sources.replication?.();
    if (replication !== undefined) {
      const lag = replication.lastSuccessAt === null ? null : Math.max(0, Math.round((this.clock() - replication.lastSuccessAt) / 1000));
      out.replication = { ...replication, lagSeconds: lag };
      if (replication.lastSuccessAt === null) reasons.push('no replication pass has succeeded yet');
    }
    const ready = reasons.length === 0;
    return { status: ready ? 'ready' : 'not ready', ready, ...(ready ? {} : { reasons }), ...out };
  }
}
