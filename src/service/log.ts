/**
 * The access log: one structured line per request through pino, as JSON (one object per line,
 * for log shippers) or `pretty` (one aligned human line, formatted here: pino-pretty would pull in
 * a dozen packages for what is a dozen lines). A line says what was asked and how it went, never
 * what was sent: the query's option *names* but no values (a `$filter` can hold a client's
 * search), no header but the request id, no body (the token route's form holds a password),
 * and the account by name only. The request id is the client's `X-Request-Id` when it is a sane
 * token (at most 128 characters of letters, digits and `-._~:@+=/`), else a fresh UUID; it is
 * echoed on the response, so a client's report and the server's line meet.
 */
import { randomUUID } from 'node:crypto';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { ServiceRequest } from './request.js';

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
export const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export interface AccessLogOptions {
  /** Lines below this level are not written (default info; health, readiness and metrics requests log at debug). */
  readonly level?: LogLevel;
  /** `json` (default) or `pretty`. */
  readonly format?: 'json' | 'pretty';
  /** Where lines go (default stdout): anything with `write(line)`. */
  readonly destination?: DestinationStream;
}

/** What one line says of a request. */
export interface AccessEntry {
  readonly reqId: string;
  readonly method: string;
  readonly path: string;
  /** The names of the query's parameters, in order, each once (never their values). */
  readonly options: readonly string[];
  readonly route: string;
  readonly resource: string | null;
  readonly account: string | null;
  readonly status: number;
  /** Until the response was ready to write; for a streamed page, until its last byte was handed on. */
  readonly durationMs: number;
  /** Body bytes as sent (after compression); 0 for HEAD, 304 and 204. */
  readonly bytes: number;
  /** The plan's access path (`scan`, `search`, `geo`, `range`, ...) for a query, else null. */
  readonly plan: string | null;
  readonly rows: number | null;
}

const REQUEST_ID = /^[A-Za-z0-9\-._~:@+=/]{1,128}$/;
const MAX_OPTIONS = 32;
const MAX_PATH = 512;
/** Routes polled by machines: their lines are debug, so a probe every second does not drown the requests. */
const QUIET_ROUTES: ReadonlySet<string> = new Set(['health', 'ready', 'metrics']);

/** The request's id: its X-Request-Id when that is a sane token, else a new UUID. */
export function requestIdOf(request: ServiceRequest): string {
  const given = request.header('x-request-id');
  return given !== null && REQUEST_ID.test(given) ? given : randomUUID();
}

/** The distinct parameter names of a raw query string (percent-decoded where that works; values never read). */
export function optionNamesOf(rawQuery: string): string[] {
  if (rawQuery === '') return [];
  const names = new Set<string>();
  for (const part of rawQuery.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const raw = (eq < 0 ? part : part.slice(0, eq)).slice(0, 64);
    let name: string;
    try {
      name = decodeURIComponent(raw.replace(/\+/g, ' '));
    } catch {
      name = raw;
    }
    names.add(name.slice(0, 40));
    if (names.size >= MAX_OPTIONS) break;
  }
  return [...names];
}

/** A destination that writes pino's JSON lines as one human line each. */
function prettyDestination(out: DestinationStream): DestinationStream {
  return {
    write(line: string): void {
      let o: Record<string, unknown>;
      try {
        o = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      out.write(`${prettyLine(o)}\n`);
    },
  };
}

const LEVEL_NAMES: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** `2025-06-01T10:00:00.000Z INFO  200 GET /v1/listings/data/Property ($filter,$top) 3.2 ms 1,234 B demo scan 25 rows [req-id]` */
export function prettyLine(o: Record<string, unknown>): string {
  const level = (LEVEL_NAMES[o.level as number] ?? String(o.level)).padEnd(5);
  const time = typeof o.time === 'string' ? o.time : new Date(Number(o.time)).toISOString();
  if (o.status === undefined) return `${time} ${level} ${String(o.msg ?? '')}${o.reqId === undefined ? '' : ` [${String(o.reqId)}]`}`;
  const options = Array.isArray(o.options) && o.options.length > 0 ? ` (${o.options.join(',')})` : '';
  const parts = [
    `${time} ${level} ${String(o.status)} ${String(o.method)} ${String(o.path)}${options}`,
    `${String(o.durationMs)} ms`,
    `${Number(o.bytes).toLocaleString('en-US')} B`,
    o.account === null ? '-' : String(o.account),
  ];
  if (o.plan !== null && o.plan !== undefined) parts.push(String(o.plan));
  if (o.rows !== null && o.rows !== undefined) parts.push(`${String(o.rows)} rows`);
  parts.push(`[${String(o.reqId)}]`);
  return parts.join(' ');
}

/** A pino logger writing the access log as asked. */
export function accessLogger(options: AccessLogOptions = {}): Logger {
  const level = options.level ?? 'info';
  if (!LOG_LEVELS.includes(level)) throw new TypeError(`log.level is one of ${LOG_LEVELS.join(', ')}, got '${String(level)}'`);
  const format = options.format ?? 'json';
  if (format !== 'json' && format !== 'pretty') throw new TypeError(`log.format is json or pretty, got '${String(format)}'`);
  const out: DestinationStream = options.destination ?? pino.destination({ dest: 1, sync: false });
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      // the only place a secret could enter is an error object; the service logs no headers or bodies
      redact: { paths: ['authorization', 'password', 'access_token', '*.authorization', '*.password', '*.access_token'], censor: '[redacted]' },
    },
    format === 'pretty' ? prettyDestination(out) : out,
  );
}

/** Writes one access line (at debug for the polled routes, else info). */
export function logAccess(logger: Logger, entry: AccessEntry): void {
  const path = entry.path.length > MAX_PATH ? `${entry.path.slice(0, MAX_PATH)}...` : entry.path;
  const line = { ...entry, path };
  if (QUIET_ROUTES.has(entry.route)) logger.debug(line, 'request');
  else logger.info(line, 'request');
}

/** Writes a defect (a 500) with its stack, under the request id its response names. */
export function logDefect(logger: Logger, error: unknown, reqId: string): void {
  const err = error instanceof Error ? { type: error.name, message: error.message, stack: error.stack } : { message: String(error) };
  logger.error({ reqId, err }, 'internal error');
}

/** Whether a log option is a pino Logger already (rather than options to make one). */
export function isLogger(value: AccessLogOptions | Logger): value is Logger {
  return typeof (value as Logger).info === 'function' && typeof (value as Logger).child === 'function';
}
