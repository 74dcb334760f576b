/**
 * `createHandler(options)`: the /v1 service of SERVICE.md §5 as a standard
 * `(Request) => Promise<Response>`. Order of checks for every request: size limits (414, 413),
 * then `/v1/token` (public), then authentication (401, before any 404), the per-token rate limit
 * (429), routing (404), method (405), and the query (400 from the engine's coded errors).
 */
import { randomUUID } from 'node:crypto';
import { TOP_LIMITS, type Engine, type QueryResource, type QueryResult } from '../engine.js';
import { QueryError } from '../errors.js';
import type { ParsedQuery } from '../odata/ast.js';
import type { TableSchema } from '../schema/table-schema.js';
import { RESOURCE_NAMES } from '../schema/types.js';
import { parseQuery } from '../odata/parse-query.js';
import { Accounts, type AccountsFile } from './accounts.js';
import { LoginThrottle, takeRequest, TokenStore, type LoginThrottleOptions, type RateLimitOptions, type Session } from './auth.js';
import { ServiceError, statusOf } from './errors.js';
import { metadataXml, serviceDocument } from './edmx.js';
import { Profiles, type ProfilesFile } from './profiles.js';
import { baseUrlOf, checkQueryLength, decodePathSegment, decodeQueryOptions, DEFAULT_LIMITS, maxPageSizeOf, rawQueryOfRequest, readBody, type Limits } from './request.js';
import { errorResponse, jsonResponse, ODATA_JSON_TYPE, ODATA_VERSION, recordsBody, textResponse, XML_TYPE } from './respond.js';

export type Handler = (request: Request) => Promise<Response>;

export interface HandlerOptions {
  readonly engine: Engine;
  /** accounts.json as parsed; defaults to the engine's data set's. */
  readonly accounts?: AccountsFile | unknown;
  /** mls_profiles.json as parsed; defaults to the engine's data set's. */
  readonly profiles?: ProfilesFile | unknown;
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
  /** Where defects (500s) are reported, with the request id their response names. Default: stderr. */
  readonly onError?: (error: unknown, requestId: string) => void;
}

