/**
 * The test harness: the service (src/service) over an in-memory engine, wrapped so that a test
 * suite controls it as it would a hosted listings API's sandbox: the clock, the data (reset to the
 * data as loaded or to a named checkpoint), fault rules, rate and limit profiles and a request
 * journal; with an admin token, the same over HTTP under `/admin/`.
 *
 * The engine sits behind a slot the service reads through (`EngineSlot`), so a reset swaps the
 * engine without touching the service: tokens stay valid across resets. A reset opens the
 * snapshot saved when the harness started (or at a checkpoint), about 0.1 s for the default data
 * set, rather than undoing changes one by one.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { timingSafeEqual } from 'node:crypto';
import path from 'node:path';
import { Engine } from '../engine.js';
import type { QueryInput, QueryOptions } from '../engine-options.js';
import { queryText } from '../engine-options.js';
import type { ChangeOperation, ChangeSummary } from '../live/change.js';
import type { QueryResult } from '../exec/page.js';
import type { QueryResource } from '../plan/plan.js';
import type { JsonValue } from '../store/columns.js';
import type { ResourceName } from '../schema/types.js';
import type { TableSchema } from '../schema/table-schema.js';
import { createHandler, type Handler, type HandlerOptions, type ServiceEngine } from '../service/handler.js';
import { errorObject, ServiceError, statusOf, headersOf } from '../service/errors.js';
import { decodeQueryOptions } from '../service/request.js';
import { JSON_TYPE, ODATA_VERSION } from '../service/respond.js';
import { QueryError } from '../errors.js';
import { splitQuery } from '../odata/parse-query.js';
import { type TestClock } from './clock.js';
import { Faults, withFault } from './faults.js';
import { Journal } from './journal.js';
import { Budgets, checkLimits, checkQuery, type LimitsProfile } from './limits.js';

/** Idle times of nextLinks kept at most (the oldest are forgotten first; a forgotten one never expires). */
const MAX_TRACKED_LINKS = 10_000;
const CHECKPOINT_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const MAX_ADMIN_BODY = 1 << 20;

/** The engine the service reads, swapped by a reset; applies the limit profile's query checks. */
class EngineSlot implements ServiceEngine {
  /** Per nextLink (resource, navigation and decoded query), when it was last given or followed. */
  private readonly links = new Map<string, number>();

  constructor(
    public engine: Engine,
    private readonly harness: { readonly clock: TestClock; limits: LimitsProfile },
  ) {}

  get accounts(): unknown {
    return this.engine.accounts;
  }
  get profiles(): unknown {
    return this.engine.profiles;
  }
  schemaOf(resource: ResourceName): TableSchema {
    return this.engine.schemaOf(resource);
  }
  now(): number {
    return this.engine.now();
  }

  forgetLinks(): void {
    this.links.clear();
  }

  private options(options: QueryOptions | undefined): QueryOptions {
    const size = this.harness.limits.defaultPageSize;
    return size === undefined || options?.maxPageSize !== undefined ? (options ?? {}) : { ...options, maxPageSize: size };
  }

  /** A followed nextLink idle longer than the profile allows is a 400 `SkipTokenExpired`, as the engine's own expired links are. */
  private follow(where: string, query: string): void {
    const idle = this.harness.limits.nextLinkIdleSeconds;
    if (idle === undefined || !query.includes('$skiptoken=')) return;
    const key = `${where}?${query}`;
    const last = this.links.get(key);
    const now = this.harness.clock.now();
    if (last !== undefined && now - last > idle * 1000) {
      this.links.delete(key);
      throw new QueryError('SkipTokenExpired', `This nextLink was not followed for more than ${idle} s and has expired: start again from the first page.`, {
        option: '$skiptoken',
      });
    }
  }

