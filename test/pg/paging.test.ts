/**
 * Paging the PostgreSQL backend while writes commit between pages: the keyset $skiptoken continues
 * after the last row returned, so a record that stays in place is returned exactly once, whatever
 * is inserted or removed before or after the cursor meanwhile (DESIGN.md, "PostgreSQL backend",
 * Paging). An offset ($skip) would skip a record for every removal before the cursor and repeat
 * one for every insertion there. The suite runs on each layout of `LAYOUTS` (test/pg/helpers.ts):
 * on the distributed ones the rows come from several nodes, the keyset is the same.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR } from '../../src/engine.js';
import type { QueryResult } from '../../src/exec/page.js';
import { PostgresEngine } from '../../src/pg/engine.js';
import { freshLayout, LAYOUTS, pgSkip, type TestLayout } from './helpers.js';

const NOW = new Date('2025-06-01T00:00:00Z');

function nextOf(r: QueryResult): string | undefined {
  const link = r['@odata.nextLink'];
  return link === undefined ? undefined : decodeURIComponent(link.slice(link.indexOf('?') + 1));
}

describe.skipIf(pgSkip).each(LAYOUTS)('paging under concurrent writes (PostgreSQL, %s)', (kind) => {
  let layout: TestLayout | undefined;
  let pg: PostgresEngine;
  beforeAll(async () => {
    layout = await freshLayout(kind, 'paging');
    pg = await PostgresEngine.open({
      postgres: { url: layout.url, schema: layout.schema, distribution: layout.distribution },
      data: DEFAULT_DATA_DIR,
      now: () => NOW,
    });
  }, 120_000);
  afterAll(async () => {
    await pg?.close();
    await layout?.release();
  });

  it.each(['$orderby=ListPrice desc', '', '$orderby=City,YearBuilt desc'])(
    'returns every record that stays in place exactly once while others are added and removed (%s)',
    async (order) => {
      const before = (await pg.query('Property', `${order}${order ? '&' : ''}$select=ListingKey,ListPrice,City,YearBuilt&$top=50000`)).value;
      const keys = before.map((r) => r.ListingKey as string);
      expect(keys.length).toBeGreaterThan(100);
      // removed between pages: records both before and after the cursor at the time
      // (each case removes four of the listings there are now; earlier cases' additions stay)
      const removed = new Set([keys[3], keys[7], keys[keys.length - 5], keys[Math.floor(keys.length / 2)]]);
      const stable = keys.filter((k) => !removed.has(k));
      const seen: string[] = [];
      let next: string | undefined = `${order}${order ? '&' : ''}$select=ListingKey,ListPrice,City,YearBuilt`;
      let page = 0;
      while (next !== undefined) {
        const r: QueryResult = await pg.query('Property', next, { maxPageSize: 25 });
        seen.push(...r.value.map((v) => v.ListingKey as string));
        next = nextOf(r);
        page++;
        if (page === 2) await pg.remove('Property', [...removed]);
        if (page === 3 || page === 6) {
          // new listings sorting first and last in every order of this test
          const at = page;
          await pg.upsert('Property', [
            { ListingKey: `A-new-${at}`, OriginatingSystemName: 'CRMLS', ListPrice: 99_000_000, City: 'Aaa', YearBuilt: 2030 },
            { ListingKey: `Z-new-${at}`, OriginatingSystemName: 'CRMLS', ListPrice: 1, City: 'Zzz', YearBuilt: 1800 },
          ]);
        }
        if (page > 1000) throw new Error('paging does not end');
      }
      expect(new Set(seen).size, 'no record twice').toBe(seen.length);
      const got = new Set(seen);
      expect(
        stable.filter((k) => !got.has(k)),
        'no record that stayed in place is skipped',
      ).toEqual([]);
    },
  );

  it('refuses a $skiptoken it did not make', async () => {
    for (const token of ['x', 'k', 'knot-base64!', `k${Buffer.from('{"a":1}').toString('base64url')}`, `k${Buffer.from('[1,2]').toString('base64url')}`]) {
      await expect(pg.query('Property', `$orderby=ListPrice&$skiptoken=${token}`), token).rejects.toMatchObject({
        code: 'InvalidSkipToken',
        option: '$skiptoken',
      });
    }
  });
});
