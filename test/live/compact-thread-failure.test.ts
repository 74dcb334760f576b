/**
 * A compaction whose worker thread fails (here: it cannot rebuild the tables it was sent) says so
 * in a process warning and runs on the event loop instead, and the engine answers as before it.
 */
import { describe, expect, it, vi } from 'vitest';
import type * as TransferModule from '../../src/store/transfer.js';

const onEventLoop = vi.hoisted(() => ({ compactions: 0 }));
vi.mock('../../src/live/compact.js', async (original) => (await import('./count-compactions.js')).countedOnEventLoop(await original(), onEventLoop));

// the tables a compaction sends its thread (packed without their key indexes) go without columns
vi.mock('../../src/store/transfer.js', async (original) => {
  const real = await original<typeof TransferModule>();
  return {
    ...real,
    packTable: (...args: Parameters<typeof real.packTable>) => {
      const out = real.packTable(...args);
      return args[1]?.keyIndex === false ? { ...out, packed: { ...out.packed, columns: [] } } : out;
    },
  };
});

const { Engine } = await import('../../src/engine.js');
const { COMPACT_THREAD_MIN_ROWS } = await import('../../src/live/compact-thread.js');
const { dataset } = await import('../replicate/helpers.js');
const { answers, change } = await import('./compaction-cases.js');

describe('compaction when its worker thread fails', () => {
  it('runs on the event loop, and the engine answers as before it', async () => {
    const base = dataset(COMPACT_THREAD_MIN_ROWS + 50, 'compact-thread-failure');
    const engine = await Engine.open({ data: base, now: () => new Date('2025-06-01T00:00:00Z'), compactFraction: false });
    await change(engine, base);
    const before = answers(engine);
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    await engine.compact();
    expect(warn).toHaveBeenCalledWith(
      expect.stringMatching(/^reso-engine: the compaction's worker thread failed \(.*key column.*\); compacting on the event loop instead$/),
    );
    warn.mockRestore();
    expect(onEventLoop.compactions).toBe(1);
    expect(engine.compactions.count).toBe(1);
    expect(answers(engine)).toEqual(before);
  }, 120_000);
});
