import { describe, expect, it } from 'vitest';
import { DataError } from '../../src/store/errors.js';
import { loadDataDirectory, loadRecords } from '../../src/store/load.js';
import { dataDir, jsonl, listing } from './helpers.js';

const DAY = 86_400_000;

describe('local fields', () => {
  const records = [
    listing('A', {
      X_Count: 1,
      X_Flag: true,
      X_When: '2024-01-01T00:00:00+01:00',
      X_Day: '2024-01-01',
      X_Text: 'abc',
      X_List: ['a', 'b'],
      X_Null: null,
      X_Mixed: '2024-02-03',
    }),
    listing('B', { X_Count: 2.5, X_Mixed: 'hello', X_List: [] }),
    listing('C', { X_Mixed: '2024-02-04T10:00:00Z', X_Late: 7 }),
    listing('D', {}),
  ];

  it('get an inferred type, widening as values require, and are reported', async () => {
    for (const fastPath of [true, false]) {
      const s = await loadDataDirectory(dataDir({ 'Property.jsonl': jsonl(records) }), { fastPath });
      const t = s.Property;
      const local = t.schema.localFields.map((f) => [f.name, f.type, f.collection, f.origin]);
      expect(local).toEqual([
        ['X_Count', 'Edm.Decimal', false, 'local'],
        ['X_Flag', 'Edm.Boolean', false, 'local'],
        ['X_When', 'Edm.DateTimeOffset', false, 'local'],
        ['X_Day', 'Edm.Date', false, 'local'],
        ['X_Text', 'Edm.String', false, 'local'],
        ['X_List', 'Edm.String', true, 'local'],
        ['X_Null', 'Edm.String', false, 'local'],
        ['X_Mixed', 'Edm.String', false, 'local'],
        ['X_Late', 'Edm.Int64', false, 'local'],
      ]);
      // Local fields come after the declared ones, in the order the data first carried them.
      expect(t.schema.fields.slice(-9).map((f) => f.name)).toEqual(local.map((l) => l[0]));
      expect(s.report.localFields).toEqual([
        { resource: 'Property', name: 'X_Count', type: 'Edm.Decimal', file: 'Property.jsonl', line: 1 },
        { resource: 'Property', name: 'X_Flag', type: 'Edm.Boolean', file: 'Property.jsonl', line: 1 },
        { resource: 'Property', name: 'X_When', type: 'Edm.DateTimeOffset', file: 'Property.jsonl', line: 1 },
        { resource: 'Property', name: 'X_Day', type: 'Edm.Date', file: 'Property.jsonl', line: 1 },
        { resource: 'Property', name: 'X_Text', type: 'Edm.String', file: 'Property.jsonl', line: 1 },
        { resource: 'Property', name: 'X_List', type: 'Collection(Edm.String)', file: 'Property.jsonl', line: 1 },
        { resource: 'Property', name: 'X_Null', type: 'Edm.String', file: 'Property.jsonl', line: 1 },
        { resource: 'Property', name: 'X_Mixed', type: 'Edm.String', file: 'Property.jsonl', line: 1 },
        { resource: 'Property', name: 'X_Late', type: 'Edm.Int64', file: 'Property.jsonl', line: 3 },
      ]);
      // Values come back as they went in, including those written before the type widened.
      for (let row = 0; row < records.length; row++) {
        for (const f of t.schema.localFields) expect(t.value(row, f.name)).toEqual(records[row][f.name] ?? null);
      }
      expect(t.columnOf('X_When', 'timestamp')!.get(0)).toBe(Date.parse('2023-12-31T23:00:00Z'));
      expect(t.column('X_Count')!.kind).toBe('number');
    }
  });

  it('that mix kinds of values fail the load (strict) or skip the record', async () => {
    const files = { 'Property.jsonl': jsonl([listing('A', { X_Code: 1 }), listing('B', { X_Code: 'one' }), listing('C', { X_Code: 3 })]) };
    for (const fastPath of [true, false]) {
      const err = await loadDataDirectory(dataDir(files), { fastPath }).catch((e: unknown) => e as DataError);
      expect(err).toBeInstanceOf(DataError);
      expect((err as DataError).message).toBe(
        'Property.jsonl line 2, field X_Code: local field X_Code holds an integer (inferred from line 1 of Property.jsonl), found the string "one".',
      );
      const s = await loadDataDirectory(dataDir(files), { fastPath, skipBadRecords: true });
      expect(s.Property.rowCount).toBe(2);
      expect(s.Property.value(1, 'X_Code')).toBe(3);
    }
    expect(() => loadRecords({ Property: [listing('A', { X_Obj: { a: 1 } })] })).toThrow(/nested objects are not supported/);
    expect(() => loadRecords({ Property: [listing('A', { X_Arr: [1, 2] })] })).toThrow(/local collection fields must hold strings only/);
  });

  it('exist only once a committed record carries them', () => {
    const s = loadRecords({ Property: [listing('A'), listing('B', { X_New: 1, ListPrice: 'bad' })] }, { skipBadRecords: true });
    expect(s.Property.schema.field('X_New')).toBeUndefined();
    expect(s.report.localFields).toEqual([]);
  });
});

