/**
 * The HTTP service under load. First, on the default data set, a mix of ten typical requests
 * (a search page of full records, a count, a key fetch, a list of a few fields, a radius, a text
 * search, a navigation, map pins, an aggregation, an expansion) through the real server with 50
 * keep-alive connections, next to a bare node:http server replaying the very same response bytes
 * (status, headers, body) in the same run: the service's requests/s as a fraction of the bare
 * server's is the cost of everything the service does beyond the transport. The mix runs twice,
 * without and with `Accept-Encoding: gzip` (wire bytes per response reported), and a page of 100
 * full listings alone, without and with gzip. The service runs as `npm start` runs it (the
 * engine's result cache on: the mix repeats its ten requests); the identity mix runs once more on
 * an engine with the result cache off, every request executing its query. Then, per data set
 * size, requests per second and latency (median, p95, p99) of a typical search page and of the key
 * fetch, and one large streamed page (time to first byte, total time, peak RSS growth). Zero errors required throughout.
 *
 * The load generator is a closed loop of 50 connections in a child process (its own event loop,
 * so it does not queue behind the server's, and its own CPU time), written on node:http rather
 * than autocannon to keep the dependency list short. On a 2-core machine client and server share
 * the cores: requests/s are a floor for the server alone. The server's CPU time per request (this
 * process's, over the timed phase) is reported beside them: it moves far less than requests/s
 * when other work shares the machine.
 */
import { createServer, request as httpRequest, type OutgoingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawn } from 'node:child_process';
import { Engine } from '../src/engine.js';
import { createHandler } from '../src/service/handler.js';
import { serve, type Server } from '../src/adapters/http.js';
import { benchDataset } from './data.js';
import type { BenchFile, BenchRow } from './lib.js';

const CONNECTIONS = 50;

/** A typical search page: one of a few cities, a price band, newest or cheapest first, 25 rows. */
function searchPaths(): string[] {
  const cities = ['Seattle', 'Houston', 'Phoenix', 'Los Angeles', 'Irvine', 'San Diego', 'Scottsdale', 'Bellevue']; // the demo account's MLSs
  const out: string[] = [];
  cities.forEach((city, i) => {
    const lo = 200_000 + (i % 4) * 100_000;
    const filter = `City eq '${city}' and StandardStatus eq 'Active' and ListPrice ge ${lo} and ListPrice le ${lo + 600_000} and BedroomsTotal ge 2`;
    const orderby = i % 2 === 0 ? 'ListPrice desc' : 'ModificationTimestamp desc';
    const q = new URLSearchParams({ $filter: filter, $orderby: orderby, $top: '25' }).toString();
    out.push(`/v1/listings/data/Property?${q}`);
  });
  return out;
}

const CLIENT = `
const http = require('node:http');
const { host, port, paths, token, connections, warmupMs, durationMs, encoding } = JSON.parse(process.env.LOAD_OPTIONS);
const headers = { authorization: 'Bearer ' + token };
if (encoding) headers['accept-encoding'] = encoding;
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
let phase = 'warmup';
const latencies = [];
let ok = 0, bad = 0, errors = 0, bytes = 0, next = 0, start = 0, end = 0;
function one() {
  return new Promise((resolve) => {
    const path = paths[next++ % paths.length];
    const t0 = process.hrtime.bigint();
    const counted = phase === 'run';
    const req = http.request({ host, port, path, agent, headers }, (res) => {
      res.on('data', (b) => { if (counted) bytes += b.length; });
      res.on('end', () => {
        if (counted && phase === 'run') {
          latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
          if (res.statusCode === 200) ok++; else bad++;
        }
        resolve();
      });
    });
    req.on('error', () => { if (phase === 'run') errors++; resolve(); });
    req.end();
  });
}
async function loop() { while (phase !== 'done') await one(); }
const loops = Array.from({ length: connections }, loop);
setTimeout(() => {
  phase = 'run';
  process.send({ phase });
  start = performance.now();
  setTimeout(() => { phase = 'done'; end = performance.now(); process.send({ phase }); }, durationMs);
}, warmupMs);
Promise.all(loops).then(() => {
  agent.destroy();
  process.send({ result: { latencies, ok, bad, errors, bytes, seconds: (end - start) / 1000 } }, () => process.exit(0));
});
`;

