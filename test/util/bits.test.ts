import { describe, expect, it } from 'vitest';
import { getBit, newBitmap, setBit, setBitPositionsInto } from '../../src/util/bits.js';

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

describe('getBit', () => {
  it('reads each bit of a full word, and false past the end of the bitmap', () => {
    const bitmap = new Uint32Array([0xffffffff, 0x80000001]);
    for (let i = 0; i < 32; i++) expect(getBit(bitmap, i)).toBe(true);
    expect([32, 33, 62, 63].map((i) => getBit(bitmap, i))).toEqual([true, false, false, true]);
    for (const i of [64, 65, 95, 1 << 20]) expect(getBit(bitmap, i)).toBe(false);
  });
});
