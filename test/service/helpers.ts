/**
 * Shared fixtures of the service tests: one engine on the default data set at a fixed clock, a
 * movable clock for tokens and throttles, cheap scrypt accounts, and request helpers that call
 * the handler in-process with standard `Request` objects.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_DATA_DIR, Engine } from '../../src/engine.js';
import { hashPassword } from '../../src/generate/dataset.js';
import { createHandler, type Handler, type HandlerOptions } from '../../src/service/handler.js';

export const NOW = Date.parse('2025-06-01T00:00:00Z');
export const BASE = 'http://service.test';
export const DEMO_SOURCES = ['CRMLS', 'NWMLS', 'ARMLS', 'HAR'];
export const PARTNER_SOURCES = ['HAR', 'MRED', 'NorthstarMLS', 'Stellar', 'BrightMLS'];

let engine: Promise<Engine> | null = null;
/** The default data set at 2025-06-01T00:00:00Z, opened once per test file. */
export function defaultEngine(): Promise<Engine> {
  engine ??= Engine.open({ now: () => new Date(NOW) });
  return engine;
}

/** A clock tests move by hand (epoch ms). */
export class TestClock {
  constructor(public ms = NOW) {}
  readonly now = (): number => this.ms;
  advance(seconds: number): void {
    this.ms += seconds * 1000;
  }
}

/** demo and partner with the default data set's sources, hashed with a small scrypt cost so logins are quick. */
export function quickAccounts(): { accounts: Array<{ username: string; password_hash: string; sources: string[] }> } {
  const salt = (s: string): Buffer => Buffer.from(s.padEnd(16, '.'));
  return {
    accounts: [
      { username: 'demo', password_hash: hashPassword('demo-password', salt('demo'), 1024, 8, 1), sources: [...DEMO_SOURCES] },
      { username: 'partner', password_hash: hashPassword('partner-password', salt('partner'), 1024, 8, 1), sources: [...PARTNER_SOURCES] },
    ],
  };
}

export async function makeHandler(options: Partial<HandlerOptions> = {}): Promise<{ handler: Handler; clock: TestClock }> {
  const clock = new TestClock();
  const handler = createHandler({ engine: await defaultEngine(), accounts: quickAccounts(), clock: clock.now, onError: () => undefined, ...options });
  return { handler, clock };
}

export function tokenRequest(
  fields: Record<string, string>,
  headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' },
): Request {
  return new Request(`${BASE}/v1/token`, { method: 'POST', headers, body: new URLSearchParams(fields).toString() });
}

export async function login(handler: Handler, username = 'demo', password = `${username}-password`): Promise<string> {
  const res = await handler(tokenRequest({ username, password }));
  if (res.status !== 200) throw new Error(`login ${username}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

export interface Call {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** GET (or another method) of a path under BASE, with a bearer token when given. */
export async function call(
  handler: Handler,
  path: string,
  options: { token?: string; method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Call> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  const res = await handler(new Request(path.startsWith('http') ? path : `${BASE}${path}`, { method: options.method ?? 'GET', headers, body: options.body }));
  const text = await res.text();
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON ($metadata, HEAD)
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** Percent-encodes a query string's values the way a form client does (spaces as `+`). */
export function q(options: Record<string, string | number>): string {
  return Object.entries(options)
    .map(([k, v]) => `${k}=${encodeURIComponent(String(v)).replace(/%20/g, '+')}`)
    .join('&');
}

/** Every error body: exactly the §5 shape, no stack anywhere. */
export function expectErrorShape(c: Call, status: number, code: string): void {
  if (c.status !== status) throw new Error(`expected ${status} ${code}, got ${c.status} ${c.text}`);
  const e = (c.json as { error?: Record<string, unknown> }).error;
  if (!e || e.code !== code || typeof e.message !== 'string') throw new Error(`expected error ${code}, got ${c.text}`);
  const extra = Object.keys(e).filter((k) => !['code', 'message', 'target', 'position', 'details'].includes(k));
  if (extra.length > 0) throw new Error(`unexpected error members ${extra.join(', ')}`);
  if (Object.keys(c.json as object).length !== 1) throw new Error(`error body has more than "error": ${c.text}`);
  if (/\bat .+:\d+:\d+/.test(c.text) || c.text.includes('node_modules') || c.text.includes('.ts:')) throw new Error(`error body carries a stack: ${c.text}`);
  if (c.headers.get('odata-version') !== '4.01') throw new Error('error without OData-Version 4.01');
}

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** `reso-engine ARGS` from the TypeScript sources, as a child process in the repository. */
export function runCli(args: string[]): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ['--import', 'tsx', path.join(repo, 'src/adapters/cli.ts'), ...args], { cwd: repo, stdio: ['pipe', 'pipe', 'pipe'] });
}

/** Runs the CLI to its end. */
export function collectCli(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = runCli(args);
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.on('exit', (code) => resolve({ code, out, err }));
  });
}

/** A `serve` child once it has printed its URL; the caller must end it (kill) in a finally. */
export interface ServeChild {
  readonly child: ChildProcessWithoutNullStreams;
  /** The origin, e.g. http://127.0.0.1:40123 */
  readonly url: string;
  readonly exited: Promise<number | null>;
  /** What it printed so far. */
  readonly out: () => string;
  readonly err: () => string;
}

/** Starts `reso-engine serve ARGS` and waits until it serves `listings` (as printed, e.g. '2,000'). */
export async function startServe(args: string[], listings = '2,000'): Promise<ServeChild> {
  const child = runCli(['serve', ...args]);
  let out = '';
  let err = '';
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const served = new RegExp(`serving ${listings} listings at (http://127\\.0\\.0\\.1:\\d+)/v1/`);
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (b: Buffer) => {
        out += b.toString();
        const m = served.exec(out);
        if (m && out.includes('press Ctrl-C')) resolve(m[1]);
      });
      child.on('exit', () => reject(new Error(`serve exited early: ${out}${err}`)));
    });
    return { child, url, exited, out: () => out, err: () => err };
  } catch (e) {
    if (child.exitCode === null) child.kill('SIGKILL');
    throw e;
  }
}

/** The records of one file of the default data set (`Property.jsonl`, `Member.jsonl`, ...), as parsed. */
export function readDefaultFile(file: string): Array<Record<string, unknown>> {
  return readFileSync(path.join(DEFAULT_DATA_DIR, file), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
