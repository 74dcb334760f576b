/**
 * The bulk load against a real PostgreSQL: every live record of every resource read back (all
 * fields and field subsets) equals the in-memory record byte for byte, keys in the same order,
 * search tokens and term statistics equal to the in-memory search views', on the default data
 * set, a generated one, one full of characters COPY must escape and values at the edges of each
 * type, and a generation changed by upserts and removals; strict and skip mode report bad lines as
 * the in-memory loader does; a failed load leaves nothing behind.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreAccess } from '../../src/access/access.js';
import type { Generation } from '../../src/access/generation.js';
import { DEFAULT_DATA_DIR } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import { generateDataset } from '../../src/generate/dataset.js';
import { ChangeWriter } from '../../src/live/change.js';
import { openPool } from '../../src/pg/connect.js';
import { Layout, schemaToJson } from '../../src/pg/layout.js';
import { loadDirectoryIntoPostgres, loadIntoPostgres } from '../../src/pg/load.js';
import { checkLayout, readSchemas } from '../../src/pg/migrate.js';
import { recordReader } from '../../src/pg/records.js';
import { SEARCH_FIELDS } from '../../src/schema/search-fields.js';
import { RESOURCE_NAMES, type ResourceName } from '../../src/schema/types.js';
import { DataError } from '../../src/store/errors.js';
import { loadDataDirectory } from '../../src/store/load.js';
import type { Store } from '../../src/store/store.js';
import { freshDatabase, pgSkip } from './helpers.js';

const NOW = Date.parse('2025-06-01T00:00:00Z');
const LATER = Date.parse('2031-02-03T04:05:06.789Z');

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function dataDir(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-pgload-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}

const jsonl = (records: readonly unknown[]): string => records.map((r) => JSON.stringify(r)).join('\n') + '\n';

const listing = (key: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  ListingKey: key,
  StandardStatus: 'Active',
  ListPrice: 100000,
  ModificationTimestamp: '2024-05-01T10:00:00.000Z',
  ...extra,
});

const generation = (store: Store): Generation => ({ id: 0, store, access: new StoreAccess(store) });

async function schemaExists(pool: pg.Pool, schema: string): Promise<boolean> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1', [schema]);
  return rows[0].n === 1;
}

/** A field subset like a `$select`: the key, every third field, a name the schema lacks, and (listings) DaysOnMarket. */
function subsetOf(fields: readonly string[]): string[] {
  const out = fields.filter((_, i) => i % 3 === 1);
  out.push('NotAFieldOfThisTable');
  if (fields.includes('DaysOnMarket')) out.push('DaysOnMarket');
  return [...out.reverse(), fields[0]];
}

/**
 * Everything a load wrote, against the in-memory generation it was made from: per resource the
 * keys (live rows, key order), each record in full and as a subset, at two clocks; per listing the
 * tokens' counts and term frequencies; the term statistics.
 */