const DATA_PREFIX = '/v1/listings/data';
const COLLECTIONS: ReadonlySet<string> = new Set<QueryResource>(['Property', 'Media', 'OpenHouse']);
const READ_METHODS = 'GET, HEAD';
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
  const accounts = new Accounts(options.accounts !== undefined ? options.accounts : engine.store.accounts);
  const profiles = new Profiles(options.profiles !== undefined ? options.profiles : engine.store.profiles);
  const clock = options.clock ?? Date.now;
  const limits: Limits = { ...DEFAULT_LIMITS, ...options.limits };
  const lifetimeSeconds = options.tokenLifetimeSeconds ?? 3600;
  if (!(lifetimeSeconds > 0)) throw new TypeError('tokenLifetimeSeconds must be positive');
  const rate = options.rateLimit ? { requestsPerSecond: options.rateLimit.requestsPerSecond, burst: options.rateLimit.burst ?? Math.max(1, options.rateLimit.requestsPerSecond) } : null;
  if (rate && !(rate.requestsPerSecond > 0 && rate.burst >= 1)) throw new TypeError('rateLimit: requestsPerSecond must be positive and burst at least 1');
  const tokens = new TokenStore(lifetimeSeconds * 1000, clock, rate?.burst ?? 0);
  const throttle = options.loginThrottle === false ? null : new LoginThrottle(options.loginThrottle ?? {}, clock);
  const publicBase = normalizeBase(options.publicBaseUrl);
  const onError = options.onError ?? defaultOnError;
  /** Logins of one username run one at a time, so a burst cannot slip past the throttle. */
  const loginQueue = new Map<string, Promise<unknown>>();
  let metadata: { schemas: Schemas; xml: string } | null = null;

  async function token(request: Request): Promise<Response> {
    if (request.method !== 'POST') throw new ServiceError('MethodNotAllowed', `${request.method} is not allowed on /v1/token; use POST.`, { headers: { Allow: 'POST' } });
    const type = (request.headers.get('content-type') ?? '').split(';')[0].trim().toLowerCase();
    if (type !== 'application/x-www-form-urlencoded') {
      throw new ServiceError('InvalidContentType', `POST /v1/token takes application/x-www-form-urlencoded, not '${type || 'no content type'}'.`);
    }
    const form = new URLSearchParams(await readBody(request, limits.maxBodyBytes));
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

  async function login(username: string, password: string): Promise<Response> {
    const wait = throttle?.retryAfter(username) ?? 0;
    if (wait > 0) {
      throw new ServiceError('TooManyLoginAttempts', `Too many failed logins for this username; try again in ${wait} s.`, { headers: { 'Retry-After': String(wait) } });
    }
    const account = await accounts.verify(username, password);
    if (account === null) {
      throttle?.failed(username);
      throw new ServiceError('InvalidCredentials', 'The username or password is wrong.');
    }
    throttle?.succeeded(username);
    const issued = tokens.issue(account.username, account.sources);
    return jsonResponse(200, { access_token: issued.token, expires_in: issued.expiresIn, type: 'Bearer' }, { 'Cache-Control': 'no-store' });
  }

  function authenticate(request: Request): Session {
    const header = request.headers.get('authorization');
    if (header === null) {
      throw new ServiceError('MissingToken', 'This path needs an Authorization: Bearer <token> header; get a token from POST /v1/token.', { headers: { 'WWW-Authenticate': BEARER_CHALLENGE } });
    }
    const m = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
    const session = m ? tokens.find(m[1]) : null;
    if (session === null) {
      throw new ServiceError('InvalidToken', 'The access token is unknown or expired; get a new one from POST /v1/token.', {
        headers: { 'WWW-Authenticate': `${BEARER_CHALLENGE}, error="invalid_token"` },
      });
    }
    if (rate) {
      const wait = takeRequest(session, rate, clock());
      if (wait > 0) throw new ServiceError('RateLimited', `Too many requests for this token; try again in ${wait} s.`, { headers: { 'Retry-After': String(wait) } });
    }
    return session;
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

  function collection(resource: QueryResource, request: Request, session: Session, decoded: string, base: string): Response {
    const prefer = maxPageSizeOf(request.headers.get('prefer'));
    const applied = prefer === undefined ? undefined : Math.min(prefer, TOP_LIMITS[resource]);
    const result: QueryResult = engine.query(resource, decoded, { sources: session.sources, maxPageSize: applied });
    const root = `${base}${DATA_PREFIX}/`;
    let head = `{"@odata.context":${JSON.stringify(root + result['@odata.context'])}`;
    if (result['@odata.count'] !== undefined) head += `,"@odata.count":${result['@odata.count']}`;
    head += ',"value":[';
    const next = result['@odata.nextLink'];
    const tail = next === undefined ? ']}' : `],"@odata.nextLink":${JSON.stringify(root + next)}}`;
    const { body, chunked } = recordsBody(head, result.value, tail);
    const headers: Record<string, string> = { 'OData-Version': ODATA_VERSION, 'Content-Type': ODATA_JSON_TYPE };
    if (!chunked) headers['Content-Length'] = String((body as Uint8Array).byteLength);
    if (applied !== undefined) headers['Preference-Applied'] = `odata.maxpagesize=${applied}`;
    return new Response(body, { status: 200, headers });
  }

  function entity(literal: string, session: Session, decoded: string, base: string): Response {
    const key = parseKey(literal);
    options_(decoded, ENTITY_OPTIONS, 'a single listing');
    const table = engine.store.Property;
    const notFound = (): ServiceError => new ServiceError('EntityNotFound', `No listing with ListingKey '${key}' is visible to this account.`);
    const row = table.rowOfKey(key);
    if (row < 0) throw notFound();
    const osn = table.value(row, 'OriginatingSystemName');
    if (typeof osn !== 'string' || !session.sources.includes(osn)) throw notFound();
    // the listing's own source narrows the engine's candidates to one MLS's rows (a lookup index)
    const filter = `OriginatingSystemName eq ${quote(osn)} and ListingKey eq ${quote(key)}`;
    const result = engine.query('Property', `${decoded === '' ? '' : `${decoded}&`}$filter=${filter}&$top=1`, { sources: session.sources });
    const record = result.value[0];
    if (record === undefined) throw notFound();
    const fields = JSON.stringify(record);
    const context = JSON.stringify(`${base}${DATA_PREFIX}/$metadata#Property/$entity`);
    return textResponse(200, `{"@odata.context":${context}${fields === '{}' ? '}' : `,${fields.slice(1)}`}`, ODATA_JSON_TYPE);
  }

  function metadataResponse(): Response {
    const schemas = schemasOf(engine);
    if (metadata === null || !sameSchemas(metadata.schemas, schemas)) metadata = { schemas, xml: metadataXml(engine.store) };
    return textResponse(200, metadata.xml, XML_TYPE);
  }

  async function route(request: Request): Promise<Response> {
    const raw = rawQueryOfRequest(request);
    checkQueryLength(raw, limits);
    const declared = request.headers.get('content-length');
    if (declared !== null && Number(declared) > limits.maxBodyBytes) {
      throw new ServiceError('PayloadTooLarge', `The request body is larger than the limit of ${limits.maxBodyBytes} bytes.`);
    }
    const path = new URL(request.url).pathname;
    if (path === '/v1/token') return token(request);
    if (path !== '/v1' && !path.startsWith('/v1/')) throw new ServiceError('NotFound', `Nothing at ${path.slice(0, 200)}: the service lives under /v1.`);
    const session = authenticate(request);

    const read = (): void => {
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        throw new ServiceError('MethodNotAllowed', `${request.method} is not allowed on ${path}; use GET.`, { headers: { Allow: READ_METHODS } });
      }
    };
    const base = baseUrlOf(request, publicBase);
    if (path === '/v1/account/resources') {
      read();
      options_(decodeQueryOptions(raw), new Set(), 'account resources');
      return jsonResponse(200, profiles.resources(session.sources));
    }
    if (path === '/v1/listings/mls_profiles') {
      read();
      options_(decodeQueryOptions(raw), new Set(), 'MLS profiles');
      return jsonResponse(200, profiles.view(session.sources, new Date(engine.now()).getUTCFullYear()));
    }
    if (path === DATA_PREFIX || path === `${DATA_PREFIX}/`) {
      read();
      format(options_(decodeQueryOptions(raw), new Set(['format']), 'the service document'), 'json', 'the service document');
      return jsonResponse(200, serviceDocument(base), {}, ODATA_JSON_TYPE);
    }
    if (path.startsWith(`${DATA_PREFIX}/`)) {
      const segment = decodePathSegment(path.slice(DATA_PREFIX.length + 1));
      if (segment === '$metadata') {
        read();
        format(options_(decodeQueryOptions(raw), new Set(['format']), '$metadata'), 'xml', '$metadata');
        return metadataResponse();
      }
      if (COLLECTIONS.has(segment)) {
        read();
        return collection(segment as QueryResource, request, session, decodeQueryOptions(raw), base);
      }
      const keyed = /^Property\((.*)\)$/s.exec(segment);
      if (keyed) {
        read();
        return entity(keyed[1], session, decodeQueryOptions(raw), base);
      }
    }
    throw new ServiceError('NotFound', `Nothing at ${path.slice(0, 200)}.`);
  }

  return async (request: Request): Promise<Response> => {
    let response: Response;
    try {
      response = await route(request);
    } catch (error) {
      if (error instanceof QueryError && statusOf(error) !== 500) {
        response = errorResponse(error);
      } else {
        const id = randomUUID();
        try {
          onError(error, id);
        } catch {
          // a failing logger must not turn a 500 into a crash
        }
        response = jsonResponse(500, { error: { code: 'InternalError', message: `The service failed on this request; it was logged with request id ${id}.` } }, { 'X-Request-Id': id });
      }
    }
    return request.method === 'HEAD' ? new Response(null, { status: response.status, headers: response.headers }) : response;
  };
}

/** `'KEY'` (with `''` for a quote) or `ListingKey='KEY'`; anything else is a 400. */
function parseKey(literal: string): string {
  const text = literal.startsWith('ListingKey=') ? literal.slice('ListingKey='.length) : literal;
  if (text.length >= 2 && text.startsWith("'") && text.endsWith("'")) {
    const inner = text.slice(1, -1);
    if (!inner.replace(/''/g, '').includes("'")) return inner.replace(/''/g, "'");
  }
  throw new ServiceError('InvalidKey', `Property(${literal.slice(0, 80)}) is not a key: write Property('KEY'), doubling any quote inside the key.`);
}

const quote = (s: string): string => `'${s.replace(/'/g, "''")}'`;

/** The schemas $metadata describes; a new table (an upsert that adds a field) means new XML. */
type Schemas = readonly TableSchema[];
const schemasOf = (engine: Engine): Schemas => RESOURCE_NAMES.map((r) => engine.store.table(r).schema);
const sameSchemas = (a: Schemas, b: Schemas): boolean => a.every((s, i) => s === b[i]);
