/**
 * `createHandler(options)`: the /v1 service of SERVICE.md §5 as a standard
 * `(Request) => Promise<Response>`. Order of checks for every request: size limits (414, 413),
 * then `/v1/token` (public), then authentication (401, before any 404), the per-token rate limit
 * (429), routing (404), method (405), and the query (400 from the engine's coded errors).
 * Sessions of admin accounts also write (POST and DELETE under /v1/listings/data, inside their
 * sources; DESIGN.md "Writes over HTTP"); to every other session the service is read-only.
 * The engine is the in-memory one or the PostgreSQL backend's (`ServiceEngine`): every call to it
 * is awaited, and a backend that cannot answer (BackendUnavailable) is a 503 with Retry-After.
 */
import type { Logger } from 'pino';
import {
  contextFragment,
  NAVIGATION_PROPERTIES,
  NAVIGATION_TOP_LIMITS,
  TOP_LIMITS,
  type ODataVersion,
  type QueryInput,
  type QueryOptions,
  type QueryResource,
  type QueryResult,
} from '../engine.js';
import { QueryError } from '../errors.js';
import type { RecordSource } from '../exec/page.js';
import { sourcesKey } from '../exec/execute.js';
import type { ParsedQuery } from '../odata/ast.js';
import type { TableSchema } from '../schema/table-schema.js';
import { RESOURCE_NAMES, type RecordResourceName, type ResourceName } from '../schema/types.js';
import type { JsonValue } from '../store/columns.js';
import { CATALOG, odataKeyOf, PROPERTY_REFERENCES } from '../schema/catalog.js';
import { checkOperations, type ChangeOperation, type ChangeSummary } from '../live/change.js';
import { parseQuery } from '../odata/parse-query.js';
import { Accounts } from './accounts.js';
import { LoginThrottle, takeRequest, TokenStore, type LoginThrottleOptions, type RateLimitOptions, type Session } from './auth.js';
import { ServiceError, statusOf } from './errors.js';
import { metadataXml, serviceDocument } from './edmx.js';
import { Profiles } from './profiles.js';
import {
  checkQueryLength,
  decodePathSegment,
  decodeQueryOptions,
  DEFAULT_LIMITS,
  maxPageSizeOf,
  serviceRequestOf,
  type Limits,
  type ServiceRequest,
} from './request.js';
import {
  emptyResponse,
  errorResponse,
  jsonResponse,
  ODATA_JSON_TYPE,
  ODATA_VERSION,
  recordsBody,
  textResponse,
  toResponse,
  whenSent,
  TEXT_TYPE,
  XML_TYPE,
  type ServiceResponse,
} from './respond.js';
import { encodeResponse } from './encoding.js';
import { HealthRoutes, type StatusSources } from './health.js';
import { Cors, type CorsOptions } from './cors.js';
import { withValidators } from './etag.js';
import { KeptBodies } from './kept-bodies.js';
import { Metrics, routeOf, type MetricsOptions, type RequestFacts } from './metrics.js';
import { accessLogger, isLogger, logAccess, logDefect, optionNamesOf, requestIdOf, type AccessLogOptions } from './log.js';
import { openApiResponse } from './openapi.js';
import { createExplorer } from './explorer.js';

export type Handler = (request: Request) => Promise<Response>;

/** The service without a runtime: what `createHandler`'s Fetch function and node:http's `serve` both run. */
export type ServiceHandler = (request: ServiceRequest) => Promise<ServiceResponse>;

/**
 * Where a handler made by `createHandler` carries its ServiceHandler, so that `serve` answers
 * node:http requests without building a WHATWG Request and Response for each.
 */
export const SERVICE_HANDLER: unique symbol = Symbol.for('reso-engine.serviceHandler');

/** The ServiceHandler behind a Fetch handler, when `createHandler` made it. */
export function serviceHandlerOf(handler: (request: Request) => Promise<Response>): ServiceHandler | undefined {
  const core = (handler as { [SERVICE_HANDLER]?: unknown })[SERVICE_HANDLER];
  return typeof core === 'function' ? (core as ServiceHandler) : undefined;
}

type Awaitable<T> = T | Promise<T>;

/**
 * What the service needs of an engine: the methods the in-memory `Engine` and the PostgreSQL
 * backend's `PostgresEngine` share, as each declares them (the backend returns Promises where it
 * reads the database; the handler awaits every call either way). Schemas, accounts, profiles and
 * the clock are synchronous in both.
 */
export interface ServiceEngine {
  readonly accounts: unknown;
  readonly profiles: unknown;
  schemaOf(resource: ResourceName): TableSchema;
  now(): number;
  query(resource: QueryResource, query: QueryInput, options?: QueryOptions): Awaitable<QueryResult>;
  navigate(resource: QueryResource, key: string, navigation: string, query: QueryInput, options?: QueryOptions): Awaitable<QueryResult>;
  navigateOne(resource: QueryResource, key: string, navigation: string, query: QueryInput, options?: QueryOptions): Awaitable<Record<string, JsonValue> | null>;
  count(resource: QueryResource, query: QueryInput, options?: Pick<QueryOptions, 'sources'>): Awaitable<number>;
  entity(resource: QueryResource, key: string, query: QueryInput, options?: QueryOptions): Awaitable<Record<string, JsonValue> | null>;
  has(resource: ResourceName, key: string): Awaitable<boolean>;
  isVisible(resource: ResourceName, key: string, sources?: readonly string[]): Awaitable<boolean>;
  apply(operations: readonly ChangeOperation[]): Promise<ChangeSummary>;
}

