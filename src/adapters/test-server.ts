/**
 * `startTestServer(options)`: a real listening server on 127.0.0.1 (a free port) for an
 * application's test suite, controlled from the test (src/harness): the clock, reset and
 * checkpoints, fault rules, rate and limit profiles, the request journal. Ready when the promise
 * resolves; `close()` stops it and removes what it wrote.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { Engine } from '../engine.js';
import type { RecordsInput } from '../store/load.js';
import { DEMO_ACCOUNTS, generateDataset, hashPassword } from '../generate/dataset.js';
import type { HandlerOptions } from '../service/handler.js';
import { TestClock } from '../harness/clock.js';
import type { FaultSet } from '../harness/faults.js';
import { Harness } from '../harness/harness.js';
import type { JournalEntry } from '../harness/journal.js';
import type { LimitsProfile } from '../harness/limits.js';
import { serve } from './http.js';

/** An account of the test server, with its password in the clear (hashed when the server starts). */
export interface TestAccount {
  readonly username: string;
  readonly password: string;
  readonly sources: readonly string[];
  /** May write over HTTP (upsert, remove) inside its sources. */
  readonly admin?: boolean;
}

export interface TestServerOptions {
  /** A data directory, or records in memory; default the embedded default data set. */
  readonly data?: string | RecordsInput;
  /** A generated data set instead (`reso-engine generate`'s, same listings and seed, same data). */
  readonly generate?: { readonly listings: number; readonly seed: string | number };
  /** Where the clock starts (ISO 8601 instant or epoch ms; default the system clock's now). It stands still until moved. */
  readonly now?: Date | string | number;
  /** Fault rules (`server.faults.set` takes the same). */
  readonly faults?: unknown;
  /** Seed of the fault rules' random streams (default a fixed one: the same requests give the same faults). */
  readonly seed?: string;
  /** A rate and limit profile. */
  readonly limits?: LimitsProfile;
  /** The accounts, instead of the data set's (whose demo accounts are `demo` and `partner`). */
  readonly accounts?: readonly TestAccount[];
  /** Also serve the admin routes over HTTP under `/admin/` for this bearer token. */
  readonly adminToken?: string;
  /** Requests the journal keeps (default 1,000). */
  readonly journalSize?: number;
  /** More options of the service (token lifetime, login throttle, request limits, public base URL). */
  readonly service?: Omit<HandlerOptions, 'engine' | 'clock' | 'accounts'>;
}

export interface TestServer {
  /** `http://127.0.0.1:<port>`; the API is under `/v1`. */
  readonly url: string;
  /** An access token for the account (default `demo`), got from `POST /v1/token` (not journaled, never faulted). */
  token(username?: string): Promise<string>;
  readonly clock: TestClock;
  /** Back to the data as loaded, or to a checkpoint; also starts the rate budgets and nextLink idle times again. */
  reset(checkpoint?: string): Promise<void>;
  checkpoint(name: string): void;
  readonly faults: FaultSet;
  readonly requests: { list(): JournalEntry[]; clear(): void };
  readonly limits: { get(): LimitsProfile; set(profile: LimitsProfile): void };
  /** The engine answering now (a reset replaces it): for reading or writing data from the test directly. */
  readonly engine: Engine;
  close(): Promise<void>;
}

const TEST_SCRYPT_N = 1024;

/** Array.isArray without narrowing a typed array to any[] (the options come from JavaScript callers too). */
const isArray = (value: unknown): boolean => Array.isArray(value);

function accountsFileOf(accounts: readonly TestAccount[]): unknown {
  if (!isArray(accounts) || accounts.length === 0) throw new TypeError('startTestServer: accounts is a non-empty array of { username, password, sources }');
  return {
    accounts: accounts.map((a) => {
      if (typeof a.username !== 'string' || typeof a.password !== 'string' || !isArray(a.sources)) {
        throw new TypeError('startTestServer: each account has a username, a password and sources');
      }
      // cheap on purpose: these are test accounts, and every login hashes
      return {
        username: a.username,
        password_hash: hashPassword(a.password, randomBytes(16), TEST_SCRYPT_N),
        sources: [...a.sources],
        admin: a.admin === true,
      };
    }),
  };
}

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  if (options.data !== undefined && options.generate !== undefined) throw new TypeError('startTestServer takes data or generate, not both');
  const clock = new TestClock(options.now);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-engine-test-'));
  try {
    let data = options.data;
    if (options.generate !== undefined) {
      data = path.join(dir, 'data');
      generateDataset({ listings: options.generate.listings, seed: options.generate.seed, outDir: data });
    }
    const engine = await Engine.open({ data, now: () => new Date(clock.now()) });
    const passwords = new Map<string, string>(
      options.accounts !== undefined ? options.accounts.map((a) => [a.username, a.password]) : DEMO_ACCOUNTS.map((a) => [a.username, a.password]),
    );
    const harness = Harness.create({
      engine,
      clock,
      workDir: path.join(dir, 'snapshots'),
      service: { ...options.service, ...(options.accounts !== undefined ? { accounts: accountsFileOf(options.accounts) } : {}) },
      faults: options.faults,
      seed: options.seed,
      limits: options.limits,
      adminToken: options.adminToken,
      journalSize: options.journalSize,
    });
    const server = await serve(harness.handle, { port: 0, host: '127.0.0.1', shutdownGraceMs: 1_000 });
    let closed = false;
    return {
      url: server.url,
      clock,
      faults: harness.faults,
      requests: { list: () => harness.journal.list(), clear: () => harness.journal.clear() },
      limits: { get: () => harness.limits, set: (profile) => harness.setLimits(profile) },
      get engine(): Engine {
        return harness.engine;
      },
      async token(username = 'demo'): Promise<string> {
        const password = passwords.get(username);
        if (password === undefined) throw new TypeError(`token(): no password is known for '${username}'; pass it in startTestServer's accounts`);
        const response = await harness.service(
          new Request(`${server.url}/v1/token`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({ username, password }).toString(),
          }),
        );
        const body = (await response.json()) as { access_token?: string; error?: { code: string; message: string } };
        if (response.status !== 200 || body.access_token === undefined)
          throw new Error(`token(): ${response.status} ${body.error?.code ?? ''} ${body.error?.message ?? ''}`.trim());
        harness.noteToken(body.access_token, username);
        return body.access_token;
      },
      reset: (checkpoint) => harness.reset(checkpoint),
      checkpoint: (name) => harness.checkpoint(name),
      async close(): Promise<void> {
        if (closed) return;
        closed = true;
        await server.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
