import { describe, expect, it } from 'vitest';
import { newBitmap, setBit, setBitPositionsInto } from '../../src/util/bits.js';

describe('setBitPositionsInto', () => {
  it('writes the set bits ascending, as a scan of every bit would, and returns their count', () => {
    for (const bits of [0, 1, 31, 32, 33, 64, 1000]) {
      const bitmap = newBitmap(bits);
      const expected: number[] = [];
      for (let i = 0; i < bits; i++) {
        if ((i * 7919) % 5 < 2 || i === 31 || i === bits - 1) {
          setBit(bitmap, i);
          expected.push(i);
        }
      }
      const out = new Uint32Array(expected.length);
      expect(setBitPositionsInto(bitmap, out)).toBe(expected.length);
      expect([...out]).toEqual(expected);
    }
  });
});
