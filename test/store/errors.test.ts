import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { QueryError } from '../../src/errors.js';
import { DataError } from '../../src/store/errors.js';
import { loadDataDirectory, loadRecords } from '../../src/store/load.js';
import { dataDir, jsonl, listing } from './helpers.js';

async function loadError(files: Record<string, string>, fastPath = true): Promise<DataError> {
  try {
    await loadDataDirectory(dataDir(files), { fastPath });
  } catch (err) {
    expect(err).toBeInstanceOf(QueryError);
    expect(err).toBeInstanceOf(DataError);
    return err as DataError;
  }
  throw new Error('the load did not fail');
}

const good = jsonl([listing('A'), listing('B')]);

/** One bad line (line 2) between good ones. */
const withBadLine = (bad: string): string => `${JSON.stringify(listing('A'))}\n${bad}\n${JSON.stringify(listing('C'))}\n`;

interface Case {
  readonly name: string;
  readonly files: Record<string, string>;
  readonly code: string;
  readonly file: string;
  readonly line: number;
  readonly field: string | null;
  readonly reason: RegExp;
}

const cases: Case[] = [
  {
    name: 'malformed JSON line',
    files: { 'Property.jsonl': withBadLine('{"ListingKey": "B", "ListPrice": 1,') },
    code: 'BadDataLine',
    file: 'Property.jsonl',
    line: 2,
    field: null,
    reason: /^malformed JSON \(.+\)$/,
  },
  {
    name: 'a line that is not an object',
    files: { 'Property.jsonl': withBadLine('["ListingKey", "B"]') },
    code: 'BadDataLine',
    file: 'Property.jsonl',
    line: 2,
    field: null,
    reason: /^expected a JSON object, found an array$/,
  },
  {
    name: 'numeric string where a number belongs',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { ListPrice: '100000' }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'ListPrice',
    reason: /^expected a number, found the string "100000"$/,
  },
  {
    name: 'a fraction in an integer field',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { BedroomsTotal: 2.5 }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'BedroomsTotal',
    reason: /^expected an integer \(Edm\.Int64\), found the number 2\.5$/,
  },
  {
    name: 'timestamp without Z or offset',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { ModificationTimestamp: '2024-05-01T10:00:00' }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'ModificationTimestamp',
    reason: /^expected an ISO 8601 timestamp with Z or an offset .*found the string "2024-05-01T10:00:00"$/,
  },
  {
    name: 'non-ISO timestamp',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { OnMarketTimestamp: '05/01/2024 10:00 AM' }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'OnMarketTimestamp',
    reason: /ISO 8601 timestamp.*"05\/01\/2024 10:00 AM"$/,
  },
  {
    name: 'timestamp out of range',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { OnMarketTimestamp: '2024-05-01T24:00:00Z' }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'OnMarketTimestamp',
    reason: /ISO 8601 timestamp/,
  },
  {
    name: 'bad date',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { ListingContractDate: '2023-02-29' }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'ListingContractDate',
    reason: /^expected a date \(YYYY-MM-DD\), found the string "2023-02-29"$/,
  },
  {
    name: 'a timestamp where a date belongs',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { CloseDate: '2024-05-01T00:00:00Z' }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'CloseDate',
    reason: /^expected a date/,
  },
  {
    name: 'a boolean field holding a string',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { PoolPrivateYN: 'Y' }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'PoolPrivateYN',
    reason: /^expected true or false, found the string "Y"$/,
  },
  {
    name: 'a string where a collection belongs',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { Appliances: 'Dishwasher' }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'Appliances',
    reason: /^expected an array of strings \(Collection\(Edm\.String\)\), found the string "Dishwasher"$/,
  },
  {
    name: 'a collection with a non-string element',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { Appliances: ['Dishwasher', 5] }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'Appliances',
    reason: /found the number 5 at index 1$/,
  },
  {
    name: 'a number where a string belongs',
    files: { 'Property.jsonl': withBadLine(JSON.stringify(listing('B', { City: 12 }))) },
    code: 'BadFieldValue',
    file: 'Property.jsonl',
    line: 2,
    field: 'City',
    reason: /^expected a string, found the number 12$/,
  },
  {
    name: 'missing key',
    files: { 'Property.jsonl': withBadLine(JSON.stringify({ ListPrice: 5 })) },
    code: 'MissingKey',
    file: 'Property.jsonl',
    line: 2,
    field: 'ListingKey',
    reason: /^the record has no ListingKey$/,
  },
  {
    name: 'duplicate key',
    files: { 'Property.jsonl': `${withBadLine(JSON.stringify(listing('B')))}${JSON.stringify(listing('B'))}\n` },
    code: 'DuplicateKey',
    file: 'Property.jsonl',
    line: 4,
    field: 'ListingKey',
    reason: /^duplicate ListingKey 'B' \(first at line 2\)$/,
  },
  {
    name: 'media without its listing',
    files: {
      'Property.jsonl': good,
      'Media.jsonl': jsonl([
        { MediaKey: 'M1', ResourceName: 'Property', ResourceRecordKey: 'A', Order: 1 },
        { MediaKey: 'M2', ResourceName: 'Property', ResourceRecordKey: 'ZZZ', Order: 1 },
      ]),
    },
    code: 'MissingParent',
    file: 'Media.jsonl',
    line: 2,
    field: 'ResourceRecordKey',
    reason: /^ResourceRecordKey 'ZZZ' matches no Property record$/,
  },
  {
    name: 'an open house without a ListingKey',
    files: { 'Property.jsonl': good, 'OpenHouse.jsonl': jsonl([{ OpenHouseKey: 'O1', OpenHouseDate: '2024-05-01' }]) },
    code: 'MissingParent',
    file: 'OpenHouse.jsonl',
    line: 1,
    field: 'ListingKey',
    reason: /^the record has no ListingKey$/,
  },
  {
    name: 'a property change of an unknown listing',
    files: { 'Property.jsonl': good, 'PropertyChange.jsonl': `\n\n${JSON.stringify({ PropertyChangeKey: 'C1', ListingKey: 'Q' })}\n` },
    code: 'MissingParent',
    file: 'PropertyChange.jsonl',
    line: 3,
    field: 'ListingKey',
    reason: /'Q' matches no Property record/,
  },
];

