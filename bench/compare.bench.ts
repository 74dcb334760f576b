/**
 * The comparison: the query families Q1–Q10 and the load (L) on reso-engine and on the engines a
 * user would pick instead — SQLite (better-sqlite3: B-tree, FTS5, R*Tree), a kdbush radius walk (Q4), Orama, MiniSearch and a
 * naive JavaScript scan — on the same data set in the same run. Each engine runs alone in its own
 * child process (bench/compare/child.ts), so memory figures are its own.
 *
 * Every answer is checked against the naive scan's (bench/compare/peers/naive.ts): the same keys in
 * the same order for sorted families, the same set for Q7, the same count and groups for Q9 and Q5,
 * and recall@k against textbook BM25 for ranked families (a key counts when its textbook score
 * reaches the k-th score, so ties may fall either way). A fast wrong answer is not a win: the ratio
 * column compares reso-engine with the fastest *correct* peer. Each family repeats one query, so
 * reso-engine runs with its result cache off (bench/compare/peers/reso-engine.ts): the figures are
 * of execution, not of a kept answer.
 *
 * Options: `--only Q4` (families; `--only L` loads only), `--peers sqlite,naive` (reso-engine and
 * the naive reference always run), `--load-timeout 420` (seconds; a peer still loading by then is
 * reported as not finished).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DoneReport, FamilyReport, LoadReport } from './compare/child.js';
import { CHECK, FAMILY_IDS, type Answer, type FamilyId } from './compare/families.js';
import { benchDataset } from './data.js';
import { gitCommit, type BenchFile, type BenchOptions, type BenchRow } from './lib.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Peers in report order; 'naive' is also the reference every answer is checked against. */
export const PEERS = ['reso-engine', 'reso-engine-postgres', 'reso-engine-postgres-partitioned', 'sqlite', 'kdbush', 'orama', 'minisearch', 'naive'] as const;

interface PeerRun {
  readonly id: string;
  readonly load?: LoadReport;
  readonly families: Partial<Record<FamilyId, FamilyReport>>;
  /** Why the run ended without a report (timeout, crash). */
  readonly failure?: string;
}

interface Verdict {
  readonly correct: boolean;
  /** For ranked families: |answer ∩ acceptable| / |reference answer|. */
  readonly recall?: number;
  readonly detail: string;
}

