#!/usr/bin/env node
/**
 * The `reso-engine` command line. Each subcommand validates its arguments and calls the library;
 * errors are one line on stderr and exit code 2 (usage) or 1 (failure), never a stack trace.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Engine, DEFAULT_DATA_DIR, type PostgresEngine, type QueryResource } from '../engine.js';
import { QueryError } from '../errors.js';
import { generateDataset, DEFAULT_REFERENCE, DEMO_ACCOUNTS } from '../generate/dataset.js';
import { EngineSink } from '../replicate/engine-sink.js';
import { ReplicationError } from '../replicate/errors.js';
import { replicate, type ReplicationResult } from '../replicate/replicate.js';
import { REPLICATED_RESOURCES } from '../replicate/sink.js';
import { serviceRoot } from '../replicate/upstream.js';
import { Accounts } from '../service/accounts.js';
import { createHandler } from '../service/handler.js';
import type { ReplicationStatus } from '../service/health.js';
import { normalizeOrigin, type CorsOptions } from '../service/cors.js';
import { LOG_LEVELS, type AccessLogOptions, type LogLevel } from '../service/log.js';
import type { MetricsOptions } from '../service/metrics.js';
import { TestClock } from '../harness/clock.js';
import { checkFaultRules } from '../harness/faults.js';
import { Harness } from '../harness/harness.js';
import { checkLimits } from '../harness/limits.js';
import { DEFAULT_PG_SCHEMA, Layout } from '../pg/layout.js';
import { openPool, shownUrl } from '../pg/connect.js';
import { checkDistribution, type Distribution } from '../pg/distribution.js';
import { loadDirectoryIntoPostgres, type PgLoadStep } from '../pg/load.js';
import type { OpenProgress } from '../engine-options.js';
import type { LoadProgress } from '../store/load.js';
import { SnapshotError } from '../snapshot/file.js';
import { DataError } from '../store/errors.js';
import { serve } from './http.js';
import { Progress } from './progress.js';

const USAGE = `Usage:
  reso-engine generate --listings N --seed S --out DIR [--reference ISO-INSTANT]
      Writes a deterministic data set (Property, Media, OpenHouse, PropertyChange as JSON Lines,
      accounts.json, mls_profiles.json). Same N, seed and reference give the same bytes.
      --reference defaults to ${DEFAULT_REFERENCE}; every timestamp lies before it.
  reso-engine serve [--data DIR | --snapshot FILE | --postgres URL [--schema S]] [--port 8080] [--host 127.0.0.1]
                    [--now ISO-INSTANT] [--public-base-url URL] [--token-lifetime SECONDS]
                    [--replicate-from URL --replicate-token TOKEN [--replicate-every 60]]
                    [--admin-token TOKEN] [--faults FILE] [--limits FILE]
                    [--cors-origin ORIGIN ...] [--metrics on|off|TOKEN] [--log-level info] [--log-format json|pretty]
      Serves the /v1 API (SERVICE.md §5) on the data set (default: the embedded one, with the demo
      accounts) and prints the URL and the demo credentials. --snapshot starts from a snapshot
      file (see snapshot) instead of loading a data directory. --postgres serves a PostgreSQL
      database that pg load filled (schema S, default reso), with the accounts and profiles
      loaded with it; the server may be shared by several serve processes. --now fixes the data clock
      (DaysOnMarket, now(), current_year). Ctrl-C (SIGINT) or SIGTERM lets requests in flight
      finish, then exits.
      --replicate-from keeps the served data a replica of a RESO Web API (as replicate does, but
      into the running engine): a pass at start, then one every --replicate-every SECONDS after
      the previous ended. Each page is one atomic change; queries keep being answered. Records
      the upstream does not list are removed; accounts and profiles stay those of the data set.
      A failed pass is logged to stderr and retried at the next
      interval. The state is in memory: each start begins with a full pass. TOKEN: as for
      replicate (RESO_ENGINE_TOKEN too); an expired token fails every pass until a restart.
      Not with --postgres.
      --admin-token, --faults and --limits make it a test stand-in (docs/test-harness.md): one clock
      for data and service, frozen at --now (else running) and moved over /admin/clock; admin routes
      under /admin/ for Authorization: Bearer TOKEN (none without --admin-token); fault rules and a
      rate and limit profile from JSON files, checked at start. In-memory engine only.
      GET /health and GET /ready (unauthenticated) answer liveness and readiness; GET /v1/openapi.json
      describes every route. --cors-origin lets browser pages of ORIGIN (scheme://host[:port], or *)
      call the API; repeat it or give a comma list. --metrics: GET /metrics (Prometheus) answers
      clients on this host (on, the default), clients sending Authorization: Bearer TOKEN (a token
      of at least 8 characters), or no one (off). The access log is one JSON line per request on
      stdout (--log-format pretty: one human line); --log-level fatal|error|warn|info|debug|trace|silent
      (default info; /health, /ready and /metrics requests log at debug).
  reso-engine query [--data DIR | --snapshot FILE | --postgres URL [--schema S]] [--resource Property|Media|OpenHouse]
                    [--sources A,B] [--now ISO-INSTANT] [--pretty] '<query string>'
      Runs one query (OData options, already percent-decoded, e.g. "$filter=City eq 'Tampa'&$top=5")
      and prints the response envelope as JSON. Without --sources every source is visible.
  reso-engine snapshot [--data DIR] --out FILE
      Loads the data set (default: the embedded one), builds its indexes and writes them all to
      one snapshot file, which serve --snapshot and query --snapshot open much faster than the
      data. FILE is replaced atomically.
  reso-engine pg load --data DIR --url URL [--schema S] [--replace] [--skip-bad-records]
                     [--citus [--shard-count N] | --workers URL,URL,... [--partitions N]]
      Loads a data directory into a PostgreSQL 15 database with PostGIS 3 (URL: a connection URL,
      postgres://user:password@host:port/database), in the PostgreSQL schema S (default reso),
      for serve --postgres and query --postgres. The data is checked as serve --data checks it: a
      bad line stops the load (nothing is kept) unless --skip-bad-records. A schema that already
      holds a data set is refused unless --replace, which replaces it in one transaction (a
      Citus layout stays on Citus; a partitioned one needs --workers again).
      --citus: URL is a Citus coordinator; Property is hash-distributed on ListingKey (N shards,
      default the cluster's citus.shard_count), Media, OpenHouse and PropertyChange co-located
      with it, the other tables reference tables. --workers: the listing tables are
      hash-partitioned (N partitions, default two per worker) into postgres_fdw foreign tables
      on the workers (URLs of their databases), the rest stays on URL (docs/scale-out.md).
  reso-engine pg init --url URL [--data DIR] [--schema S] [--replace] [--citus ... | --workers ...]
      pg load for a new deployment: makes the layout, distributed as asked, and loads DIR (default:
      the embedded data set, with the demo accounts).
  reso-engine replicate --from URL --token TOKEN --to DIR [--page-size 1000]
      Pulls Property, Media and OpenHouse from a RESO Web API (URL: its base, e.g. the
      http://127.0.0.1:8080 of serve, or its OData service root) into DIR, a data directory that
      serve --data and query --data read. Incremental by ModificationTimestamp; records the
      upstream no longer lists are removed; a stopped run resumes where it left off (state in
      DIR/.replication.json). TOKEN is a bearer token (POST /v1/token), or set RESO_ENGINE_TOKEN.
      Progress goes to stderr.
  reso-engine help
`;

class UsageError extends Error {}

/** The longest wait a Node timer takes (2^31 - 1 ms), in whole seconds. */
const MAX_TIMER_SECONDS = 2_147_483;