describe('derived fields', () => {
  const at = (iso: string): number => Date.parse(iso);
  const s = loadRecords(
    {
      Property: [
        { ListingKey: 'zero', Latitude: 0, Longitude: 0 },
        { ListingKey: 'noLon', Latitude: 33.5 },
        { ListingKey: 'noLat', Longitude: -118 },
        { ListingKey: 'lat91', Latitude: 91, Longitude: -118 },
        { ListingKey: 'lon181', Latitude: 33, Longitude: -181 },
        { ListingKey: 'swapped', Latitude: -118.2, Longitude: 33.9 },
        { ListingKey: 'ok', Latitude: 33.959363, Longitude: -118.161366 },
        { ListingKey: 'edge', Latitude: -90, Longitude: 180 },
        {
          ListingKey: 'entry',
          OriginalEntryTimestamp: '2024-01-01T10:00:00+02:00',
          ListingContractDate: '2023-12-01',
          ModificationTimestamp: '2023-11-01T00:00:00Z',
        },
        { ListingKey: 'contract', ListingContractDate: '2024-03-01', ModificationTimestamp: '2024-03-05T12:00:00Z' },
        { ListingKey: 'modified', ListingContractDate: '2024-03-10', ModificationTimestamp: '2024-03-05T12:00:00Z' },
        { ListingKey: 'onlyMod', ModificationTimestamp: '2024-03-05T12:00:00.250Z', OnMarketTimestamp: '2024-04-01T00:00:00Z' },
        { ListingKey: 'nothing', DaysOnMarket: 12 },
      ],
    },
    { now: () => new Date('2024-04-11T06:00:00Z') },
  );
  const p = s.Property;
  const row = (key: string): number => p.rowOfKey(key);
  const point = (lon: number, lat: number) => ({ type: 'Point', coordinates: [lon, lat] });

  it('RawLocation keeps 0,0 and drops missing or out-of-range coordinates; Location also drops 0,0', () => {
    const expected: Record<string, [unknown, unknown]> = {
      zero: [point(0, 0), null],
      noLon: [null, null],
      noLat: [null, null],
      lat91: [null, null],
      lon181: [null, null],
      swapped: [null, null],
      ok: [point(-118.161366, 33.959363), point(-118.161366, 33.959363)],
      edge: [point(180, -90), point(180, -90)],
      nothing: [null, null],
    };
    for (const [key, [raw, clean]] of Object.entries(expected)) {
      expect([key, p.value(row(key), 'RawLocation'), p.value(row(key), 'Location')]).toEqual([key, raw, clean]);
    }
    expect(s.derived.location.lat).toBe(p.columnOf('Latitude', 'number')!.values);
  });

  it('service_OriginalEntryTimestamp: OriginalEntryTimestamp, else the earliest of contract day and modification', () => {
    expect(p.value(row('entry'), 'service_OriginalEntryTimestamp')).toBe('2024-01-01T08:00:00.000Z');
    expect(p.value(row('contract'), 'service_OriginalEntryTimestamp')).toBe('2024-03-01T00:00:00.000Z');
    expect(p.value(row('modified'), 'service_OriginalEntryTimestamp')).toBe('2024-03-05T12:00:00.000Z');
    expect(p.value(row('onlyMod'), 'service_OriginalEntryTimestamp')).toBe('2024-03-05T12:00:00.250Z');
    expect(p.value(row('nothing'), 'service_OriginalEntryTimestamp')).toBeNull();
    expect(s.derived.originalEntryTimestamp.get(row('contract'))).toBe(at('2024-03-01T00:00:00Z'));
  });

  it('service_DaysOnMarketReferenceTimestamp: OnMarketTimestamp, else service_OriginalEntryTimestamp', () => {
    expect(p.value(row('onlyMod'), 'service_DaysOnMarketReferenceTimestamp')).toBe('2024-04-01T00:00:00.000Z');
    expect(p.value(row('entry'), 'service_DaysOnMarketReferenceTimestamp')).toBe('2024-01-01T08:00:00.000Z');
    expect(p.value(row('nothing'), 'service_DaysOnMarketReferenceTimestamp')).toBeNull();
  });

  it('DaysOnMarket counts whole days to the clock, never below 0, at query time', () => {
    const r = row('onlyMod'); // reference 2024-04-01T00:00:00Z
    expect(p.value(r, 'DaysOnMarket')).toBe(10); // the store's clock: 2024-04-11T06:00Z
    expect(s.daysOnMarket(r)).toBe(10);
    expect(s.daysOnMarket(r, at('2024-04-01T00:00:00Z'))).toBe(0);
    expect(s.daysOnMarket(r, at('2024-04-01T23:59:59.999Z'))).toBe(0);
    expect(s.daysOnMarket(r, at('2024-04-02T00:00:00Z'))).toBe(1);
    expect(s.daysOnMarket(r, at('2024-03-01T00:00:00Z'))).toBe(0);
    expect(p.value(r, 'DaysOnMarket', at('2025-04-01T00:00:00Z'))).toBe(365);
    expect(p.record(r, ['ListingKey', 'DaysOnMarket'], at('2024-04-03T12:00:00Z'))).toEqual({ ListingKey: 'onlyMod', DaysOnMarket: 2 });
    expect(p.value(row('nothing'), 'DaysOnMarket')).toBeNull();
    expect(s.derived.daysOnMarket.get(r, at('2024-04-01T00:00:00Z') + 5 * DAY)).toBe(5);
  });

  it('input values of derived fields are ignored and reported', () => {
    expect(s.report.resources.Property.ignoredFields).toEqual({ DaysOnMarket: 1 });
    expect(p.value(row('nothing'), 'DaysOnMarket')).toBeNull();
    expect(p.schema.field('DaysOnMarket')!.origin).toBe('derived');
  });

  it('the clock moves DaysOnMarket without reloading', () => {
    let now = at('2024-04-05T00:00:00Z');
    const moving = loadRecords({ Property: [{ ListingKey: 'A', OnMarketTimestamp: '2024-04-01T00:00:00Z' }] }, { now: () => now });
    expect(moving.Property.value(0, 'DaysOnMarket')).toBe(4);
    now += 3 * DAY;
    expect(moving.Property.value(0, 'DaysOnMarket')).toBe(7);
  });
});