describe('strict mode: the first bad line fails the load with file, line, field and reason', () => {
  for (const c of cases) {
    it(c.name, async () => {
      for (const fastPath of [true, false]) {
        const err = await loadError(c.files, fastPath);
        expect({ code: err.code, file: err.file, line: err.line, field: err.field }).toEqual({ code: c.code, file: c.file, line: c.line, field: c.field });
        expect(err.reason).toMatch(c.reason);
        expect(err.message).toBe(`${c.file} line ${c.line}${c.field ? `, field ${c.field}` : ''}: ${err.reason}.`);
        expect(err.details).toEqual([{ code: c.code, message: err.reason, target: `${c.file}:${c.line}${c.field ? `:${c.field}` : ''}` }]);
      }
    });
  }

  it('reports the line where a bad element of a JSON array starts', async () => {
    const text = `[\n  ${JSON.stringify(listing('A'))},\n  {\n    "ListingKey": "B",\n    "ListPrice": "9"\n  }\n]\n`;
    const err = await loadError({ 'Property.json': text });
    expect([err.code, err.file, err.line, err.field]).toEqual(['BadFieldValue', 'Property.json', 3, 'ListPrice']);
  });

  it('reports files that cannot be split into records', async () => {
    expect((await loadError({ 'Property.json': `[${JSON.stringify(listing('A'))} ${JSON.stringify(listing('B'))}]` })).reason).toBe(
      'expected , or ] after the record at line 1',
    );
    expect((await loadError({ 'Property.json': `[${JSON.stringify(listing('A'))},]` })).reason).toBe('a comma is followed by ] (trailing comma)');
    expect((await loadError({ 'Property.json': `[${JSON.stringify(listing('A'))}` })).reason).toBe('unexpected end of file inside the array');
    expect((await loadError({ 'Property.json': `{"ListingKey": "A"}` })).code).toBe('BadDataFile');
    expect((await loadError({ 'Property.json': '' })).code).toBe('BadDataFile');
    const gz = gzipSync(good);
    const broken = await loadError({ 'Property.jsonl.gz': gz.subarray(0, gz.length - 6).toString('latin1') });
    expect([broken.code, broken.file]).toEqual(['BadDataFile', 'Property.jsonl.gz']);
  });

  it('needs Property records, one file per resource, and well-formed accounts and profiles', async () => {
    expect((await loadError({ 'Media.jsonl': '' })).code).toBe('MissingDataFile');
    expect((await loadError({ 'Property.jsonl': good, 'Property.json': '[]' })).code).toBe('AmbiguousDataFile');
    const accounts = await loadError({
      'Property.jsonl': good,
      'accounts.json': '{"accounts": [{"username": "u", "password_hash": "x", "sources": "CRMLS"}]}',
    });
    expect([accounts.code, accounts.file, accounts.field, accounts.message]).toEqual([
      'BadDataFile',
      'accounts.json',
      'accounts[0].sources',
      'accounts.json field accounts[0].sources: expected an array of strings.',
    ]);
    expect((await loadError({ 'Property.jsonl': good, 'mls_profiles.json': '{"CRMLS": {"disclaimer": "x"}}' })).field).toBe('CRMLS.originating_system_name');
    expect((await loadError({ 'Property.jsonl': good, 'mls_profiles.json': '{' })).reason).toMatch(/^malformed JSON/);
    await expect(loadDataDirectory(path.join(dataDir({}), 'nope'))).rejects.toMatchObject({ code: 'MissingDataFile' });
  });

  it('in-memory records report the record number', () => {
    expect(() => loadRecords({ Property: [listing('A'), listing('B', { ListPrice: '1' })] })).toThrow(
      expect.objectContaining({
        code: 'BadFieldValue',
        file: 'Property records',
        line: 2,
        field: 'ListPrice',
        message: 'Property records record 2, field ListPrice: expected a number, found the string "1".',
      }),
    );
    expect(() => loadRecords({ Property: [listing('A'), 7] })).toThrow(expect.objectContaining({ code: 'BadDataLine', line: 2 }));
    expect(() => loadRecords({ Property: [listing('A', { ListPrice: Number.NaN })] })).toThrow(
      expect.objectContaining({ code: 'BadFieldValue', field: 'ListPrice' }),
    );
    expect(() => loadRecords({ Listing: [] } as never)).toThrow(expect.objectContaining({ code: 'UnknownResource' }));
  });
});