  /** Notes when a result's nextLink was given. */
  private given(where: string, result: QueryResult): QueryResult {
    const next = result['@odata.nextLink'];
    if (this.harness.limits.nextLinkIdleSeconds === undefined || next === undefined) return result;
    const q = next.indexOf('?');
    const key = `${where}?${decodeQueryOptions(q < 0 ? '' : next.slice(q + 1))}`;
    this.links.delete(key);
    this.links.set(key, this.harness.clock.now());
    if (this.links.size > MAX_TRACKED_LINKS) this.links.delete(this.links.keys().next().value!);
    return result;
  }

  query(resource: QueryResource, query: QueryInput, options?: QueryOptions): QueryResult {
    const text = queryText(query);
    checkQuery(this.harness.limits, resource, text, true);
    this.follow(resource, text);
    return this.given(resource, this.engine.query(resource, query, this.options(options)));
  }
  navigate(resource: QueryResource, key: string, navigation: string, query: QueryInput, options?: QueryOptions): QueryResult {
    const text = queryText(query);
    checkQuery(this.harness.limits, navigation, text, false);
    const where = `${resource}(${key})/${navigation}`;
    this.follow(where, text);
    return this.given(where, this.engine.navigate(resource, key, navigation, query, this.options(options)));
  }
  navigateOne(resource: QueryResource, key: string, navigation: string, query: QueryInput, options?: QueryOptions): Record<string, JsonValue> | null {
    return this.engine.navigateOne(resource, key, navigation, query, options);
  }
  count(resource: QueryResource, query: QueryInput, options?: Pick<QueryOptions, 'sources'>): number {
    checkQuery(this.harness.limits, resource, queryText(query), true);
    return this.engine.count(resource, query, options);
  }
  entity(resource: QueryResource, key: string, query: QueryInput, options?: QueryOptions): Record<string, JsonValue> | null {
    return this.engine.entity(resource, key, query, options);
  }
  has(resource: ResourceName, key: string): boolean {
    return this.engine.has(resource, key);
  }
  isVisible(resource: ResourceName, key: string, sources?: readonly string[]): boolean {
    return this.engine.isVisible(resource, key, sources);
  }
  apply(operations: readonly ChangeOperation[]): Promise<ChangeSummary> {
    return this.engine.apply(operations);
  }
}

export interface HarnessOptions {
  /** The engine as loaded: reset returns to its data. Its clock must be `clock` (open it with `now: () => new Date(clock.now())`). */
  readonly engine: Engine;
  readonly clock: TestClock;
  /** A directory of the harness's own (snapshots); created if missing, removed by `close()`. */
  readonly workDir: string;
  /** The service's options (accounts, profiles, publicBaseUrl, token lifetime, login throttle, limits). */
  readonly service?: Omit<HandlerOptions, 'engine' | 'clock'>;
  /** Fault rules (see faults.ts) and the seed of their random streams. */
  readonly faults?: unknown;
  readonly seed?: string;
  /** A rate and limit profile (see limits.ts). */
  readonly limits?: unknown;
  /** With a token, the admin routes exist under `/admin/` for `Authorization: Bearer <token>`; without, they do not. */
  readonly adminToken?: string;
  /** Requests the journal keeps (default 1,000). */
  readonly journalSize?: number;
}

export class Harness {
  readonly clock: TestClock;
  readonly faults: Faults;
  readonly journal: Journal;
  /** The service's own handler: no faults, no budgets, no journal (what the harness wraps). */
  readonly service: Handler;
  private readonly slot: EngineSlot;
  private readonly budgets: Budgets;
  private readonly workDir: string;
  private readonly adminToken: Buffer | null;
  private readonly state: { readonly clock: TestClock; limits: LimitsProfile };
  /** Access tokens the harness saw given, and their accounts. */
  private readonly accountOf = new Map<string, string>();
  private readonly checkpoints = new Set<string>();
  /** A reset in progress: requests wait for it. */
  private swapping: Promise<void> | null = null;

