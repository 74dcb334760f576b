/**
 * `npm run bench [-- --size 100k] [--only NAME] [--quick] [--peers sqlite,orama] [--load-timeout S]`
 *
 * `--only` takes a bench name (query, search, compare, ...) or a comparison family (Q1–Q10, L),
 * which runs just that family in bench/compare.bench.ts; `--peers` and `--load-timeout` are the
 * comparison's. Runs every selected bench/*.bench.ts in its own child process (clean heap figures), then writes
 * bench/results/<timestamp>.json (with machine, Node version, date and commit) and prints a
 * markdown table. Progress goes to stderr. The children run as the service does (`npm start`):
 * with `--v8-pool-size=0`, V8's background threads one fewer than the cores (DESIGN.md, "Process
 * settings"). RESO_BENCH_V8 adds V8 flags to the child processes after those (for example
 * `--heap-growing-percent=100`, or `--v8-pool-size=4` for Node's default), to measure a process
 * setting beside them.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gitCommit, type BenchFile, type BenchRow } from './lib.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** An `--only` value naming a comparison family rather than a bench. */
const FAMILY = /^(Q\d+|L)$/i;

function parseSize(text: string): number {
  const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(text);
  if (!m) throw new Error(`--size takes a count such as 100k or 1m, not '${text}'`);
  const mult = m[2].toLowerCase() === 'k' ? 1_000 : m[2].toLowerCase() === 'm' ? 1_000_000 : 1;
  return Math.round(Number(m[1]) * mult);
}

interface Args {
  sizes: number[];
  only: string[];
  quick: boolean;
  peers: string[];
  loadTimeoutS?: number;
  child?: string;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { sizes: [], only: [], quick: false, peers: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--size') args.sizes.push(parseSize(argv[++i] ?? ''));
    else if (a === '--only') args.only.push(argv[++i] ?? '');
    else if (a === '--quick') args.quick = true;
    else if (a === '--peers') args.peers.push(...(argv[++i] ?? '').split(',').filter(Boolean));
    else if (a === '--load-timeout') args.loadTimeoutS = Number(argv[++i]);
    else if (a === '--child') args.child = argv[++i];
    else throw new Error(`unknown argument '${a}' (use --size N, --only NAME, --quick, --peers A,B, --load-timeout S)`);
  }
  if (args.sizes.length === 0) args.sizes = [100_000, 1_000_000];
  return args;
}

async function runChild(file: string, args: Args): Promise<void> {
  const mod = (await import(pathToFileURL(path.join(here, file)).href)) as { default: BenchFile };
  const rows = await mod.default.run({
    sizes: args.sizes,
    quick: args.quick,
    only: args.only,
    peers: args.peers,
    loadTimeoutS: args.loadTimeoutS,
    log: (line) => process.stderr.write(`  ${line}\n`),
  });
  process.stdout.write(JSON.stringify(rows));
}

function fmt(n: number | undefined, digits = 3): string {
  if (n === undefined || !Number.isFinite(n)) return '';
  return n >= 1000 ? Math.round(n).toLocaleString('en-US') : n.toPrecision(digits);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.child) return runChild(args.child, args);

  const files = readdirSync(here)
    .filter((f) => f.endsWith('.bench.ts'))
    .filter((f) => args.only.length === 0 || args.only.some((o) => (FAMILY.test(o) ? f === 'compare.bench.ts' : f.toLowerCase().includes(o.toLowerCase()))))
    .sort();
  const rows: BenchRow[] = [];
  const passThrough = process.argv.slice(2);
  for (const file of files) {
    process.stderr.write(`bench ${file}\n`);
    const child = spawnSync(
      process.execPath,
      [
        '--expose-gc',
        '--max-old-space-size=16384',
        '--v8-pool-size=0',
        ...(process.env.RESO_BENCH_V8 ?? '').split(' ').filter(Boolean),
        '--import',
        'tsx',
        path.join(here, 'run.ts'),
        ...passThrough,
        '--child',
        file,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
    );
    if (child.status !== 0) throw new Error(`${file} failed with exit code ${child.status}`);
    rows.push(...(JSON.parse(child.stdout) as BenchRow[]));
  }

  const report = {
    date: new Date().toISOString(),
    commit: gitCommit(),
    node: process.version,
    machine: { cpus: os.cpus().map((c) => c.model)[0], cores: os.cpus().length, memoryBytes: os.totalmem(), platform: `${os.platform()} ${os.arch()}` },
    args: { sizes: args.sizes, only: args.only, quick: args.quick },
    rows,
  };
  const outDir = path.join(here, 'results');
  mkdirSync(outDir, { recursive: true });
  const outFile = path.join(outDir, `${report.date.replace(/[:.]/g, '-')}.json`);
  writeFileSync(outFile, JSON.stringify(report, null, 2) + '\n');

  const lines = [
    `reso-engine bench — ${report.date}, commit ${report.commit}, Node ${report.node}, ${report.machine.cores}× ${report.machine.cpus}`,
    '',
    '| bench | task | ops/s | median ms | p95 ms | samples | other |',
    '|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.bench} | ${r.task} | ${fmt(r.opsPerSec)} | ${fmt(r.medianMs)} | ${fmt(r.p95Ms)} | ${r.samples ?? ''} | ${[
          ...Object.entries(r.metrics ?? {}).map(([k, v]) => `${k}=${fmt(v)}`),
          r.note ?? '',
        ]
          .filter(Boolean)
          .join(', ')} |`,
    ),
  ];
  writeFileSync(outFile.replace(/\.json$/, '.md'), lines.join('\n') + '\n');
  process.stdout.write(lines.join('\n') + '\n');
  process.stderr.write(`results written to ${path.relative(process.cwd(), outFile)} (and .md)\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
