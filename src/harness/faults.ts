/**
 * Fault injection for the test harness: rules that make matching requests fail the way hosted
 * listings APIs do (a status with a body in the service's error format, 429 with Retry-After and
 * rate-limit headers, latency, a dropped connection, a truncated or slow body).
 *
 * A rule matches by method, path pattern (`*` within one path segment, `**` across segments),
 * resource and the query options present. Each rule keeps its own count of matching requests and
 * its own seeded random stream, which draws one number per matching request whether or not the
 * rule fires: the same seed and the same requests give the same faults, whatever other rules do.
 * The first rule (in order) that fires applies; `nth` fires on the Nth matching request only,
 * `probability` on that share of them, `times` caps how often it fires.
 */
import { Rng } from '../generate/prng.js';
import type { QueryErrorDetail } from '../errors.js';
import { ServiceError } from '../service/errors.js';
import { JSON_TYPE, ODATA_VERSION } from '../service/respond.js';

export type FaultAction =
  | { readonly kind: 'latency'; readonly ms: number | readonly [number, number] }
  | { readonly kind: 'status'; readonly status: number; readonly code?: string; readonly message?: string; readonly retryAfter?: number }
  | { readonly kind: 'drop' }
  | { readonly kind: 'truncate'; readonly bytes: number }
  | { readonly kind: 'slow'; readonly chunkBytes: number; readonly delayMs: number };

export interface FaultRule {
  /** Names the rule in the request journal (default `rule <index>`). */
  readonly name?: string;
  readonly method?: string;
  /** A path pattern: `/v1/listings/data/Property*`, `/v1/listings/data/*`, `/v1/**`. */
  readonly path?: string;
  /** The entity set the path addresses (`Property`, `Media`, ...). */
  readonly resource?: string;
  /** Query options that must all be present (`$expand`, `$skiptoken`, ...; case-insensitive). */
  readonly options?: readonly string[];
  /** Fire on the Nth matching request only (1 is the first). */
  readonly nth?: number;
  /** The share of matching requests it fires on (default 1). */
  readonly probability?: number;
  /** Seeds this rule's random stream (default: the fault set's seed and the rule's index). */
  readonly seed?: string | number;
  /** Fire at most this many times. */
  readonly times?: number;
  readonly fault: FaultAction;
}

/** A fault chosen for one request. */
export interface FaultDecision {
  readonly rule: string;
  readonly action: FaultAction;
  /** The latency to wait, ms (drawn for a `latency` range). */
  readonly delayMs: number;
}

export interface RequestFacts {
  readonly method: string;
  readonly path: string;
  /** Query option names as sent, before decoding values. */
  readonly options: readonly string[];
}

/** The paths the service answers (a rule's literal prefix must lead to one of them). */
const ROUTES = [
  '/v1/token',
  '/v1/account/resources',
  '/v1/listings/mls_profiles',
  '/v1/listings/data/',
  '/v1/listings/data/$metadata',
  ...['Property', 'Media', 'OpenHouse', 'Member', 'Office', 'Lookup', 'EntityEvent'].map((r) => `/v1/listings/data/${r}`),
];
const RESOURCES = new Set(['Property', 'Media', 'OpenHouse', 'Member', 'Office', 'Lookup', 'EntityEvent']);
const KINDS = new Set(['latency', 'status', 'drop', 'truncate', 'slow']);
const RULE_KEYS = new Set(['name', 'method', 'path', 'resource', 'options', 'nth', 'probability', 'seed', 'times', 'fault']);
const CODE_BY_STATUS: Readonly<Record<number, string>> = {
  429: 'RateLimited',
  500: 'InternalError',
  502: 'BadGateway',
  503: 'ServiceUnavailable',
  504: 'GatewayTimeout',
};
const MAX_DELAY_MS = 600_000;

/** The entity set a data path addresses (`/v1/listings/data/Property('K')/Media` → Property), or null. */
export function resourceOfPath(path: string): string | null {
  const m = /^\/v1\/listings\/data\/([A-Za-z]+)/.exec(path);
  return m !== null && RESOURCES.has(m[1]) ? m[1] : null;
}

function patternRegExp(pattern: string): RegExp {
  let out = '^';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*' && pattern[i + 1] === '*') {
      out += '.*';
      i++;
    } else if (c === '*') out += '[^/]*';
    else out += c.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`${out}$`);
}

