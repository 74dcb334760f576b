/**
 * `GET /metrics`: Prometheus text format through prom-client, one Registry per handler (never
 * the global one, so several servers in one process, tests among them, keep their own counts).
 * Requests are counted and timed by route, resource, method and status; queries by their plan's
 * access path and rows returned; login failures and throttles by kind. The engine's generation and
 * rows, the process's memory, the data load's duration and the background replication are read
 * when scraped. Every label takes a bounded set of values (routes and resources of the service,
 * methods it knows, statuses): no client input becomes a label.
 *
 * Who may read it: by default loopback clients only (an operator's agent on the same host; behind
 * a reverse proxy on the same host every client is loopback, so there use a token or turn it off);
 * with a token, any client presenting `Authorization: Bearer <token>`, and no one else; off, a 404.
 */
import { timingSafeEqual } from 'node:crypto';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RecordSource } from '../exec/page.js';
import { RESOURCE_NAMES } from '../schema/types.js';
import { ServiceError } from './errors.js';
import { memoryEngineOf, type StatusSources } from './health.js';
import type { ServiceRequest } from './request.js';
import { textResponse, type ServiceResponse } from './respond.js';

/** `false`: no /metrics; otherwise who may read it (default: loopback clients). */
export type MetricsOptions = false | { readonly token?: string };

/** A request as the metrics and the access log name it. */
export interface RouteName {
  readonly route: string;
  readonly resource: string | null;
}

const DATA = '/v1/listings/data/';
const RESOURCES: ReadonlySet<string> = new Set(['Property', 'Media', 'OpenHouse', 'Member', 'Office', 'Lookup', 'EntityEvent']);
const METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS']);
const FIXED: Readonly<Record<string, string>> = {
  '/health': 'health',
  '/ready': 'ready',
  '/metrics': 'metrics',
  '/v1/openapi.json': 'openapi',
  '/v1/token': 'token',
  '/v1/account/resources': 'account',
  '/v1/listings/mls_profiles': 'profiles',
  '/v1/listings/data': 'service-document',
  '/v1/listings/data/': 'service-document',
};

/** The route and resource of a path, from the service's own set (`other` for anything else). */
export function routeOf(path: string): RouteName {
  const fixed = FIXED[path];
  if (fixed !== undefined) return { route: fixed, resource: null };
  if (path === '/admin' || path.startsWith('/admin/')) return { route: 'admin', resource: null };
  if (!path.startsWith(DATA)) return { route: 'other', resource: null };
  let segment = path.slice(DATA.length);
  try {
    segment = decodeURIComponent(segment);
  } catch {
    return { route: 'other', resource: null };
  }
  if (segment === '$metadata') return { route: 'metadata', resource: null };
  if (segment === '$changes') return { route: 'changes', resource: null };
  if (RESOURCES.has(segment)) return { route: 'collection', resource: segment };
  const m = /^([A-Za-z]+)(?:\((.*)\)(\/[^/]*)?|\/\$count)$/s.exec(segment);
  if (m === null || !RESOURCES.has(m[1])) return { route: 'other', resource: null };
  if (m[2] === undefined) return { route: 'count', resource: m[1] };
  return m[3] === undefined ? { route: 'entity', resource: m[1] } : { route: 'navigation', resource: m[1] };
}

/** Whether an address is the loopback interface's (127.0.0.0/8, ::1, or 127.x mapped into IPv6). */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(address) || address === '::1' || /^::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/i.test(address);
}

/** What the handler learned of one request besides its path and status. */
export interface RequestFacts {
  account: string | null;
  /** The sources of the account's session, once authenticated: its answers are scoped to them. */
  sources: readonly string[] | null;
  plan: string | null;
  rows: number | null;
  /** Rows the engine tested one by one for the query (null: not a query, or a backend that does not count). */
  scanned: number | null;
  /** The error code of an error response. */
  errorCode: string | null;
  /** A page's rows, when the engine handed them over for its records' cached texts (QueryOptions `onPage`). */
  page?: RecordSource;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'route' | 'resource' | 'method' | 'status'>;
  private readonly duration: Histogram<'route' | 'resource' | 'status'>;
  private readonly bytes: Counter<'route'>;
  private readonly plans: Counter<'resource' | 'access'>;
  private readonly rows: Counter<'resource'>;
  private readonly scanned: Counter<'resource'>;
  private readonly loginFailures: Counter;
  private readonly throttled: Counter<'kind'>;
  private readonly token: Buffer | null;