describe('tables', () => {
  const s = loadRecords({ Property: [listing('A', { City: 'Austin' }), listing('B')] });

  it('map keys to rows and back', () => {
    expect(s.Property.rowOfKey('B')).toBe(1);
    expect(s.Property.rowOfKey('Z')).toBe(-1);
    expect(s.Property.rowOfKey('')).toBe(-1);
    expect(s.Property.keyOf(0)).toBe('A');
  });

  it('answer null for absent values and for fields outside the schema', () => {
    expect(s.Property.value(1, 'City')).toBeNull();
    expect(s.Property.value(0, 'NoSuchField')).toBeNull();
    expect(s.Property.column('NoSuchField')).toBeUndefined();
    expect(s.Property.columnOf('City', 'number')).toBeUndefined();
    expect(s.Property.columnOf('City', 'dictionary')!.dictionary).toEqual([null, 'Austin']);
  });

  it('give records in schema order, whatever order the fields are asked in', () => {
    const rec = s.Property.record(0, ['StandardStatus', 'Nope', 'City', 'ListingKey']);
    expect(Object.keys(rec)).toEqual(['ListingKey', 'City', 'StandardStatus', 'Nope']);
    expect(rec).toEqual({ ListingKey: 'A', City: 'Austin', StandardStatus: 'Active', Nope: null });
    const odd = loadRecords({ Property: [JSON.parse('{"ListingKey": "A", "__proto__": "x", "constructor": 1}') as Record<string, unknown>] });
    const r = odd.Property.record(0);
    expect(Object.keys(r).slice(-2)).toEqual(['__proto__', 'constructor']);
    expect(JSON.stringify(r)).toContain('"__proto__":"x","constructor":1');
  });

  it('have only the declared fields the data carries, plus the derived ones', () => {
    expect(s.Property.schema.fields.map((f) => f.name)).toEqual([
      'ListingKey',
      'City',
      'DaysOnMarket',
      'ListPrice',
      'Location',
      'ModificationTimestamp',
      'RawLocation',
      'StandardStatus',
      'service_DaysOnMarketReferenceTimestamp',
      'service_OriginalEntryTimestamp',
    ]);
    expect(s.Media.rowCount).toBe(0);
    expect(s.Media.schema.fields.map((f) => f.name)).toEqual(['MediaKey']);
    expect(s.accounts).toBeNull();
  });
});
