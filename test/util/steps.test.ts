/**
 * runYielding (src/util/steps.ts): the steps up to the first turn run in the caller's turn, other
 * callbacks run between the steps once the budget is used, the result or the thrown error is what
 * the promise gives, and a turn is counted by the pacer.
 */
import { describe, expect, it } from 'vitest';
import { Pacer, runYielding, type Steps } from '../../src/util/steps.js';

function* counted(log: string[], n: number, fail?: unknown): Steps<number> {
  for (let i = 0; i < n; i++) {
    log.push(`step ${i}`);
    yield;
  }
  // eslint-disable-next-line @typescript-eslint/only-throw-error -- a step may throw anything; the promise must give it back as it is
  if (fail !== undefined) throw fail;
  return n;
}

describe('runYielding', () => {
  it('gives the loop a turn at each check point with a zero budget', async () => {
    const log: string[] = [];
    const pacer = new Pacer(0);
    const done = runYielding(counted(log, 3), pacer);
    log.push('caller'); // the first step ran before runYielding returned
    setImmediate(() => log.push('other'));
    expect(await done).toBe(3);
    expect(log).toEqual(['step 0', 'caller', 'step 1', 'other', 'step 2']);
    expect(pacer.turns).toBe(3);
  });

  it('runs every step at once with an unbounded budget', async () => {
    const log: string[] = [];
    const pacer = new Pacer(Infinity);
    const done = runYielding(counted(log, 3), pacer);
    expect(log).toEqual(['step 0', 'step 1', 'step 2']);
    expect(await done).toBe(3);
    expect(pacer.turns).toBe(0);
  });

  it('rejects with what the steps threw, before or after a turn', async () => {
    const error = new RangeError('bad step');
    await expect(runYielding(counted([], 0, error), new Pacer(0))).rejects.toBe(error);
    await expect(runYielding(counted([], 2, error), new Pacer(0))).rejects.toBe(error);
    await expect(runYielding(counted([], 2, 'not an Error'), new Pacer(0))).rejects.toBe('not an Error');
  });
});