interface LoadResult {
  latencies: number[];
  ok: number;
  bad: number;
  errors: number;
  bytes: number;
  seconds: number;
  /** CPU time of this process (the server's event loop, its GC and zlib threads) per request of the timed phase, µs. */
  serverCpuUs: number;
}

export function load(
  server: { host: string; port: number },
  token: string,
  paths: string[],
  warmupMs: number,
  durationMs: number,
  encoding?: string,
): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const options = { host: server.host, port: server.port, paths, token, connections: CONNECTIONS, warmupMs, durationMs, encoding };
    const child = spawn(process.execPath, ['-e', CLIENT], {
      env: { ...process.env, LOAD_OPTIONS: JSON.stringify(options) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let cpu0: NodeJS.CpuUsage | null = null;
    let cpu = 0;
    child.on('message', (m: { phase?: string; result?: Omit<LoadResult, 'serverCpuUs'> }) => {
      if (m.phase === 'run') cpu0 = process.cpuUsage();
      else if (m.phase === 'done' && cpu0 !== null) {
        const d = process.cpuUsage(cpu0);
        cpu = d.user + d.system;
      } else if (m.result) resolve({ ...m.result, serverCpuUs: cpu / Math.max(1, m.result.ok + m.result.bad) });
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`the load generator exited with ${code}`));
    });
  });
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

function row(task: string, r: LoadResult, note: string): BenchRow {
  const sorted = [...r.latencies].sort((a, b) => a - b);
  return {
    bench: 'http',
    task,
    opsPerSec: r.ok / r.seconds,
    medianMs: pct(sorted, 0.5),
    p95Ms: pct(sorted, 0.95),
    samples: sorted.length,
    metrics: {
      p99Ms: pct(sorted, 0.99),
      maxMs: sorted[sorted.length - 1],
      errors: r.bad + r.errors,
      connections: CONNECTIONS,
      serverCpuUsPerRequest: r.serverCpuUs,
      kbPerResponse: r.bytes / 1024 / Math.max(1, r.ok),
    },
    note,
  };
}