export interface HandlerOptions {
  readonly engine: ServiceEngine;
  /** accounts.json as parsed (an AccountsFile once checked); defaults to the engine's data set's. */
  readonly accounts?: unknown;
  /** mls_profiles.json as parsed (a ProfilesFile once checked); defaults to the engine's data set's. */
  readonly profiles?: unknown;
  /**
   * The scheme, host and optional path prefix clients reach the service at (e.g.
   * `https://api.example.com`), for `@odata.context` and `@odata.nextLink`. Default: the
   * origin of each request's URL.
   */
  readonly publicBaseUrl?: string;
  /** Access token lifetime, seconds (default 3,600). */
  readonly tokenLifetimeSeconds?: number;
  /** Failed-login throttle per username (default 10 failures in 60 s lock for 60 s); false turns it off. */
  readonly loginThrottle?: LoginThrottleOptions | false;
  /** Per-token request rate limit (token bucket); off by default. */
  readonly rateLimit?: RateLimitOptions | false;
  readonly limits?: Partial<Limits>;
  /** The clock of tokens, throttles and rate limits, epoch ms (default Date.now). Data uses the engine's clock. */
  readonly clock?: () => number;
  /** What /ready and /metrics report besides the engine (the background replication of `serve --replicate-from`). */
  readonly status?: StatusSources;
  /** Origins whose browser pages may call the service (CORS); none by default. */
  readonly cors?: CorsOptions;
  /** `GET /metrics`: on for loopback clients by default; `{ token }`: for clients sending that bearer token; false: off. */
  readonly metrics?: MetricsOptions;
  /** The access log (one JSON line per request): pino options, or a pino Logger; off by default. */
  readonly log?: AccessLogOptions | Logger | false;
  /** Where defects (500s) are reported, with the request id their response names. Default: the access log when there is one, else stderr. */
  readonly onError?: (error: unknown, requestId: string) => void;
}

const DATA_PREFIX = '/v1/listings/data';
const COLLECTIONS: ReadonlySet<string> = new Set<QueryResource>(['Property', 'Media', 'OpenHouse', 'Member', 'Office', 'Lookup', 'EntityEvent']);
/** The collections an admin session writes: all but Lookup and EntityEvent, which the engine writes itself. */
type WritableResource = QueryResource & RecordResourceName;
const WRITABLE: ReadonlySet<string> = new Set<WritableResource>(['Property', 'Media', 'OpenHouse', 'Member', 'Office']);
const READ_METHODS = 'GET, HEAD';
/** What an admin session may do on a collection, and on one record (`Property('KEY')`, `Media('KEY')`, ...). */
const COLLECTION_METHODS_ADMIN = 'GET, HEAD, POST';
const ENTITY_METHODS_ADMIN = 'GET, HEAD, DELETE';
const BEARER_CHALLENGE = 'Bearer realm="reso-engine"';
/** Options a fetch by key takes (the rest describe collections). */
const ENTITY_OPTIONS: ReadonlySet<keyof ParsedQuery> = new Set<keyof ParsedQuery>(['select', 'expand', 'ignorenulls', 'format']);

function defaultOnError(error: unknown, requestId: string): void {
  const text = error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error);
  process.stderr.write(`reso-engine: internal error, request id ${requestId}: ${text}\n`);
}

function normalizeBase(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`publicBaseUrl '${url}' is not an absolute URL`);
  }
  if (parsed.search !== '' || parsed.hash !== '') throw new TypeError(`publicBaseUrl '${url}' must not have a query or fragment`);
  return `${parsed.origin}${parsed.pathname}`.replace(/\/+$/, '');
}

