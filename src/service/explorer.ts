/**
 * The explorer: a page for looking at the data without writing requests by hand. Its static files
 * (the package's `explorer/` folder, read once when the handler is created) are served at `/` and
 * `/explorer` (the page) and `/explorer/<file>`, without a token, with a Content-Security-Policy
 * that lets the page reach nothing but this origin. The page itself uses only the public API, plus
 * `GET /v1/listings/explain/{Resource}?<query>`: the plan a collection query would run with, for
 * the account that asks, as `{"resource","plan"}`.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ExplainOptions, QueryInput } from '../engine-options.js';
import { explainText } from '../plan/explain.js';
import type { Plan } from '../plan/plan.js';
import { ServiceError } from './errors.js';
import { TOP_LIMITS, type QueryResource } from '../engine.js';
import { PostgresEngine } from '../pg/engine.js';
import { decodeQueryOptions, maxPageSizeOf, type ServiceRequest } from './request.js';
import { jsonResponse, type ServiceResponse } from './respond.js';

/**
 * Everything the page loads comes from this origin: no inline script or style, no other host to
 * connect to, no plugins, no framing, and a form or `<base>` cannot point elsewhere.
 */
export const EXPLORER_CSP = "default-src 'self'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";

/**
 * The files change only with the package, but a browser must not keep an old page after an
 * upgrade: it revalidates every time (`no-cache`), and the ETag makes that a 304 without a body.
 */
const CACHE_CONTROL = 'no-cache';

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};

const PAGE = 'index.html';
const EXPLAIN_PREFIX = '/v1/listings/explain/';
const RESOURCES: ReadonlySet<string> = new Set<QueryResource>(['Property', 'Media', 'OpenHouse', 'Member', 'Office', 'Lookup', 'EntityEvent']);

interface StaticFile {
  readonly body: Buffer;
  readonly type: string;
  /** Weak: the service may send the file compressed (encoding.ts), a different byte sequence. */
  readonly etag: string;
}

/** The package's `explorer/` folder (beside `src/` and `dist/`, so both resolve it). */
export const EXPLORER_DIR = fileURLToPath(new URL('../../explorer/', import.meta.url));

/**
 * The files of a folder by name (not its subfolders; a name with a type the table does not know
 * is left out). A folder that is not there gives none: the service then has no page, and the
 * routes answer 404.
 */
