/**
 * The upstream RESO Web API, as the replicator sees it: GET requests with the bearer token, JSON
 * pages checked for shape, transient failures retried, every other failure a ReplicationError
 * naming the URL. Requests go through an injectable `fetch` (Node's global by default) and waits
 * through an injectable `sleep`, so tests control both.
 */
import { ReplicationError } from './errors.js';

/** The part of the Fetch API the replicator uses. */
export type FetchLike = (url: string, init: { headers: Record<string, string> }) => Promise<Response>;

export interface RetryInfo {
  readonly url: string;
  /** The status that is retried, or null for a network failure. */
  readonly status: number | null;
  readonly attempt: number;
  readonly delayMs: number;
}

export interface UpstreamOptions {
  /** The data service root, e.g. `http://127.0.0.1:8080/v1/listings/data`. */
  readonly root: string;
  readonly token: string;
  readonly fetch: FetchLike;
  readonly sleep: (ms: number) => Promise<void>;
  /** Epoch ms, for a Retry-After given as an HTTP date. */
  readonly now: () => number;
  /** Retries of one request after a transient failure (429, 502, 503, 504, network). */
  readonly maxRetries: number;
  /** The longest wait honoured; a Retry-After beyond it fails at once. */
  readonly maxRetryDelayMs: number;
  readonly onRetry?: (info: RetryInfo) => void;
}

/** One page of a collection. */
export interface Page {
  readonly url: string;
  readonly value: ReadonlyArray<Record<string, unknown>>;
  /** Whether the upstream said more rows remain (`@odata.nextLink`). */
  readonly more: boolean;
}

const TRANSIENT = new Set([429, 502, 503, 504]);
const FIRST_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 30_000;
/** How much of an upstream error body a message quotes. */
const QUOTE_CHARS = 300;

/**
 * The data service root of a base URL: `http://host` and `http://host/v1` mean reso-engine's
 * `/v1/listings/data`; any other path is taken as the OData service root itself.
 */
export function serviceRoot(from: string): string {
  let url: URL;
  try {
    url = new URL(from);
  } catch {
    throw new ReplicationError('InvalidArgument', `the upstream URL '${from}' is not an absolute URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ReplicationError('InvalidArgument', `the upstream URL '${from}' is not an http(s) URL`);
  if (url.search !== '' || url.hash !== '') throw new ReplicationError('InvalidArgument', `the upstream URL '${from}' must not have a query or fragment`);
  if (url.username !== '' || url.password !== '')
    throw new ReplicationError('InvalidArgument', 'the upstream URL must not carry credentials; pass the bearer token separately');
  let pathname = url.pathname.replace(/\/+$/, '');
  if (pathname === '') pathname = '/v1/listings/data';
  else if (pathname.endsWith('/v1')) pathname += '/listings/data';
  return `${url.origin}${pathname}`;
}

/** A query string of OData options, values percent-encoded (`$` names kept as they are). */
export function queryString(options: Readonly<Record<string, string | undefined>>): string {
  const parts: string[] = [];
  for (const [name, value] of Object.entries(options)) if (value !== undefined) parts.push(`${name}=${encodeURIComponent(value)}`);
  return parts.length === 0 ? '' : `?${parts.join('&')}`;
}

/** `'text'` with quotes doubled: an OData string literal. */
export const stringLiteral = (s: string): string => `'${s.replace(/'/g, "''")}'`;

export class Upstream {
  /** Requests sent, retries included. */
  requests = 0;

  constructor(private readonly options: UpstreamOptions) {}

  get root(): string {
    return this.options.root;
  }

  /** A page of `resource` with these options, asking for at most `pageSize` rows (`Prefer: odata.maxpagesize`). */
  async page(resource: string, options: Readonly<Record<string, string | undefined>>, pageSize: number): Promise<Page> {
    const url = `${this.options.root}/${resource}${queryString(options)}`;
    const text = await this.get(url, { Accept: 'application/json', Prefer: `odata.maxpagesize=${pageSize}` });
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw new ReplicationError('BadResponse', `the upstream's answer is not JSON (${(err as Error).message})`, { url, cause: err });
    }
    if (typeof body !== 'object' || body === null || !Array.isArray((body as { value?: unknown }).value)) {
      throw new ReplicationError('BadResponse', 'the upstream\'s answer has no "value" array', { url });
    }
    const value = (body as { value: unknown[] }).value;
    value.forEach((row, i) => {
      if (typeof row !== 'object' || row === null || Array.isArray(row)) throw new ReplicationError('BadResponse', `value[${i}] is not a record`, { url });
    });
    const next = (body as Record<string, unknown>)['@odata.nextLink'];
    if (next !== undefined && typeof next !== 'string') throw new ReplicationError('BadResponse', '@odata.nextLink is not a string', { url });
    return { url, value: value as Array<Record<string, unknown>>, more: typeof next === 'string' };
  }

  /**
   * The text of `GET /v1/account/resources` beside a reso-engine data root (the sources the token
   * sees), or null when the root is not one or the upstream answers 404.
   */
  async account(): Promise<string | null> {
    if (!this.options.root.endsWith('/v1/listings/data')) return null;
    return this.orNull(this.get(`${this.options.root.slice(0, -'/listings/data'.length)}/account/resources`, { Accept: 'application/json' }));
  }

  /** One entity by its key path (`EntityEvent(42)`) parsed, or null for a 404. */
  async entity(path: string): Promise<Record<string, unknown> | null> {
    const url = `${this.options.root}/${path}`;
    const text = await this.orNull(this.get(url, { Accept: 'application/json' }));
    if (text === null) return null;
    try {
      const body = JSON.parse(text) as unknown;
      if (typeof body === 'object' && body !== null && !Array.isArray(body)) return body as Record<string, unknown>;
    } catch {
      // reported below
    }
    throw new ReplicationError('BadResponse', "the upstream's answer is not a JSON record", { url });
  }

  private async orNull(answer: Promise<string>): Promise<string | null> {
    try {
      return await answer;
    } catch (err) {
      if (err instanceof ReplicationError && err.code === 'HttpError' && err.status === 404) return null;
      throw err;
    }
  }

  /** `$metadata` (CSDL XML) as text. */
  metadata(): Promise<string> {
    return this.get(`${this.options.root}/$metadata`, { Accept: 'application/xml' });
  }

  /** GET with retries; the body of a 2xx answer, or a ReplicationError. */
  private async get(url: string, headers: Record<string, string>): Promise<string> {
    const { maxRetries, maxRetryDelayMs } = this.options;
    for (let attempt = 1; ; attempt++) {
      this.requests++;
      let status: number;
      let retryAfter: string | null;
      let text: string;
      try {
        const res = await this.options.fetch(url, { headers: { ...headers, Authorization: `Bearer ${this.options.token}` } });
        status = res.status;
        retryAfter = res.headers.get('retry-after');
        text = await res.text();
      } catch (err) {
        if (attempt > maxRetries) {
          throw new ReplicationError('NetworkError', `the upstream cannot be reached: ${errorText(err)}${tries(attempt)}`, { url, cause: err });
        }
        await this.wait(url, null, attempt, backoff(attempt));
        continue;
      }
      if (status >= 200 && status < 300) return text;
      if (TRANSIENT.has(status)) {
        const asked = retryAfterMs(retryAfter, this.options.now());
        if (asked !== null && asked > maxRetryDelayMs) {
          throw new ReplicationError(
            'HttpError',
            `the upstream answered ${status} and asks to wait ${Math.ceil(asked / 1000)} s, more than the ${Math.ceil(maxRetryDelayMs / 1000)} s allowed${upstreamSays(text)}`,
            { url, status },
          );
        }
        if (attempt <= maxRetries) {
          await this.wait(url, status, attempt, asked ?? backoff(attempt));
          continue;
        }
      }
      if (status === 401 || status === 403) {
        throw new ReplicationError('Unauthorized', `the upstream refused the token (${status})${upstreamSays(text)}`, { url, status });
      }
      throw new ReplicationError('HttpError', `the upstream answered ${status}${TRANSIENT.has(status) ? tries(attempt) : ''}${upstreamSays(text)}`, {
        url,
        status,
      });
    }
  }

  private async wait(url: string, status: number | null, attempt: number, delayMs: number): Promise<void> {
    this.options.onRetry?.({ url, status, attempt, delayMs });
    await this.options.sleep(delayMs);
  }
}