function runPeer(id: string, dir: string, families: readonly FamilyId[] | 'none', options: BenchOptions, env: NodeJS.ProcessEnv = {}): Promise<PeerRun> {
  const args = [
    '--expose-gc',
    '--max-old-space-size=16384',
    '--import',
    'tsx',
    path.join(here, 'compare', 'child.ts'),
    '--peer',
    id,
    '--dir',
    dir,
    '--families',
    families === 'none' ? 'none' : families.join(','),
    ...(options.quick ? ['--quick'] : []),
  ];
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
    let load: LoadReport | undefined;
    let done: DoneReport | undefined;
    let buffered = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      buffered += chunk;
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const event = JSON.parse(buffered.slice(0, nl)) as LoadReport | DoneReport;
        buffered = buffered.slice(nl + 1);
        if (event.event === 'loaded') {
          load = event;
          clearTimeout(timer);
        } else done = event;
      }
    });
    const timeoutS = options.loadTimeoutS ?? 420;
    let failure: string | undefined;
    const timer = setTimeout(() => {
      failure = `did not finish loading in ${timeoutS} s`;
      child.kill('SIGKILL');
    }, timeoutS * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (!done && !failure) failure = `exited with ${signal ?? `code ${code}`} before reporting`;
      resolve({ id, load, families: done?.families ?? {}, failure });
    });
  });
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function check(id: FamilyId, answer: Answer, reference: Answer): Verdict {
  if (answer.kind !== reference.kind) return { correct: false, detail: `answered ${answer.kind}, expected ${reference.kind}` };
  switch (CHECK[id]) {
    case 'count': {
      const [a, r] = [answer, reference] as Array<Extract<Answer, { kind: 'count' }>>;
      return { correct: a.count === r.count, detail: a.count === r.count ? `count ${a.count}` : `count ${a.count}, expected ${r.count}` };
    }
    case 'groups': {
      const [a, r] = [answer, reference] as Array<Extract<Answer, { kind: 'groups' }>>;
      const rows = (gs: Answer & { kind: 'groups' }): string => JSON.stringify(gs.groups.map((g) => [g.City, g.N, g.Median, g.P90]));
      const same = rows(a) === rows(r);
      return { correct: same, detail: same ? `${a.groups.length} groups` : `groups differ (${a.groups.length} vs ${r.groups.length})` };
    }
    case 'ordered': {
      const [a, r] = [answer, reference] as Array<Extract<Answer, { kind: 'keys' }>>;
      if (sameList(a.keys, r.keys)) return { correct: true, detail: `${a.keys.length} keys in order` };
      const at = a.keys.findIndex((k, i) => k !== r.keys[i]);
      return { correct: false, detail: `${a.keys.length} keys, expected ${r.keys.length}; first difference at position ${at < 0 ? a.keys.length : at}` };
    }
    case 'set': {
      const [a, r] = [answer, reference] as Array<Extract<Answer, { kind: 'keys' }>>;
      const mine = new Set(a.keys);
      const missing = r.keys.filter((k) => !mine.has(k)).length;
      const extra = mine.size - (r.keys.length - missing);
      const correct = missing === 0 && extra === 0 && mine.size === a.keys.length;
      return { correct, detail: correct ? `${a.keys.length} keys` : `${missing} missing, ${extra} extra of ${r.keys.length}` };
    }
    case 'ranked': {
      const [a, r] = [answer, reference] as Array<Extract<Answer, { kind: 'keys' }>>;
      const acceptable = new Set(r.acceptable ?? r.keys);
      const hits = new Set(a.keys.filter((k) => acceptable.has(k))).size;
      const recall = r.keys.length === 0 ? (a.keys.length === 0 ? 1 : 0) : hits / r.keys.length;
      const correct = recall === 1 && a.keys.length === r.keys.length;
      return { correct, recall, detail: `recall@${r.keys.length} ${recall.toFixed(2)}${a.keys.length !== r.keys.length ? ` (${a.keys.length} keys)` : ''}` };
    }
  }
}

const ms = (x: number): string => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x >= 0.01 ? x.toFixed(3) : x.toPrecision(2));

/** The markdown comparison table of one size: families down, engines across. */
function table(
  size: number,
  runs: readonly PeerRun[],
  verdicts: Map<string, Partial<Record<FamilyId, Verdict>>>,
  families: readonly FamilyId[],
  ratios: Partial<Record<FamilyId | 'L', string>>,
): string {
  const shown = runs.filter((r) => r.id !== 'reso-engine-property-only');
  const lines = [
    `### ${size.toLocaleString('en-US')} listings`,
    '',
    `| family | ${shown.map((r) => r.load?.peer ?? r.id).join(' | ')} | reso-engine / best correct peer |`,
    `|---|${shown.map(() => '---|').join('')}---|`,
  ];
  for (const id of families) {
    const cells = shown.map((r) => {
      if (r.failure && !r.families[id]) return `— (${r.failure})`;
      const f = r.families[id];
      if (!f) return '';
      if (f.status === 'n/a') return `n/a: ${f.reason}`;
      if (f.status === 'error') return `error: ${f.message}`;
      const v = verdicts.get(r.id)?.[id];
      const mark = r.id === 'naive' ? 'reference' : v ? `${v.correct ? '✓' : '✗'} ${v.detail}` : '';
      return `${ms(f.medianMs)} ms (p95 ${ms(f.p95Ms)}, n=${f.samples}) ${mark}`;
    });
    lines.push(`| ${id} | ${cells.join(' | ')} | ${ratios[id] ?? ''} |`);
  }
  const loadCell = (r: PeerRun): string =>
    r.load
      ? `${(r.load.loadMs / 1000).toFixed(1)} s; +${r.load.rssMB.toFixed(0)} MB resident (heap ${r.load.heapMB.toFixed(0)} MB, ArrayBuffers ${r.load.arrayBuffersMB.toFixed(0)} MB); ${r.load.loads}`
      : `— (${r.failure ?? 'no load report'})`;
  lines.push(`| L | ${shown.map(loadCell).join(' | ')} | ${ratios.L ?? ''} |`);
  const po = runs.find((r) => r.id === 'reso-engine-property-only');
  if (po) lines.push('', `reso-engine with Property only (no Media): ${loadCell(po)}.`);
  return lines.join('\n');
}

