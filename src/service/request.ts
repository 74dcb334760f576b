/**
 * Reading a request: the `ServiceRequest` the handler's core reads (made from a WHATWG Request
 * here, from node:http's IncomingMessage by the adapter), the raw query string (size, then
 * percent-decoding as form clients send it), the `Prefer` header, the body (capped), and the base
 * URL absolute links are built from.
 */
import { ServiceError } from './errors.js';

/**
 * What the service reads of a request, whatever runtime received it: the WHATWG Request of
 * `createHandler`, or node:http's request without a Request being built (`serve`).
 */
export interface ServiceRequest {
  /** Upper case, as the client sent it (GET, HEAD, POST, DELETE, ...). */
  readonly method: string;
  /** The path as a WHATWG URL has it: dot segments resolved, percent-encoding as sent, no query. */
  readonly path: string;
  /** The query string without its `?`, still percent-encoded, exactly as the client sent it. */
  readonly rawQuery: string;
  /** `http://host[:port]` the request was addressed to, as a URL's `origin`. */
  readonly origin: string;
  /** A header's value (repeated ones joined by `, `, as Fetch's Headers does), or null; the name in lower case. */
  header(name: string): string | null;
  /** The body as text, refusing more than `limit` bytes (413) without reading past it. */
  text(limit: number): Promise<string>;
  /** The client's IP address when the runtime tells it (node:http does), else undefined. */
  readonly remoteAddress?: string;
}

/** The ServiceRequest of a WHATWG Request. */
export function serviceRequestOf(request: Request): ServiceRequest {
  const url = new URL(request.url);
  return {
    method: request.method,
    path: url.pathname,
    rawQuery: rawQueryOfRequest(request),
    origin: url.origin,
    header: (name) => request.headers.get(name),
    text: (limit) => readBody(request, limit),
    remoteAddress: remoteAddressOf(request),
  };
}

export interface Limits {
  /** Raw (still percent-encoded) query string, in bytes; longer is a 414. */
  readonly maxQueryStringBytes: number;
  /** Request body, in bytes; larger is a 413. */
  readonly maxBodyBytes: number;
  /** Body of a write (POST under /v1/listings/data/) by an admin account's session, in bytes; larger is a 413. */
  readonly maxWriteBodyBytes: number;
}

export const DEFAULT_LIMITS: Limits = Object.freeze({ maxQueryStringBytes: 16_384, maxBodyBytes: 16_384, maxWriteBodyBytes: 64 * 1024 * 1024 });

/**
 * Where an adapter leaves the request target exactly as the client sent it. `Request.url` is
 * normalized (an apostrophe becomes `%27`), which would make the 414 limit count bytes the client
 * never sent; node:http knows the raw target and attaches it under this symbol.
 */
export const RAW_TARGET: unique symbol = Symbol.for('reso-engine.rawTarget');

/**
 * Where the node:http adapter leaves the client's address on a Request it builds (for a handler
 * that is not `createHandler`'s, such as the test harness's, which passes the Request on to it).
 */
export const REMOTE_ADDRESS: unique symbol = Symbol.for('reso-engine.remoteAddress');

function remoteAddressOf(request: Request): string | undefined {
  const address = (request as Request & { [REMOTE_ADDRESS]?: unknown })[REMOTE_ADDRESS];
  return typeof address === 'string' ? address : undefined;
}

/** The raw query string of a request without its `?` (as the client sent it, still encoded). */
function rawQueryOfRequest(request: Request): string {
  const raw = (request as Request & { [RAW_TARGET]?: unknown })[RAW_TARGET];
  return rawQueryOf(typeof raw === 'string' ? raw : request.url);
}

export function rawQueryOf(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return '';
  const h = url.indexOf('#', q);
  return url.slice(q + 1, h < 0 ? undefined : h);
}

export function checkQueryLength(raw: string, limits: Limits): void {
  // the raw string is ASCII when a client encoded it; count UTF-8 bytes in case it did not
  const bytes = raw.length > limits.maxQueryStringBytes / 3 ? Buffer.byteLength(raw, 'utf8') : raw.length;
  if (bytes > limits.maxQueryStringBytes) {
    throw new ServiceError('QueryStringTooLong', `The query string is ${bytes} bytes long; the limit is ${limits.maxQueryStringBytes} bytes.`);
  }
}

/** Form-style decoding of one component: `+` is a space, `%2B` a plus. */
function decodeComponent(text: string): string {
  return decodeURIComponent(text.includes('+') ? text.replace(/\+/g, ' ') : text);
}

/**
 * The `$` options of a raw query string, percent-decoded and joined with `&` — the text
 * parseQuery takes. Parameters whose names do not start with `$` are dropped here (OData ignores
 * them; dropping them before decoding means an encoded `&` in one cannot smuggle in an option).
 * A `&` that was sent encoded (`%26`) inside a `$filter` string literal stays in the literal.
 */
export function decodeQueryOptions(raw: string): string {
  if (raw === '') return '';
  const kept: string[] = [];
  for (const part of raw.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const rawName = eq < 0 ? part : part.slice(0, eq);
    let name: string;
    try {
      name = decodeComponent(rawName);
    } catch {
      if (rawName.startsWith('$') || rawName.slice(0, 3).toUpperCase() === '%24') throw badEncoding(rawName, undefined);
      continue;
    }
    if (!name.startsWith('$')) continue;
    try {
      kept.push(eq < 0 ? name : `${name}=${decodeComponent(part.slice(eq + 1))}`);
    } catch {
      throw badEncoding(part.slice(eq + 1), name);
    }
  }
  return kept.join('&');
}

function badEncoding(text: string, option: string | undefined): ServiceError {
  const m = /%(?![0-9A-Fa-f]{2})|(?:%[0-9A-Fa-f]{2})+/.exec(text);
  const near = m ? text.slice(Math.max(0, m.index - 10), m.index + 12) : text.slice(0, 20);
  return new ServiceError(
    'InvalidPercentEncoding',
    `${option ?? 'A query option name'} is not valid percent-encoded UTF-8 near '${near}'.`,
    option === undefined ? {} : { option },
  );
}

/** A percent-decoded path segment (`+` stays a plus in paths). */
export function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ServiceError('InvalidPercentEncoding', `The path segment '${segment.slice(0, 60)}' is not valid percent-encoded UTF-8.`);
  }
}

/**
 * `odata.maxpagesize=N` (or `maxpagesize=N`, OData 4.01) from a Prefer header, or undefined when
 * absent or not a positive integer (a preference the server cannot use is ignored, RFC 7240).
 */
export function maxPageSizeOf(prefer: string | null): number | undefined {
  if (prefer === null) return undefined;
  for (const item of prefer.split(',')) {
    const m = /^\s*(?:odata\.)?maxpagesize\s*=\s*"?(\d{1,15})"?\s*$/i.exec(item);
    if (m) {
      const n = Number(m[1]);
      return n > 0 ? n : undefined;
    }
  }
  return undefined;
}

/** The request body as text, refusing more than `limit` bytes (413) without reading past it. */
async function readBody(request: Request, limit: number): Promise<string> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit);
  if (request.body === null) return '';
  const reader: ReadableStreamDefaultReader<Uint8Array> = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function tooLarge(limit: number): ServiceError {
  return new ServiceError('PayloadTooLarge', `The request body is larger than the limit of ${limit} bytes.`);
}