async function expectSameAsMemory(pool: pg.Pool, layout: Layout, gen: Generation): Promise<void> {
  await checkLayout(pool, layout);
  const meta = await readSchemas(pool, layout);
  for (const r of RESOURCE_NAMES) {
    const table = gen.store.table(r);
    const access = gen.access.of(table);
    expect(schemaToJson(meta.schemas[r]), r).toEqual(schemaToJson(table.schema));
    const names = table.schema.fields.map((f) => f.name);
    const all = recordReader(meta.schemas[r], 't', null);
    const some = recordReader(meta.schemas[r], 't', subsetOf(names));
    const key = `t."${table.schema.key}"`;
    const { rows } = await pool.query<unknown[]>({
      text: `SELECT ${key}, ${all.columns}, ${some.columns} FROM ${layout.table(r)} t ORDER BY ${key}`,
      rowMode: 'array',
    });
    const want = [...access.keyOrder].filter((row) => !access.isDead(row));
    expect(
      rows.map((row) => row[0]),
      `${r} keys`,
    ).toEqual(want.map((row) => table.keyOf(row)));
    rows.forEach((row, i) => {
      const at = want[i];
      for (const now of [NOW, LATER]) {
        expect(JSON.stringify(all.decode(row, 1, now)), `${r} ${table.keyOf(at)}`).toBe(JSON.stringify(table.record(at, undefined, now)));
        expect(JSON.stringify(some.decode(row, 1 + all.width, now)), `${r} ${table.keyOf(at)} subset`).toBe(
          JSON.stringify(table.record(at, subsetOf(names), now)),
        );
      }
    });
  }

  const property = gen.store.Property;
  const live = gen.access.of(property);
  for (const s of SEARCH_FIELDS) {
    const view = gen.access.search[s];
    const { rows } = await pool.query<[string, string[], number]>({
      text: `SELECT "ListingKey", "${s}#tokens", "${s}#length" FROM ${layout.table('Property')}`,
      rowMode: 'array',
    });
    let total = 0;
    for (const [key, tokens, length] of rows) {
      const row = property.rowOfKey(key);
      expect(live.isDead(row)).toBe(false);
      expect(length, `${s} ${key}`).toBe(view.lengthOf(row));
      expect(tokens.length).toBe(length);
      total += length;
      const tf = new Map<string, number>();
      for (const t of tokens) tf.set(t, (tf.get(t) ?? 0) + 1);
      for (const [t, n] of tf) {
        expect(view.termId(t), `${s} ${t}`).toBeGreaterThanOrEqual(0);
        expect(view.tfOf(view.termId(t), row), `${s} ${key} ${t}`).toBe(n);
      }
    }
    const stats = await pool.query<{ n: string; total_length: string }>(`SELECT n, total_length FROM ${layout.search} WHERE field = $1`, [s]);
    expect(Number(stats.rows[0].n), `${s} N`).toBe(view.liveCount);
    expect(Number(stats.rows[0].total_length), `${s} total length`).toBe(total);
    expect(total / Math.max(1, view.liveCount)).toBeCloseTo(view.avgLength, 12);

    const want = new Map<string, number>();
    for (let id = 0; id < view.termCount; id++) if (view.liveDocFreq(id) > 0) want.set(view.termOf(id), view.liveDocFreq(id));
    const terms = await pool.query<{ term: string; df: number }>(`SELECT term, df FROM ${layout.terms} WHERE field = $1`, [s]);
    expect(new Map(terms.rows.map((t) => [t.term, t.df])), `${s} terms`).toEqual(want);
  }
}