export function createHandler(options: HandlerOptions): Handler {
  const engine = options.engine;
  const accounts = new Accounts(options.accounts !== undefined ? options.accounts : engine.accounts);
  const profiles = new Profiles(options.profiles !== undefined ? options.profiles : engine.profiles);
  const clock = options.clock ?? Date.now;
  const limits: Limits = { ...DEFAULT_LIMITS, ...options.limits };
  const lifetimeSeconds = options.tokenLifetimeSeconds ?? 3600;
  if (!(lifetimeSeconds > 0)) throw new TypeError('tokenLifetimeSeconds must be positive');
  const rate = options.rateLimit
    ? { requestsPerSecond: options.rateLimit.requestsPerSecond, burst: options.rateLimit.burst ?? Math.max(1, options.rateLimit.requestsPerSecond) }
    : null;
  if (rate && !(rate.requestsPerSecond > 0 && rate.burst >= 1)) throw new TypeError('rateLimit: requestsPerSecond must be positive and burst at least 1');
  const tokens = new TokenStore(lifetimeSeconds * 1000, clock, rate?.burst ?? 0);
  const throttle = options.loginThrottle === false ? null : new LoginThrottle(options.loginThrottle ?? {}, clock);
  const publicBase = normalizeBase(options.publicBaseUrl);
  const log = options.log === undefined || options.log === false ? null : isLogger(options.log) ? options.log : accessLogger(options.log);
  const onError = options.onError ?? (log === null ? defaultOnError : (error: unknown, id: string) => logDefect(log, error, id));
  const cors = options.cors === undefined ? null : new Cors(options.cors);
  const metrics = options.metrics === false ? null : new Metrics(options.metrics ?? {}, engine, options.status ?? {}, clock);
  /** Logins of one username run one at a time, so a burst cannot slip past the throttle. */
  const loginQueue = new Map<string, Promise<unknown>>();
  let metadata: { schemas: Schemas; xml: Map<ODataVersion, string> } | null = null;
  const health = new HealthRoutes(engine, options.status ?? {}, clock);
  const bodies = new KeptBodies();
  const explorer = createExplorer(engine);

  async function token(request: ServiceRequest): Promise<ServiceResponse> {
    if (request.method !== 'POST')
      throw new ServiceError('MethodNotAllowed', `${request.method} is not allowed on /v1/token; use POST.`, { headers: { Allow: 'POST' } });
    const type = mediaTypeOf(request);
    if (type !== 'application/x-www-form-urlencoded') {
      throw new ServiceError('InvalidContentType', `POST /v1/token takes application/x-www-form-urlencoded, not '${type || 'no content type'}'.`);
    }
    const form = new URLSearchParams(await request.text(limits.maxBodyBytes));
    const field = (name: string): string => {
      const values = form.getAll(name);
      if (values.length === 0 || values[0] === '') throw new ServiceError('InvalidRequest', `The form field '${name}' is missing.`, { option: name });
      if (values.length > 1) throw new ServiceError('InvalidRequest', `The form field '${name}' is given ${values.length} times.`, { option: name });
      return values[0];
    };
    const username = field('username');
    const password = field('password');
    const previous = loginQueue.get(username) ?? Promise.resolve();
    const attempt = previous.then(() => login(username, password));
    const settled = attempt.catch(() => undefined);
    loginQueue.set(username, settled);
    void settled.then(() => {
      if (loginQueue.get(username) === settled) loginQueue.delete(username);
    });
    return attempt;
  }

  async function login(username: string, password: string): Promise<ServiceResponse> {
    const wait = throttle?.retryAfter(username) ?? 0;
    if (wait > 0) {
      throw new ServiceError('TooManyLoginAttempts', `Too many failed logins for this username; try again in ${wait} s.`, {
        headers: { 'Retry-After': String(wait) },
      });
    }
    const account = await accounts.verify(username, password);
    if (account === null) {
      throttle?.failed(username);
      throw new ServiceError('InvalidCredentials', 'The username or password is wrong.');
    }
    throttle?.succeeded(username);
    const issued = tokens.issue(account.username, account.sources, account.admin);
    return jsonResponse(200, { access_token: issued.token, expires_in: issued.expiresIn, type: 'Bearer' }, { 'Cache-Control': 'no-store' });
  }

  function authenticate(request: ServiceRequest): Session {
    const header = request.header('authorization');
    if (header === null) {
      throw new ServiceError('MissingToken', 'This path needs an Authorization: Bearer <token> header; get a token from POST /v1/token.', {
        headers: { 'WWW-Authenticate': BEARER_CHALLENGE },
      });
    }
    const session = sessionOf(header);
    if (session === null) {
      throw new ServiceError('InvalidToken', 'The access token is unknown or expired; get a new one from POST /v1/token.', {
        headers: { 'WWW-Authenticate': `${BEARER_CHALLENGE}, error="invalid_token"` },
      });
    }
    if (rate) {
      const wait = takeRequest(session, rate, clock());
      if (wait > 0)
        throw new ServiceError('RateLimited', `Too many requests for this token; try again in ${wait} s.`, { headers: { 'Retry-After': String(wait) } });
    }
    return session;
  }

  /** The live session an Authorization header names, or null. */
  function sessionOf(header: string | null): Session | null {
    const m = header === null ? null : /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
    return m ? tokens.find(m[1]) : null;
  }

  /**
   * The body limit of a request, known before authentication (a 413 comes first): a POST under
   * the data path by an admin account's session is a write, with its own limit.
   */
  function bodyLimitOf(request: ServiceRequest, path: string): number {
    if (request.method !== 'POST' || !path.startsWith(`${DATA_PREFIX}/`)) return limits.maxBodyBytes;
    return sessionOf(request.header('authorization'))?.admin === true ? limits.maxWriteBodyBytes : limits.maxBodyBytes;
  }

  /** parseQuery's coded errors, then only the options this path takes. */
  function options_(decoded: string, allowed: ReadonlySet<keyof ParsedQuery>, what: string): ParsedQuery {
    const parsed = parseQuery(decoded);
    for (const k of Object.keys(parsed) as (keyof ParsedQuery)[]) {
      if (!allowed.has(k)) throw new ServiceError('QueryOptionNotAllowed', `$${k} does not apply to ${what}.`, { option: `$${k}` });
    }
    return parsed;
  }

  function format(parsed: ParsedQuery, wanted: 'json' | 'xml', what: string): void {
    if (parsed.format !== undefined && parsed.format !== wanted) {
      throw new ServiceError('UnsupportedFormat', `$format=${parsed.format} is not available for ${what}: it comes as ${wanted}.`, { option: '$format' });
    }
  }

  async function collection(
    resource: QueryResource,
    request: ServiceRequest,
    session: Session,
    decoded: string,
    base: string,
    version: ODataVersion,
    facts: RequestFacts,
  ) {
    const prefer = maxPageSizeOf(request.header('prefer'));
    const applied = prefer === undefined ? undefined : Math.min(prefer, TOP_LIMITS[resource]);
    return pageResponse(await engine.query(resource, decoded, pageOptions(session, applied, base, version, facts)), applied, facts);
  }

  /** What a page of a collection or a navigation path asks of the engine; the plan and rows scanned go to `facts`. */
  function pageOptions(session: Session, applied: number | undefined, base: string, version: ODataVersion, facts: RequestFacts): QueryOptions {
    return {
      sources: session.sources,
      maxPageSize: applied,
      base: `${base}${DATA_PREFIX}/`,
      odataVersion: version,
      onPlan: planInto(facts),
      onExecuted: scannedInto(facts),
      onPage: pageInto(facts),
      plainPagesAsRows: true,
    };
  }

  function pageResponse(result: QueryResult, applied: number | undefined, facts: RequestFacts): ServiceResponse {
    // a page handed over as rows has no records built (an engine that does not hand pages over, the PostgreSQL backend's, builds them)
    const page = facts.page;
    facts.page = undefined;
    facts.rows = page === undefined ? result.value.length : page.rows.length;
    return envelopeResponse(result, applied, page);
  }

  /**
   * A navigation path, `Property('KEY')/Media` (or `Property(ListingKey='KEY')/Media`): the
   * listing's children as a collection; a single-valued one (`/ListAgent`, `/ListOffice`, ...) the
   * one record, or 204 No Content when the listing names none the account sees; 404
   * `UnknownNavigationProperty` for a name Property does not have, 404 `EntityNotFound` for a
   * listing the account does not see.
   */
  async function navigation(
    literal: string,
    name: string,
    request: ServiceRequest,
    session: Session,
    decoded: string,
    base: string,
    version: ODataVersion,
    facts: RequestFacts,
  ) {
    const key = parseKey('Property', literal);
    const reference = PROPERTY_REFERENCES.find((r) => r.name === name);
    if (reference !== undefined) {
      const parsed = options_(decoded, ENTITY_OPTIONS, `a single ${reference.target}`);
      const record = await engine.navigateOne('Property', key, name, decoded, { sources: session.sources });
      if (record === null) return emptyResponse(204);
      const fields = JSON.stringify(record);
      const context = JSON.stringify(`${base}${DATA_PREFIX}/$metadata#${contextFragment(reference.target, parsed, version, true)}`);
      return textResponse(200, `{"@odata.context":${context}${fields === '{}' ? '}' : `,${fields.slice(1)}`}`, ODATA_JSON_TYPE);
    }
    const prefer = maxPageSizeOf(request.header('prefer'));
    const target = Object.hasOwn(NAVIGATION_PROPERTIES, name) ? NAVIGATION_PROPERTIES[name as keyof typeof NAVIGATION_PROPERTIES] : null;
    const limit = target === null || target === 'Member' || target === 'Office' ? undefined : NAVIGATION_TOP_LIMITS[target];
    const applied = prefer === undefined || limit === undefined ? prefer : Math.min(prefer, limit);
    return pageResponse(await engine.navigate('Property', key, name, decoded, pageOptions(session, applied, base, version, facts)), applied, facts);
  }

  /** The engine's envelope, written with its records streamed (large pages are chunked). */
  function envelopeResponse(result: QueryResult, applied: number | undefined, page?: RecordSource): ServiceResponse {
    let head = `{"@odata.context":${JSON.stringify(result['@odata.context'])}`;
    if (result['@odata.count'] !== undefined) head += `,"@odata.count":${result['@odata.count']}`;
    head += ',"value":[';
    const next = result['@odata.nextLink'];
    const tail = next === undefined ? ']}' : `],"@odata.nextLink":${JSON.stringify(next)}}`;
    const body = recordsBody(head, page ?? result.value, tail);
    const headers: Record<string, string> = { 'OData-Version': ODATA_VERSION, 'Content-Type': ODATA_JSON_TYPE };
    if (body instanceof Uint8Array) headers['Content-Length'] = String(body.byteLength);
    if (applied !== undefined) headers['Preference-Applied'] = `odata.maxpagesize=${applied}`;
    return { status: 200, headers, body };
  }

  /** Whether a live record of the resource has this key and is visible to the sources (as the engine decides visibility). */
  function visibleRecord(resource: QueryResource, key: string, sources: readonly string[]): Awaitable<boolean> {
    return engine.isVisible(resource, key, sources);
  }

  /** `Property('KEY')`, `Media(MediaKey='KEY')`, ...: one record visible to the account, else 404. */
  async function entity(
    resource: QueryResource,
    literal: string,
    session: Session,
    decoded: string,
    base: string,
    version: ODataVersion,
  ): Promise<ServiceResponse> {
    const key = parseKey(resource, literal);
    const parsed = options_(decoded, ENTITY_OPTIONS, `a single ${resource} record`);
    const root = `${base}${DATA_PREFIX}/`;
    const record = await engine.entity(resource, key, decoded, { sources: session.sources, base: root });
    if (record === null) throw notFoundOf(resource, key);
    const fields = JSON.stringify(record);
    const context = JSON.stringify(`${root}$metadata#${contextFragment(resource, parsed, version, true)}`);
    return textResponse(200, `{"@odata.context":${context}${fields === '{}' ? '}' : `,${fields.slice(1)}`}`, ODATA_JSON_TYPE);
  }

  /** `Property/$count` (also after `?$filter=`): the number of visible matches as text/plain. */
  async function count(resource: QueryResource, session: Session, decoded: string): Promise<ServiceResponse> {
    return textResponse(200, String(await engine.count(resource, decoded, { sources: session.sources })), TEXT_TYPE);
  }

  /** Writes run one at a time, so each one's source checks see the data the one before left. */
  let writes: Promise<unknown> = Promise.resolve();

  /**
   * A change of an admin session: checked against its sources (`scope`), then applied as one
   * atomic change. Keys the account cannot see are left out of removals and counted as not found.
   */
  function write(session: Session, operations: readonly ChangeOperation[]): Promise<ChangeSummary> {
    const run = writes.then(async (): Promise<ChangeSummary> => {
      const { allowed, hidden } = await scope(operations, session.sources);
      const s = await engine.apply(allowed);
      return { generation: s.generation, upserted: s.upserted, removed: s.removed, notFound: s.notFound + hidden };
    });
    writes = run.catch(() => undefined);
    return run;
  }

  /**
   * An admin session writes only inside its sources. Walking the operations in order (a record
   * upserted or removed earlier in the change counts as the account's): an upserted listing's
   * OriginatingSystemName must be one of the sources; a child must name a live listing the account
   * sees; an upsert may not take a key a record the account cannot see holds; a removal of a key
   * the account cannot see is dropped and counted as not found, exactly like an unknown key.
   * Records that are not objects are left for the engine to refuse (BadDataLine). Each record's
   * visibility is asked once per change (many children of one listing ask the database once).
   */
  async function scope(operations: readonly ChangeOperation[], sources: readonly string[]): Promise<{ allowed: ChangeOperation[]; hidden: number }> {
    /** Keys of this change so far: upserted (true) or removed (false). */
    const changed = new Map<string, boolean>();
    const id = (r: string, key: string): string => `${r}\u0000${key}`;
    const seen = new Map<string, Awaitable<boolean>>();
    const visible = (r: QueryResource, key: string): Awaitable<boolean> => {
      let v = seen.get(id(r, key));
      if (v === undefined) seen.set(id(r, key), (v = visibleRecord(r, key, sources)));
      return v;
    };
    const own = async (r: QueryResource, key: string): Promise<boolean> => changed.has(id(r, key)) || (await visible(r, key));
    const liveListing = async (key: string): Promise<boolean> => changed.get(id('Property', key)) ?? (await visible('Property', key));
    const refuse = (message: string): ServiceError => new ServiceError('SourceNotAllowed', message);
    let hidden = 0;
    const allowed: ChangeOperation[] = [];
    for (const op of operations) {
      const r = op.resource as WritableResource;
      if ('remove' in op) {
        const keys: string[] = [];
        for (const key of op.remove) {
          if (!(await own(r, key))) {
            hidden++;
            continue;
          }
          keys.push(key);
          changed.set(id(r, key), false);
        }
        allowed.push({ resource: r, remove: keys });
        continue;
      }
      // a JSON body cannot hold bytes: checkOperations refuses upsertLines from one
      if (!('upsert' in op)) throw new QueryError('InvalidChange', `${r}: over HTTP an upsert is a list of records (upsert).`);
      const def = CATALOG[r];
      for (const [i, record] of op.upsert.entries()) {
        if (record === null || typeof record !== 'object' || Array.isArray(record)) continue;
        const rec = record as Record<string, unknown>;
        const at = `${r} record ${i + 1}`;
        const key = rec[def.key];
        if (typeof key === 'string' && key !== '' && !(await own(r, key)) && (await engine.has(r, key))) {
          throw refuse(`${at}: ${def.key} '${key.slice(0, 100)}' is held by a record this account cannot write; keys are unique across sources.`);
        }
        // a listing, Member or Office needs one of the sources; a child may leave it out (it is its listing's)
        const osn = rec.OriginatingSystemName;
        const ours = typeof osn === 'string' && sources.includes(osn);
        if (!ours && (def.parent === null || (osn !== undefined && osn !== null))) {
          const what = osn === undefined ? 'has no OriginatingSystemName' : `has OriginatingSystemName ${JSON.stringify(osn).slice(0, 80)}`;
          throw refuse(`${at} ${what}: this account writes records of its sources only (${sources.join(', ')}).`);
        }
        if (def.parent !== null) {
          const link = def.parent;
          const listing = rec[link.field];
          const linked = link.when === null || rec[link.when.field] === link.when.equals;
          if (!linked || typeof listing !== 'string' || !(await liveListing(listing))) {
            const named =
              typeof listing === 'string' && linked
                ? `${link.field} '${listing.slice(0, 100)}' is not a listing of this account's sources`
                : `names no listing (give ${link.when === null ? '' : `${link.when.field} '${link.when.equals}' and `}${link.field})`;
            throw refuse(`${at}: ${named}; this account writes records of its sources' listings only.`);
          }
        }
        if (typeof key === 'string') changed.set(id(r, key), true);
      }
      allowed.push(op);
    }
    return { allowed, hidden };
  }

  /** The JSON body of a write: application/json, up to the write limit. */
  async function jsonBody(request: ServiceRequest): Promise<unknown> {
    const type = mediaTypeOf(request);
    if (type !== 'application/json') throw new ServiceError('InvalidContentType', `A write takes application/json, not '${type || 'no content type'}'.`);
    const text = await request.text(limits.maxWriteBodyBytes);
    try {
      return JSON.parse(text) as unknown;
    } catch (e) {
      throw new ServiceError('InvalidJson', `The request body is not valid JSON: ${(e as Error).message.slice(0, 200)}.`);
    }
  }

  /** `POST .../{Resource}`: a JSON array of records, or `{"value":[records]}`, upserted as one change. */
  async function upsertRecords(resource: WritableResource, request: ServiceRequest, session: Session, raw: string): Promise<ServiceResponse> {
    options_(decodeQueryOptions(raw), new Set(), 'a write');
    const body = await jsonBody(request);
    const records = Array.isArray(body) ? (body as unknown[]) : memberOf(body, 'value');
    if (records === undefined)
      throw new ServiceError('InvalidBody', `POST ${DATA_PREFIX}/${resource} takes a JSON array of ${resource} records, or {"value":[records]}.`);
    return summaryResponse(await write(session, [{ resource, upsert: records }]));
  }

  /** `POST .../$changes`: `{"operations":[{resource, upsert: [records]} | {resource, remove: [keys]}, ...]}` as one change. */
  async function applyChanges(request: ServiceRequest, session: Session, raw: string): Promise<ServiceResponse> {
    options_(decodeQueryOptions(raw), new Set(), 'a write');
    const operations = memberOf(await jsonBody(request), 'operations');
    if (operations === undefined) {
      throw new ServiceError(
        'InvalidBody',
        `POST ${DATA_PREFIX}/$changes takes {"operations":[{"resource":"Property","upsert":[records]},{"resource":"Media","remove":["KEY"]}]}.`,
      );
    }
    // resources first (the engine's UnknownResource is a 404, and PropertyChange is not written here)
    operations.forEach((op, i) => {
      if (op === null || typeof op !== 'object') return; // the engine's InvalidChange names it
      const resource = (op as { resource?: unknown }).resource;
      if (typeof resource === 'string' && WRITABLE.has(resource)) return;
      const what = resource === undefined ? 'names no resource' : `cannot change the resource ${JSON.stringify(resource).slice(0, 80)}`;
      throw new QueryError('InvalidChange', `operation ${i + 1} ${what}: give "resource" as one of ${[...WRITABLE].join(', ')}.`);
    });
    return summaryResponse(await write(session, checkOperations(operations)));
  }

  /** `DELETE .../{Resource}('KEY')`: 204, or 404 when no such record is visible to the account. */
  async function removeRecord(resource: WritableResource, literal: string, session: Session, raw: string): Promise<ServiceResponse> {
    const key = parseKey(resource, literal);
    options_(decodeQueryOptions(raw), new Set(), 'a write');
    const summary = await write(session, [{ resource, remove: [key] }]);
    if (summary.removed !== 1) throw notFoundOf(resource, key);
    return emptyResponse(204);
  }

  function metadataResponse(version: ODataVersion): ServiceResponse {
    const schemas = schemasOf(engine);
    if (metadata === null || !sameSchemas(metadata.schemas, schemas)) metadata = { schemas, xml: new Map() };
    let xml = metadata.xml.get(version);
    if (xml === undefined) metadata.xml.set(version, (xml = metadataXml((r) => engine.schemaOf(r), version)));
    return textResponse(200, xml, XML_TYPE);
  }

  async function route(request: ServiceRequest, negotiated: Negotiated, facts: RequestFacts): Promise<ServiceResponse> {
    const raw = request.rawQuery;
    checkQueryLength(raw, limits);
    const path = request.path;
    if (path === '/health' || path === '/ready') return health.answer(path, request.method);
    if (path === '/metrics' && metrics !== null) return metrics.answer(request);
    if (path === '/v1/openapi.json') return openApiResponse(request.method);
    const declared = request.header('content-length');
    const bodyLimit = bodyLimitOf(request, path);
    if (declared !== null && Number(declared) > bodyLimit) {
      throw new ServiceError('PayloadTooLarge', `The request body is larger than the limit of ${bodyLimit} bytes.`);
    }
    if (negotiated.problem !== null) throw negotiated.problem;
    const version = negotiated.version;
    if (path === '/v1/token') return token(request);
    if (path !== '/v1' && !path.startsWith('/v1/')) {
      const page = explorer.page(request);
      if (page !== null) return page;
      throw new ServiceError('NotFound', `Nothing at ${path.slice(0, 200)}: the service lives under /v1.`);
    }
    const session = authenticate(request);
    facts.account = session.username;
    facts.sources = session.sources;

    const base = publicBase ?? request.origin;
    const explained = explorer.explain(request, session.sources);
    if (explained !== null) return explained;
    if (path === '/v1/account/resources') {
      allowOnly(request, READ_METHODS);
      options_(decodeQueryOptions(raw), new Set(), 'account resources');
      return jsonResponse(200, profiles.resources(session.sources));
    }
    if (path === '/v1/listings/mls_profiles') {
      allowOnly(request, READ_METHODS);
      options_(decodeQueryOptions(raw), new Set(), 'MLS profiles');
      return jsonResponse(200, profiles.view(session.sources, new Date(engine.now()).getUTCFullYear()));
    }
    if (path === DATA_PREFIX || path === `${DATA_PREFIX}/`) {
      allowOnly(request, READ_METHODS);
      format(options_(decodeQueryOptions(raw), new Set(['format']), 'the service document'), 'json', 'the service document');
      return jsonResponse(200, serviceDocument(base), {}, ODATA_JSON_TYPE);
    }
    if (path.startsWith(`${DATA_PREFIX}/`)) {
      const segment = decodePathSegment(path.slice(DATA_PREFIX.length + 1));
      if (segment === '$metadata') {
        allowOnly(request, READ_METHODS);
        format(options_(decodeQueryOptions(raw), new Set(['format']), '$metadata'), 'xml', '$metadata');
        return metadataResponse(version);
      }
      if (COLLECTIONS.has(segment)) {
        if (session.admin && request.method === 'POST' && WRITABLE.has(segment)) return upsertRecords(segment as WritableResource, request, session, raw);
        allowOnly(request, session.admin && WRITABLE.has(segment) ? COLLECTION_METHODS_ADMIN : READ_METHODS);
        return collection(segment as QueryResource, request, session, decodeQueryOptions(raw), base, version, facts);
      }
      const counted = /^(Property|Media|OpenHouse|Member|Office|Lookup|EntityEvent)\/\$count$/.exec(segment);
      if (counted) {
        allowOnly(request, READ_METHODS);
        return count(counted[1] as QueryResource, session, decodeQueryOptions(raw));
      }
      if (segment === '$changes' && session.admin) {
        allowOnly(request, 'POST');
        return applyChanges(request, session, raw);
      }
      // `Property('KEY')/Nav`: the last `)/` ends the key (a key may hold `)/` inside its quotes)
      const navigated = /^Property\((.*)\)\/([^/]*)$/s.exec(segment);
      if (navigated) {
        allowOnly(request, READ_METHODS);
        return navigation(navigated[1], navigated[2], request, session, decodeQueryOptions(raw), base, version, facts);
      }
      const keyed = /^(Property|Media|OpenHouse|Member|Office|Lookup|EntityEvent)\((.*)\)$/s.exec(segment);
      if (keyed) {
        const resource = keyed[1] as QueryResource;
        const writable = session.admin && WRITABLE.has(resource);
        if (writable && request.method === 'DELETE') return removeRecord(resource as WritableResource, keyed[2], session, raw);
        allowOnly(request, writable ? ENTITY_METHODS_ADMIN : READ_METHODS);
        facts.plan = 'key';
        return entity(resource, keyed[2], session, decodeQueryOptions(raw), base, version);
      }
    }
    throw new ServiceError('NotFound', `Nothing at ${path.slice(0, 200)}.`);
  }

  const service: ServiceHandler = async (request) => {
    const started = performance.now();
    const requestId = requestIdOf(request);
    const facts: RequestFacts = { account: null, sources: null, plan: null, rows: null, scanned: null, errorCode: null };
    const negotiated = negotiate(request);
    let response = cors?.preflight(request) ?? null;
    if (response === null) {
      try {
        response = await route(request, negotiated, facts);
      } catch (error) {
        response = failure(error, requestId);
        facts.errorCode = error instanceof QueryError ? error.code : 'InternalError';
      }
    }
    if (facts.sources !== null) response = keptBody(request, response, facts.sources, negotiated.version);
    response.headers['OData-Version'] = negotiated.version;
    response.headers['X-Request-Id'] = requestId;
    response = await encodeResponse(withValidators(request, response, negotiated.version), request.header('accept-encoding'), request.method);
    cors?.decorate(request, response.headers);
    if (metrics === null && log === null) return response;
    const { status } = response;
    return whenSent(response, (bytes) => {
      const seconds = (performance.now() - started) / 1000;
      const name = routeOf(request.path);
      metrics?.observe(name, request.method, status, seconds, bytes, facts);
      if (log !== null) {
        logAccess(log, {
          reqId: requestId,
          method: request.method,
          path: request.path,
          options: optionNamesOf(request.rawQuery),
          route: name.route,
          resource: name.resource,
          account: facts.account,
          status,
          durationMs: Math.round(seconds * 1e6) / 1000,
          bytes,
          plan: facts.plan,
          rows: facts.rows,
        });
      }
    });
  };

  /**
   * A successful read's one-buffer body as the very buffer sent last for the same request when the
   * bytes are the same (kept-bodies.ts), so that its entity tag and compressed forms are reused.
   */
  function keptBody(request: ServiceRequest, response: ServiceResponse, sources: readonly string[], version: ODataVersion): ServiceResponse {
    const body = response.body;
    if (response.status !== 200 || !Buffer.isBuffer(body) || (request.method !== 'GET' && request.method !== 'HEAD')) return response;
    const key = `${version}\u0000${sourcesKey(sources)}\u0000${publicBase ?? request.origin}\u0000${request.header('prefer') ?? ''}\u0000${request.path}?${request.rawQuery}`;
    const kept = bodies.same(key, body);
    return kept === body ? response : { status: 200, headers: response.headers, body: kept };
  }

  /** The response of an error: its coded answer, or for a defect a 500 naming the request id it was reported under. */
  function failure(error: unknown, requestId: string): ServiceResponse {
    if (error instanceof QueryError && statusOf(error) !== 500) return errorResponse(error);
    try {
      onError(error, requestId);
    } catch {
      // a failing logger must not turn a 500 into a crash
    }
    return jsonResponse(500, { error: { code: 'InternalError', message: `The service failed on this request; it was logged with request id ${requestId}.` } });
  }

  const handler: Handler = async (request) => toResponse(await service(serviceRequestOf(request)));
  return Object.defineProperty(handler, SERVICE_HANDLER, { value: service });
}