const bench: BenchFile = {
  name: 'compare',
  async run(options) {
    const rows: BenchRow[] = [];
    const markdown: string[] = [];
    const selected = options.only.filter((o) => /^(Q\d+|L)$/i.test(o)).map((o) => o.toUpperCase());
    const families = FAMILY_IDS.filter((id) => selected.length === 0 || selected.includes(id));
    const wantLoadOnly = selected.length > 0 && families.length === 0;
    const unknown = options.peers.filter((p) => !(PEERS as readonly string[]).includes(p));
    if (unknown.length) throw new Error(`--peers: no peer named ${unknown.join(', ')} (peers: ${PEERS.join(', ')})`);
    const peers = PEERS.filter((p) => options.peers.length === 0 || options.peers.includes(p) || p === 'reso-engine' || p === 'naive');
    for (const size of options.sizes) {
      const dir = benchDataset(size, options.log);
      const label = `${size / 1000}k`;
      const runs: PeerRun[] = [];
      // reso-engine's three runs first and back to back: the same code for all of them.
      options.log(`${label}: reso-engine`);
      runs.push(await runPeer('reso-engine', dir, wantLoadOnly ? 'none' : families, options));
      if (!wantLoadOnly) {
        options.log(`${label}: reso-engine returning keys`);
        runs.push({ ...(await runPeer('reso-engine', dir, families, options, { RESO_COMPARE_SELECT_KEYS: '1' })), id: 'reso-engine-keys' });
      }
      options.log(`${label}: reso-engine without Media (load only)`);
      runs.push({ ...(await runPeer('reso-engine', dir, 'none', options, { RESO_COMPARE_PROPERTY_ONLY: '1' })), id: 'reso-engine-property-only' });
      for (const id of peers.filter((p) => p !== 'reso-engine')) {
        options.log(`${label}: ${id}`);
        runs.push(await runPeer(id, dir, wantLoadOnly ? 'none' : families, options));
      }

      const reference = runs.find((r) => r.id === 'naive')!;
      const verdicts = new Map<string, Partial<Record<FamilyId, Verdict>>>();
      for (const run of runs) {
        const v: Partial<Record<FamilyId, Verdict>> = {};
        for (const id of families) {
          const mine = run.families[id];
          const ref = reference.families[id];
          if (mine?.status === 'ok' && ref?.status === 'ok') v[id] = check(id, mine.answer, ref.answer);
        }
        verdicts.set(run.id, v);
      }
      const ratios: Partial<Record<FamilyId | 'L', string>> = {};
      // Load: reso-engine without Media against the fastest peer (the peers load Property only).
      const own = runs.find((r) => r.id === 'reso-engine-property-only')?.load;
      const fastest = runs.filter((r) => !r.id.startsWith('reso-engine') && r.load).sort((a, b) => a.load!.loadMs - b.load!.loadMs)[0];
      if (own && fastest) ratios.L = `${(own.loadMs / fastest.load!.loadMs).toPrecision(2)} (Property only, vs ${fastest.load!.peer})`;
      const peersOnly = runs.filter((r) => !r.id.startsWith('reso-engine'));
      for (const id of families) {
        const best = peersOnly
          .map((r) => ({ r, f: r.families[id] }))
          .filter(({ r, f }) => f?.status === 'ok' && (r.id === 'naive' || verdicts.get(r.id)?.[id]?.correct))
          .sort((a, b) => (a.f as { medianMs: number }).medianMs - (b.f as { medianMs: number }).medianMs)[0];
        if (!best) continue;
        const bestMs = (best.f as { medianMs: number }).medianMs;
        const parts = ['reso-engine', 'reso-engine-keys'].flatMap((engineId) => {
          const f = runs.find((r) => r.id === engineId)?.families[id];
          return f?.status === 'ok' ? [`${engineId === 'reso-engine' ? '' : 'keys: '}${(f.medianMs / bestMs).toPrecision(2)}`] : [];
        });
        ratios[id] = `${parts.join('; ')} (vs ${best.r.load?.peer ?? best.r.id})`;
      }

      for (const run of runs) {
        const name = run.load?.peer ?? run.id;
        rows.push({
          bench: 'compare',
          task: `L ${label} ${name}`,
          metrics: run.load ? { loadMs: run.load.loadMs, rssMB: run.load.rssMB, heapMB: run.load.heapMB, arrayBuffersMB: run.load.arrayBuffersMB } : undefined,
          note: run.failure ?? run.load?.loads,
        });
        for (const id of families) {
          const f = run.families[id];
          if (!f) continue;
          const v = verdicts.get(run.id)?.[id];
          if (f.status !== 'ok') {
            rows.push({ bench: 'compare', task: `${id} ${label} ${name}`, note: f.status === 'n/a' ? `n/a: ${f.reason}` : `error: ${f.message}` });
            continue;
          }
          rows.push({
            bench: 'compare',
            task: `${id} ${label} ${name}`,
            medianMs: f.medianMs,
            p95Ms: f.p95Ms,
            samples: f.samples,
            opsPerSec: 1000 / f.medianMs,
            metrics: { firstMs: f.firstMs, ...(v?.recall !== undefined ? { recall: v.recall } : {}) },
            note: [
              run.id === 'naive' ? 'reference' : v ? `${v.correct ? 'correct' : 'WRONG'}: ${v.detail}` : '',
              run.id === 'reso-engine' ? `ratio to best correct peer ${ratios[id] ?? 'n/a'}` : '',
              f.plan ? `plan: ${f.plan}` : '',
            ]
              .filter(Boolean)
              .join('; '),
          });
        }
      }
      markdown.push(table(size, runs, verdicts, families, ratios));
    }
    const command = [
      'npm run bench --',
      ...options.sizes.map((n) => `--size ${n % 1_000_000 === 0 ? `${n / 1_000_000}m` : `${n / 1000}k`}`),
      ...(options.only.length ? options.only.map((o) => `--only ${o}`) : ['--only compare']),
      ...(options.peers.length ? [`--peers ${options.peers.join(',')}`] : []),
      ...(options.quick ? ['--quick'] : []),
    ].join(' ');
    const header = [
      `Produced by \`${command}\` on ${new Date().toISOString().slice(0, 10)} (commit ${gitCommit()}, Node ${process.version}, ${os.cpus().length}× ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB).`,
      'Medians and p95 over the stated number of runs after warm-up; reso-engine runs each family as an OData string through `engine.query` with its plan cache on.',
      '✓/✗: the answer checked against the naive scan (ranked families: recall@k against textbook BM25).',
    ].join('\n');
    const out = path.join(here, 'results', 'compare-latest.md');
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, `${header}\n\n${markdown.join('\n\n')}\n`);
    options.log(`comparison tables written to ${path.relative(process.cwd(), out)}`);
    return rows;
  },
};

export default bench;
