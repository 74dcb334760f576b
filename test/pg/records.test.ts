/**
 * Value encoding and record decoding: the texts COPY writes (read from the typed columns) equal the
 * texts a write binds (made from the record's JSON values) on every row of the default data set
 * and of records at the edges of each type; COPY and array-literal escaping; and against a real
 * PostgreSQL, records written through bind parameters (the write path) read back through
 * recordReader exactly as the in-memory engine gives them, dates and timestamps PostgreSQL spells
 * differently (years before 1, after 9999) included, for every day and millisecond sampled.
 */
import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR } from '../../src/engine.js';
import { CATALOG } from '../../src/schema/catalog.js';
import { openPool } from '../../src/pg/connect.js';
import { arrayText, copyField, dateText, encodeFeedText, encodeField, encodeRecord, fieldColumns, hasFeedText, timestampText } from '../../src/pg/encode.js';
import { Layout, isStored } from '../../src/pg/layout.js';
import { initLayout } from '../../src/pg/migrate.js';
import { recordReader } from '../../src/pg/records.js';
import { RESOURCE_NAMES, type ResourceName } from '../../src/schema/types.js';
import type { TableSchema } from '../../src/schema/table-schema.js';
import { loadDataDirectory, loadRecords } from '../../src/store/load.js';
import type { Store } from '../../src/store/store.js';
import { daysFromCivil, formatDate } from '../../src/store/temporal.js';
import { freshDatabase, pgSkip } from './helpers.js';

const NOW = Date.parse('2025-06-01T00:00:00Z');

/**
 * Records at the edges: every inferred local type, odd names, characters to escape, years 0 and
 * 9999 (and, with `outOfRange`, instants in years -1 and 10000 UTC: derived fields give them in a
 * canonical text no ISO 8601 parser reads back, so only the typed columns can say what they are).
 */
const edgeStore = (outOfRange = true): Store =>
  loadRecords(
    {
      Property: [
        {
          ListingKey: 'P1',
          StandardStatus: 'Active',
          PublicRemarks: 'tab\there, new\nline, back\\slash, "quotes", {braces}, 😀',
          Appliances: ['NULL', '', 'a,b', '"q"', '\\', '𠀀'],
          ListingContractDate: '0000-02-29',
          OnMarketTimestamp: outOfRange ? '0000-01-01T00:00:00.5+23:59' : '0000-01-01T00:00:00.5-23:59',
          ModificationTimestamp: '9999-12-31T23:59:59.9999+00:00',
          OriginalEntryTimestamp: outOfRange ? '9999-12-31T23:59:59.9999-23:59' : '9999-12-31T23:59:59.9999+23:59',
          Latitude: 89.99999999999999,
          Longitude: -179.99999999999997,
          ['__proto__']: 'own property, not a prototype',
          constructor: 'c',
          LocalInt: -(2 ** 60),
          LocalDecimal: 0.30000000000000004,
          LocalBool: true,
          LocalList: ['x'],
        },
        { ListingKey: 'P2', ModificationTimestamp: '2020-01-01T00:00+05:30', LocalInt: 0, LocalDecimal: -1e-300, LocalBool: false },
        { ListingKey: 'P3' },
      ],
      Media: [{ MediaKey: 'M1', ResourceRecordKey: 'P1', Order: 3, MediaModificationTimestamp: '2020-02-02T02:02:02.2Z' }],
      OpenHouse: [{ OpenHouseKey: 'O1', ListingKey: 'P2', OpenHouseDate: '2024-01-01', OpenHouseStartTime: '2024-01-01T10:00:00-08:00' }],
      Member: [{ MemberKey: 'AG', MemberFirstName: 'Zoë' }],
    },
    { now: () => NOW },
  );