/*
 * The hooks a page's query reports to `facts` through, returned by functions rather than written
 * as arrow functions in the options' literal: a function written there is given its name when it
 * is made (keepNames, as tsx runs the service), which costs more per request than the closure.
 */
function planInto(facts: RequestFacts): NonNullable<QueryOptions['onPlan']> {
  return (plan) => (facts.plan = plan.access.kind);
}

function scannedInto(facts: RequestFacts): NonNullable<QueryOptions['onExecuted']> {
  return (stats) => (facts.scanned = stats.rowsScanned);
}

function pageInto(facts: RequestFacts): NonNullable<QueryOptions['onPage']> {
  return (page) => (facts.page = page);
}

/** A 405 unless the request's method is one of `allow` (`GET, HEAD`, as the Allow header lists them). */
function allowOnly(request: ServiceRequest, allow: string): void {
  const method = request.method;
  if (method === 'GET' || method === 'HEAD' ? allow.startsWith('GET, HEAD') : allow.split(', ').includes(method)) return;
  const use = allow
    .split(', ')
    .filter((m) => m !== 'HEAD')
    .join(' or ');
  throw new ServiceError('MethodNotAllowed', `${method} is not allowed on ${request.path}; use ${use}.`, { headers: { Allow: allow } });
}

/** The OData version of the response, and the 400 the request's version headers deserve, if any. */
interface Negotiated {
  readonly version: ODataVersion;
  readonly problem: ServiceError | null;
}

