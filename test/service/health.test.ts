import { describe, expect, it } from 'vitest';
import type { ReplicationStatus } from '../../src/service/health.js';
import { BASE, makeHandler } from './helpers.js';

describe('GET /health and /ready', () => {
  it('/health answers 200 JSON without a token, never cached', async () => {
    const { handler } = await makeHandler();
    const res = await handler(new Request(`${BASE}/health`));
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await res.json()) as { status: string; uptimeSeconds: number };
    expect(body.status).toBe('ok');
    expect(body.uptimeSeconds).toBeGreaterThanOrEqual(0);
  });

  it('/ready reports the in-memory engine loaded, its generation and listings', async () => {
    const { handler } = await makeHandler();
    const res = await handler(new Request(`${BASE}/ready`));
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 'ready', ready: true, backend: 'memory', generation: 0 });
    expect(body.listings).toBeGreaterThan(0);
  });

  it('HEAD works; other methods are 405 with Allow', async () => {
    const { handler } = await makeHandler();
    const head = await handler(new Request(`${BASE}/ready`, { method: 'HEAD' }));
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    const post = await handler(new Request(`${BASE}/health`, { method: 'POST' }));
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect(((await post.json()) as { error: { code: string } }).error.code).toBe('MethodNotAllowed');
  });

  it('a replicating server is 503 until a pass succeeds, then reports lag and the last error', async () => {
    let status: ReplicationStatus = { from: 'http://up.test/v1/listings/data/', lastSuccessAt: null, lastError: 'HttpError: 502', passes: 1, failures: 1 };
    const { handler, clock } = await makeHandler({ status: { replication: () => status } });
    const before = await handler(new Request(`${BASE}/ready`));
    expect(before.status).toBe(503);
    expect(before.headers.get('retry-after')).toBe('5');
    const b = (await before.json()) as { ready: boolean; reasons: string[]; replication: { lastError: string; lagSeconds: number | null } };
    expect(b.ready).toBe(false);
    expect(b.reasons[0]).toMatch(/no replication pass/);
    expect(b.replication).toMatchObject({ lastError: 'HttpError: 502', lagSeconds: null });
    status = { ...status, lastSuccessAt: clock.now(), lastError: null, passes: 2 };
    clock.advance(42);
    const after = await handler(new Request(`${BASE}/ready`));
    expect(after.status).toBe(200);
    expect(((await after.json()) as { replication: { lagSeconds: number } }).replication.lagSeconds).toBe(42);
  });

  it('a PostgreSQL-like engine: the pool and SELECT 1 are reported; a failing database is 503', async () => {
    const { defaultEngine } = await import('./helpers.js');
    const memory = await defaultEngine();
    let ok = true;
    // a wrapper that is not the in-memory engine and has the backend's health check
    const engine = {
      accounts: memory.accounts,
      profiles: memory.profiles,
      schemaOf: memory.schemaOf.bind(memory),
      now: memory.now.bind(memory),
      query: memory.query.bind(memory),
      navigate: memory.navigate.bind(memory),
      navigateOne: memory.navigateOne.bind(memory),
      count: memory.count.bind(memory),
      entity: memory.entity.bind(memory),
      has: memory.has.bind(memory),
      isVisible: memory.isVisible.bind(memory),
      apply: memory.apply.bind(memory),
      health: () =>
        Promise.resolve(
          ok
            ? { ok: true, pool: { total: 2, idle: 1, waiting: 0 }, latencyMs: 0.4 }
            : { ok: false, pool: { total: 0, idle: 0, waiting: 3 }, latencyMs: 1, error: 'connection refused' },
        ),
    };
    const { handler } = await makeHandler({ engine });
    const good = await handler(new Request(`${BASE}/ready`));
    expect(good.status).toBe(200);
    expect(await good.json()).toMatchObject({ backend: 'postgres', database: { ok: true, pool: { total: 2, idle: 1, waiting: 0 } } });
    ok = false;
    const bad = await handler(new Request(`${BASE}/ready`));
    expect(bad.status).toBe(503);
    expect(await bad.json()).toMatchObject({ ready: false, database: { ok: false, pool: { waiting: 3 }, error: 'connection refused' } });
  });
});
