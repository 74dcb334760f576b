import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { lookupKey } from '../../src/schema/lookups.js';

const expected = (name: string, value: string): string => createHash('sha256').update(`${name}\u0000${value}`).digest('hex').slice(0, 16);

describe('lookupKey', () => {
  it('is the first 16 hex digits of SHA-256 over name, NUL and value, asked once or again', () => {
    for (const [name, value] of [
      ['StandardStatus', 'Active'],
      ['City', 'Seattle'],
      ['City', ''],
      ['Appliances', 'Dishwasher, Range'],
    ]) {
      expect(lookupKey(name, value)).toBe(expected(name, value));
      expect(lookupKey(name, value)).toBe(expected(name, value));
    }
  });

  it('stays exact past the number of keys it keeps (it starts again)', () => {
    const n = (1 << 18) + 10;
    for (let i = 0; i < n; i++) lookupKey(i % 2 === 0 ? 'City' : 'PostalCode', `v${i}`);
    for (const i of [0, 1, 2, n - 3, n - 2, n - 1]) {
      const name = i % 2 === 0 ? 'City' : 'PostalCode';
      expect(lookupKey(name, `v${i}`)).toBe(expected(name, `v${i}`));
    }
  });
});