/**
 * OData-Version negotiation (SERVICE.md §5): `OData-MaxVersion` 4.0 (up to 4.01 exclusive) gets a
 * 4.0 response, none or 4.01 and above a 4.01 one; a MaxVersion below 4.0 cannot be served, and a
 * request that says it is written in a version above 4.01 (`OData-Version`) cannot be read: both
 * 400 `UnsupportedODataVersion`, as is a value that is not a version number.
 */
function negotiate(request: ServiceRequest): Negotiated {
  const maxHeader = request.header('odata-maxversion');
  const ownHeader = request.header('odata-version');
  // most requests name no version: one answer for all of them, made once
  if (maxHeader === null && ownHeader === null) return NEGOTIATED_DEFAULT;
  const max = versionNumberOf(maxHeader);
  const own = versionNumberOf(ownHeader);
  const version: ODataVersion = max !== undefined && max !== null && max < 4.01 ? '4.0' : '4.01';
  if (max === null) return refuseVersion(version, 'OData-MaxVersion must be a version number such as 4.0 or 4.01.');
  if (max !== undefined && max < 4) return refuseVersion('4.0', `OData-MaxVersion ${max.toFixed(1)} is below 4.0: this service speaks OData 4.0 and 4.01.`);
  if (own === null) return refuseVersion(version, 'OData-Version must be a version number such as 4.0 or 4.01.');
  if (own !== undefined && (own > 4.01 || own < 4)) {
    return refuseVersion(version, `OData-Version ${ownHeader!.trim()} is not one this service reads: send requests as OData 4.0 or 4.01.`);
  }
  return { version, problem: null };
}