/** Checks rules as given (JSON from a file or an admin call): every problem is a detail of one 400 `InvalidFaultRule`. */
export function checkFaultRules(input: unknown): FaultRule[] {
  const list = Array.isArray(input)
    ? (input as unknown[])
    : typeof input === 'object' && input !== null && Array.isArray((input as { rules?: unknown }).rules)
      ? (input as { rules: unknown[] }).rules
      : null;
  if (list === null) throw new ServiceError('InvalidFaultRule', 'Fault rules are a JSON array of rules, or an object with a "rules" array.');
  const details: QueryErrorDetail[] = [];
  list.forEach((rule, i) => {
    for (const problem of problemsOf(rule)) details.push({ code: 'InvalidFaultRule', message: problem.message, target: `rules[${i}]${problem.at}` });
  });
  if (details.length > 0) {
    throw new ServiceError(
      'InvalidFaultRule',
      `${details.length === 1 ? 'A fault rule is' : `${details.length} problems make the fault rules`} invalid: ${details[0].target}: ${details[0].message}`,
      {
        details,
      },
    );
  }
  return list as FaultRule[];
}

function problemsOf(rule: unknown): Array<{ at: string; message: string }> {
  const out: Array<{ at: string; message: string }> = [];
  const add = (at: string, message: string): void => void out.push({ at, message });
  if (typeof rule !== 'object' || rule === null || Array.isArray(rule)) return [{ at: '', message: 'a rule is an object with a "fault" and what it matches.' }];
  const r = rule as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!RULE_KEYS.has(k)) add(`.${k}`, `unknown member; a rule has ${[...RULE_KEYS].join(', ')}.`);
  if (r.name !== undefined && (typeof r.name !== 'string' || r.name.length === 0 || r.name.length > 100))
    add('.name', 'a name is a string of 1 to 100 characters.');
  if (r.method !== undefined && (typeof r.method !== 'string' || !/^[A-Z]+$/.test(r.method)))
    add('.method', 'a method is an upper-case HTTP method such as GET.');
  if (r.path !== undefined) {
    if (typeof r.path !== 'string' || !r.path.startsWith('/') || r.path.length > 500) add('.path', 'a path pattern starts with / (at most 500 characters).');
    else {
      const literal = r.path.split('*')[0];
      if (!ROUTES.some((route) => route.startsWith(literal) || literal.startsWith(route))) {
        add(
          '.path',
          `'${r.path.slice(0, 80)}' matches no path of the service (they start with /v1/token, /v1/account, /v1/listings/mls_profiles or /v1/listings/data/).`,
        );
      }
    }
  }
  if (r.resource !== undefined && (typeof r.resource !== 'string' || !RESOURCES.has(r.resource)))
    add('.resource', `a resource is one of ${[...RESOURCES].join(', ')}.`);
  if (r.options !== undefined && (!Array.isArray(r.options) || r.options.some((o) => typeof o !== 'string' || !/^\$?[A-Za-z]+$/.test(o)))) {
    add('.options', 'options is an array of query option names such as "$expand".');
  }
  const positiveInt = (k: string): void => {
    if (r[k] !== undefined && !(Number.isInteger(r[k]) && (r[k] as number) >= 1)) add(`.${k}`, `${k} is a whole number of at least 1.`);
  };
  positiveInt('nth');
  positiveInt('times');
  if (r.probability !== undefined && !(typeof r.probability === 'number' && r.probability >= 0 && r.probability <= 1))
    add('.probability', 'probability is a number from 0 to 1.');
  if (r.seed !== undefined && typeof r.seed !== 'string' && !(typeof r.seed === 'number' && Number.isFinite(r.seed)))
    add('.seed', 'a seed is a string or a number.');
  const f = r.fault;
  if (typeof f !== 'object' || f === null || Array.isArray(f)) {
    add('.fault', `a rule needs a fault: an object whose "kind" is one of ${[...KINDS].join(', ')}.`);
    return out;
  }
  const a = f as Record<string, unknown>;
  const delay = (v: unknown): boolean => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= MAX_DELAY_MS;
  switch (a.kind) {
    case 'latency':
      if (!(delay(a.ms) || (Array.isArray(a.ms) && a.ms.length === 2 && delay(a.ms[0]) && delay(a.ms[1]) && a.ms[0] <= a.ms[1]))) {
        add('.fault.ms', `latency takes ms: a number or [min, max], from 0 to ${MAX_DELAY_MS}.`);
      }
      break;
    case 'status':
      if (!(Number.isInteger(a.status) && (a.status as number) >= 400 && (a.status as number) <= 599))
        add('.fault.status', 'a status fault takes an HTTP status from 400 to 599.');
      if (a.code !== undefined && (typeof a.code !== 'string' || !/^[A-Za-z]{1,60}$/.test(a.code)))
        add('.fault.code', 'a code is a word of letters, such as ServiceUnavailable.');
      if (a.message !== undefined && (typeof a.message !== 'string' || a.message.length > 500))
        add('.fault.message', 'a message is a string of at most 500 characters.');
      if (a.retryAfter !== undefined && !(Number.isInteger(a.retryAfter) && (a.retryAfter as number) >= 0))
        add('.fault.retryAfter', 'retryAfter is whole seconds, 0 or more.');
      break;
    case 'drop':
      break;
    case 'truncate':
      if (!(Number.isInteger(a.bytes) && (a.bytes as number) >= 0))
        add('.fault.bytes', 'truncate takes the bytes of the body to send before the connection closes (0 or more).');
      break;
    case 'slow':
      if (!(Number.isInteger(a.chunkBytes) && (a.chunkBytes as number) >= 1)) add('.fault.chunkBytes', 'a slow body takes chunkBytes, 1 or more.');
      if (!delay(a.delayMs)) add('.fault.delayMs', `a slow body takes delayMs between chunks, from 0 to ${MAX_DELAY_MS}.`);
      break;
    default:
      add('.fault.kind', `kind is one of ${[...KINDS].join(', ')}.`);
  }
  return out;
}