/** One large page over a fresh connection: time to the first byte, total time, RSS growth. */
function bigPage(
  server: Server,
  token: string,
  path: string,
): Promise<{ firstByteMs: number; totalMs: number; bytes: number; chunks: number; rssGrowthMB: number }> {
  return new Promise((resolve, reject) => {
    const rss0 = process.memoryUsage().rss;
    let peak = rss0;
    const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    const t0 = performance.now();
    let first = 0;
    let bytes = 0;
    let chunks = 0;
    const req = httpRequest({ host: server.host, port: server.port, path, agent: false, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.on('data', (b: Buffer) => {
        if (first === 0) first = performance.now();
        bytes += b.length;
        chunks++;
      });
      res.on('end', () => {
        clearInterval(timer);
        if (res.statusCode !== 200) reject(new Error(`big page: ${res.statusCode}`));
        else resolve({ firstByteMs: first - t0, totalMs: performance.now() - t0, bytes, chunks, rssGrowthMB: (peak - rss0) / 2 ** 20 });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** The ten requests of the mixed workload, on the default data set as the demo account sees it. */
export function mixedPaths(engine: Engine): string[] {
  const sources = ['CRMLS', 'NWMLS', 'ARMLS', 'HAR'];
  const withMedia = engine.query('Media', '$select=ResourceRecordKey&$orderby=MediaKey&$top=1', { sources }).value[0].ResourceRecordKey as string;
  const p = (options: Record<string, string>): string =>
    `/v1/listings/data/Property?${Object.entries(options)
      .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
      .join('&')}`;
  return [
    p({ $filter: "City eq 'Seattle' and StandardStatus eq 'Active' and ListPrice ge 300000", $orderby: 'ListPrice desc', $top: '25' }),
    p({ $filter: "StandardStatus eq 'Active'", $count: 'true', $top: '0' }),
    `/v1/listings/data/Property('${withMedia}')`,
    p({ $select: 'ListingKey,ListPrice,City,BedroomsTotal,StandardStatus', $orderby: 'ModificationTimestamp desc', $top: '50' }),
    p({
      $filter: "geo.distance(Location, geography'POINT(-122.33 47.61)') le 10000",
      $select: 'ListingKey,ListPrice,UnparsedAddress,Latitude,Longitude',
      $top: '25',
    }),
    p({ $filter: "search.text(KeywordSearchText,'pool granite')", $orderby: 'relevance desc', $top: '10' }),
    `/v1/listings/data/Property('${withMedia}')/Media`,
    p({ $filter: "StandardStatus eq 'Active'", $select: 'ListingKey,Latitude,Longitude,ListPrice', $top: '200' }),
    p({ $apply: "filter(StandardStatus eq 'Active')/groupby((City),aggregate($count as N,ListPrice with average as AvgPrice))" }),
    p({ $filter: "City eq 'Houston'", $select: 'ListingKey,ListPrice', $expand: 'Media($select=MediaURL;$top=3)', $top: '10' }),
  ];
}

/** One response as the server sent it: status, headers (as a node server writes them back) and the body bytes. */
interface Captured {
  readonly status: number;
  readonly headers: OutgoingHttpHeaders;
  readonly body: Buffer;
}

/** Headers node:http writes itself (or that describe the connection), left to the replaying server. */
const TRANSPORT_HEADERS = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding', 'content-length']);

function capture(server: Server, token: string, path: string, encoding: string | undefined): Promise<Captured> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (encoding !== undefined) headers['accept-encoding'] = encoding;
    const req = httpRequest({ host: server.host, port: server.port, path, agent: false, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () => {
        const body = Buffer.concat(parts);
        const out: OutgoingHttpHeaders = {};
        for (let i = 0; i < res.rawHeaders.length; i += 2) {
          if (!TRANSPORT_HEADERS.has(res.rawHeaders[i].toLowerCase())) out[res.rawHeaders[i]] = res.rawHeaders[i + 1];
        }
        out['Content-Length'] = String(body.byteLength);
        resolve({ status: res.statusCode ?? 0, headers: out, body });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** A bare node:http server that answers each path with the bytes captured for it. */
async function bareServer(responses: ReadonlyMap<string, Captured>): Promise<{ host: string; port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const r = responses.get(req.url ?? '');
    if (r === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(r.status, r.headers).end(r.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { address, port } = server.address() as AddressInfo;
  return {
    host: address,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The mixed workload, service and bare server alternating (service, bare, service, bare) so a
 * neighbour's load on the machine hits both alike; the best round of each is reported.
 */
export async function mixed(options: { quick: boolean; log: (line: string) => void; rounds?: number }): Promise<BenchRow[]> {
  const { quick, log } = options;
  const engine = await Engine.open({ now: () => new Date('2025-06-01T00:00:00Z') });
  const server = await serve(createHandler({ engine }), { port: 0 });
  const rows: BenchRow[] = [];
  try {
    const t = await fetch(`${server.url}/v1/token`, { method: 'POST', body: new URLSearchParams({ username: 'demo', password: 'demo-password' }) });
    const token = ((await t.json()) as { access_token: string }).access_token;
    const paths = mixedPaths(engine);
    const warmup = quick ? 500 : 2000;
    const duration = quick ? 3000 : 8000;
    const rounds = options.rounds ?? 2;
    let bareIdentity: LoadResult | null = null;
    for (const encoding of [undefined, 'gzip']) {
      const captured = new Map<string, Captured>();
      for (const p of paths) {
        const c = await capture(server, token, p, encoding);
        if (c.status !== 200 || c.body.byteLength < 2) throw new Error(`${p}: ${c.status} with ${c.body.byteLength} bytes`);
        captured.set(p, c);
      }
      const bytes = [...captured.values()].reduce((n, c) => n + c.body.byteLength, 0);
      const bare = await bareServer(captured);
      try {
        let best: LoadResult | null = null;
        let bestBare: LoadResult | null = null;
        const rate = (r: LoadResult | null): number => (r === null ? 0 : r.ok / r.seconds);
        for (let round = 0; round < rounds; round++) {
          log(`mixed workload${encoding ? `, accept-encoding ${encoding}` : ''}, round ${round + 1}: service`);
          const s = await load(server, token, paths, warmup, duration, encoding);
          if (s.bad + s.errors > 0 || rate(s) > rate(best)) best = s.bad + s.errors > 0 && best !== null ? best : s;
          log(`  ${rate(s).toFixed(0)} req/s; bare server`);
          const b = await load(bare, token, paths, warmup, duration, encoding);
          if (rate(b) > rate(bestBare)) bestBare = b;
          log(`  ${rate(b).toFixed(0)} req/s`);
        }
        const label = encoding === undefined ? 'identity' : encoding;
        if (encoding === undefined) bareIdentity = bestBare;
        const fraction = rate(best) / rate(bestBare);
        rows.push(
          row(
            `mixed ten requests, ${label} (default data set)`,
            best!,
            `${(fraction * 100).toFixed(0)}% of the bare server; ${bytes} bytes for the ten bodies`,
          ),
        );
        rows.push(row(`  bare node:http replaying the same bytes, ${label}`, bestBare!, 'the transport alone'));
        rows.push({
          bench: 'http',
          task: `  mixed, ${label}: service / bare`,
          metrics: {
            fraction,
            serviceRps: rate(best),
            bareRps: rate(bestBare),
            // on a shared machine CPU time per request is steadier than requests/s: its ratio is the fraction a CPU-bound server reaches
            cpuFraction: bestBare!.serverCpuUs / best!.serverCpuUs,
            serviceCpuUsPerRequest: best!.serverCpuUs,
            bareCpuUsPerRequest: bestBare!.serverCpuUs,
            bodyBytesPerMix: bytes,
          },
        });
      } finally {
        await bare.close();
      }
    }
    rows.push(...(await mixedWithoutResultCache(paths, bareIdentity!, { warmup, duration, rounds, log })));
    const full = '/v1/listings/data/Property?$top=100';
    for (const encoding of [undefined, 'gzip']) {
      log(`100 full listings${encoding ? `, accept-encoding ${encoding}` : ''}`);
      rows.push(
        row(
          `Property?$top=100, ${encoding ?? 'identity'} (default data set)`,
          await load(server, token, [full], warmup, duration, encoding),
          'one page of 100 full records',
        ),
      );
    }
  } finally {
    await server.close();
  }
  return rows;
}

/**
 * The identity mix again through a second server whose engine has its result cache off, so that
 * every request executes its query: what the service costs when requests do not repeat. Compared
 * with the bare server's best identity round of `mixed`.
 */
async function mixedWithoutResultCache(
  paths: string[],
  bare: LoadResult,
  o: { warmup: number; duration: number; rounds: number; log: (line: string) => void },
): Promise<BenchRow[]> {
  const engine = await Engine.open({ now: () => new Date('2025-06-01T00:00:00Z'), resultCache: false });
  const server = await serve(createHandler({ engine }), { port: 0 });
  try {
    const t = await fetch(`${server.url}/v1/token`, { method: 'POST', body: new URLSearchParams({ username: 'demo', password: 'demo-password' }) });
    const token = ((await t.json()) as { access_token: string }).access_token;
    let best: LoadResult | null = null;
    for (let round = 0; round < o.rounds; round++) {
      o.log(`mixed workload, result cache off, round ${round + 1}: service`);
      const s = await load(server, token, paths, o.warmup, o.duration);
      if (best === null || (s.bad + s.errors === 0 && s.ok / s.seconds > best.ok / best.seconds)) best = s;
      o.log(`  ${(s.ok / s.seconds).toFixed(0)} req/s`);
    }
    const fraction = best!.ok / best!.seconds / (bare.ok / bare.seconds);
    return [
      row(
        'mixed ten requests, identity, result cache off (default data set)',
        best!,
        `${(fraction * 100).toFixed(0)}% of the bare server's best identity round`,
      ),
      {
        bench: 'http',
        task: '  mixed, identity, result cache off: service / bare',
        metrics: {
          fraction,
          serviceRps: best!.ok / best!.seconds,
          cpuFraction: bare.serverCpuUs / best!.serverCpuUs,
          serviceCpuUsPerRequest: best!.serverCpuUs,
        },
      },
    ];
  } finally {
    await server.close();
  }
}

const bench: BenchFile = {
  name: 'http',
  async run({ sizes, quick, log }) {
    const rows: BenchRow[] = await mixed({ quick, log });
    for (const size of sizes) {
      const label = size >= 1_000_000 ? `${size / 1_000_000}M` : `${size / 1000}k`;
      const dir = benchDataset(size, log);
      log(`loading ${label}`);
      const engine = await Engine.open({ data: dir, now: () => new Date('2025-06-01T00:00:00Z') });
      const server = await serve(createHandler({ engine }), { port: 0 });
      try {
        const t = await fetch(`${server.url}/v1/token`, { method: 'POST', body: new URLSearchParams({ username: 'demo', password: 'demo-password' }) });
        const token = ((await t.json()) as { access_token: string }).access_token;
        const paths = searchPaths();
        // every path answers 200 with rows before the load starts
        for (const p of paths) {
          const r = await fetch(`${server.url}${p}`, { headers: { authorization: `Bearer ${token}` } });
          const body = (await r.json()) as { value?: unknown[] };
          if (r.status !== 200 || !body.value?.length) throw new Error(`${p}: ${r.status} with ${body.value?.length ?? 0} rows`);
        }
        const warmup = quick ? 500 : 2000;
        const duration = quick ? 3000 : 10_000;
        log(`search page, ${CONNECTIONS} connections, ${duration / 1000} s`);
        rows.push(
          row(
            `search page $top=25 (${label})`,
            await load(server, token, paths, warmup, duration),
            'filter (city, status, price band, bedrooms) + order, full records, demo account',
          ),
        );
        const keys = engine
          .query('Property', "$filter=OriginatingSystemName in ('CRMLS','NWMLS','ARMLS','HAR')&$select=ListingKey&$top=64")
          .value.map((r) => r.ListingKey as string);
        log(`fetch by key, ${CONNECTIONS} connections`);
        rows.push(
          row(
            `Property('KEY') (${label})`,
            await load(
              server,
              token,
              keys.map((k) => `/v1/listings/data/Property('${k}')`),
              warmup,
              duration,
            ),
            'one full record',
          ),
        );
        log('one 25,000-row Media page');
        const big = await bigPage(server, token, '/v1/listings/data/Media?$top=25000');
        rows.push({
          bench: 'http',
          task: `Media $top=25000, one request (${label})`,
          medianMs: big.totalMs,
          metrics: { firstByteMs: big.firstByteMs, MB: big.bytes / 2 ** 20, chunks: big.chunks, rssGrowthMB: big.rssGrowthMB },
          note: 'streamed',
        });
      } finally {
        await server.close();
      }
    }
    return rows;
  },
};

export default bench;