describe('parallel loading (Media in a worker thread)', () => {
  const property = jsonl([listing('A'), listing('B')]);
  const media = (rows: Array<Record<string, unknown>>): string =>
    jsonl(rows.map((r, i) => ({ MediaKey: `M${i}`, ResourceName: 'Property', ResourceRecordKey: 'A', Order: i, ...r })));
  const change = (rows: Array<Record<string, unknown>>): string =>
    jsonl(rows.map((r, i) => ({ PropertyChangeKey: `C${i}`, ListingKey: 'B', FieldName: 'ListPrice', NewValue: `${i}`, ...r })));

  it('reports the same first error as a sequential load', async () => {
    const cases: Array<Record<string, string>> = [
      // Media's orphan (line 2) comes before its bad value (line 3).
      { 'Property.jsonl': property, 'Media.jsonl': media([{}, { ResourceRecordKey: 'Q' }, { Order: 'x' }]) },
      { 'Property.jsonl': property, 'Media.jsonl': media([{}, { Order: 1.5 }]) },
      // Errors in Media and OpenHouse: Media's is reported, as sequential loading reads it first.
      { 'Property.jsonl': property, 'Media.jsonl': media([{ ResourceRecordKey: 'Q' }]), 'OpenHouse.jsonl': jsonl([{ OpenHouseKey: 'O', ListingKey: 'Q' }]) },
      { 'Property.jsonl': property, 'Media.jsonl': media([{}]), 'OpenHouse.jsonl': jsonl([{ OpenHouseKey: 'O', ListingKey: 'Q' }]) },
      // A Property error stops the load before anything else.
      { 'Property.jsonl': `${property}{"ListingKey": 1}\n`, 'Media.jsonl': media([{ Order: 'x' }]) },
      // The worker checks Media's keys only when it builds their index after the file: a duplicate
      // alone, one before a bad value, and one after it.
      { 'Property.jsonl': property, 'Media.jsonl': media([{}, {}, { MediaKey: 'M0' }]) },
      { 'Property.jsonl': property, 'Media.jsonl': media([{}, { MediaKey: 'M0' }, { Order: 'x' }]) },
      { 'Property.jsonl': property, 'Media.jsonl': media([{}, { Order: 'x' }, { MediaKey: 'M0' }]) },
      // OpenHouse and PropertyChange load in the worker after Media: their errors come after
      // Media's and before Member's, whichever thread meets them.
      {
        'Property.jsonl': property,
        'Media.jsonl': media([{}]),
        'PropertyChange.jsonl': change([{}, { ListingKey: 'Q' }]),
        'Member.jsonl': '{"MemberKey": 1}\n',
      },
      {
        'Property.jsonl': property,
        'Media.jsonl': media([{}]),
        'PropertyChange.jsonl': change([{}, { PropertyChangeKey: 'C0' }]),
        'Member.jsonl': '{"MemberKey": 1}\n',
      },
      {
        'Property.jsonl': property,
        'Media.jsonl': media([{}]),
        'OpenHouse.jsonl': jsonl([{ OpenHouseKey: 'O', ListingKey: 'A', OpenHouseDate: 5 }]),
        'PropertyChange.jsonl': change([{ ListingKey: 'Q' }]),
      },
      { 'Property.jsonl': property, 'Media.jsonl': media([{}]), 'Member.jsonl': '{"MemberKey": 1}\n', 'PropertyChange.jsonl': change([{}]) },
      { 'Property.jsonl': property, 'Media.jsonl': media([{ Order: 'x' }]), 'PropertyChange.jsonl': change([{ ListingKey: 'Q' }]) },
    ];
    for (const files of cases) {
      const d = dataDir(files);
      const sequential = await loadDataDirectory(d, { parallel: false }).catch((e: unknown) => e as DataError);
      const parallel = await loadDataDirectory(d, { parallel: true }).catch((e: unknown) => e as DataError);
      expect(sequential).toBeInstanceOf(DataError);
      expect((parallel as DataError).toJSON()).toEqual((sequential as DataError).toJSON());
    }
  });

  it('skips and reports exactly as a sequential load', async () => {
    const d = dataDir({
      'Property.jsonl': property,
      'Media.jsonl': media([{}, { ResourceRecordKey: 'Q' }, { Order: 'x' }, { ResourceName: 'Member', ResourceRecordKey: 'X1' }, { X_Local: 3 }]),
      'OpenHouse.jsonl': jsonl([
        { OpenHouseKey: 'O', ListingKey: 'Q' },
        { OpenHouseKey: 'P', ListingKey: 'B' },
      ]),
    });
    const duplicate = dataDir({ 'Property.jsonl': property, 'Media.jsonl': media([{}, { Order: 'x' }, { MediaKey: 'M0' }, { X_Local: 3 }]) });
    // PropertyChange's orphan: Media and OpenHouse are taken from the worker, PropertyChange loaded again
    const changes = dataDir({
      'Property.jsonl': property,
      'Media.jsonl': media([{}, { Order: 'x' }]),
      'OpenHouse.jsonl': jsonl([{ OpenHouseKey: 'P', ListingKey: 'B' }]),
      'PropertyChange.jsonl': change([{}, { ListingKey: 'Q' }, { NewValue: 3 }, { PropertyChangeKey: 'C0' }, {}]),
      'Member.jsonl': '{"MemberKey": 1}\n{"MemberKey": "M"}\n',
    });
    for (const dir of [d, duplicate, changes, dataDir({ 'Property.jsonl': property, 'Media.jsonl': media([{}, { Order: 'x' }, { X_Local: 3 }]) })]) {
      const clean = dir !== d && dir !== duplicate;
      const sequential = await loadDataDirectory(dir, { parallel: false, skipBadRecords: true });
      const parallel = await loadDataDirectory(dir, { parallel: true, skipBadRecords: true });
      // With an orphan or a duplicate key the worker's result is discarded and Media loaded again on the main thread.
      expect(parallel.report.parallel).toBe(clean);
      expect({ ...parallel.report, parallel: false }).toEqual(sequential.report);
      for (const t of ['Property', 'Media', 'OpenHouse', 'PropertyChange', 'Member', 'EntityEvent'] as const) {
        const rows = (s: typeof sequential) => [...Array(s.table(t).rowCount).keys()].map((r) => s.table(t).record(r, undefined, 0));
        expect(rows(parallel)).toEqual(rows(sequential));
      }
    }
  });
});