const NEGOTIATED_DEFAULT: Negotiated = Object.freeze({ version: '4.01', problem: null });

/** A version header's number: undefined when absent, null when it is not a version number. */
function versionNumberOf(value: string | null): number | null | undefined {
  if (value === null) return undefined;
  return /^\s*\d+\.\d+\s*$/.test(value) ? Number(value) : null;
}

function refuseVersion(version: ODataVersion, message: string): Negotiated {
  return { version, problem: new ServiceError('UnsupportedODataVersion', message) };
}

/**
 * `'KEY'` (with `''` for a quote) or `ListingKey='KEY'` (the resource's key field): another
 * name is a 400 `UnknownKeyProperty`, anything else that is not a key a 400 `InvalidKey`.
 */
function parseKey(resource: QueryResource, literal: string): string {
  // the key a client sees (EntityEvent: its EntityEventSequence, an Int64 literal; the rest: a string)
  const keyName = odataKeyOf(resource);
  const numeric = resource === 'EntityEvent';
  const example = numeric ? '42' : "'KEY'";
  const name = /^([\p{L}_][\p{L}\p{N}_]*)=/u.exec(literal)?.[1];
  if (name !== undefined && name !== keyName) {
    throw new ServiceError(
      'UnknownKeyProperty',
      `${resource}'s key is ${keyName}, not '${name.slice(0, 80)}': write ${resource}(${example}) or ${resource}(${keyName}=${example}).`,
    );
  }
  const text = name !== undefined ? literal.slice(name.length + 1) : literal;
  if (numeric && /^[0-9]{1,19}$/.test(text)) return String(BigInt(text));
  if (!numeric && text.length >= 2 && text.startsWith("'") && text.endsWith("'")) {
    const inner = text.slice(1, -1);
    if (!inner.replace(/''/g, '').includes("'")) return inner.replace(/''/g, "'");
  }
  throw new ServiceError(
    'InvalidKey',
    `${resource}(${literal.slice(0, 80)}) is not a key: write ${resource}(${example}) or ${resource}(${keyName}=${example})${numeric ? ', a whole number' : ', doubling any quote inside the key'}.`,
  );
}