interface LiveRule {
  readonly rule: FaultRule;
  readonly name: string;
  readonly path: RegExp | null;
  readonly options: readonly string[];
  readonly rng: Rng;
  matched: number;
  fired: number;
}

export interface FaultSet {
  /** The rules in order, with how many requests each matched and how often it fired. */
  list(): Array<{ readonly rule: FaultRule; readonly matched: number; readonly fired: number }>;
  /** Replaces the rules (an array, or `{ seed?, rules }`; checked: a bad set changes nothing); counts and random streams start again. */
  set(rules: unknown): void;
  /** Adds one rule (checked) after the others. */
  add(rule: unknown): void;
  clear(): void;
}

export class Faults implements FaultSet {
  private rules: LiveRule[] = [];

  constructor(
    rules: unknown = [],
    private seed: string = 'reso-engine',
  ) {
    this.set(rules);
  }

  private live(rule: FaultRule, index: number): LiveRule {
    return {
      rule,
      name: rule.name ?? `rule ${index}`,
      path: rule.path === undefined ? null : patternRegExp(rule.path),
      options: (rule.options ?? []).map((o) => (o.startsWith('$') ? o : `$${o}`).toLowerCase()),
      rng: new Rng(rule.seed !== undefined ? String(rule.seed) : `${this.seed}:${index}`),
      matched: 0,
      fired: 0,
    };
  }

  /** No rule is set. */
  get empty(): boolean {
    return this.rules.length === 0;
  }

  list(): Array<{ readonly rule: FaultRule; readonly matched: number; readonly fired: number }> {
    return this.rules.map((r) => ({ rule: r.rule, matched: r.matched, fired: r.fired }));
  }

  set(rules: unknown): void {
    const checked = checkFaultRules(rules);
    const seed = typeof rules === 'object' && rules !== null && !Array.isArray(rules) ? (rules as { seed?: unknown }).seed : undefined;
    if (seed !== undefined && typeof seed !== 'string') throw new ServiceError('InvalidFaultRule', 'The "seed" of a rule set is a string.');
    if (seed !== undefined) this.seed = seed;
    this.rules = checked.map((r, i) => this.live(r, i));
  }

  add(rule: unknown): void {
    const [checked] = checkFaultRules([rule]);
    this.rules.push(this.live(checked, this.rules.length));
  }