function runGenerate(argv: string[]): void {
  const { values } = parseArgs({
    args: argv,
    options: {
      listings: { type: 'string' },
      seed: { type: 'string', default: '1' },
      out: { type: 'string' },
      reference: { type: 'string', default: DEFAULT_REFERENCE },
    },
    strict: true,
  });
  const listings = Number(values.listings?.replace(/_/g, ''));
  if (values.listings === undefined || !Number.isInteger(listings) || listings < 0) {
    throw new UsageError(`--listings takes a non-negative integer, got '${values.listings ?? ''}'`);
  }
  if (!values.out) throw new UsageError('--out DIR is required');
  const tty = process.stderr.isTTY === true;
  const started = Date.now();
  const summary = generateDataset({
    listings,
    seed: values.seed,
    reference: values.reference,
    outDir: values.out,
    onProgress: tty
      ? (done, total) => {
          const pct = total === 0 ? 100 : Math.floor((done / total) * 100);
          process.stderr.write(`\rgenerating ${pct}% (${done.toLocaleString('en-US')}/${total.toLocaleString('en-US')} listings)`);
        }
      : undefined,
  });
  if (tty) process.stderr.write('\n');
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  process.stdout.write(
    `wrote ${summary.listings} listings, ${summary.media} media, ${summary.openHouses} open houses, ` +
      `${summary.propertyChanges} property changes, ${summary.members} members, ${summary.offices} offices to ${values.out} in ${seconds} s\n`,
  );
}

