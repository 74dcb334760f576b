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
  /** What `observe` has counted and prom-client has not been told yet (see Tally). */
  private readonly tally: Tally;

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
    // every per-request metric hands over what was counted before it is read (the tally is made below)
    const flush = (): void => this.tally.flush();
    this.requests = new Counter({
      name: 'reso_http_requests_total',
      help: 'HTTP requests answered, by route, resource, method and status.',
      labelNames: ['route', 'resource', 'method', 'status'],
      registers,
      collect: flush,
    });
    this.duration = new Histogram({
      name: 'reso_http_request_duration_seconds',
      help: 'Time from a request to its response being ready (a streamed page: its last byte handed on), by route, resource and status.',
      labelNames: ['route', 'resource', 'status'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
      collect: flush,
    });
    this.bytes = new Counter({
      name: 'reso_http_response_bytes_total',
      help: 'Response body bytes sent (after compression), by route.',
      labelNames: ['route'],
      registers,
      collect: flush,
    });
    this.plans = new Counter({
      name: 'reso_query_plans_total',
      help: "Queries planned, by resource and the plan's access path (scan, range, search, geo, lookup, text, children).",
      labelNames: ['resource', 'access'],
      registers,
      collect: flush,
    });
    this.rows = new Counter({
      name: 'reso_query_rows_returned_total',
      help: 'Records returned in query pages, by resource.',
      labelNames: ['resource'],
      registers,
      collect: flush,
    });
    this.scanned = new Counter({
      name: 'reso_query_rows_scanned_total',
      help: 'Rows queries tested one by one (filters and visibility over candidate rows; bitset and index arithmetic is not counted), by resource.',
      labelNames: ['resource'],
      registers,
      collect: flush,
    });
    this.loginFailures = new Counter({ name: 'reso_login_failures_total', help: 'POST /v1/token with a wrong username or password.', registers });
    this.throttled = new Counter({
      name: 'reso_throttled_total',
      help: 'Requests refused with 429: kind login (failed-login throttle) or rate (per-token or per-account rate limit).',
      labelNames: ['kind'],
      registers,
    });
    this.tally = new Tally(this.requests, this.duration, this.bytes, this.plans, this.rows, this.scanned);
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
    const tally = this.tally;
    const series = tally.seriesOf(name, METHODS.has(method) ? method : 'other', status);
    tally.count(tally.requests, series.requests, 1);
    tally.time(series.duration, seconds);
    if (bytes > 0) tally.count(tally.bytes, series.bytes, bytes);
    if (facts.plan !== null) tally.count(tally.plans, series.plan(facts.plan), 1);
    if (facts.rows !== null && facts.rows > 0) tally.count(tally.rows, series.rows, facts.rows);
    if (facts.scanned !== null && facts.scanned > 0) tally.count(tally.scanned, series.scanned, facts.scanned);
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

type Labels = Partial<Record<string, string>>;

/** A count of one label set of a counter, not yet handed to prom-client. */
interface PendingCount {
  readonly labels: Labels;
  value: number;
  /** Whether the label set is in its counter's list (from its first increment on). */
  listed: boolean;
}

/** Durations of one label set of the histogram, in the order observed, not yet handed to prom-client. */
interface PendingTimes {
  readonly labels: Labels;
  readonly values: number[];
  listed: boolean;
}

/** A counter and the label sets counted since it was last read, in the order of their first increment. */
interface CounterTally {
  readonly counter: Counter<string>;
  readonly pending: PendingCount[];
}

/** The label sets of one route, resource, method and status: made once, then found by one lookup per request. */
interface Series {
  readonly requests: PendingCount;
  readonly duration: PendingTimes;
  readonly bytes: PendingCount;
  readonly rows: PendingCount;
  readonly scanned: PendingCount;
  plan(access: string): PendingCount;
}

/** Durations held before they are handed over without waiting for a read: the tally's memory stays bounded between scrapes. */
const MAX_PENDING_TIMES = 1024;

/**
 * What `observe` counted, summed per label set and handed to prom-client only when the metrics are
 * read (each per-request metric's `collect`), or when many durations are waiting. prom-client hashes
 * the labels of every call (a string built and looked up per metric per request), which was a
 * tenth of the service's own work on a small answer; here a request costs one lookup of its route,
 * resource, method and status. What prom-client holds when read is what it would hold had it been
 * told each request: counts are integers (their sums do not depend on the order), durations are
 * handed over one by one in the order observed per label set, and label sets reach each metric in
 * the order of their first increment, as its text lists them.
 */
class Tally {
  readonly requests: CounterTally;
  readonly bytes: CounterTally;
  readonly plans: CounterTally;
  readonly rows: CounterTally;
  readonly scanned: CounterTally;
  private readonly times: PendingTimes[] = [];
  private timesHeld = 0;
  private readonly series = new Map<string, Series>();
  /** Label sets shared by several series (bytes by route; rows, scanned and plans by resource), by their metric's own key. */
  private readonly shared = new Map<string, PendingCount>();

  constructor(
    requests: Counter<string>,
    private readonly duration: Histogram<string>,
    bytes: Counter<string>,
    plans: Counter<string>,
    rows: Counter<string>,
    scanned: Counter<string>,
  ) {
    this.requests = { counter: requests, pending: [] };
    this.bytes = { counter: bytes, pending: [] };
    this.plans = { counter: plans, pending: [] };
    this.rows = { counter: rows, pending: [] };
    this.scanned = { counter: scanned, pending: [] };
  }

  seriesOf(name: RouteName, method: string, status: number): Series {
    const key = `${name.route}\u0000${name.resource ?? ''}\u0000${method}\u0000${status}`;
    let series = this.series.get(key);
    if (series === undefined) this.series.set(key, (series = this.makeSeries(name.route, name.resource ?? '', method, String(status))));
    return series;
  }

  count(tally: CounterTally, pending: PendingCount, n: number): void {
    if (!pending.listed) {
      pending.listed = true;
      tally.pending.push(pending);
    }
    pending.value += n;
  }

  time(pending: PendingTimes, seconds: number): void {
    if (!pending.listed) {
      pending.listed = true;
      this.times.push(pending);
    }
    pending.values.push(seconds);
    if (++this.timesHeld >= MAX_PENDING_TIMES) this.flushTimes();
  }

  /** Hands everything counted to prom-client. */
  flush(): void {
    for (const tally of [this.requests, this.bytes, this.plans, this.rows, this.scanned]) {
      for (const p of tally.pending) {
        if (p.value !== 0) tally.counter.inc(p.labels, p.value);
        p.value = 0;
        p.listed = false;
      }
      tally.pending.length = 0;
    }
    this.flushTimes();
  }

  private flushTimes(): void {
    for (const p of this.times) {
      for (const v of p.values) this.duration.observe(p.labels, v);
      p.values.length = 0;
      p.listed = false;
    }
    this.times.length = 0;
    this.timesHeld = 0;
  }

  private makeSeries(route: string, resource: string, method: string, status: string): Series {
    const pendingOf = (key: string, labels: Labels): PendingCount => {
      let p = this.shared.get(key);
      if (p === undefined) this.shared.set(key, (p = { labels, value: 0, listed: false }));
      return p;
    };
    const plans = new Map<string, PendingCount>();
    return {
      requests: { labels: { route, resource, method, status }, value: 0, listed: false },
      duration: this.timesOf(route, resource, status),
      bytes: pendingOf(`bytes\u0000${route}`, { route }),
      rows: pendingOf(`rows\u0000${resource}`, { resource }),
      scanned: pendingOf(`scanned\u0000${resource}`, { resource }),
      plan(access) {
        let p = plans.get(access);
        if (p === undefined) plans.set(access, (p = pendingOf(`plan\u0000${resource}\u0000${access}`, { resource, access })));
        return p;
      },
    };
  }

  /** The durations of a route, resource and status (shared by the series of every method). */
  private readonly timesByKey = new Map<string, PendingTimes>();

  private timesOf(route: string, resource: string, status: string): PendingTimes {
    const key = `${route}\u0000${resource}\u0000${status}`;
    let p = this.timesByKey.get(key);
    if (p === undefined) this.timesByKey.set(key, (p = { labels: { route, resource, status }, values: [], listed: false }));
    return p;
  }
}