describe.skipIf(pgSkip)('bulk load into PostgreSQL', () => {
  const pools: pg.Pool[] = [];
  afterAll(async () => {
    for (const p of pools) await p.end();
  });
  async function newPool(): Promise<pg.Pool> {
    const pool = openPool(await freshDatabase('load'));
    pools.push(pool);
    return pool;
  }

  describe('the default data set', () => {
    let pool: pg.Pool;
    let store: Store;
    const layout = new Layout('reso');
    beforeAll(async () => {
      pool = await newPool();
      store = await loadDataDirectory(DEFAULT_DATA_DIR, { now: () => NOW });
    });

    it('loads every table and reports the rows written', async () => {
      const summary = await loadIntoPostgres(pool, layout, store);
      for (const r of RESOURCE_NAMES) expect(summary.tables[r], r).toBe(store.table(r).rowCount);
      expect(summary.tables.Property).toBe(2000);
      expect(summary.ms).toBeGreaterThan(0);
    });

    it('gives back every record of every resource as the in-memory engine does, with the same tokens and term statistics', async () => {
      await expectSameAsMemory(pool, layout, generation(store));
    });

    it('keeps accounts, profiles and the load report in #meta as loaded (key order too)', async () => {
      const meta = await readSchemas(pool, layout);
      expect(JSON.stringify(meta.accounts)).toBe(JSON.stringify(store.accounts));
      expect(JSON.stringify(meta.profiles)).toBe(JSON.stringify(store.profiles));
      expect(meta.report).toEqual(JSON.parse(JSON.stringify(store.report)));
    });

    it('made the indexes and analyzed the tables', async () => {
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_indexes WHERE schemaname = 'reso' AND indexname LIKE 'Property#%'`);
      expect(rows[0].n).toBeGreaterThan(10);
      const stats = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stats WHERE schemaname = 'reso' AND tablename = 'Property'`);
      expect(stats.rows[0].n).toBeGreaterThan(10);
    });

    it('refuses to load over a layout (PgSchemaExists) unless replace, which loads anew', async () => {
      const err = await loadIntoPostgres(pool, layout, store).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(QueryError);
      expect((err as QueryError).code).toBe('PgSchemaExists');
      expect((err as QueryError).message).toMatch(/replace/);

      const small = await loadDataDirectory(dataDir({ 'Property.jsonl': jsonl([listing('ONLY')]) }));
      const summary = await loadIntoPostgres(pool, layout, small, { replace: true });
      expect(summary.tables.Property).toBe(1);
      await expectSameAsMemory(pool, layout, generation(small));
      await loadIntoPostgres(pool, layout, store, { replace: true });
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${layout.table('Property')}`);
      expect(rows[0].n).toBe(2000);
    });

    it('never drops a schema that holds tables of its own (PgSchemaExists, replace or not)', async () => {
      await pool.query('CREATE SCHEMA theirs');
      await pool.query('CREATE TABLE theirs.keep (x int)');
      await pool.query('INSERT INTO theirs.keep VALUES (42)');
      for (const replace of [false, true]) {
        const err = await loadIntoPostgres(pool, new Layout('theirs'), store, { replace }).catch((e: unknown) => e);
        expect((err as QueryError).code).toBe('PgSchemaExists');
        expect((err as QueryError).message).toMatch(/not reso-engine's/);
      }
      const { rows } = await pool.query<{ x: number }>('SELECT x FROM theirs.keep');
      expect(rows).toEqual([{ x: 42 }]);
    });

    it('loads into an empty schema that exists already, and into a second schema beside the first', async () => {
      await pool.query('CREATE SCHEMA empty_one');
      const summary = await loadIntoPostgres(pool, new Layout('empty_one'), store);
      expect(summary.tables.Media).toBe(store.Media.rowCount);
      const other = await loadDataDirectory(dataDir({ 'Property.jsonl': jsonl([listing('A'), listing('B')]) }));
      await loadIntoPostgres(pool, new Layout('second'), other);
      await expectSameAsMemory(pool, new Layout('second'), generation(other));
      await expectSameAsMemory(pool, new Layout('empty_one'), generation(store));
    });
  });

  it('a pool’s statement timeout does not cut a load short', async () => {
    const pool = openPool(await freshDatabase('timeout'), { statementTimeoutMs: 20 });
    pools.push(pool);
    const store = await loadDataDirectory(DEFAULT_DATA_DIR, { now: () => NOW });
    const summary = await loadIntoPostgres(pool, new Layout('reso'), store);
    expect(summary.tables.Media).toBe(store.Media.rowCount);
    await expect(pool.query('SELECT pg_sleep(5)')).rejects.toMatchObject({ code: '57014' });
  });

  it('a generated data set (listings with Media, OpenHouse, PropertyChange, Member, Office) loads exactly', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-pgload-gen-'));
    dirs.push(dir);
    generateDataset({ listings: 400, seed: 'pg-load', outDir: dir });
    const pool = await newPool();
    const layout = new Layout('generated');
    const result = await loadDirectoryIntoPostgres(pool, layout, dir, { now: () => NOW });
    expect(result.report.skipped.total).toBe(0);
    const store = await loadDataDirectory(dir, { now: () => NOW });
    for (const r of RESOURCE_NAMES) expect(result.tables[r], r).toBe(store.table(r).rowCount);
    expect(result.tables.Media).toBeGreaterThan(400);
    expect(result.tables.Member).toBeGreaterThan(0);
    await expectSameAsMemory(pool, layout, generation(store));
  });

  describe('text and values COPY must carry exactly', () => {
    const nasty = [
      'tab\there',
      'new\nline',
      'carriage\rreturn',
      'back\\slash \\N \\t \\\\',
      'quote " and \' and , and { } and NULL',
      'NULL',
      '\\N',
      '',
      ' padded ',
      'unicode: café Straße naïve Ωμέγα 東京 עברית',
      'astral: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀 🏠 𠀀',
      'controls \u0001\u0007\u001f\u007f \u2028 \u2029 \ufeff',
      'a\\"b"\\',
    ];
    const records = [
      listing('E1', {
        PublicRemarks: nasty.join(' | '),
        City: nasty[0],
        UnparsedAddress: '123 North Main Street Apt 4',
        Appliances: nasty,
        InteriorFeatures: [],
        ListAgentFullName: "Zoë 😀 O'Brien\tJr.",
        LocalText: nasty[3],
        LocalList: ['x', '', 'NULL', '"', '\\', '😀'],
        LocalInt: 2 ** 53 + 2,
        LocalNumber: -1.5e-7,
        LocalBool: false,
        LocalDate: '0000-01-01',
        LocalTime: '2024-02-29T23:59:59.999999+14:00',
        LocalNulls: null,
        ListingContractDate: '9999-12-31',
        OnMarketTimestamp: '0000-01-01T00:00+01:00',
        OriginalEntryTimestamp: '9999-12-31T23:59-05:00',
        Latitude: -90,
        Longitude: 180,
        LotSizeArea: 1.7976931348623157e308,
        BathroomsTotalInteger: 9223372036854774784,
      }),
      listing('E2', {
        PublicRemarks: 'plain',
        City: nasty[10],
        Appliances: ['Dishwasher'],
        LocalText: null,
        LocalList: [],
        LocalInt: -9223372036854775808,
        LocalNumber: 5e-324,
        LocalBool: true,
        LocalDate: '1969-12-31',
        LocalTime: '1970-01-01T00:00:00Z',
        ModificationTimestamp: '2024-05-01T10:00Z',
        Latitude: 0,
        Longitude: -0,
        LotSizeArea: 0.1,
      }),
      listing('E3 \t\\ key with spaces', {
        City: nasty[4],
        Latitude: 37.774929,
        Longitude: -122.419416,
        ModificationTimestamp: '2024-05-01T10:00:00.1-07:30',
        LocalTime: '2024-05-01T10:00:00.12Z',
        LocalNumber: 1.2345678901234567e19,
      }),
      listing('E4 😀', { City: 'Östersund', ModificationTimestamp: '2024-05-01T10:00:00.000+00:00' }),
    ];
    const media = [
      { MediaKey: 'M1', ResourceRecordKey: 'E1', ResourceName: 'Property', MediaURL: 'https://x.test/a\tb\\c.jpg', Order: 1, ShortDescription: nasty[1] },
      { MediaKey: 'M2 😀', ResourceRecordKey: 'E3 \t\\ key with spaces', ResourceName: 'Property', Order: 2, ShortDescription: nasty[10] },
    ];
    const members = [{ MemberKey: 'AG1', MemberFullName: nasty[12], MemberFirstName: 'Zoë', OriginatingSystemName: 'CRMLS' }];

    it('every record, key, token and statistic round-trips, local fields of every inferred type included', async () => {
      const dir = dataDir({ 'Property.jsonl': jsonl(records), 'Media.jsonl': jsonl(media), 'Member.jsonl': jsonl(members) });
      const store = await loadDataDirectory(dir, { now: () => NOW });
      const local = Object.fromEntries(store.Property.schema.localFields.map((f) => [f.name, f.collection ? `Collection(${f.type})` : f.type]));
      expect(local).toEqual({
        LocalText: 'Edm.String',
        LocalList: 'Collection(Edm.String)',
        LocalInt: 'Edm.Int64',
        LocalNumber: 'Edm.Decimal',
        LocalBool: 'Edm.Boolean',
        LocalDate: 'Edm.Date',
        LocalTime: 'Edm.DateTimeOffset',
        LocalNulls: 'Edm.String',
      });
      const pool = await newPool();
      const layout = new Layout('escapes');
      await loadIntoPostgres(pool, layout, store);
      await expectSameAsMemory(pool, layout, generation(store));
      // the feed's timestamp texts are kept only where they are not the canonical form
      const { rows } = await pool.query<{ key: string; text: string | null }>(
        `SELECT "ListingKey" AS key, "ModificationTimestamp#text" AS text FROM ${layout.table('Property')} ORDER BY 1`,
      );
      expect(rows.map((r) => r.text)).toEqual([null, '2024-05-01T10:00Z', '2024-05-01T10:00:00.1-07:30', '2024-05-01T10:00:00.000+00:00']);
      // PostgreSQL holds the values themselves: years before 1 as BC, integers beyond 2^53 exactly
      const e1 = await pool.query<Record<string, string>>(
        `SELECT "LocalDate"::text AS date, "OnMarketTimestamp"::text AS before, "OriginalEntryTimestamp"::text AS after, "BathroomsTotalInteger"::text AS big,
                "LocalInt"::text AS int, ST_AsText("Location") AS point FROM ${layout.table('Property')} WHERE "ListingKey" = 'E1'`,
      );
      expect(e1.rows[0]).toEqual({
        date: '0001-01-01 BC',
        before: '0002-12-31 23:00:00+00 BC', // year -1 (0000-01-01T00:00+01:00)
        after: '10000-01-01 04:59:00+00',
        big: '9223372036854774784',
        int: '9007199254740994',
        point: 'POINT(180 -90)',
      });
      const e2 = await pool.query<{ int: string }>(`SELECT "LocalInt"::text AS int FROM ${layout.table('Property')} WHERE "ListingKey" = 'E2'`);
      expect(e2.rows[0].int).toBe('-9223372036854775808');
    });

    it('text with a NUL character cannot be stored: PgUnsupportedValue naming the record and field, and nothing is left', async () => {
      const pool = await newPool();
      for (const [resource, files] of [
        ['Property', { 'Property.jsonl': jsonl([listing('A'), listing('B', { City: 'nul\u0000here' })]) }],
        ['Property', { 'Property.jsonl': jsonl([listing('A', { Appliances: ['ok', 'n\u0000'] })]) }],
        ['Media', { 'Property.jsonl': jsonl([listing('A')]), 'Media.jsonl': jsonl([{ MediaKey: 'M\u0000', ResourceRecordKey: 'A' }]) }],
      ] as const) {
        const store = await loadDataDirectory(dataDir(files));
        const err = await loadIntoPostgres(pool, new Layout('nul'), store).catch((e: unknown) => e);
        expect(err, resource).toBeInstanceOf(QueryError);
        expect((err as QueryError).code).toBe('PgUnsupportedValue');
        expect((err as QueryError).message).toMatch(new RegExp(`^${resource} '`));
        expect((err as QueryError).message).toMatch(/NUL character/);
        expect(await schemaExists(pool, 'nul')).toBe(false);
      }
      // and a replace that fails keeps the layout that was there
      const good = await loadDataDirectory(dataDir({ 'Property.jsonl': jsonl([listing('KEPT')]) }));
      await loadIntoPostgres(pool, new Layout('nul'), good);
      const bad = await loadDataDirectory(dataDir({ 'Property.jsonl': jsonl([listing('B', { PublicRemarks: '\u0000' })]) }));
      await expect(loadIntoPostgres(pool, new Layout('nul'), bad, { replace: true })).rejects.toMatchObject({ code: 'PgUnsupportedValue' });
      await expectSameAsMemory(pool, new Layout('nul'), generation(good));
      // the pool's connections are all usable after the aborted COPYs
      const checks = await Promise.all([1, 2, 3].map(() => pool.query<{ one: number }>('SELECT 1 AS one')));
      expect(checks.map((c) => c.rows[0].one)).toEqual([1, 1, 1]);
    });

    /** Letters that barely compress (a fixed linear congruential sequence), a space after every `word` of them. */
    const letters = (n: number, word: number): string => {
      let x = 12345;
      let out = '';
      for (let i = 0; i < n; i++) {
        x = (x * 1103515245 + 12345) % 2 ** 31;
        out += String.fromCharCode(97 + (x % 26)) + ((i + 1) % word === 0 ? ' ' : '');
      }
      return out;
    };

    it('free text far longer than an index entry (remarks, URLs, a bio) loads and reads back', async () => {
      const remarks = letters(20_000, 7);
      const dir = dataDir({
        'Property.jsonl': jsonl([
          listing('LONG', { PublicRemarks: remarks, ListingURL: `https://x.test/${letters(9000, 9000)}`, ListingId: letters(5000, 8) }),
        ]),
        'Member.jsonl': jsonl([{ MemberKey: 'M', MemberBio: remarks }]),
      });
      const store = await loadDataDirectory(dir, { now: () => NOW });
      const pool = await newPool();
      await loadIntoPostgres(pool, new Layout('long'), store);
      await expectSameAsMemory(pool, new Layout('long'), generation(store));
    });

    it('a search token longer than an index entry can be: PgUnsupportedValue, nothing left', async () => {
      const store = await loadDataDirectory(dataDir({ 'Property.jsonl': jsonl([listing('T', { PublicRemarks: letters(6000, 6000) })]) }));
      const pool = await newPool();
      const err = (await loadIntoPostgres(pool, new Layout('token'), store).catch((e: unknown) => e)) as QueryError;
      expect(err).toBeInstanceOf(QueryError);
      expect(err.code).toBe('PgUnsupportedValue');
      expect(err.message).toMatch(/too large for a PostgreSQL index/);
      expect(await schemaExists(pool, 'token')).toBe(false);
    });

    it('an integer beyond bigint cannot be stored: PgUnsupportedValue', async () => {
      const pool = await newPool();
      const store = await loadDataDirectory(dataDir({ 'Property.jsonl': jsonl([listing('A', { LocalInt: 1 }), listing('B', { LocalInt: 2 ** 63 })]) }));
      const err = (await loadIntoPostgres(pool, new Layout('big'), store).catch((e: unknown) => e)) as QueryError;
      expect(err.code).toBe('PgUnsupportedValue');
      expect(err.message).toMatch(/^Property 'B' field LocalInt: 9223372036854776000 is beyond the bigint column's range/);
      expect(await schemaExists(pool, 'big')).toBe(false);
    });
  });

  describe('bad data lines', () => {
    const files = {
      'Property.jsonl': `${JSON.stringify(listing('A'))}\n${JSON.stringify(listing('B', { ListPrice: 'cheap' }))}\n${JSON.stringify(listing('C'))}\n`,
      'Media.jsonl': `${JSON.stringify({ MediaKey: 'M1', ResourceRecordKey: 'A' })}\n{"MediaKey": "M2",\n${JSON.stringify({ MediaKey: 'M3', ResourceRecordKey: 'C' })}\n`,
    };

    it('strict mode fails with the in-memory loader’s DataError (file and line) and writes nothing', async () => {
      const dir = dataDir(files);
      const memory = await loadDataDirectory(dir).catch((e: unknown) => e);
      expect(memory).toBeInstanceOf(DataError);
      const pool = await newPool();
      const err = await loadDirectoryIntoPostgres(pool, new Layout('strict'), dir).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DataError);
      expect((err as DataError).toJSON()).toEqual((memory as DataError).toJSON());
      expect((err as DataError).toJSON()).toMatchObject({ code: 'BadFieldValue', file: 'Property.jsonl', line: 2, field: 'ListPrice' });
      expect((err as DataError).message).toBe((memory as DataError).message);
      expect(await schemaExists(pool, 'strict')).toBe(false);
    });

    it('skip mode loads the other records and reports the skipped lines, in #meta too', async () => {
      const dir = dataDir(files);
      const pool = await newPool();
      const layout = new Layout('skip');
      const result = await loadDirectoryIntoPostgres(pool, layout, dir, { skipBadRecords: true, now: () => NOW });
      expect(result.tables.Property).toBe(2);
      expect(result.tables.Media).toBe(2);
      expect(result.report.skipped.total).toBe(2);
      expect(result.report.skipped.samples.map((s) => [s.file, s.line, s.code])).toEqual([
        ['Property.jsonl', 2, 'BadFieldValue'],
        ['Media.jsonl', 2, 'BadDataLine'],
      ]);
      const memory = await loadDataDirectory(dir, { skipBadRecords: true, now: () => NOW });
      expect(result.report).toEqual(memory.report);
      expect((await readSchemas(pool, layout)).report).toEqual(JSON.parse(JSON.stringify(memory.report)));
      await expectSameAsMemory(pool, layout, generation(memory));
    });
  });

  it('a changed generation: only live rows are written (replaced, removed, cascaded children left out)', async () => {
    const store = await loadDataDirectory(DEFAULT_DATA_DIR, { now: () => NOW });
    const gen0 = generation(store);
    let id = 0;
    const writer = new ChangeWriter(
      () => NOW,
      () => ++id,
    );
    let gen = gen0;
    const removed = store.Property.keyOf(0);
    const second = store.Property.keyOf(1);
    // a whole record back in (its derived fields are ignored by the loader, as in any upsert)
    const replaced = { ...store.Property.record(2), PublicRemarks: 'Replaced remarks with brand new words: zyzzyva quokka', City: 'Newtown' };
    await writer.apply(
      [
        { resource: 'Property', remove: [removed] },
        { resource: 'Property', upsert: [replaced, listing('NEW-1', { PublicRemarks: 'quokka island' })] },
        { resource: 'Media', remove: [store.Media.keyOf(store.Media.rowCount - 1)] },
        { resource: 'Member', remove: [store.Member.keyOf(0)] },
      ],
      () => gen,
      (next) => (gen = next),
    );
    expect(gen.id).toBe(1);
    const pool = await newPool();
    const layout = new Layout('changed');
    const summary = await loadIntoPostgres(pool, layout, gen.store, { access: gen.access });
    const liveCount = (r: ResourceName): number => {
      const t = gen.store.table(r);
      const a = gen.access.of(t);
      let n = 0;
      for (let row = 0; row < t.rowCount; row++) if (!a.isDead(row)) n++;
      return n;
    };
    for (const r of RESOURCE_NAMES) expect(summary.tables[r], r).toBe(liveCount(r));
    expect(summary.tables.Property).toBe(2000);
    expect(summary.tables.Member).toBe(store.Member.rowCount - 1);
    expect(summary.tables.Media).toBeLessThan(store.Media.rowCount);
    await expectSameAsMemory(pool, layout, gen);
    const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${layout.table('Property')} WHERE "ListingKey" = ANY($1)`, [
      [removed, second, 'NEW-1'],
    ]);
    expect(rows[0].n).toBe(2);
  });
});