/** Every table's rows: COPY's texts (typed columns) equal the bound texts (JSON values), column by column. */
function expectSameTexts(store: Store): number {
  let checked = 0;
  for (const r of RESOURCE_NAMES) {
    const table = store.table(r);
    const columns = fieldColumns(table);
    for (let row = 0; row < table.rowCount; row++) {
      const record = table.record(row);
      const encoded = encodeRecord(table.schema, record);
      expect(encoded.columns).toEqual(columns.map((c) => c.column));
      expect(encoded.casts).toEqual(columns.map((c) => c.cast));
      expect(encoded.values, `${r} ${table.keyOf(row)}`).toEqual(columns.map((c) => c.text(row)));
      checked++;
    }
  }
  return checked;
}

describe('value texts', () => {
  it('COPY escapes backslash, tab, newline and carriage return, and writes NULL as \\N', () => {
    expect(copyField(null)).toBe('\\N');
    expect(copyField('\\N')).toBe('\\\\N');
    expect(copyField('a\tb\nc\rd\\e')).toBe('a\\tb\\nc\\rd\\\\e');
    expect(copyField('plain "text", {x} 😀')).toBe('plain "text", {x} 😀');
  });

  it('array literals quote every element and escape quotes and backslashes', () => {
    expect(arrayText([], 'f')).toBe('{}');
    expect(arrayText(['NULL', '', 'a,b', '"q"', '\\', ' x '], 'f')).toBe('{"NULL","","a,b","\\"q\\"","\\\\"," x "}');
    expect(() => arrayText(['a\u0000'], 'field F')).toThrow(/field F: the text holds a NUL character/);
  });

  it('dates and instants before year 1 are written as PostgreSQL reads them (BC), later ones as ISO 8601', () => {
    expect(dateText(0)).toBe('1970-01-01');
    expect(dateText(daysFromCivil(1, 1, 1))).toBe('0001-01-01');
    expect(dateText(daysFromCivil(0, 12, 31))).toBe('0001-12-31 BC');
    expect(dateText(daysFromCivil(0, 2, 29))).toBe('0001-02-29 BC');
    expect(dateText(daysFromCivil(-1, 3, 1))).toBe('0002-03-01 BC');
    expect(dateText(daysFromCivil(-400, 1, 1))).toBe('0401-01-01 BC');
    expect(dateText(daysFromCivil(10000, 1, 1))).toBe('10000-01-01');
    expect(timestampText(0)).toBe('1970-01-01T00:00:00.000Z');
    expect(timestampText(daysFromCivil(0, 1, 1) * 86_400_000 - 1)).toBe('0002-12-31T23:59:59.999Z BC');
    expect(timestampText(Date.UTC(10000, 0, 1, 4, 59))).toBe('10000-01-01T04:59:00.000Z');
  });

  it('encodeField refuses values of the wrong type (a programming error, not data)', () => {
    const p = CATALOG.Property;
    expect(() => encodeField(p.field('ListPrice')!, 'cheap')).toThrow(TypeError);
    expect(() => encodeField(p.field('Appliances')!, [1])).toThrow(TypeError);
    expect(() => encodeField(p.field('ListingContractDate')!, '2024-02-30')).toThrow(TypeError);
    expect(() => encodeFeedText(p.field('ModificationTimestamp')!, 'yesterday')).toThrow(TypeError);
    expect(encodeField(p.field('Appliances')!, null)).toBe('{}');
    expect(encodeField(p.field('ListPrice')!, undefined)).toBeNull();
    expect(encodeFeedText(p.field('ModificationTimestamp')!, null)).toBeNull();
    expect(encodeFeedText(p.field('ModificationTimestamp')!, '2024-01-01T00:00:00.000Z')).toBeNull();
    expect(encodeFeedText(p.field('ModificationTimestamp')!, '2024-01-01T00:00Z')).toBe('2024-01-01T00:00Z');
  });

  it('the texts read from typed columns equal the texts made from JSON values, on every row of the default data set', async () => {
    const store = await loadDataDirectory(DEFAULT_DATA_DIR, { now: () => NOW });
    expect(expectSameTexts(store)).toBeGreaterThan(40_000);
  });

  it('and on records at the edges of every type', () => {
    expectSameTexts(edgeStore(false));
    const p = edgeStore().Property;
    const texts = new Map(fieldColumns(p).map((c) => [c.column, c.text(0)]));
    expect(texts.get('"ListingContractDate"')).toBe('0001-02-29 BC');
    expect(texts.get('"OriginalEntryTimestamp"')).toBe('10000-01-01T23:58:59.999Z');
    expect(texts.get('"OriginalEntryTimestamp#text"')).toBe('9999-12-31T23:59:59.9999-23:59');
    expect(texts.get('"ModificationTimestamp#text"')).toBe('9999-12-31T23:59:59.9999+00:00');
    expect(texts.get('"OnMarketTimestamp"')).toBe('0002-12-31T00:01:00.500Z BC');
    expect(texts.get('"LocalInt"')).toBe('-1152921504606846976');
    expect(texts.get('"Location"')).toBe('SRID=4326;POINT(-179.99999999999997 89.99999999999999)');
    expect(texts.has('"DaysOnMarket"')).toBe(false);
    expect(p.schema.fields.filter((f) => !isStored(f)).map((f) => f.name)).toEqual(['DaysOnMarket']);
    expect(p.schema.fields.filter(hasFeedText).map((f) => f.name)).toContain('OnMarketTimestamp');
  });
});