export function loadExplorerFiles(dir: string = EXPLORER_DIR): ReadonlyMap<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return files;
  }
  for (const name of names.sort()) {
    const type = TYPES[path.extname(name).toLowerCase()];
    const file = path.join(dir, name);
    if (type === undefined || !statSync(file).isFile()) continue;
    const body = readFileSync(file);
    const etag = `W/"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    files.set(name, { body, type, etag });
  }
  return files;
}

/** Both routes read only: GET and HEAD. */
function readOnly(request: ServiceRequest): void {
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    throw new ServiceError('MethodNotAllowed', `${request.method} is not allowed on ${request.path.slice(0, 200)}; use GET.`, {
      headers: { Allow: 'GET, HEAD' },
    });
  }
}

function staticResponse(file: StaticFile): ServiceResponse {
  const headers: Record<string, string> = {
    'Cache-Control': CACHE_CONTROL,
    ETag: file.etag,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
  };
  if (file.type.startsWith('text/html')) {
    headers['Content-Security-Policy'] = EXPLORER_CSP;
    headers['X-Frame-Options'] = 'DENY';
  }
  // If-None-Match and the 304 are withValidators' (etag.ts), which keeps this tag
  return { status: 200, headers: { 'Content-Type': file.type, 'Content-Length': String(file.body.byteLength), ...headers }, body: file.body };
}

/**
 * The answer to a path outside `/v1` when it is the explorer's, else null (the caller's 404).
 * `/` and `/explorer` are the page; its relative links (`explorer/app.js`, `v1/token`) resolve the
 * same from both. `/explorer/` would resolve them one folder too deep, so it is sent to
 * `/explorer`; any other name under `/explorer/` is the file of that name or a 404.
 */
export function explorerResponse(files: ReadonlyMap<string, StaticFile>, request: ServiceRequest): ServiceResponse | null {
  const p = request.path;
  if (p !== '/' && p !== '/explorer' && !p.startsWith('/explorer/')) return null;
  if (files.size === 0) throw new ServiceError('NotFound', `Nothing at ${p.slice(0, 200)}: this installation has no explorer page.`);
  readOnly(request);
  if (p === '/explorer/' || p === `/explorer/${PAGE}`) {
    // relative, so it holds behind a proxy that adds a path prefix
    return { status: 308, headers: { Location: '../explorer', 'Content-Length': '0' }, body: null };
  }
  const name = p === '/' || p === '/explorer' ? PAGE : p.slice('/explorer/'.length);
  const file = files.get(name);
  if (file === undefined) throw new ServiceError('NotFound', `The explorer has no file ${JSON.stringify(name.slice(0, 200))}.`);
  return staticResponse(file);
}

/** What the explain route needs of an engine: both the in-memory Engine and PostgresEngine have it. */
interface ExplainingEngine {
  explain(resource: QueryResource, query: QueryInput, options: ExplainOptions & { format: 'json' }): Plan | Promise<Plan>;
}

function canExplain(engine: unknown): engine is ExplainingEngine {
  return typeof (engine as { explain?: unknown }).explain === 'function';
}

/** The explorer's two routes, as the handler dispatches to them. */
export interface Explorer {
  /** A path outside `/v1`: the page's answer, or null when the path is not the page's (the caller's 404). */
  page(request: ServiceRequest): ServiceResponse | null;
  /** An authenticated path under `/v1`: the explain route's answer, or null when the path is another. */
  explain(request: ServiceRequest, sources: readonly string[]): Promise<ServiceResponse> | null;
}

/** The explorer of a handler: its files read now, from `dir` (default: the package's). */
export function createExplorer(engine: unknown, dir: string = EXPLORER_DIR): Explorer {
  const files = loadExplorerFiles(dir);
  return {
    page: (request) => explorerResponse(files, request),
    explain: (request, sources) => (request.path.startsWith(EXPLAIN_PREFIX) ? explainResponse(engine, request, sources) : null),
  };
}

/**
 * `GET /v1/listings/explain/{Resource}?<query>`: `{"resource","plan"}`, the plan as the text of
 * `engine.explain` for the account's sources, the query's errors as on the collection (400s).
 * The text leaves out the row counts the in-memory engine adds to some lines: they count every
 * source's rows, which an account must not learn. Over PostgreSQL it is that backend's text
 * (its plan, then a line on how the database runs the filter).
 */
export async function explainResponse(engine: unknown, request: ServiceRequest, sources: readonly string[]): Promise<ServiceResponse> {
  const resource = request.path.slice(EXPLAIN_PREFIX.length);
  readOnly(request);
  if (!RESOURCES.has(resource)) {
    throw new ServiceError('NotFound', `Nothing to explain at ${request.path.slice(0, 200)}: name a collection, one of ${[...RESOURCES].join(', ')}.`);
  }
  if (!canExplain(engine)) throw new ServiceError('ExplainUnavailable', 'This backend does not explain its queries.');
  // the page size a collection request with the same Prefer header would get
  const prefer = maxPageSizeOf(request.header('prefer'));
  const maxPageSize = prefer === undefined ? undefined : Math.min(prefer, TOP_LIMITS[resource as QueryResource]);
  const query = decodeQueryOptions(request.rawQuery);
  // PostgreSQL's text counts no rows and says how the backend runs the filter; the in-memory
  // engine's counts rows of every source, so its text is made again from the plan without them
  const text =
    engine instanceof PostgresEngine
      ? await engine.explain(resource as QueryResource, query, { sources, maxPageSize })
      : explainText(await engine.explain(resource as QueryResource, query, { format: 'json', sources, maxPageSize }), { sources, accessRows: null });
  return jsonResponse(200, { resource, plan: text }, { 'Cache-Control': 'no-store' });
}
