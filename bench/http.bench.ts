/**
 * The HTTP service under load: requests per second and latency (median, p95, p99) of a typical
 * search page (`$filter` + `$orderby` + `$top=25`) against a real server on loopback, with 50
 * concurrent keep-alive connections, zero errors required. Also the key fetch, and one large
 * streamed page (time to first byte, total time, peak RSS growth).
 *
 * The load generator is a closed loop of 50 connections in a worker thread (its own event loop,
 * so it does not queue behind the server's), written on node:http rather than autocannon to keep
 * the dependency list short. On a 2-core machine client and server share the cores: the figures
 * are a floor for the server alone.
 */
import { request as httpRequest } from 'node:http';
import { Worker } from 'node:worker_threads';
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

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const { host, port, paths, token, connections, warmupMs, durationMs } = workerData;
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
let phase = 'warmup';
const latencies = [];
let ok = 0, bad = 0, errors = 0, bytes = 0, next = 0, start = 0, end = 0;
function one() {
  return new Promise((resolve) => {
    const path = paths[next++ % paths.length];
    const t0 = process.hrtime.bigint();
    const counted = phase === 'run';
    const req = http.request({ host, port, path, agent, headers: { authorization: 'Bearer ' + token } }, (res) => {
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
  start = performance.now();
  setTimeout(() => { phase = 'done'; end = performance.now(); }, durationMs);
}, warmupMs);
Promise.all(loops).then(() => {
  agent.destroy();
  parentPort.postMessage({ latencies, ok, bad, errors, bytes, seconds: (end - start) / 1000 });
});
`;

interface LoadResult {
  latencies: number[];
  ok: number;
  bad: number;
  errors: number;
  bytes: number;
  seconds: number;
}

function load(server: Server, token: string, paths: string[], warmupMs: number, durationMs: number): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const w = new Worker(WORKER, {
      eval: true,
      workerData: { host: server.host, port: server.port, paths, token, connections: CONNECTIONS, warmupMs, durationMs },
    });
    w.once('message', (m: LoadResult) => {
      void w.terminate();
      resolve(m);
    });
    w.once('error', reject);
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

const bench: BenchFile = {
  name: 'http',
  async run({ sizes, quick, log }) {
    const rows: BenchRow[] = [];
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