  private constructor(options: HarnessOptions) {
    this.clock = options.clock;
    this.workDir = options.workDir;
    this.state = { clock: options.clock, limits: options.limits === undefined ? {} : checkLimits(options.limits) };
    this.faults = new Faults(options.faults ?? [], options.seed);
    this.journal = new Journal(options.journalSize);
    this.budgets = new Budgets(this.state.limits, this.clock.now);
    this.slot = new EngineSlot(options.engine, this.state);
    this.service = createHandler({ ...options.service, engine: this.slot, clock: this.clock.now });
    if (options.adminToken !== undefined && (typeof options.adminToken !== 'string' || options.adminToken.length < 8)) {
      throw new TypeError('adminToken must be a string of at least 8 characters');
    }
    this.adminToken = options.adminToken === undefined ? null : Buffer.from(options.adminToken);
  }

  /** A harness over `engine` as loaded: saves it as the state `reset()` returns to. */
  static create(options: HarnessOptions): Harness {
    const harness = new Harness(options);
    mkdirSync(options.workDir, { recursive: true });
    options.engine.save(harness.snapshotFile(null));
    return harness;
  }

  /** The engine answering now (a reset replaces it). */
  get engine(): Engine {
    return this.slot.engine;
  }

  get limits(): LimitsProfile {
    return this.state.limits;
  }

  /** Replaces the rate and limit profile (checked; a bad one changes nothing); budgets start again. */
  setLimits(profile: unknown): void {
    this.state.limits = checkLimits(profile);
    this.budgets.configure(this.state.limits);
    this.slot.forgetLinks();
  }

  private snapshotFile(name: string | null): string {
    return path.join(this.workDir, name === null ? 'loaded.snapshot' : `checkpoint-${name}.snapshot`);
  }

  /** Saves the data as it is now under `name` (letters, digits, `_ . -`; at most 64), for `reset(name)`. */
  checkpoint(name: string): void {
    if (typeof name !== 'string' || !CHECKPOINT_NAME.test(name)) {
      throw new ServiceError('InvalidCheckpoint', 'A checkpoint name is 1 to 64 letters, digits, _ . or -.');
    }
    this.engine.save(this.snapshotFile(name));
    this.checkpoints.add(name);
  }

  /**
   * Returns to the data as loaded, or as checkpoint `name` was taken; the rate budgets and the
   * nextLinks' idle times start again. The clock, fault rules and journal stay (each has its own reset).
   */
  async reset(name?: string): Promise<void> {
    if (name !== undefined && !this.checkpoints.has(name)) {
      throw new ServiceError('UnknownCheckpoint', `There is no checkpoint named '${String(name).slice(0, 64)}': take one with checkpoint(name) first.`);
    }
    const file = this.snapshotFile(name ?? null);
    const previous = this.swapping;
    const swap = (async () => {
      await previous;
      const engine = await Engine.open({ snapshot: file, now: () => new Date(this.clock.now()) });
      this.slot.engine = engine;
      this.slot.forgetLinks();
      this.budgets.clear();
    })();
    this.swapping = swap;
    try {
      await swap;
    } finally {
      if (this.swapping === swap) this.swapping = null;
    }
  }

  /** Removes the harness's snapshots. */
  close(): void {
    rmSync(this.workDir, { recursive: true, force: true });
  }

  /** Notes whose an access token is (a test that gets one another way than over HTTP tells the harness). */
  noteToken(token: string, username: string): void {
    this.accountOf.set(token, username);
  }