  constructor(
    options: Exclude<MetricsOptions, false>,
    engine: object,
    sources: StatusSources,
    private readonly clock: () => number,
  ) {
    if (options.token !== undefined && (typeof options.token !== 'string' || options.token.length < 8)) {
      throw new TypeError('metrics.token must be a string of at least 8 characters');
    }
    this.token = options.token === undefined ? null : Buffer.from(options.token);
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'reso_http_requests_total',
      help: 'HTTP requests answered, by route, resource, method and status.',
      labelNames: ['route', 'resource', 'method', 'status'],
      registers,
    });
    this.duration = new Histogram({
      name: 'reso_http_request_duration_seconds',
      help: 'Time from a request to its response being ready (a streamed page: its last byte handed on), by route, resource and status.',
      labelNames: ['route', 'resource', 'status'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.bytes = new Counter({
      name: 'reso_http_response_bytes_total',
      help: 'Response body bytes sent (after compression), by route.',
      labelNames: ['route'],
      registers,
    });
    this.plans = new Counter({
      name: 'reso_query_plans_total',
      help: "Queries planned, by resource and the plan's access path (scan, range, search, geo, lookup, text, children).",
      labelNames: ['resource', 'access'],
      registers,
    });
    this.rows = new Counter({
      name: 'reso_query_rows_returned_total',
      help: 'Records returned in query pages, by resource.',
      labelNames: ['resource'],
      registers,
    });
    this.scanned = new Counter({
      name: 'reso_query_rows_scanned_total',
      help: 'Rows queries tested one by one (filters and visibility over candidate rows; bitset and index arithmetic is not counted), by resource.',
      labelNames: ['resource'],
      registers,
    });
    this.loginFailures = new Counter({ name: 'reso_login_failures_total', help: 'POST /v1/token with a wrong username or password.', registers });
    this.throttled = new Counter({
      name: 'reso_throttled_total',
      help: 'Requests refused with 429: kind login (failed-login throttle) or rate (per-token or per-account rate limit).',
      labelNames: ['kind'],
      registers,
    });
    new Gauge({
      name: 'reso_engine_generation',
      help: "The in-memory engine's newest generation (0 as loaded, one more per change).",
      registers,
      collect() {
        const memory = memoryEngineOf(engine);
        if (memory !== null) this.set(memory.generation);
      },
    });
    new Gauge({
      name: 'reso_engine_rows',
      help: 'Live records per table of the in-memory engine.',
      labelNames: ['table'],
      registers,
      collect() {
        const memory = memoryEngineOf(engine);
        if (memory === null) return;
        for (const table of RESOURCE_NAMES) if (RESOURCES.has(table)) this.set({ table }, memory.count(table as 'Property', ''));
      },
    });
    new Gauge({
      name: 'reso_engine_compactions',
      help: 'Compactions of the in-memory engine since it opened (count) and the seconds they took in all (seconds).',
      labelNames: ['of'],
      registers,
      collect() {
        const memory = memoryEngineOf(engine);
        if (memory === null) return;
        const { count, seconds } = memory.compactions;
        this.set({ of: 'count' }, count);
        this.set({ of: 'seconds' }, seconds);
      },
    });
    new Gauge({
      name: 'reso_process_memory_bytes',
      help: 'Process memory by kind: rss, heap_total, heap_used, external, array_buffers.',
      labelNames: ['kind'],
      registers,
      collect() {
        const m = process.memoryUsage();
        this.set({ kind: 'rss' }, m.rss);
        this.set({ kind: 'heap_total' }, m.heapTotal);
        this.set({ kind: 'heap_used' }, m.heapUsed);
        this.set({ kind: 'external' }, m.external);
        this.set({ kind: 'array_buffers' }, m.arrayBuffers);
      },
    });
    if (sources.loadSeconds !== undefined) {
      const load = new Gauge({ name: 'reso_engine_load_seconds', help: 'How long opening the data (load or snapshot) took at start.', registers });
      load.set(sources.loadSeconds);
    }
    const replication = sources.replication;
    if (replication !== undefined) {
      const now = this.clock;
      new Gauge({
        name: 'reso_replication_lag_seconds',
        help: 'Seconds since the start of the last replication pass that succeeded (absent before the first).',
        registers,
        collect() {
          const at = replication().lastSuccessAt;
          if (at !== null) this.set(Math.max(0, (now() - at) / 1000));
        },
      });
      new Gauge({
        name: 'reso_replication_passes',
        help: 'Replication passes run, by outcome (failed or all).',
        labelNames: ['outcome'],
        registers,
        collect() {
          const s = replication();
          this.set({ outcome: 'all' }, s.passes);
          this.set({ outcome: 'failed' }, s.failures);
        },
      });
    }
  }

  /** Counts one answered request. */
  observe(name: RouteName, method: string, status: number, seconds: number, bytes: number, facts: RequestFacts): void {
    const resource = name.resource ?? '';
    const code = String(status);
    this.requests.inc({ route: name.route, resource, method: METHODS.has(method) ? method : 'other', status: code });
    this.duration.observe({ route: name.route, resource, status: code }, seconds);
    if (bytes > 0) this.bytes.inc({ route: name.route }, bytes);
    if (facts.plan !== null) this.plans.inc({ resource, access: facts.plan });
    if (facts.rows !== null && facts.rows > 0) this.rows.inc({ resource }, facts.rows);
    if (facts.scanned !== null && facts.scanned > 0) this.scanned.inc({ resource }, facts.scanned);
    if (facts.errorCode === 'InvalidCredentials') this.loginFailures.inc();
    else if (facts.errorCode === 'TooManyLoginAttempts') this.throttled.inc({ kind: 'login' });
    else if (facts.errorCode === 'RateLimited') this.throttled.inc({ kind: 'rate' });
  }

  /** The answer to /metrics, for a client allowed to read it. */
  async answer(request: ServiceRequest): Promise<ServiceResponse> {
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      throw new ServiceError('MethodNotAllowed', `${request.method} is not allowed on /metrics; use GET.`, { headers: { Allow: 'GET, HEAD' } });
    }
    if (this.token !== null) {
      const m = /^Bearer +(\S+) *$/i.exec(request.header('authorization') ?? '');
      const given = m === null ? null : Buffer.from(m[1]);
      if (given === null || given.length !== this.token.length || !timingSafeEqual(given, this.token)) {
        throw new ServiceError('InvalidToken', '/metrics needs Authorization: Bearer <the metrics token the server was started with>.', {
          headers: { 'WWW-Authenticate': 'Bearer realm="reso-engine metrics"' },
        });
      }
    } else if (!isLoopback(request.remoteAddress)) {
      throw new ServiceError('Forbidden', '/metrics answers clients on this host only (or, when the server has a metrics token, clients that send it).');
    }
    return textResponse(200, await this.registry.metrics(), this.registry.contentType, { 'Cache-Control': 'no-store' });
  }
}