describe('recordReader', () => {
  const schema = edgeStore().Property.schema;

  it('selects one expression per field (two for timestamps and points, none for a name the schema lacks) in schema order', () => {
    const all = recordReader(schema, 't', null);
    const expected = schema.fields.reduce((n, f) => n + (f.type === 'Edm.DateTimeOffset' || f.type === 'Edm.GeographyPoint' ? 2 : 1), 0);
    expect(all.width).toBe(expected);
    const some = recordReader(schema, 'p', ['Nope', 'ListPrice', 'ListingKey', 'ListPrice', 'Location']);
    expect(some.columns).toBe('"p"."ListingKey"::text, ST_X("p"."Location"::geometry), ST_Y("p"."Location"::geometry)');
    expect(some.width).toBe(3);
    // ListPrice: no edge record has one, so the schema lacks it too
    expect(JSON.stringify(some.decode(['x', 'K', 1.5, 2.5], 1, NOW))).toBe(
      '{"ListingKey":"K","Location":{"type":"Point","coordinates":[1.5,2.5]},"Nope":null,"ListPrice":null}',
    );
    const none = recordReader(schema, 'p', ['Nope']);
    expect([none.columns, none.width, none.decode([], 0, NOW)]).toEqual(['', 0, { Nope: null }]);
    expect(() => recordReader(schema, 'bad alias', null)).toThrow(/not a layout identifier/);
  });
});