describe('skip mode', () => {
  it('skips bad records, counts them by reason and loads the rest', async () => {
    const property = [
      JSON.stringify(listing('A')),
      '{"ListingKey": "X",',
      JSON.stringify(listing('B', { ListPrice: '7' })),
      JSON.stringify(listing('A', { ListPrice: 9 })),
      JSON.stringify(listing('C', { ModificationTimestamp: '2024-05-01' })),
      JSON.stringify({ City: 'Nowhere' }),
      JSON.stringify(listing('D', { Appliances: 'Oven' })),
      JSON.stringify(listing('E')),
    ].join('\n');
    const media = jsonl([
      { MediaKey: 'M1', ResourceName: 'Property', ResourceRecordKey: 'A', Order: 1 },
      { MediaKey: 'M2', ResourceName: 'Property', ResourceRecordKey: 'B', Order: 1 },
      { MediaKey: 'M3', ResourceName: 'Property', ResourceRecordKey: 'E', Order: 1 },
      { MediaKey: 'M3', ResourceName: 'Property', ResourceRecordKey: 'E', Order: 2 },
    ]);
    for (const fastPath of [true, false]) {
      const s = await loadDataDirectory(dataDir({ 'Property.jsonl': property, 'Media.jsonl': media }), { skipBadRecords: true, fastPath });
      expect([...Array(s.Property.rowCount).keys()].map((r) => s.Property.keyOf(r))).toEqual(['A', 'E']);
      expect(s.Property.value(0, 'ListPrice')).toBe(100000);
      expect([...Array(s.Media.rowCount).keys()].map((r) => s.Media.keyOf(r))).toEqual(['M1', 'M3']);
      expect(s.report.skipped.total).toBe(8);
      expect(s.report.skipped.byCode).toEqual({ BadDataLine: 1, BadFieldValue: 3, DuplicateKey: 2, MissingKey: 1, MissingParent: 1 });
      expect(s.report.resources.Property).toMatchObject({ file: 'Property.jsonl', records: 2, skipped: 6 });
      expect(s.report.resources.Media).toMatchObject({ records: 2, skipped: 2 });
      expect(s.report.skipped.samples.map((e) => [e.file, e.line, e.code, e.field])).toEqual([
        ['Property.jsonl', 2, 'BadDataLine', null],
        ['Property.jsonl', 3, 'BadFieldValue', 'ListPrice'],
        ['Property.jsonl', 4, 'DuplicateKey', 'ListingKey'],
        ['Property.jsonl', 5, 'BadFieldValue', 'ModificationTimestamp'],
        ['Property.jsonl', 6, 'MissingKey', 'ListingKey'],
        ['Property.jsonl', 7, 'BadFieldValue', 'Appliances'],
        ['Media.jsonl', 2, 'MissingParent', 'ResourceRecordKey'],
        ['Media.jsonl', 4, 'DuplicateKey', 'MediaKey'],
      ]);
      // A skipped record leaves no trace: no dictionary value, no schema field.
      expect(s.Property.schema.field('City')).toBeUndefined();
      expect(s.Property.schema.field('Appliances')).toBeUndefined();
    }
  });

  it('keeps at most 100 samples but counts every skipped record', async () => {
    const lines = [JSON.stringify(listing('A')), ...Array.from({ length: 250 }, (_, i) => JSON.stringify(listing(`B${i}`, { ListPrice: 'x' })))];
    const d = dataDir({});
    writeFileSync(path.join(d, 'Property.jsonl'), lines.join('\n'));
    const s = await loadDataDirectory(d, { skipBadRecords: true });
    expect(s.report.skipped.total).toBe(250);
    expect(s.report.skipped.samples.length).toBe(100);
    expect(s.Property.rowCount).toBe(1);
  });
});
