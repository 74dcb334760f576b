/**
 * Rate and limit profiles of the test harness, the kinds hosted listings APIs impose: request
 * budgets per account per second, hour and day and bytes per hour (fixed windows of the harness
 * clock, so they are deterministic: a 429 `RateLimited` with Retry-After, the seconds until the
 * window ends, and X-RateLimit-* headers), a `$top` maximum, an expansion's `$top` maximum, a
 * default page size, a `$filter` that must name OriginatingSystemName, and nextLinks that expire
 * after an idle time. A profile is JSON (a file for `serve --limits`, an object for
 * `startTestServer`); no vendor is imitated by name.
 */
import type { QueryErrorDetail } from '../errors.js';
import { parseQuery } from '../odata/parse-query.js';
import type { ExpandItem, Expr } from '../odata/ast.js';
import { ServiceError } from '../service/errors.js';

export interface LimitsProfile {
  readonly requestsPerSecond?: number;
  readonly requestsPerHour?: number;
  readonly requestsPerDay?: number;
  /** Response body bytes per account per hour (the request that passes it is answered; the next is refused). */
  readonly bytesPerHour?: number;
  /** The largest `$top` (a larger one is a 400 `TopTooLarge`). */
  readonly maxTop?: number;
  /** The largest `$top` inside `$expand` (a larger one is a 400 `TopTooLarge`). */
  readonly maxExpandTop?: number;
  /** Rows of a page without `$top` or `Prefer: odata.maxpagesize` (the engine's default is 10). */
  readonly defaultPageSize?: number;
  /** A collection query on Property, Media or OpenHouse must name OriginatingSystemName in `$filter` (400 `OriginatingSystemNameRequired`). */
  readonly requireOriginatingSystemName?: boolean;
  /** A nextLink not followed for this long expires (400 `SkipTokenExpired`). */
  readonly nextLinkIdleSeconds?: number;
}

const KEYS: ReadonlyArray<keyof LimitsProfile> = [
  'requestsPerSecond',
  'requestsPerHour',
  'requestsPerDay',
  'bytesPerHour',
  'maxTop',
  'maxExpandTop',
  'defaultPageSize',
  'requireOriginatingSystemName',
  'nextLinkIdleSeconds',
];

/** Checks a profile as given: every problem is a detail of one 400 `InvalidLimits`. */
export function checkLimits(input: unknown): LimitsProfile {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new ServiceError('InvalidLimits', `A limits profile is a JSON object with any of ${KEYS.join(', ')}.`);
  }
  const o = input as Record<string, unknown>;
  const details: QueryErrorDetail[] = [];
  for (const [k, v] of Object.entries(o)) {
    if (!KEYS.includes(k as keyof LimitsProfile))
      details.push({ code: 'InvalidLimits', message: `unknown member; a profile has ${KEYS.join(', ')}.`, target: k });
    else if (k === 'requireOriginatingSystemName') {
      if (typeof v !== 'boolean') details.push({ code: 'InvalidLimits', message: 'true or false.', target: k });
    } else if (!(Number.isInteger(v) && (v as number) >= 1)) details.push({ code: 'InvalidLimits', message: 'a whole number of at least 1.', target: k });
  }
  if (details.length > 0) throw new ServiceError('InvalidLimits', `The limits profile is invalid: ${details[0].target}: ${details[0].message}`, { details });
  return o;
}

/** A budget's fixed windows: their length, and the profile member that sets it. */
const WINDOWS = [
  { ms: 1_000, key: 'requestsPerSecond', what: 'requests per second' },
  { ms: 3_600_000, key: 'requestsPerHour', what: 'requests per hour' },
  { ms: 86_400_000, key: 'requestsPerDay', what: 'requests per day' },
] as const;
const HOUR_MS = 3_600_000;

/** Request and byte budgets per account, over fixed windows of the clock. */
export class Budgets {
  /** Per account and window length: the window's start and its count. */
  private readonly used = new Map<string, { start: number; n: number }>();

  constructor(
    private profile: LimitsProfile,
    private readonly clock: () => number,
  ) {}

  configure(profile: LimitsProfile): void {
    this.profile = profile;
    this.used.clear();
  }

  clear(): void {
    this.used.clear();
  }

  private window(account: string, ms: number, now: number): { start: number; n: number } {
    const start = Math.floor(now / ms) * ms;
    const id = `${ms}:${account}`;
    let w = this.used.get(id);
    if (w === undefined || w.start !== start) {
      w = { start, n: 0 };
      this.used.set(id, w);
    }
    return w;
  }

