/**
 * The command line over PostgreSQL: `pg load` fills a database (refusing a loaded schema unless
 * --replace, failing on a bad line as the in-memory loader does, or skipping it), `query
 * --postgres` prints what `query --data` prints on the same data, and `serve --postgres` answers
 * the HTTP API and shuts down cleanly (its pool closed, so the process exits). Each CLI run is a
 * child process from the TypeScript sources.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR } from '../../src/engine.js';
import { collectCli, startServe } from '../service/helpers.js';
import { freshDatabase, pgSkip } from './helpers.js';

const NOW = ['--now', '2025-06-01T00:00:00Z'];
/** A nextLink's $skiptoken differs by design between the backends (a keyset here, a generation pin in memory). */
const withoutToken = (text: string): string => text.replace(/(?:\$|%24)skiptoken=[^&"]*/g, '$skiptoken=');

describe.skipIf(pgSkip)('reso-engine pg load, query --postgres and serve --postgres', () => {
  let url: string;
  const temp: string[] = [];
  const tempDir = (): string => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-pg-cli-'));
    temp.push(dir);
    return dir;
  };
  /** The default data set with line 3 of Property.jsonl made bad. */
  const badData = (): string => {
    const dir = tempDir();
    cpSync(DEFAULT_DATA_DIR, dir, { recursive: true });
    const file = path.join(dir, 'Property.jsonl');
    const lines = readFileSync(file, 'utf8').split('\n');
    lines[2] = lines[2].replace(/"ListPrice":[0-9.]+/, '"ListPrice":"cheap"');
    writeFileSync(file, lines.join('\n'));
    return dir;
  };

  beforeAll(async () => {
    url = await freshDatabase('cli');
  });
  afterAll(() => {
    for (const dir of temp) rmSync(dir, { recursive: true, force: true });
  });

  it('pg load prints the load summary; loading again needs --replace', async () => {
    const loaded = await collectCli(['pg', 'load', '--data', DEFAULT_DATA_DIR, '--url', url]);
    expect(loaded.err.split('\n').filter((l) => l.startsWith('reso-engine:'))).toEqual([]);
    expect(loaded.code).toBe(0);
    expect(loaded.out).toMatch(
      /^loaded 2,000 listings, [0-9,]+ media, [0-9,]+ open houses, [0-9,]+ property changes, [0-9,]+ members, [0-9,]+ offices into schema reso of /,
    );
    const again = await collectCli(['pg', 'load', '--data', DEFAULT_DATA_DIR, '--url', url]);
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/^reso-engine: .*--replace/m);
    const replaced = await collectCli(['pg', 'load', '--data', DEFAULT_DATA_DIR, '--url', url, '--replace']);
    expect(replaced.code).toBe(0);
    expect(replaced.out).toMatch(/^loaded 2,000 listings/);
  }, 300_000);

  it('query --postgres prints the same JSON as query --data on the same data, errors included', async () => {
    const cases: string[][] = [
      ["$filter=City eq 'Seattle'&$orderby=ListPrice desc&$select=ListingKey,ListPrice,City&$top=5&$count=true"],
      ['--sources', 'HAR,CRMLS', "$filter=search.text(KeywordSearchText,'pool')&$orderby=relevance desc&$top=3&$select=ListingKey"],
      ['--resource', 'Media', '--pretty', "$filter=MediaCategory eq 'Photo'&$top=2"],
      ['$apply=groupby((StandardStatus),aggregate($count as N,ListPrice with median as M))'],
      ["$filter=City eq 'Houston'&$select=ListingKey&$expand=Media($top=1;$select=MediaKey)"],
      ['$filter=City eq'],
      ['$filter=Nope gt 1'],
    ];
    for (const args of cases) {
      const [memory, postgres] = await Promise.all([
        collectCli(['query', '--data', DEFAULT_DATA_DIR, ...NOW, ...args]),
        collectCli(['query', '--postgres', url, ...NOW, ...args]),
      ]);
      expect(postgres.code, args.join(' ')).toBe(memory.code);
      expect(withoutToken(postgres.out), args.join(' ')).toBe(withoutToken(memory.out));
      expect(postgres.err, args.join(' ')).toBe(memory.err);
    }
  }, 300_000);

  it('a bad data line fails pg load as it fails the in-memory loader, and nothing is loaded; --skip-bad-records skips it', async () => {
    const dir = badData();
    const target = await freshDatabase('cli');
    const memory = await collectCli(['query', '--data', dir, '$top=1']);
    const postgres = await collectCli(['pg', 'load', '--data', dir, '--url', target]);
    expect(memory.code).toBe(1);
    expect(postgres.code).toBe(memory.code);
    expect(postgres.err.split('\n').filter((l) => l.startsWith('reso-engine:'))).toEqual(memory.err.split('\n').filter((l) => l.startsWith('reso-engine:')));
    expect(postgres.err).toMatch(/Property\.jsonl line 3, field ListPrice/);
    // nothing was loaded: the database has no data set to serve
    const empty = await collectCli(['query', '--postgres', target, '$top=1']);
    expect(empty.code).toBe(1);
    const skipped = await collectCli(['pg', 'load', '--data', dir, '--url', target, '--skip-bad-records']);
    expect(skipped.code).toBe(0);
    expect(skipped.out).toMatch(/^loaded 1,999 listings/);
    // the listing, and the children that name it (as the in-memory loader skips them)
    expect(skipped.out).toMatch(/\nskipped [0-9]+ bad records, the first: Property\.jsonl line 3, field ListPrice: /);
  }, 300_000);

  it('serve --postgres answers the API with the accounts loaded with the data, and stops on SIGTERM with its pool closed', async () => {
    const served = await startServe(['--postgres', url, '--port', '0', ...NOW]);
    const { child, url: origin, exited } = served;
    try {
      expect(served.out()).toContain('demo / demo-password');
      const t = await fetch(`${origin}/v1/token`, { method: 'POST', body: new URLSearchParams({ username: 'demo', password: 'demo-password' }) });
      expect(t.status).toBe(200);
      const { access_token } = (await t.json()) as { access_token: string };
      const auth = { authorization: `Bearer ${access_token}` };
      const page = await fetch(`${origin}/v1/listings/data/Property?$filter=City%20eq%20'Seattle'&$top=2&$count=true`, { headers: auth });
      expect(page.status).toBe(200);
      const body = (await page.json()) as { value: Array<{ City: string }>; '@odata.count': number };
      expect(body.value.map((r) => r.City)).toEqual(['Seattle', 'Seattle']);
      const profiles = await fetch(`${origin}/v1/listings/mls_profiles`, { headers: auth });
      expect(((await profiles.json()) as { profiles: Record<string, { current_year: string }> }).profiles.CRMLS.current_year).toBe('2025');
      const count = await fetch(`${origin}/v1/listings/data/Property/$count`, { headers: auth });
      expect(Number(await count.text())).toBeGreaterThan(body['@odata.count']);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(served.err()).toContain('stopped');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL'); // never leave a server behind
    }
  }, 120_000);

  it('usage errors exit 2; a database that cannot be reached exits 1 with BackendUnavailable', async () => {
    for (const args of [
      ['serve', '--postgres', url, '--data', DEFAULT_DATA_DIR],
      ['query', '--postgres', url, '--snapshot', 'x.snapshot', '$top=1'],
      ['query', '--schema', 'reso', '$top=1'],
      ['serve', '--postgres', url, '--replicate-from', 'http://127.0.0.1:1', '--replicate-token', 't'],
      ['pg'],
      ['pg', 'unload'],
      ['pg', 'load', '--url', url],
      ['pg', 'load', '--data', DEFAULT_DATA_DIR],
    ]) {
      const r = await collectCli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err, args.join(' ')).toMatch(/^reso-engine: /);
    }
    const down = await collectCli(['query', '--postgres', 'postgres://postgres@127.0.0.1:1/none', '$top=1']);
    expect(down.code).toBe(1);
    expect(down.err).toMatch(/^reso-engine: BackendUnavailable: /);
  }, 120_000);
});
