/**
 * Bearer tokens, the login throttle and the per-token rate limit. All three read an injected
 * clock (epoch ms), so tests move time instead of sleeping.
 *
 * - Tokens are 32 random bytes (base64url), never starting with '-' (`newToken`); the store keeps
 *   only their SHA-256, so a dump of the process memory's token table cannot be replayed.
 * - The login throttle counts failed logins per username (known or not) in a sliding window;
 *   reaching the limit locks the name for `lockSeconds`, during which every attempt (even with
 *   the right password) is refused without running scrypt. A successful login clears the count.
 * - The rate limit is a token bucket per access token: `burst` requests at once, refilled at
 *   `requestsPerSecond`.
 */
import { hash, randomBytes } from 'node:crypto';

export interface Session {
  readonly username: string;
  readonly sources: readonly string[];
  /** An admin account's session: it may write inside its sources (handler.ts). */
  readonly admin: boolean;
  readonly expiresAt: number;
  /** Rate-limit bucket: tokens left and when they were last counted. */
  tokens: number;
  refilledAt: number;
}

// the one-shot hash: a Hash object per request cost twice as much
const sha256 = (token: string): string => hash('sha256', token, 'base64url');

/**
 * A new token: 32 random bytes as base64url, drawn again when it starts with '-' (one draw in
 * 64): a command line would read such a token as an option (`reso-engine replicate --token
 * -x…` is refused as ambiguous), and a token has no reason to look like one.
 */
function newToken(): string {
  for (;;) {
    const token = randomBytes(32).toString('base64url');
    if (token[0] !== '-') return token;
  }
}

export class TokenStore {
  private readonly sessions = new Map<string, Session>();
  private sweepAt = 1024;

  constructor(
    private readonly lifetimeMs: number,
    private readonly clock: () => number,
    private readonly burst: number,
  ) {}

  issue(username: string, sources: readonly string[], admin = false): { token: string; expiresIn: number } {
    const now = this.clock();
    if (this.sessions.size >= this.sweepAt) this.sweep(now);
    const token = newToken();
    this.sessions.set(sha256(token), { username, sources, admin, expiresAt: now + this.lifetimeMs, tokens: this.burst, refilledAt: now });
    return { token, expiresIn: Math.round(this.lifetimeMs / 1000) };
  }

  /** The live session of a token, or null (unknown, forged or expired). */
  find(token: string): Session | null {
    const key = sha256(token);
    const s = this.sessions.get(key);
    if (s === undefined) return null;
    if (this.clock() >= s.expiresAt) {
      this.sessions.delete(key);
      return null;
    }
    return s;
  }

  get size(): number {
    return this.sessions.size;
  }

  /** Drops expired sessions; the next sweep waits until the table has doubled. */
  private sweep(now: number): void {
    for (const [k, s] of this.sessions) if (now >= s.expiresAt) this.sessions.delete(k);
    this.sweepAt = Math.max(1024, this.sessions.size * 2);
  }
}

export interface LoginThrottleOptions {
  /** Failed attempts within the window that lock a username (default 10). */
  readonly maxFailures?: number;
  /** The window failures are counted in, seconds (default 60). */
  readonly windowSeconds?: number;
  /** How long a locked username stays locked, seconds (default 60). */
  readonly lockSeconds?: number;
}

interface Failures {
  /** Times of recent failures, oldest first. */
  times: number[];
  lockedUntil: number;
}

export class LoginThrottle {
  private readonly maxFailures: number;
  private readonly windowMs: number;
  private readonly lockMs: number;
  private readonly byName = new Map<string, Failures>();
  private sweepAt = 4096;

  constructor(
    options: LoginThrottleOptions,
    private readonly clock: () => number,
  ) {
    this.maxFailures = options.maxFailures ?? 10;
    this.windowMs = (options.windowSeconds ?? 60) * 1000;
    this.lockMs = (options.lockSeconds ?? 60) * 1000;
    if (!(this.maxFailures >= 1) || !(this.windowMs > 0) || !(this.lockMs > 0))
      throw new TypeError('loginThrottle: maxFailures, windowSeconds and lockSeconds must be positive');
  }

  /** Seconds until the username may try again, or 0 when it may try now. */
  retryAfter(username: string): number {
    const f = this.byName.get(username);
    if (f === undefined) return 0;
    const now = this.clock();
    return f.lockedUntil > now ? Math.ceil((f.lockedUntil - now) / 1000) : 0;
  }

  failed(username: string): void {
    const now = this.clock();
    if (this.byName.size >= this.sweepAt) this.sweep(now);
    let f = this.byName.get(username);
    if (f === undefined) {
      f = { times: [], lockedUntil: 0 };
      this.byName.set(username, f);
    }
    const times = f.times;
    let old = 0;
    while (old < times.length && times[old] <= now - this.windowMs) old++;
    if (old > 0) times.splice(0, old);
    times.push(now);
    if (times.length >= this.maxFailures) {
      f.lockedUntil = now + this.lockMs;
      f.times = [];
    }
  }

  succeeded(username: string): void {
    this.byName.delete(username);
  }

  private sweep(now: number): void {
    for (const [name, f] of this.byName) {
      const last = f.times.length > 0 ? f.times[f.times.length - 1] : -Infinity;
      if (f.lockedUntil <= now && last <= now - this.windowMs) this.byName.delete(name);
    }
    this.sweepAt = Math.max(4096, this.byName.size * 2);
  }
}

export interface RateLimitOptions {
  /** Sustained requests per second per access token. */
  readonly requestsPerSecond: number;
  /** Requests allowed at once (bucket size); defaults to requestsPerSecond, at least 1. */
  readonly burst?: number;
}

/** Takes one request from the session's bucket; returns 0, or the seconds to wait when it is empty. */
export function takeRequest(session: Session, limit: Required<RateLimitOptions>, now: number): number {
  const elapsed = Math.max(0, now - session.refilledAt) / 1000;
  session.tokens = Math.min(limit.burst, session.tokens + elapsed * limit.requestsPerSecond);
  session.refilledAt = now;
  if (session.tokens >= 1) {
    session.tokens -= 1;
    return 0;
  }
  return Math.max(1, Math.ceil((1 - session.tokens) / limit.requestsPerSecond));
}