  /** Counts one request of the account; a ServiceError `RateLimited` (429) when a budget is spent. */
  admit(account: string): void {
    const now = this.clock();
    const bytes = this.profile.bytesPerHour;
    if (bytes !== undefined) {
      const w = this.window(`bytes:${account}`, HOUR_MS, now);
      if (w.n >= bytes) throw limited(`${bytes} response bytes per hour`, bytes, 0, w.start + HOUR_MS - now);
    }
    const spent = WINDOWS.find((b) => {
      const limit = this.profile[b.key];
      return limit !== undefined && this.window(account, b.ms, now).n >= limit;
    });
    if (spent !== undefined) {
      const w = this.window(account, spent.ms, now);
      throw limited(`${this.profile[spent.key]} ${spent.what}`, this.profile[spent.key]!, 0, w.start + spent.ms - now);
    }
    for (const b of WINDOWS) if (this.profile[b.key] !== undefined) this.window(account, b.ms, now).n++;
  }

  /** The rate-limit headers of an admitted request: the tightest request budget's. */
  headers(account: string): Record<string, string> {
    const now = this.clock();
    let best: { limit: number; remaining: number; reset: number } | null = null;
    for (const b of WINDOWS) {
      const limit = this.profile[b.key];
      if (limit === undefined) continue;
      const w = this.window(account, b.ms, now);
      const remaining = Math.max(0, limit - w.n);
      if (best === null || remaining < best.remaining) best = { limit, remaining, reset: Math.ceil((w.start + b.ms - now) / 1000) };
    }
    return best === null
      ? {}
      : { 'X-RateLimit-Limit': String(best.limit), 'X-RateLimit-Remaining': String(best.remaining), 'X-RateLimit-Reset': String(best.reset) };
  }

  /** Counts the bytes of a response to the account. */
  charge(account: string, bytes: number): void {
    if (this.profile.bytesPerHour !== undefined) this.window(`bytes:${account}`, HOUR_MS, this.clock()).n += bytes;
  }
}

function limited(budget: string, limit: number, remaining: number, msLeft: number): ServiceError {
  const seconds = Math.max(1, Math.ceil(msLeft / 1000));
  return new ServiceError('RateLimited', `This account has used its ${budget}: retry after ${seconds} s.`, {
    headers: {
      'Retry-After': String(seconds),
      'X-RateLimit-Limit': String(limit),
      'X-RateLimit-Remaining': String(remaining),
      'X-RateLimit-Reset': String(seconds),
    },
  });
}

/** Whether an expression names the field (anywhere, as a property path's first segment). */
function names(expr: Expr | undefined, field: string): boolean {
  if (expr === undefined) return false;
  let found = false;
  const visit = (node: unknown): void => {
    if (found || typeof node !== 'object' || node === null) return;
    const n = node as { kind?: unknown; path?: unknown };
    if (n.kind === 'member' && Array.isArray(n.path) && n.path[0] === field) {
      found = true;
      return;
    }
    for (const v of Object.values(node)) {
      if (Array.isArray(v)) v.forEach(visit);
      else visit(v);
    }
  };
  visit(expr);
  return found;
}

function largestExpandTop(items: readonly ExpandItem[] | undefined): number {
  let top = 0;
  for (const item of items ?? []) if (item.options.top !== undefined) top = Math.max(top, item.options.top);
  return top;
}

/**
 * The profile's checks of a query (already percent-decoded) on a collection: `$top`, an
 * expansion's `$top` and the OriginatingSystemName filter. A query that does not parse is left to
 * the engine, whose error is the one to give.
 */
export function checkQuery(profile: LimitsProfile, resource: string, query: string, collection: boolean): void {
  if (profile.maxTop === undefined && profile.maxExpandTop === undefined && !profile.requireOriginatingSystemName) return;
  let parsed: ReturnType<typeof parseQuery>;
  try {
    parsed = parseQuery(query);
  } catch {
    return;
  }
  if (profile.maxTop !== undefined && parsed.top !== undefined && parsed.top > profile.maxTop) {
    throw new ServiceError('TopTooLarge', `$top is at most ${profile.maxTop} here; page with the nextLink for more.`, { option: '$top' });
  }
  if (profile.maxExpandTop !== undefined && largestExpandTop(parsed.expand) > profile.maxExpandTop) {
    throw new ServiceError('TopTooLarge', `$top inside $expand is at most ${profile.maxExpandTop} here.`, { option: '$expand' });
  }
  if (
    profile.requireOriginatingSystemName &&
    collection &&
    ['Property', 'Media', 'OpenHouse'].includes(resource) &&
    !names(parsed.filter, 'OriginatingSystemName')
  ) {
    throw new ServiceError(
      'OriginatingSystemNameRequired',
      `A query on ${resource} must name OriginatingSystemName in $filter here, e.g. $filter=OriginatingSystemName eq 'CRMLS'.`,
      {
        option: '$filter',
      },
    );
  }
}
