import { afterEach, describe, expect, it } from 'vitest';
import { recordCache, RecordShape, type JsonRecord } from '../../src/store/record-cache.js';
import { KeptRows } from '../../src/util/kept-rows.js';
import { loadRecords } from '../../src/store/load.js';
import type { Table } from '../../src/store/table.js';

const NOW = Date.parse('2025-06-01T00:00:00Z');
const DAY = 86_400_000;

/** Listings with every kind of value: text, collections (a local one too), points, timestamps in several styles, dates, DaysOnMarket, an own `__proto__`. */
function edgeTable(n = 60): Table {
  const listings = Array.from({ length: n }, (_, i) => ({
    ListingKey: `P${i}`,
    StandardStatus: i % 3 === 0 ? 'Active' : 'Closed',
    ListPrice: 100_000 + i * 1_000,
    PublicRemarks: i % 5 === 0 ? null : `tab\there, "quotes", 😀 remarks of listing ${i} `.repeat(1 + (i % 4)),
    Appliances: i % 4 === 0 ? [] : ['Dishwasher', 'Range', `X${i % 7}`],
    ...(i % 6 === 0 ? {} : { Cooling: ['Central Air'] }),
    ListingContractDate: `2024-0${1 + (i % 9)}-1${i % 10}`,
    OnMarketTimestamp: i % 2 === 0 ? `2024-03-0${1 + (i % 9)}T10:00:00-05:00` : `2024-03-0${1 + (i % 9)}T10:00Z`,
    ModificationTimestamp: `2025-0${1 + (i % 5)}-01T10:00:00.${String(i).padStart(3, '0')}Z`,
    ...(i % 7 === 0 ? {} : { Latitude: 47 + i / 100, Longitude: -122 - i / 100 }),
    ['__proto__']: `own ${i}`,
    LocalList: i % 2 === 0 ? ['x', `y${i}`] : [],
  }));
  return loadRecords({ Property: listings }, { now: () => NOW }).Property;
}

/** The field lists the tests read through: every field, a $select in another order, one with a field the schema lacks and `__proto__`, and cheap fields only. */
const FIELD_LISTS: Array<readonly string[] | undefined> = [
  undefined,
  ['DaysOnMarket', 'Location', 'Appliances', 'ListingKey', 'PublicRemarks'],
  ['NoSuchField', '__proto__', 'LocalList', 'ListingKey'],
  ['ListPrice', 'StandardStatus'],
];

/** Same values and the same key order. */
function expectSame(actual: Record<string, unknown>, expected: Record<string, unknown>): void {
  expect(Object.keys(actual)).toEqual(Object.keys(expected));
  expect(JSON.stringify(actual)).toBe(JSON.stringify(expected));
  expect(actual).toEqual(expected);
  expect(Object.getPrototypeOf(actual)).toBe(Object.prototype);
}

const budget = recordCache.budget;
afterEach(() => {
  recordCache.budget = budget;
});