describe.skipIf(pgSkip)('records through PostgreSQL (real server)', () => {
  let pool: pg.Pool;
  beforeAll(async () => {
    pool = openPool(await freshDatabase('records'));
  });
  afterAll(async () => {
    await pool.end();
  });

  /** Writes every row of the store with parameterized INSERTs of its texts (a write's encoding), then reads each record back. */
  async function roundTrip(store: Store, schemaName: string): Promise<void> {
    const layout = new Layout(schemaName);
    const schemas = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, store.table(r).schema])) as Record<ResourceName, TableSchema>;
    await initLayout(pool, layout, schemas);
    for (const r of RESOURCE_NAMES) {
      const table = store.table(r);
      const columns = fieldColumns(table);
      for (let row = 0; row < table.rowCount; row++) {
        await pool.query(
          `INSERT INTO ${layout.table(r)} (${columns.map((c) => c.column).join(', ')}) VALUES (${columns.map((c, i) => `$${i + 1}::${c.cast}`).join(', ')})`,
          columns.map((c) => c.text(row)),
        );
      }
      const reader = recordReader(table.schema, 'r', null);
      const subset = table.schema.fields.map((f) => f.name).filter((_, i) => i % 2 === 0);
      const some = recordReader(table.schema, 'r', subset);
      const key = `r."${table.schema.key}"`;
      const { rows } = await pool.query<unknown[]>({
        text: `SELECT ${key}, ${reader.columns}, ${some.columns} FROM ${layout.table(r)} r ORDER BY ${key}`,
        rowMode: 'array',
      });
      expect(rows.length, r).toBe(table.rowCount);
      for (const row of rows) {
        const at = table.rowOfKey(row[0] as string);
        for (const now of [NOW, 0, Date.parse('2100-01-01T00:00:00Z')]) {
          expect(JSON.stringify(reader.decode(row, 1, now)), `${r} ${table.keyOf(at)}`).toBe(JSON.stringify(table.record(at, undefined, now)));
          expect(JSON.stringify(some.decode(row, 1 + reader.width, now))).toBe(JSON.stringify(table.record(at, subset, now)));
        }
      }
    }
  }

  it('records at the edges of every type, written as bind parameters, read back exactly (own __proto__ included)', async () => {
    const store = edgeStore();
    await roundTrip(store, 'edges');
    const { rows } = await pool.query<unknown[]>({
      text: `SELECT ${recordReader(store.Property.schema, 'p', ['__proto__', 'DaysOnMarket']).columns} FROM ${new Layout('edges').table('Property')} p WHERE "ListingKey" = 'P1'`,
      rowMode: 'array',
    });
    const record = recordReader(store.Property.schema, 'p', ['__proto__', 'DaysOnMarket']).decode(rows[0], 0, NOW);
    expect(Object.getPrototypeOf(record)).toBe(Object.prototype);
    expect(Object.keys(record)).toEqual(['DaysOnMarket', '__proto__']);
    expect(record.DaysOnMarket).toBeGreaterThan(700_000);
  });

  it('the default data set, written as bind parameters, reads back exactly', { timeout: 300_000 }, async () => {
    const store = await loadDataDirectory(DEFAULT_DATA_DIR, { now: () => NOW });
    await roundTrip(
      loadRecords(
        {
          Property: Array.from({ length: 300 }, (_, i) => store.Property.record(i)),
          Media: Array.from({ length: 300 }, (_, i) => store.Media.record(i)).filter((m) => store.Property.rowOfKey(m.ResourceRecordKey as string) < 300),
          Member: Array.from({ length: store.Member.rowCount }, (_, i) => store.Member.record(i)),
        },
        { now: () => NOW },
      ),
      'sample',
    );
  });

  it('every day and instant sampled reads back as the same day number and epoch milliseconds', async () => {
    const minDay = daysFromCivil(0, 1, 1) - 1;
    const maxDay = daysFromCivil(10000, 1, 1);
    const days = fc.sample(fc.integer({ min: minDay, max: maxDay }), { numRuns: 3000, seed: 16 });
    days.push(minDay, maxDay, daysFromCivil(1, 1, 1), daysFromCivil(1, 1, 1) - 1, 0, -1);
    const dayRows = await pool.query<{ d: number }>(`SELECT (t::date - DATE '1970-01-01') AS d FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i`, [
      days.map(dateText),
    ]);
    expect(dayRows.rows.map((r) => r.d)).toEqual(days);
    expect(days.map((d) => formatDate(d)).slice(-4)).toEqual(['0001-01-01', '0000-12-31', '1970-01-01', '1969-12-31']);

    const ms = fc.sample(fc.integer({ min: minDay * 86_400_000, max: maxDay * 86_400_000 }), { numRuns: 3000, seed: 16 });
    ms.push(minDay * 86_400_000, daysFromCivil(0, 1, 1) * 86_400_000 - 1, -62135596800001, -62135596800000, 0, -1);
    const msRows = await pool.query<{ ms: number }>(
      `SELECT (extract(epoch from t::timestamptz) * 1000)::float8 AS ms FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i`,
      [ms.map(timestampText)],
    );
    expect(msRows.rows.map((r) => r.ms)).toEqual(ms);
  });
});