  /** The handler a server mounts: admin routes (with a token), budgets, faults and the journal around the service. */
  readonly handle = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    if (this.adminToken !== null && (url.pathname === '/admin' || url.pathname.startsWith('/admin/'))) return this.admin(request, url);
    if (this.swapping !== null) await this.swapping;
    const started = performance.now();
    const at = new Date(this.clock.now()).toISOString();
    const seq = this.journal.next();
    const auth = request.headers.get('authorization');
    const bearer = auth !== null && /^Bearer /i.test(auth) ? auth.slice(7).trim() : null;
    let account = bearer === null ? null : (this.accountOf.get(bearer) ?? null);
    const login = request.method === 'POST' && url.pathname === '/v1/token';
    const loginName = login ? await usernameOf(request) : null;
    if (login) account = loginName;
    const target = url.pathname + url.search;
    // without rules nothing is drawn, and the query is not split into its options
    const decision = this.faults.empty
      ? null
      : this.faults.decide({ method: request.method, path: url.pathname, options: splitQuery(decodeQueryOptions(url.search.slice(1))).map((o) => o.name) });
    let response: Response;
    let rateHeaders: Record<string, string> = {};
    try {
      if (account !== null && !login) {
        this.budgets.admit(account);
        rateHeaders = this.budgets.headers(account);
      }
      const next = (): Promise<Response> => this.service(request);
      response = decision === null ? await next() : await withFault(decision, next);
    } catch (error) {
      if (!(error instanceof QueryError)) throw error;
      response = errorJson(error);
    }
    if (login && loginName !== null && response.status === 200) {
      const token = await accessTokenOf(response);
      if (token !== null) this.accountOf.set(token, loginName);
    }
    const dropped = decision?.action.kind === 'drop';
    if (Object.keys(rateHeaders).length > 0 && !dropped && response.status < 400) response = withHeaders(response, rateHeaders);
    if (account !== null && this.state.limits.bytesPerHour !== undefined && !dropped) response = counted(response, (n) => this.budgets.charge(account, n));
    this.journal.record({
      seq,
      at,
      method: request.method,
      url: target,
      status: dropped ? 0 : response.status,
      durationMs: Math.round((performance.now() - started) * 1000) / 1000,
      fault: decision?.rule ?? null,
      account,
    });
    return response;
  };

  private async admin(request: Request, url: URL): Promise<Response> {
    try {
      const auth = request.headers.get('authorization');
      if (auth === null || !/^Bearer /i.test(auth)) throw new ServiceError('MissingToken', 'The admin routes need Authorization: Bearer <admin token>.');
      const given = Buffer.from(auth.slice(7).trim());
      if (given.length !== this.adminToken!.length || !timingSafeEqual(given, this.adminToken!)) {
        throw new ServiceError('InvalidToken', 'The admin token is not the one the server was started with.');
      }
      const route = url.pathname.replace(/\/+$/, '');
      const allow = (methods: string): never => {
        throw new ServiceError('MethodNotAllowed', `${route} takes ${methods}.`, { headers: { Allow: methods } });
      };
      switch (route) {
        case '/admin/clock':
          if (request.method === 'GET') return json(200, this.clock.state());
          if (request.method === 'POST') {
            const body = await bodyOf(request);
            const keys = Object.keys(body);
            if (keys.length !== 1 || !['set', 'advance'].includes(keys[0])) {
              throw new ServiceError('InvalidBody', 'POST /admin/clock takes {"set": <ISO 8601 instant>} or {"advance": <ms or ISO 8601 duration>}.');
            }
            if (keys[0] === 'set') this.clock.set(body.set);
            else this.clock.advance(body.advance);
            return json(200, this.clock.state());
          }
          return allow('GET, POST');
        case '/admin/reset': {
          if (request.method !== 'POST') return allow('POST');
          const body = await bodyOf(request, true);
          const name = body.checkpoint;
          if (name !== undefined && typeof name !== 'string') throw new ServiceError('InvalidBody', 'POST /admin/reset takes {} or {"checkpoint": "<name>"}.');
          await this.reset(name);
          return json(200, { reset: name ?? null });
        }
        case '/admin/checkpoint': {
          if (request.method !== 'POST') return allow('POST');
          const body = await bodyOf(request);
          if (typeof body.name !== 'string') throw new ServiceError('InvalidBody', 'POST /admin/checkpoint takes {"name": "<name>"}.');
          this.checkpoint(body.name);
          return json(200, { checkpoint: body.name });
        }
        case '/admin/faults':
          if (request.method === 'GET') return json(200, { rules: this.faults.list() });
          if (request.method === 'PUT') this.faults.set(await jsonOf(request));
          else if (request.method === 'POST') this.faults.add(await jsonOf(request));
          else if (request.method === 'DELETE') this.faults.clear();
          else return allow('GET, PUT, POST, DELETE');
          return json(200, { rules: this.faults.list() });
        case '/admin/limits':
          if (request.method === 'GET') return json(200, this.limits);
          if (request.method === 'PUT') {
            this.setLimits(await jsonOf(request));
            return json(200, this.limits);
          }
          return allow('GET, PUT');
        case '/admin/requests':
          if (request.method === 'GET') return json(200, { requests: this.journal.list() });
          if (request.method === 'DELETE') {
            this.journal.clear();
            return json(200, { requests: [] });
          }
          return allow('GET, DELETE');
        default:
          throw new ServiceError(
            'NotFound',
            `No admin route ${route.slice(0, 100)}: there are /admin/clock, /admin/reset, /admin/checkpoint, /admin/faults, /admin/limits and /admin/requests.`,
          );
      }
    } catch (error) {
      if (error instanceof QueryError) return errorJson(error);
      throw error;
    }
  }
}