describe('kept records', () => {
  it('are the records built afresh, the first, second and later times a row is read, for every field list', () => {
    const table = edgeTable();
    for (const fields of FIELD_LISTS) {
      for (let pass = 0; pass < 4; pass++) {
        for (let row = 0; row < table.rowCount; row++) expectSame(table.record(row, fields, NOW), table.builtRecord(row, fields, NOW));
      }
    }
    const first = table.record(0, undefined, NOW);
    expect(Object.hasOwn(first, '__proto__')).toBe(true);
    expect(first['__proto__']).toBe('own 0');
    expect(table.record(0, FIELD_LISTS[2], NOW).NoSuchField).toBeNull();
  });

  it('give DaysOnMarket as of each call', () => {
    const table = edgeTable();
    const fields = ['ListingKey', 'DaysOnMarket'];
    for (let pass = 0; pass < 3; pass++) table.record(3, fields, NOW);
    const days = table.record(3, fields, NOW).DaysOnMarket as number;
    expect(days).toBeGreaterThan(0);
    for (const later of [1, 2, 30, 400]) {
      expect(table.record(3, fields, NOW + later * DAY).DaysOnMarket).toBe(days + later);
      expect(table.record(3, undefined, NOW + later * DAY).DaysOnMarket).toBe(days + later);
    }
    expect(table.record(3, fields, NOW).DaysOnMarket).toBe(days);
  });

  it('are each caller’s own: changing a record, its arrays or its points does not reach the next answer', () => {
    const table = edgeTable();
    const row = 2;
    const fields = ['ListingKey', 'Appliances', 'Location', 'LocalList', 'PublicRemarks'];
    for (const f of [undefined, fields]) {
      for (let pass = 0; pass < 3; pass++) table.record(row, f, NOW); // kept by now
      const expected = table.builtRecord(row, f, NOW);
      for (let pass = 0; pass < 2; pass++) {
        const r = table.record(row, f, NOW) as Record<string, unknown> & {
          Appliances: string[];
          LocalList: string[];
          Location: { type: string; coordinates: number[] };
        };
        r.Appliances.push('mutated');
        r.LocalList.length = 0;
        r.Location.coordinates[0] = 0;
        r.Location.type = 'Polygon';
        r.ListingKey = 'changed';
        delete r.PublicRemarks;
        r.Added = 1;
        const again = table.record(row, f, NOW);
        expectSame(again, expected);
        expect(again.Appliances).not.toBe(r.Appliances);
        expect(again.Location).not.toBe(r.Location);
      }
    }
  });

  it('stay within their bound, the oldest dropped first, and stay exact under eviction', () => {
    const table = edgeTable(400);
    recordCache.budget = 20_000;
    for (let pass = 0; pass < 4; pass++) {
      for (let row = 0; row < table.rowCount; row += 1 + (pass % 2)) {
        expectSame(table.record(row, undefined, NOW), table.builtRecord(row, undefined, NOW));
        expect(recordCache.heldSize).toBeLessThanOrEqual(20_000);
      }
    }
    expect(recordCache.heldSize).toBeGreaterThan(0);
    recordCache.budget = 0;
    for (let row = 0; row < 50; row++) expectSame(table.record(row, FIELD_LISTS[1], NOW), table.builtRecord(row, FIELD_LISTS[1], NOW));
  });

  it('are kept from the second read of a row, not for cheap field lists, and counted until evicted', () => {
    const table = edgeTable();
    const cache = new KeptRows<JsonRecord>(1_000_000);
    const names = table.schema.fields.map((f) => f.name);
    const shape = new RecordShape(names, table.columns, undefined);
    shape.record(table.columns, 5, NOW, cache);
    expect(shape.kept.size).toBe(0);
    shape.record(table.columns, 5, NOW, cache);
    expect(shape.kept.size).toBe(1);
    const held = cache.heldSize;
    expect(held).toBeGreaterThan(JSON.stringify(table.builtRecord(5, undefined, NOW)).length / 2);
    shape.record(table.columns, 5, NOW, cache);
    expect(cache.heldSize).toBe(held);
    const cheap = new RecordShape(names, table.columns, ['ListPrice', 'StandardStatus']);
    for (let pass = 0; pass < 3; pass++) cheap.record(table.columns, 5, NOW, cache);
    expect(cheap.kept.size).toBe(0);
    // rows whose slots collide in the table of rows read once: each is kept on its second read in a row
    const many = loadRecords({ Property: Array.from({ length: 8200 }, (_, i) => ({ ListingKey: `K${i}` })) }, { now: () => NOW }).Property;
    const other = new RecordShape(
      many.schema.fields.map((f) => f.name),
      many.columns,
      ['ListingKey'],
    );
    for (const row of [1, 8193, 1, 8193, 8193]) expect(other.record(many.columns, row, NOW, cache).ListingKey).toBe(`K${row}`);
    expect([...other.kept.keys()]).toEqual([8193]);
  });
});