function clockOption(now: string | undefined): (() => Date) | undefined {
  if (now === undefined) return undefined;
  const ms = Date.parse(now);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(now) || Number.isNaN(ms)) throw new UsageError(`--now takes an ISO 8601 instant such as 2025-06-01T00:00:00Z, got '${now}'`);
  return () => new Date(ms);
}

function positiveInteger(text: string | undefined, name: string, min = 1): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min) throw new UsageError(`${name} takes an integer of at least ${min}, got '${text}'`);
  return n;
}

/** A JSON file of the harness (fault rules, a limits profile), checked: a bad one is a usage error naming the file. */
function harnessFile(file: string, flag: string, check: (input: unknown) => unknown): { input: unknown; seed?: string } {
  let input: unknown;
  try {
    input = JSON.parse(readFileSync(file, 'utf8')) as unknown;
  } catch (err) {
    throw new UsageError(`${flag} ${file}: ${err instanceof SyntaxError ? 'not valid JSON' : (err as Error).message}`, { cause: err });
  }
  try {
    check(input);
  } catch (err) {
    const details = err instanceof QueryError && err.details !== undefined ? err.details.map((d) => `\n  ${d.target ?? ''}: ${d.message}`).join('') : '';
    throw new UsageError(`${flag} ${file}: ${(err as Error).message}${details}`, { cause: err });
  }
  const seed = typeof input === 'object' && input !== null && !Array.isArray(input) ? (input as { seed?: unknown }).seed : undefined;
  if (seed !== undefined && typeof seed !== 'string') throw new UsageError(`${flag} ${file}: "seed" is a string`);
  return { input, seed };
}

/** The service options of --cors-origin, --metrics, --log-level and --log-format. */
function operationsOf(values: { 'cors-origin'?: string[]; metrics?: string; 'log-level'?: string; 'log-format'?: string }): {
  cors?: CorsOptions;
  metrics: MetricsOptions;
  log: AccessLogOptions;
} {
  const origins = (values['cors-origin'] ?? []).flatMap((o) => o.split(',')).map((o) => o.trim());
  for (const o of origins) {
    if (o !== '*' && normalizeOrigin(o) === null)
      throw new UsageError(`--cors-origin takes an origin such as https://app.example.com (no path) or *, got '${o}'`);
  }
  const m = values.metrics ?? 'on';
  if (m !== 'on' && m !== 'off' && m.length < 8) throw new UsageError('--metrics takes on, off or a token of at least 8 characters');
  const level = values['log-level'] ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new UsageError(`--log-level takes one of ${LOG_LEVELS.join(', ')}, got '${level}'`);
  const format = values['log-format'] ?? 'json';
  if (format !== 'json' && format !== 'pretty') throw new UsageError(`--log-format takes json or pretty, got '${format}'`);
  return {
    ...(origins.length > 0 ? { cors: { origins } } : {}),
    metrics: m === 'on' ? {} : m === 'off' ? false : { token: m },
    log: { level: level as LogLevel, format },
  };
}

