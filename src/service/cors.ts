/**
 * Cross-origin requests (the Fetch standard's CORS protocol) for browser pages on other origins:
 * a preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered 204 before
 * authentication (browsers send no Authorization on a preflight), and every response to an allowed
 * origin names it in `Access-Control-Allow-Origin` with the headers a client may read. An origin
 * that is not allowed gets the same answers without any CORS header: the browser then refuses the
 * page the response, and nothing looks like an error to a server log. No credentials mode: the
 * service authenticates with bearer tokens, never cookies, so `Allow-Credentials` is not sent.
 */
import type { ServiceRequest } from './request.js';
import type { ServiceResponse } from './respond.js';

export interface CorsOptions {
  /** Allowed origins (`https://app.example.com`, `http://localhost:3000`), or `*` for any origin. */
  readonly origins: readonly string[];
  /** How long a browser may cache a preflight's answer, seconds (default 600). */
  readonly maxAgeSeconds?: number;
}

const ALLOW_METHODS = 'GET, HEAD, POST, DELETE, OPTIONS';
const ALLOW_HEADERS = 'Authorization, Content-Type, Prefer, OData-Version, OData-MaxVersion, If-None-Match, X-Request-Id, Accept, Accept-Encoding';
/** What a page may read besides the CORS-safelisted headers: the service's own and the rate limit's (X-RateLimit-*, sent by the test harness's limit profiles). */
const EXPOSE_HEADERS = [
  'OData-Version',
  'Preference-Applied',
  'ETag',
  'Retry-After',
  'X-Request-Id',
  'WWW-Authenticate',
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
].join(', ');
/** An origin as a browser serializes it: scheme, host, optional port; nothing else (no path, no userinfo). */
const ORIGIN = /^(https?):\/\/([A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::(\d{1,5}))?$/i;

/** An origin in the form browsers send (lower-case scheme and host, default port dropped), or null when it is none. */
export function normalizeOrigin(text: string): string | null {
  const m = ORIGIN.exec(text.trim());
  if (m === null) return null;
  const scheme = m[1].toLowerCase();
  const port = m[3] === undefined || (scheme === 'http' && m[3] === '80') || (scheme === 'https' && m[3] === '443') ? '' : `:${Number(m[3])}`;
  return `${scheme}://${m[2].toLowerCase()}${port}`;
}

export class Cors {
  private readonly any: boolean;
  private readonly allowed: ReadonlySet<string>;
  private readonly maxAge: string;

  constructor(options: CorsOptions) {
    if (!Array.isArray(options.origins)) throw new TypeError('cors.origins is an array of origins such as https://app.example.com, or ["*"]');
    const allowed = new Set<string>();
    let any = false;
    for (const o of options.origins) {
      if (o === '*') {
        any = true;
        continue;
      }
      const n = typeof o === 'string' ? normalizeOrigin(o) : null;
      if (n === null) throw new TypeError(`cors: '${String(o)}' is not an origin (scheme://host[:port], no path), nor *`);
      allowed.add(n);
    }
    const maxAge = options.maxAgeSeconds ?? 600;
    if (!Number.isInteger(maxAge) || maxAge < 0) throw new TypeError('cors.maxAgeSeconds is a whole number of seconds');
    this.any = any;
    this.allowed = allowed;
    this.maxAge = String(maxAge);
  }

  /** The request's Origin when it is allowed, as sent (browsers compare it byte for byte), else null. */
  private allowedOrigin(request: ServiceRequest): string | null {
    const origin = request.header('origin');
    if (origin === null || origin.length > 300) return null;
    const n = normalizeOrigin(origin);
    if (n === null) return null;
    return this.any || this.allowed.has(n) ? origin.trim() : null;
  }

  /** The 204 answer to a preflight, or null when the request is not one. */
  preflight(request: ServiceRequest): ServiceResponse | null {
    if (request.method !== 'OPTIONS' || request.header('origin') === null || request.header('access-control-request-method') === null) return null;
    const headers: Record<string, string> = { Allow: ALLOW_METHODS, Vary: 'Origin', 'Cache-Control': 'no-store' };
    const origin = this.allowedOrigin(request);
    if (origin !== null) {
      headers['Access-Control-Allow-Origin'] = origin;
      headers['Access-Control-Allow-Methods'] = ALLOW_METHODS;
      headers['Access-Control-Allow-Headers'] = ALLOW_HEADERS;
      headers['Access-Control-Max-Age'] = this.maxAge;
    }
    return { status: 204, headers, body: null };
  }

  /** Adds the CORS headers of an allowed origin to a response, and `Vary: Origin` to every response. */
  decorate(request: ServiceRequest, headers: Record<string, string>): void {
    headers.Vary = headers.Vary === undefined ? 'Origin' : headers.Vary.includes('Origin') ? headers.Vary : `${headers.Vary}, Origin`;
    const origin = this.allowedOrigin(request);
    if (origin === null) return;
    headers['Access-Control-Allow-Origin'] = origin;
    headers['Access-Control-Expose-Headers'] = EXPOSE_HEADERS;
  }
}