/** 1 s, 2 s, 4 s, ... up to 30 s before retry n (1-based). Deterministic: no jitter. */
const backoff = (attempt: number): number => Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (attempt - 1));

const tries = (attempts: number): string => ` (after ${attempts} attempt${attempts === 1 ? '' : 's'})`;

/** Retry-After as delay-seconds or an HTTP date (RFC 9110 §10.2.3), in ms; null when absent or unreadable. */
export function retryAfterMs(value: string | null, now: number): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}

/** The upstream's own error code and message (§5 error object), or the start of its body. */
function upstreamSays(text: string): string {
  try {
    const e = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }).error;
    if (e && typeof e.message === 'string') return `: ${typeof e.code === 'string' ? `${e.code}: ` : ''}${e.message.slice(0, QUOTE_CHARS)}`;
  } catch {
    // not an error object
  }
  const t = text.trim();
  return t === '' ? '' : `: ${t.slice(0, QUOTE_CHARS)}`;
}

/** What `$metadata` says of one entity type. */
export interface EntityTypeInfo {
  readonly key: string | null;
  /** Property name → Edm type (`Edm.DateTimeOffset`, `Collection(Edm.String)`, ...). */
  readonly properties: ReadonlyMap<string, string>;
}

const attribute = (attrs: string, name: string): string | null => new RegExp(`\\b${name}="([^"]*)"`).exec(attrs)?.[1] ?? null;

/**
 * The entity types of a CSDL XML document by name (namespace prefixes on elements allowed). A
 * reading of what replication needs, not a CSDL parser: names, keys and property types.
 */
export function entityTypes(xml: string): Map<string, EntityTypeInfo> {
  const out = new Map<string, EntityTypeInfo>();
  for (const m of xml.matchAll(/<(?:[\w.-]+:)?EntityType\b([^>]*[^/>])?>([\s\S]*?)<\/(?:[\w.-]+:)?EntityType>/g)) {
    const name = attribute(m[1] ?? '', 'Name');
    if (name === null) continue;
    const ref = /<(?:[\w.-]+:)?PropertyRef\b([^>]*)>/.exec(m[2]);
    const properties = new Map<string, string>();
    for (const p of m[2].matchAll(/<(?:[\w.-]+:)?Property\b([^>]*)>/g)) {
      const pn = attribute(p[1], 'Name');
      const type = attribute(p[1], 'Type');
      if (pn !== null && type !== null) properties.set(pn, type);
    }
    out.set(name, { key: ref ? attribute(ref[1], 'Name') : null, properties });
  }
  return out;
}