/** The distribution pg init / pg load flags ask for (undefined: none named). */
function distributionOf(values: { citus?: boolean; 'shard-count'?: string; workers?: string; partitions?: string }): Distribution | undefined {
  if (values.citus && values.workers !== undefined) throw new UsageError('--citus and --workers are two different layouts: choose one');
  if (values['shard-count'] !== undefined && !values.citus) throw new UsageError('--shard-count goes with --citus');
  if (values.partitions !== undefined && values.workers === undefined) throw new UsageError('--partitions goes with --workers');
  let d: Distribution | undefined;
  if (values.citus) d = { kind: 'citus', shardCount: positiveInteger(values['shard-count'], '--shard-count') };
  else if (values.workers !== undefined)
    d = { kind: 'partitioned', workers: values.workers.split(','), partitions: positiveInteger(values.partitions, '--partitions') };
  if (d === undefined) return undefined;
  try {
    return checkDistribution(d);
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/^distribution\./, '--'), { cause: err });
  }
}

/** The layout of --schema S. */
function layoutOf(schema: string): Layout {
  try {
    return new Layout(schema);
  } catch (err) {
    throw new UsageError(`--schema takes a PostgreSQL identifier (letters, digits, _), got '${schema}'`, { cause: err });
  }
}

/** The engine of --postgres URL [--schema S], else of --data DIR or --snapshot FILE (see openEngine). */
async function openServedEngine(
  values: { data?: string; snapshot?: string; postgres?: string; schema?: string },
  now: (() => Date) | undefined,
  log: boolean,
): Promise<Engine | PostgresEngine> {
  if (values.postgres === undefined) {
    if (values.schema !== undefined) throw new UsageError('--schema goes with --postgres URL');
    return openEngine(values, now, log);
  }
  if (values.data !== undefined || values.snapshot !== undefined) {
    throw new UsageError('--postgres reads the data set the database holds: load a data directory into it with pg load, not with --data or --snapshot');
  }
  const schema = layoutOf(values.schema ?? DEFAULT_PG_SCHEMA).schema;
  if (log) process.stderr.write(`connecting to ${shownUrl(values.postgres)} ...\n`);
  return Engine.open({ postgres: { url: values.postgres, schema }, now });
}

/** The engine of --data DIR or --snapshot FILE (one of them; neither: the embedded data set). */
async function openEngine(values: { data?: string; snapshot?: string }, now: (() => Date) | undefined, log: boolean): Promise<Engine> {
  if (values.data !== undefined && values.snapshot !== undefined) throw new UsageError('give --data DIR or --snapshot FILE, not both');
  const progress = new Progress(values.snapshot !== undefined ? 'opening snapshot' : 'loading');
  const onProgress = !log
    ? undefined
    : (p: OpenProgress): void =>
        p.kind === 'load'
          ? progress.update({ what: p.file, bytes: p.bytesRead, bytesTotal: p.bytesTotal, rows: p.records })
          : progress.update({ bytes: p.bytesRead, bytesTotal: p.bytesTotal });
  try {
    if (values.snapshot !== undefined) {
      if (log) process.stderr.write(`opening snapshot ${values.snapshot} ...\n`);
      return await Engine.open({ snapshot: values.snapshot, now, onProgress });
    }
    const dataDir = values.data ?? DEFAULT_DATA_DIR;
    if (log) process.stderr.write(`loading ${dataDir} ...\n`);
    return await Engine.open({ data: dataDir, now, onProgress });
  } finally {
    progress.end();
  }
}

async function runSnapshot(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      data: { type: 'string' },
      out: { type: 'string' },
    },
    strict: true,
  });
  if (!values.out) throw new UsageError('--out FILE is required');
  const started = Date.now();
  const engine = await openEngine(values, undefined, true);
  const loaded = Date.now();
  const progress = new Progress('writing snapshot');
  const { bytes } = engine.save(values.out, { onProgress: (written, total) => progress.update({ bytes: written, bytesTotal: total }) });
  progress.end();
  const seconds = (ms: number): string => (ms / 1000).toFixed(1);
  process.stdout.write(
    `wrote a snapshot of ${engine.store.Property.rowCount.toLocaleString('en-US')} listings to ${values.out} ` +
      `(${(bytes / 1e6).toFixed(1)} MB; loaded in ${seconds(loaded - started)} s, written in ${seconds(Date.now() - loaded)} s)\n`,
  );
}

