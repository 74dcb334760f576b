/**
 * When no worker thread can start, a compaction past COMPACT_THREAD_MIN_ROWS runs on the event
 * loop instead, and the compacted engine answers as before it.
 */
import type * as WorkerThreads from 'node:worker_threads';
import { describe, expect, it, vi } from 'vitest';

vi.mock('node:worker_threads', async (original) => {
  const real = await original<typeof WorkerThreads>();
  class Unstartable {
    constructor() {
      throw new Error('no thread for you');
    }
  }
  return { ...real, Worker: Unstartable };
});

const onEventLoop = vi.hoisted(() => ({ compactions: 0 }));
vi.mock('../../src/live/compact.js', async (original) => (await import('./count-compactions.js')).countedOnEventLoop(await original(), onEventLoop));

const { Engine } = await import('../../src/engine.js');
const { COMPACT_THREAD_MIN_ROWS } = await import('../../src/live/compact-thread.js');
const { dataset } = await import('../replicate/helpers.js');
const { answers, change } = await import('./compaction-cases.js');

describe('compaction when no worker thread can start', () => {
  it('runs on the event loop, and the engine answers as before it', async () => {
    const base = dataset(COMPACT_THREAD_MIN_ROWS + 50, 'compact-thread-fallback');
    const engine = await Engine.open({ data: base, now: () => new Date('2025-06-01T00:00:00Z'), compactFraction: false });
    await change(engine, base);
    const before = answers(engine);
    await engine.compact();
    expect(onEventLoop.compactions).toBe(1);
    expect(engine.compactions.count).toBe(1);
    expect(answers(engine)).toEqual(before);
  }, 120_000);
});
