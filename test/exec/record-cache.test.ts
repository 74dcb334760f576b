import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import type { QueryResult } from '../../src/exec/page.js';
import { recordCache } from '../../src/store/record-cache.js';

const DAY = 86_400_000;
let ms = Date.parse('2025-06-01T00:00:00Z');
let engine: Engine;

beforeAll(async () => {
  engine = await Engine.open({ now: () => new Date(ms) });
});

const budget = recordCache.budget;
afterEach(() => {
  recordCache.budget = budget;
});

/** Pages of whole records, of `$select`s, and of records shaped further (nulls dropped, links, expansions). */
const QUERIES = [
  "$filter=StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=25",
  '$orderby=ListingKey&$skip=10&$top=20&$count=true',
  '$select=ListingKey,ListPrice,DaysOnMarket,Appliances,Location&$orderby=ListPrice&$top=30',
  '$select=DaysOnMarket&$orderby=ListingKey&$top=5',
  '$select=*&$top=3',
  '$select=ListingKey,City,Cooling,PublicRemarks&$ignorenulls=true&$top=10',
  '$expand=Media($top=2)&$top=3',
  '$select=ListingKey,Media&$top=3',
];

/** The answer with nothing kept: every record built afresh. */
function uncached(query: string): QueryResult {
  recordCache.budget = 0;
  try {
    return engine.query('Property', query);
  } finally {
    recordCache.budget = budget;
  }
}

/** The query's answer, read three times (a row's records are kept from its second read on), each equal to the uncached answer, key order included. */
function expectExact(query: string): QueryResult {
  let last: QueryResult | undefined;
  for (let pass = 0; pass < 3; pass++) {
    const result = engine.query('Property', query);
    const expected = uncached(query);
    expect(JSON.stringify(result), query).toBe(JSON.stringify(expected));
    expect(result.value.map((r) => Object.keys(r))).toEqual(expected.value.map((r) => Object.keys(r)));
    last = result;
  }
  return last!;
}

describe('records kept between queries', () => {
  it('give the answers of records built afresh, with or without $select and shaped further', () => {
    for (const q of QUERIES) expectExact(q);
  });

  it('give DaysOnMarket as of each query', () => {
    const q = '$select=ListingKey,DaysOnMarket&$orderby=ListingKey&$top=50';
    const days = (r: QueryResult): unknown[] => r.value.map((x) => x.DaysOnMarket);
    const before = days(expectExact(q));
    const whole = days(expectExact('$orderby=ListingKey&$top=50'));
    expect(before.some((d) => typeof d === 'number' && d > 0)).toBe(true);
    ms += 3 * DAY + 1;
    const after = days(expectExact(q));
    expect(after).toEqual(before.map((d) => (d === null ? null : (d as number) + 3)));
    expect(days(expectExact('$orderby=ListingKey&$top=50'))).toEqual(after);
    expect(whole).toEqual(before);
  });

  it('stay exact across generations, through a change that failed after adding a field and rows, and one that added a field', async () => {
    const q = '$orderby=ListingKey desc&$top=12';
    const top = expectExact(q).value;
    const newest = withoutDerived(top[0]);
    const failing = engine.apply([
      { resource: 'Property', upsert: [{ ...newest, ListingKey: 'ZZ-ROLLED-BACK', X_Rolled: 'yes', PublicRemarks: 'rolled back' }] },
      { resource: 'OpenHouse', upsert: [{ OpenHouseKey: 'OH-ROLLED-BACK', ListingKey: 'NO-SUCH-LISTING' }] },
    ]);
    await expect(failing).rejects.toMatchObject({ code: 'MissingParent' });
    // the rows the failed change wrote are written again by this one, with other values
    await engine.upsert('Property', [{ ...newest, ListingKey: 'ZZ-WRITTEN-AGAIN', PublicRemarks: 'written again' }]);
    let now = expectExact(q).value;
    expect(now[0]).toMatchObject({ ListingKey: 'ZZ-WRITTEN-AGAIN', PublicRemarks: 'written again' });
    expect(now.some((r) => 'X_Rolled' in r)).toBe(false);
    expect(now.slice(1)).toEqual(top.slice(0, 11));
    // a field added: older rows (their records kept before) read it as null
    await engine.upsert('Property', [{ ...newest, ListingKey: 'ZZZ-WITH-A-FIELD', X_Added: 7 }]);
    now = expectExact(q).value;
    expect(now.map((r) => r.X_Added)).toEqual([7, ...Array<null>(11).fill(null)]);
  });

  it('follow upserts and removals', async () => {
    const q = '$orderby=ListingKey&$top=10';
    const first = expectExact(q).value;
    const changed = { ...withoutDerived(first[0]), ListPrice: 123_456, PublicRemarks: 'changed remarks', Appliances: ['Oven'] };
    await engine.upsert('Property', [changed]);
    let now = expectExact(q).value;
    expect([now[0].ListPrice, now[0].PublicRemarks, now[0].Appliances]).toEqual([123_456, 'changed remarks', ['Oven']]);
    expect(now.slice(1)).toEqual(first.slice(1));
    await engine.remove('Property', [first[1].ListingKey as string]);
    now = expectExact(q).value;
    expect(now.map((r) => r.ListingKey)).toEqual([first[0], ...first.slice(2), now[9]].map((r) => r.ListingKey));
    expect(now.slice(1, 9)).toEqual(first.slice(2));
  });

  it('are each query’s own: changing an answer does not reach the next one', () => {
    for (const q of QUERIES) {
      expectExact(q);
      const mine = engine.query('Property', q).value;
      for (const r of mine) {
        for (const [k, v] of Object.entries(r)) {
          if (Array.isArray(v)) v.push('mutated');
          else if (v !== null && typeof v === 'object') (v as { type?: string }).type = 'mutated';
          else if (k !== 'ListingKey') delete r[k];
        }
        r.Extra = 1;
      }
      expectExact(q);
    }
  });
});

/** A record as a feed would send it again: the fields the engine derives left out. */
function withoutDerived(record: Record<string, unknown>): Record<string, unknown> {
  const schema = engine.schemaOf('Property');
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(record)) if (schema.field(k)?.origin !== 'derived' && !k.startsWith('service_')) out[k] = v;
  return out;
}
