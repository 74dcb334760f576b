/**
 * A key-order walk starts at the first key a top-level `Key gt/ge 'k'` allows (binary search over
 * the key order): keyset pages must equal a brute-force filter and sort, whatever the bound (before,
 * between, on or past the keys), with other conditions beside it, and with keys whose UTF-8 and
 * UTF-16 orders differ (a 4-byte character).
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';

const KEYS = ['A1', 'A10', 'A2', 'B', 'b', 'Ba', 'Z9', 'a', 'é', 'ﬀ', '\u{1F600}x', '\u{1F600}', 'K000', 'K001', 'K002', 'K010', 'K100'];

function expected(records: Array<Record<string, unknown>>, keep: (r: Record<string, unknown>) => boolean, top: number): string[] {
  return records
    .filter(keep)
    .map((r) => r.ListingKey as string)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, top);
}

describe('keyset pages over the key order', () => {
  const records = KEYS.map((k, i) => ({ ListingKey: k, ListPrice: i * 1000, StandardStatus: i % 3 === 0 ? 'Pending' : 'Active' }));

  it('answer like a brute-force filter and sort for every bound', async () => {
    const engine = await Engine.open({ data: { Property: records } });
    const bounds = ['', '0', 'A1', 'A11', 'B', 'Ba', 'K0', 'K001', 'K1', 'a', 'zz', 'é', '\u{1F600}', '\u{1F601}'];
    for (const bound of bounds) {
      for (const op of ['gt', 'ge'] as const) {
        const q = `$filter=ListingKey ${op} '${bound.replace(/'/g, "''")}'&$orderby=ListingKey asc&$top=4&$select=ListingKey`;
        const got = engine.query('Property', q).value.map((r) => r.ListingKey);
        const keep = (r: Record<string, unknown>): boolean => (op === 'gt' ? (r.ListingKey as string) > bound : (r.ListingKey as string) >= bound);
        expect(got, q).toEqual(expected(records, keep, 4));
        // with another condition and a second, weaker bound beside it
        const q2 = `$filter=StandardStatus eq 'Active' and ListingKey ${op} '${bound}' and ListingKey ge 'A'&$top=3&$select=ListingKey`;
        const got2 = engine.query('Property', q2).value.map((r) => r.ListingKey);
        expect(got2, q2).toEqual(expected(records, (r) => r.StandardStatus === 'Active' && keep(r) && (r.ListingKey as string) >= 'A', 3));
      }
    }
  });

  it('walk a whole table page by page', async () => {
    const engine = await Engine.open({ data: { Property: records } });
    const seen: string[] = [];
    let last: string | null = null;
    for (;;) {
      const filter: string = last === null ? '' : `$filter=ListingKey gt '${last}'&`;
      const page: string[] = engine.query('Property', `${filter}$orderby=ListingKey asc&$top=5&$select=ListingKey`).value.map((r) => r.ListingKey as string);
      if (page.length === 0) break;
      seen.push(...page);
      last = page[page.length - 1];
    }
    expect(seen).toEqual([...KEYS].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
  });
});