async function runServe(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      data: { type: 'string' },
      snapshot: { type: 'string' },
      postgres: { type: 'string' },
      schema: { type: 'string' },
      port: { type: 'string', default: '8080' },
      host: { type: 'string', default: '127.0.0.1' },
      now: { type: 'string' },
      'public-base-url': { type: 'string' },
      'token-lifetime': { type: 'string' },
      'replicate-from': { type: 'string' },
      'replicate-token': { type: 'string' },
      'replicate-every': { type: 'string' },
      'admin-token': { type: 'string' },
      faults: { type: 'string' },
      limits: { type: 'string' },
      'cors-origin': { type: 'string', multiple: true },
      metrics: { type: 'string', default: 'on' },
      'log-level': { type: 'string', default: 'info' },
      'log-format': { type: 'string', default: 'json' },
    },
    strict: true,
  });
  const port = positiveInteger(values.port, '--port', 0)!;
  const ops = operationsOf(values);
  if (port > 65535) throw new UsageError(`--port takes 0-65535, got ${port}`);
  const from = values['replicate-from'];
  if (from === undefined && (values['replicate-token'] !== undefined || values['replicate-every'] !== undefined)) {
    throw new UsageError('--replicate-token and --replicate-every go with --replicate-from URL');
  }
  const replicateToken = values['replicate-token'] ?? process.env.RESO_ENGINE_TOKEN;
  if (from !== undefined && !replicateToken) throw new UsageError('--replicate-from needs --replicate-token TOKEN (or RESO_ENGINE_TOKEN)');
  const every = positiveInteger(values['replicate-every'], '--replicate-every') ?? 60;
  if (every > MAX_TIMER_SECONDS) throw new UsageError(`--replicate-every takes at most ${MAX_TIMER_SECONDS} seconds (a timer's limit), got ${every}`);
  if (from !== undefined) serviceRoot(from); // a malformed URL fails now, not at every pass
  if (from !== undefined && values.postgres !== undefined) throw new UsageError('--replicate-from replicates into the in-memory engine, not with --postgres');
  const tokenLifetimeSeconds = positiveInteger(values['token-lifetime'], '--token-lifetime');
  const harnessed = values['admin-token'] !== undefined || values.faults !== undefined || values.limits !== undefined;
  if (harnessed && values.postgres !== undefined) throw new UsageError('--admin-token, --faults and --limits serve the in-memory engine, not --postgres');
  if (harnessed && from !== undefined)
    throw new UsageError('--admin-token, --faults and --limits do not go with --replicate-from (a reset would drop the replica)');
  const faults = values.faults === undefined ? undefined : harnessFile(values.faults, '--faults', checkFaultRules);
  const limits = values.limits === undefined ? undefined : harnessFile(values.limits, '--limits', checkLimits);
  if (values['admin-token'] !== undefined && values['admin-token'].length < 8) throw new UsageError('--admin-token takes a token of at least 8 characters');
  // with the harness, one clock for data and service that the admin routes move: frozen at --now, else running
  const clock = harnessed ? new TestClock(values.now === undefined ? undefined : clockOption(values.now)!().getTime(), values.now !== undefined) : null;
  const opening = performance.now();
  const engine = await openServedEngine(values, clock === null ? clockOption(values.now) : () => new Date(clock.now()), true);
  const loadSeconds = Math.round(performance.now() - opening) / 1000;
  // what /ready and /metrics report of --replicate-from, updated by each pass
  let replicationStatus: ReplicationStatus | undefined =
    from === undefined ? undefined : { from: serviceRoot(from), lastSuccessAt: null, lastError: null, passes: 0, failures: 0 };
  let server: Awaited<ReturnType<typeof serve>>;
  let listings: number;
  let harness: Harness | null = null;
  try {
    const status = { loadSeconds, ...(replicationStatus === undefined ? {} : { replication: () => replicationStatus! }) };
    const service = { publicBaseUrl: values['public-base-url'], tokenLifetimeSeconds, status, ...ops };
    if (clock !== null && engine instanceof Engine) {
      harness = Harness.create({
        engine,
        clock,
        workDir: mkdtempSync(path.join(os.tmpdir(), 'reso-engine-serve-')),
        service,
        faults: faults?.input,
        seed: faults?.seed,
        limits: limits?.input,
        adminToken: values['admin-token'],
      });
    }
    const handler = harness !== null ? harness.handle : createHandler({ engine, ...service });
    listings = engine instanceof Engine ? engine.store.Property.rowCount : await engine.count('Property', '');
    server = await serve(handler, { port, host: values.host });
  } catch (err) {
    // the pool's connections would keep the process alive
    if (!(engine instanceof Engine)) await engine.close().catch(() => undefined);
    throw err;
  }
  // the demo accounts this data set really has (checked against its password hashes)
  const accounts = new Accounts(engine.accounts);
  const demo: string[] = [];
  for (const a of DEMO_ACCOUNTS)
    if (await accounts.verify(a.username, a.password)) demo.push(`  ${a.username} / ${a.password}  (sources: ${a.sources.join(', ')})`);
  process.stdout.write(
    `reso-engine: serving ${listings.toLocaleString('en-US')} listings at ${server.url}/v1/${engine instanceof Engine ? '' : ` from ${shownUrl(values.postgres!)}`}\n` +
      (demo.length > 0 ? `demo accounts (username / password):\n${demo.join('\n')}\n` : '') +
      `get a token: curl -s -X POST ${server.url}/v1/token -d username=${demo.length > 0 ? DEMO_ACCOUNTS[0].username : 'USER'} -d password=${demo.length > 0 ? DEMO_ACCOUNTS[0].password : 'PASSWORD'}\n` +
      `or look around in a browser: ${server.url}/\n` +
      (from === undefined ? '' : `replicating ${serviceRoot(from)} every ${every} s (log on stderr)\n`) +
      (values['admin-token'] === undefined ? '' : `admin routes: ${server.url}/admin/ (clock, reset, checkpoint, faults, limits, requests)\n`) +
      `health: ${server.url}/health, readiness: ${server.url}/ready, API description: ${server.url}/v1/openapi.json` +
      (ops.metrics === false
        ? '\n'
        : `, metrics: ${server.url}/metrics${ops.metrics.token === undefined ? ' (this host only)' : ' (with the metrics token)'}\n`) +
      'press Ctrl-C to stop\n',
  );
  const replication =
    from === undefined || !(engine instanceof Engine)
      ? null
      : replicateInBackground(engine, from, replicateToken!, every, (status) => (replicationStatus = { ...replicationStatus!, ...status }));
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) {
        process.stderr.write(`reso-engine: ${signal} again, exiting now\n`);
        process.exit(130);
      }
      stopping = true;
      process.stderr.write(`reso-engine: ${signal}, finishing requests in flight ...\n`);
      Promise.all([server.close(), replication?.stop()])
        .then(() => harness?.close())
        .then(() => (engine instanceof Engine ? undefined : engine.close()))
        .then(
          () => {
            process.stderr.write('reso-engine: stopped\n');
            resolve(0);
          },
          (err: unknown) => {
            process.stderr.write(`reso-engine: ${err instanceof Error ? err.message : String(err)}\n`);
            resolve(1);
          },
        );
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

