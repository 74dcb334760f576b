/**
 * `reso-engine replicate` against a real node:http server: a full run (summary on stdout, progress
 * on stderr), its errors (exit 1 with the code, exit 2 for usage), and a run killed with SIGKILL
 * after its first flush, which the library then resumes to the same replica.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Server } from '../../src/adapters/http.js';
import { Engine } from '../../src/engine.js';
import { replicate } from '../../src/replicate/replicate.js';
import { REPLICATED_RESOURCES } from '../../src/replicate/sink.js';
import { createHandler, type Handler } from '../../src/service/handler.js';
import { collectCli, defaultEngine, login, quickAccounts, runCli } from '../service/helpers.js';
import { defaultFixture, DEMO_SOURCES, entries, readState, replicaRecords, tempDir, visible } from './helpers.js';

describe('reso-engine replicate', () => {
  let handler: Handler;
  let server: Server;
  let token: string;
  /** While set, requests wait for it (a stalled upstream). */
  let gate: Promise<void> | null = null;
  let watch: (() => void) | null = null;
  const expected = visible(defaultFixture(), DEMO_SOURCES);

  beforeAll(async () => {
    handler = createHandler({ engine: await defaultEngine(), accounts: quickAccounts() });
    server = await serve(
      async (request) => {
        watch?.();
        if (gate !== null) await gate;
        return handler(request);
      },
      { port: 0, host: '127.0.0.1' },
    );
    token = await login(handler);
  });

  afterAll(async () => {
    await server?.close();
  });

  it("replicates the demo account's view into a directory serve --data can open", async () => {
    const dir = path.join(tempDir(), 'replica');
    const { code, out, err } = await collectCli(['replicate', '--from', server.url, '--token', token, '--to', dir, '--page-size', '2000']);
    // not a terminal: no progress (pages, key listings), only the events (the end)
    expect(err).not.toContain('Media: page 1,');
    expect(err).not.toContain('keys listed');
    expect(err).toMatch(/^done/m);
    expect(code).toBe(0);
    expect(out).toMatch(
      new RegExp(
        `^replicated ${server.url}/v1/listings/data into ${dir} in \\d+\\.\\d s \\(\\d+ requests\\): Property \\+1,129 -0, Media \\+19,544 -0, OpenHouse \\+167 -0, Member \\+120 -0, Office \\+32 -0\\n$`,
      ),
    );
    for (const r of REPLICATED_RESOURCES) expect(entries(replicaRecords(dir)[r])).toEqual(entries(expected[r]));
    expect((await Engine.open({ data: dir })).store.Property.rowCount).toBe(1129);
  });

  it('exits 1 with the error code and URL, 2 for usage mistakes', async () => {
    const [bad, usage, size] = await Promise.all([
      collectCli(['replicate', '--from', server.url, '--token', 'expired', '--to', tempDir()]),
      collectCli(['replicate', '--from', server.url, '--token', token]),
      collectCli(['replicate', '--from', server.url, '--token', token, '--to', tempDir(), '--page-size', '0']),
    ]);
    expect(bad.code).toBe(1);
    expect(bad.err).toBe(
      `reso-engine: Unauthorized: the upstream refused the token (401): InvalidToken: The access token is unknown or expired; get a new one from POST /v1/token. (${server.url}/v1/listings/data/$metadata)\n`,
    );
    expect(usage.code).toBe(2);
    expect(usage.err).toContain('--to DIR is required');
    expect(usage.err).toContain('reso-engine replicate --from URL --token TOKEN --to DIR');
    expect(size.code).toBe(2);
    expect(size.err).toContain('--page-size takes an integer of at least 1');
  });

  it('a run killed after its first flush is resumed by the next, to the same replica', async () => {
    const dir = tempDir();
    let release!: () => void;
    let stalled!: () => void;
    const stalledAt = new Promise<void>((resolve) => (stalled = resolve));
    // Stall every request once the replica's state has a Media cursor: the first flush is done.
    watch = () => {
      if (gate !== null) return;
      try {
        if (readState(dir).resources.Media.cursor === null) return;
      } catch {
        return;
      }
      gate = new Promise((resolve) => (release = resolve));
      stalled();
    };
    const child = runCli(['replicate', '--from', server.url, '--token', token, '--to', dir]);
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await stalledAt;
      child.kill('SIGKILL');
      await exited;
    } finally {
      watch = null;
      gate = null;
      release?.();
    }
    const killed = readState(dir);
    expect(killed.status).toBe('running');
    const partial = replicaRecords(dir);
    expect(partial.Property.size).toBe(1129);
    expect(partial.Media.size).toBeGreaterThan(0);
    expect(partial.Media.size).toBeLessThan(expected.Media.size);
    await Engine.open({ data: dir });

    // the lock of the killed process is taken over
    const resumed = await replicate({ from: server.url, token, to: dir, fetch: (url, init) => handler(new Request(url, init)) });
    expect(resumed.resumed).toBe(true);
    expect(resumed.resources.Property.pages).toBe(0);
    expect(resumed.resources.Media.pages).toBe(1);
    for (const r of REPLICATED_RESOURCES) expect(entries(replicaRecords(dir)[r])).toEqual(entries(expected[r]));
    expect(readState(dir).status).toBe('complete');
  });
});