function json(status: number, value: unknown): Response {
  return new Response(JSON.stringify(value), { status, headers: { 'Content-Type': JSON_TYPE } });
}

function errorJson(error: QueryError): Response {
  return new Response(JSON.stringify({ error: errorObject(error) }), {
    status: statusOf(error),
    headers: { 'OData-Version': ODATA_VERSION, 'Content-Type': JSON_TYPE, ...headersOf(error) },
  });
}

async function jsonOf(request: Request): Promise<unknown> {
  const type = request.headers.get('content-type') ?? '';
  if (!/^application\/json\b/i.test(type)) throw new ServiceError('InvalidContentType', 'The admin routes take application/json bodies.');
  const text = await request.text();
  if (Buffer.byteLength(text) > MAX_ADMIN_BODY) throw new ServiceError('PayloadTooLarge', `An admin request body is at most ${MAX_ADMIN_BODY} bytes.`);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ServiceError('InvalidJson', 'The body is not valid JSON.');
  }
}

/** An object body (an empty body is `{}` where `optional`). */
async function bodyOf(request: Request, optional = false): Promise<Record<string, unknown>> {
  if (optional && (request.headers.get('content-length') === '0' || request.body === null)) return {};
  const value = await jsonOf(request);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ServiceError('InvalidBody', 'The body is a JSON object.');
  return value as Record<string, unknown>;
}

async function usernameOf(request: Request): Promise<string | null> {
  try {
    const form = new URLSearchParams(await request.clone().text());
    const name = form.get('username');
    return name === null || name === '' ? null : name.slice(0, 200);
  } catch {
    return null;
  }
}

async function accessTokenOf(response: Response): Promise<string | null> {
  try {
    const body = (await response.clone().json()) as { access_token?: unknown };
    return typeof body.access_token === 'string' ? body.access_token : null;
  } catch {
    return null;
  }
}

function withHeaders(response: Response, headers: Record<string, string>): Response {
  const h = new Headers(response.headers);
  for (const [k, v] of Object.entries(headers)) h.set(k, v);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers: h });
}

/** The response with its body's bytes reported once it has been read. */
function counted(response: Response, report: (bytes: number) => void): Response {
  if (response.body === null) {
    report(0);
    return response;
  }
  let n = 0;
  const counter = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      n += chunk.byteLength;
      controller.enqueue(chunk);
    },
    flush() {
      report(n);
    },
  });
  return new Response(response.body.pipeThrough(counter), { status: response.status, statusText: response.statusText, headers: response.headers });
}