async function runQuery(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      data: { type: 'string' },
      snapshot: { type: 'string' },
      postgres: { type: 'string' },
      schema: { type: 'string' },
      resource: { type: 'string', default: 'Property' },
      sources: { type: 'string' },
      now: { type: 'string' },
      pretty: { type: 'boolean', default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 1) throw new UsageError('query takes one query string (quote it)');
  const resource = values.resource as QueryResource;
  if (!['Property', 'Media', 'OpenHouse'].includes(resource)) throw new UsageError(`--resource takes Property, Media or OpenHouse, got '${values.resource}'`);
  const engine = await openServedEngine(values, clockOption(values.now), false);
  const sources =
    values.sources === undefined
      ? undefined
      : values.sources
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== '');
  try {
    const result = await engine.query(resource, positionals[0] ?? '', { sources });
    process.stdout.write(`${JSON.stringify(result, null, values.pretty ? 2 : undefined)}\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof QueryError)) throw err;
    const where = err.option === undefined ? '' : ` in ${err.option}${err.position === undefined ? '' : ` at ${err.position}`}`;
    process.stderr.write(`reso-engine: ${err.code}${where}: ${err.message}\n`);
    return 1;
  } finally {
    if (!(engine instanceof Engine)) await engine.close();
  }
}

async function runPg(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command !== 'load' && command !== 'init')
    throw new UsageError(command === undefined ? 'pg takes a command: pg init or pg load' : `unknown pg command '${command}'`);
  const { values } = parseArgs({
    args: rest,
    options: {
      data: { type: 'string' },
      url: { type: 'string' },
      schema: { type: 'string', default: DEFAULT_PG_SCHEMA },
      replace: { type: 'boolean', default: false },
      'skip-bad-records': { type: 'boolean', default: false },
      citus: { type: 'boolean', default: false },
      'shard-count': { type: 'string' },
      workers: { type: 'string' },
      partitions: { type: 'string' },
    },
    strict: true,
  });
  // pg init makes the layout, distributed as asked, with the data set (the embedded one unless --data)
  if (command === 'init') values.data ??= DEFAULT_DATA_DIR;
  if (!values.data) throw new UsageError('--data DIR is required');
  if (!values.url) throw new UsageError('--url URL is required');
  const distribution = distributionOf(values);
  const layout = layoutOf(values.schema);
  const started = Date.now();
  process.stderr.write(`loading ${values.data} into ${shownUrl(values.url)} ...\n`);
  const pool = openPool(values.url);
  const progress = new Progress('pg load');
  try {
    const loaded = await loadDirectoryIntoPostgres(pool, layout, values.data, {
      skipBadRecords: values['skip-bad-records'],
      replace: values.replace,
      distribution,
      // the files as they are read, then each step of the load as it ends
      onProgress: (p: LoadProgress | PgLoadStep) =>
        'step' in p
          ? progress.note(
              `${p.step}${p.resource !== undefined ? ` ${p.resource}` : ''}${p.rows !== undefined ? `: ${p.rows.toLocaleString('en-US')} rows` : ''} in ${(p.ms / 1000).toFixed(1)} s`,
            )
          : progress.update({ what: `reading ${p.file}`, bytes: p.bytesRead, bytesTotal: p.bytesTotal, rows: p.records }),
    });
    progress.end();
    const n = (x: number): string => x.toLocaleString('en-US');
    const t = loaded.tables;
    const skipped = loaded.report.skipped;
    process.stdout.write(
      `loaded ${n(t.Property)} listings, ${n(t.Media)} media, ${n(t.OpenHouse)} open houses, ${n(t.PropertyChange)} property changes, ` +
        `${n(t.Member)} members, ${n(t.Office)} offices into schema ${layout.schema} of ${shownUrl(values.url)} in ${((Date.now() - started) / 1000).toFixed(1)} s\n` +
        (skipped.total === 0
          ? ''
          : `skipped ${n(skipped.total)} bad record${skipped.total === 1 ? '' : 's'}, the first: ${new DataError(skipped.samples[0]).message}\n`),
    );
  } finally {
    await pool.end();
  }
}

async function runReplicate(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      from: { type: 'string' },
      token: { type: 'string' },
      to: { type: 'string' },
      'page-size': { type: 'string', default: '1000' },
    },
    strict: true,
  });
  if (!values.from) throw new UsageError('--from URL is required');
  if (!values.to) throw new UsageError('--to DIR is required');
  const token = values.token ?? process.env.RESO_ENGINE_TOKEN;
  if (!token) throw new UsageError('--token TOKEN (or RESO_ENGINE_TOKEN) is required');
  const pageSize = positiveInteger(values['page-size'], '--page-size')!;
  const started = Date.now();
  const progress = new Progress('replicating');
  const result = await replicate({
    from: values.from,
    token,
    to: values.to,
    pageSize,
    // pages and key listings are progress (a terminal's one line); the rest are events, logged wherever stderr goes
    onProgress: (p) => {
      if (p.phase === 'changes' || p.phase === 'keys') progress.update({ what: p.message });
      else {
        progress.end();
        process.stderr.write(`${p.message}\n`);
      }
    },
  });
  progress.end();
  process.stdout.write(`${result.resumed ? 'resumed and ' : ''}replicated ${result.from} into ${values.to} ${describeRun(result, started)}\n`);
}

/** `in 1.2 s (57 requests): Property +10 -2, Media +80 -9, OpenHouse +1 -0` */
function describeRun(result: ReplicationResult, started: number): string {
  const n = (x: number): string => x.toLocaleString('en-US');
  const parts = REPLICATED_RESOURCES.map((r) => {
    const c = result.resources[r];
    return `${r} +${n(c.upserted)} -${n(c.removed)}${c.orphans > 0 ? ` (${n(c.orphans)} left out: listing not shown)` : ''}`;
  });
  return `in ${((Date.now() - started) / 1000).toFixed(1)} s (${n(result.requests)} requests): ${parts.join(', ')}`;
}

/**
 * serve --replicate-from: replicates into the served engine in the background, a pass now and
 * then one `everySeconds` after the previous ended (passes never overlap). The first pass that
 * succeeds and those that changed something are logged to stderr, failures too (retried at the
 * next interval, never fatal). `stop` ends the loop, aborting a pass in flight (its requests and
 * retry waits; a change being applied finishes, so the engine holds whole pages only).
 */
function replicateInBackground(
  engine: Engine,
  from: string,
  token: string,
  everySeconds: number,
  report: (status: Partial<ReplicationStatus>) => void,
): { stop(): Promise<void> } {
  const sink = new EngineSink(engine);
  const abort = new AbortController();
  const { signal } = abort;
  const log = (line: string): boolean => process.stderr.write(`reso-engine: ${line}\n`);
  let reported = false;
  let passes = 0;
  let failures = 0;
  const pass = async (): Promise<void> => {
    const started = Date.now();
    passes++;
    try {
      const result = await replicate({
        from,
        token,
        sink,
        fetch: (url, init) => fetch(url, { ...init, signal }),
        sleep: (ms) => delay(ms, undefined, { signal }),
      });
      const changed = REPLICATED_RESOURCES.some((r) => result.resources[r].upserted + result.resources[r].removed > 0);
      if (!reported || changed) log(`replicated ${result.from} ${describeRun(result, started)}`);
      reported = true;
      report({ lastSuccessAt: started, lastError: null, passes, failures });
    } catch (err) {
      if (signal.aborted) return;
      const code = err instanceof QueryError ? `${err.code}: ` : '';
      failures++;
      report({ lastError: `${code}${err instanceof Error ? err.message : String(err)}`, passes, failures });
      log(`replication from ${from} failed: ${code}${err instanceof Error ? err.message : String(err)}; next attempt in ${everySeconds} s`);
    }
  };
  const loop = (async (): Promise<void> => {
    while (!signal.aborted) {
      await pass();
      await delay(everySeconds * 1000, undefined, { signal }).catch(() => undefined);
    }
  })();
  return {
    stop: async () => {
      abort.abort();
      await loop;
    },
  };
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'generate':
        runGenerate(rest);
        return 0;
      case 'serve':
        return await runServe(rest);
      case 'query':
        return await runQuery(rest);
      case 'snapshot':
        await runSnapshot(rest);
        return 0;
      case 'pg':
        await runPg(rest);
        return 0;
      case 'replicate':
        await runReplicate(rest);
        return 0;
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(USAGE);
        return command === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown command '${command}'`);
    }
  } catch (err) {
    if (err instanceof UsageError || (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'))) {
      process.stderr.write(`reso-engine: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    // A snapshot that cannot be opened or written names its code (SnapshotCorrupt, ...) and file;
    // a failed replication its code (Unauthorized, HttpError, ...) and the URL; PostgreSQL's
    // (BackendUnavailable, PgSchemaExists, ...) theirs. A bad data line reads as the loader wrote it.
    const coded = err instanceof SnapshotError || err instanceof ReplicationError || (err instanceof QueryError && !(err instanceof DataError));
    const code = coded ? `${err.code}: ` : '';
    process.stderr.write(`reso-engine: ${code}${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