  clear(): void {
    this.rules = [];
  }

  /** The fault for a request, or null: every matching rule counts it and draws from its stream; the first that fires applies. */
  decide(facts: RequestFacts): FaultDecision | null {
    const resource = resourceOfPath(facts.path);
    const present = new Set(facts.options.map((o) => o.toLowerCase()));
    let chosen: FaultDecision | null = null;
    for (const r of this.rules) {
      const rule = r.rule;
      if (rule.method !== undefined && rule.method !== facts.method) continue;
      if (r.path !== null && !r.path.test(facts.path)) continue;
      if (rule.resource !== undefined && rule.resource !== resource) continue;
      if (r.options.some((o) => !present.has(o))) continue;
      r.matched++;
      const draw = r.rng.next();
      const fires = (rule.nth === undefined || rule.nth === r.matched) && draw < (rule.probability ?? 1) && (rule.times === undefined || r.fired < rule.times);
      if (!fires || chosen !== null) continue;
      r.fired++;
      const action = rule.fault;
      let delayMs = 0;
      if (action.kind === 'latency')
        delayMs = typeof action.ms === 'number' ? action.ms : action.ms[0] + Math.floor(r.rng.next() * (action.ms[1] - action.ms[0] + 1));
      chosen = { rule: r.name, action, delayMs };
    }
    return chosen;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The response of a `status` fault: the service's error object, Retry-After and rate-limit headers on a 429. */
function statusResponse(action: Extract<FaultAction, { kind: 'status' }>): Response {
  const code = action.code ?? CODE_BY_STATUS[action.status] ?? (action.status >= 500 ? 'ServiceUnavailable' : 'RequestRefused');
  const message =
    action.message ??
    (action.status === 429
      ? 'Too many requests: slow down and retry after the time Retry-After gives.'
      : 'The service could not answer this request; retry later.');
  const headers: Record<string, string> = { 'OData-Version': ODATA_VERSION, 'Content-Type': JSON_TYPE };
  if (action.retryAfter !== undefined || action.status === 429 || action.status === 503) headers['Retry-After'] = String(action.retryAfter ?? 1);
  if (action.status === 429) {
    headers['X-RateLimit-Limit'] = '0';
    headers['X-RateLimit-Remaining'] = '0';
    headers['X-RateLimit-Reset'] = String(action.retryAfter ?? 1);
  }
  return new Response(JSON.stringify({ error: { code, message } }), { status: action.status, headers });
}

/** A body that fails at once: the adapter then closes the connection without a response. */
function droppedResponse(): Response {
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      controller.error(new Error('connection dropped by a fault rule'));
    },
  });
  return new Response(body, { status: 200 });
}

/** The response with its body re-sent: its first `bytes` then a failure (truncate), or in chunks with pauses (slow). */
async function reshaped(response: Response, action: Extract<FaultAction, { kind: 'truncate' | 'slow' }>): Promise<Response> {
  const bytes = new Uint8Array(await response.arrayBuffer());
  const headers = new Headers(response.headers);
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (action.kind === 'truncate') {
        if (sent === 0 && action.bytes > 0) {
          sent = Math.min(action.bytes, bytes.length);
          controller.enqueue(bytes.subarray(0, sent));
          return;
        }
        controller.error(new Error('body truncated by a fault rule'));
        return;
      }
      if (sent >= bytes.length) {
        controller.close();
        return;
      }
      if (sent > 0) await sleep(action.delayMs);
      const end = Math.min(bytes.length, sent + action.chunkBytes);
      controller.enqueue(bytes.subarray(sent, end));
      sent = end;
    },
  });
  // the full length is announced, so a client sees a truncated body as one
  headers.set('Content-Length', String(bytes.length));
  return new Response(body, { status: response.status, statusText: response.statusText, headers });
}

/** Answers a request under a fault: `next` is the service's answer (called unless the fault replaces it). */
export async function withFault(decision: FaultDecision, next: () => Promise<Response>): Promise<Response> {
  const action = decision.action;
  switch (action.kind) {
    case 'latency':
      await sleep(decision.delayMs);
      return next();
    case 'status':
      return statusResponse(action);
    case 'drop':
      return droppedResponse();
    case 'truncate':
    case 'slow':
      return reshaped(await next(), action);
  }
}
