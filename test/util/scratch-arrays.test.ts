import { describe, expect, it } from 'vitest';
import { ScratchArrays } from '../../src/util/scratch-arrays.js';

describe('scratch arrays', () => {
  it('hand each take of a run its own zeroed array, and the next run the same memory zeroed again', () => {
    const scratch = new ScratchArrays(1_000);
    const first = scratch.run((take) => {
      const a = take(Float64Array, 100);
      const b = take(Float64Array, 50);
      const c = take(Uint32Array, 10);
      expect([a.length, b.length, c.length]).toEqual([100, 50, 10]);
      expect(a.buffer).not.toBe(b.buffer);
      a.fill(7);
      b.fill(8);
      c.fill(9);
      return { a, b, c };
    });
    scratch.run((take) => {
      const a = take(Float64Array, 80);
      const b = take(Float64Array, 50);
      const c = take(Uint32Array, 10);
      // the same arrays as the first run's takes, in the same order, zeroed
      expect(a.buffer).toBe(first.a.buffer);
      expect(b.buffer).toBe(first.b.buffer);
      expect(c.buffer).toBe(first.c.buffer);
      expect([...a, ...b, ...c].every((x) => x === 0)).toBe(true);
      // a take longer than the kept array grows it: a new array, zeroed
      const d = take(Uint32Array, 10);
      expect(d.buffer).not.toBe(c.buffer);
      const e = take(Float64Array, 900);
      expect(e.length).toBe(900);
      expect(e.every((x) => x === 0)).toBe(true);
    });
  });

  it('allocate what is longer than the longest kept, and keep none of it', () => {
    const scratch = new ScratchArrays(16);
    const big = scratch.run((take) => take(Uint8Array, 17).fill(1));
    scratch.run((take) => {
      const again = take(Uint8Array, 17);
      expect(again.buffer).not.toBe(big.buffer);
      expect(again.every((x) => x === 0)).toBe(true);
    });
  });

  it('refuse a run inside a run, and give the arrays back when a run throws', () => {
    const scratch = new ScratchArrays(64);
    expect(() => scratch.run(() => scratch.run(() => 1))).toThrow('ScratchArrays: a run cannot start inside another');
    let kept: Int32Array | null = null;
    expect(() =>
      scratch.run((take) => {
        kept = take(Int32Array, 8).fill(5);
        throw new Error('the grouping failed');
      }),
    ).toThrow('the grouping failed');
    scratch.run((take) => {
      const a = take(Int32Array, 8);
      expect(a.buffer).toBe(kept!.buffer);
      expect(Array.from(a)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    });
  });
});