/** The 404 of a key no live record visible to the account has (the same whether it exists elsewhere or not). */
function notFoundOf(resource: QueryResource, key: string): ServiceError {
  const what = resource === 'Property' ? 'listing' : `${resource} record`;
  return new ServiceError('EntityNotFound', `No ${what} with ${odataKeyOf(resource)} '${key}' is visible to this account.`);
}

/** The media type of a request's Content-Type, lower-cased, without parameters ('' when absent). */
function mediaTypeOf(request: ServiceRequest): string {
  return (request.header('content-type') ?? '').split(';')[0].trim().toLowerCase();
}

/** `body[name]` when the body is an object holding an array there and otherwise only annotations (`@...`). */
function memberOf(body: unknown, name: string): unknown[] | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const o = body as Record<string, unknown>;
  if (!Array.isArray(o[name]) || Object.keys(o).some((k) => k !== name && !k.startsWith('@'))) return undefined;
  return o[name] as unknown[];
}

function summaryResponse(s: ChangeSummary): ServiceResponse {
  return jsonResponse(200, { generation: s.generation, upserted: s.upserted, removed: s.removed, notFound: s.notFound });
}

/** The schemas $metadata describes; a new table (an upsert that adds a field) means new XML. */
type Schemas = readonly TableSchema[];
const schemasOf = (engine: ServiceEngine): Schemas => RESOURCE_NAMES.map((r) => engine.schemaOf(r));
const sameSchemas = (a: Schemas, b: Schemas): boolean => a.every((s, i) => s === b[i]);
