import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import { generateDataset, generateListings, generateRoster } from '../../src/generate/dataset.js';
import type { GeneratedListing, GeneratedRoster } from '../../src/generate/listing.js';
import { RECORD_RESOURCES, RESOURCE_NAMES, type RecordResourceName } from '../../src/schema/types.js';
import { loadDataDirectory, loadRecords } from '../../src/store/load.js';
import type { ChildIndex } from '../../src/store/children.js';
import type { Store } from '../../src/store/store.js';
import type { Table } from '../../src/store/table.js';
import { tempDir } from './helpers.js';

const root = path.resolve(import.meta.dirname, '../..');
const NOW = Date.parse('2025-06-01T00:00:00Z');
type Rec = Record<string, unknown>;

function readJsonl(file: string): Rec[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Rec);
}

/**
 * Every input record comes back with the same value for every field it carried, null for the
 * schema's other stored fields ([] for collections), keys in schema order. Returns the first mismatches (empty when
 * all agree).
 */
function roundTripProblems(table: Table, inputs: readonly Rec[]): string[] {
  const problems: string[] = [];
  if (table.rowCount !== inputs.length) return [`${table.resource}: ${table.rowCount} rows for ${inputs.length} records`];
  const names = table.schema.fields.map((f) => f.name);
  const storedFields = table.schema.fields.filter((f) => f.origin !== 'derived');
  const stored = storedFields.map((f) => f.name);
  const known = new Set(names);
  for (let row = 0; row < inputs.length && problems.length < 5; row++) {
    const input = inputs[row];
    const rec = table.record(row, undefined, NOW);
    const keys = Object.keys(rec);
    if (keys.join() !== names.join()) problems.push(`${table.resource} row ${row}: field order ${keys.join()}`);
    for (const k of Object.keys(input)) if (!known.has(k)) problems.push(`${table.resource} row ${row}: ${k} missing from the schema`);
    // an absent collection reads as [] (never null)
    const expected = JSON.stringify(storedFields.map((f) => input[f.name] ?? (f.collection ? [] : null)));
    const actual = JSON.stringify(stored.map((f) => rec[f]));
    if (expected !== actual) problems.push(`${table.resource} row ${row}:\n  expected ${expected}\n  actual   ${actual}`);
  }
  return problems;
}

function inputsOf(listings: readonly GeneratedListing[], roster: GeneratedRoster): Record<RecordResourceName, Rec[]> {
  return {
    Property: listings.map((l) => l.property),
    Media: listings.flatMap((l) => l.media),
    OpenHouse: listings.flatMap((l) => l.openHouses),
    PropertyChange: listings.flatMap((l) => l.changes),
    Member: roster.members,
    Office: roster.offices,
  };
}

/** Every record of every table, as JSON text, for comparing two stores. */
function dump(store: Store): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const r of RESOURCE_NAMES) {
    const t = store.table(r);
    out[r] = [JSON.stringify(t.schema.fields.map((f) => [f.name, f.type, f.collection, f.origin, t.column(f.name)!.kind]))];
    for (let row = 0; row < t.rowCount; row++) out[r].push(JSON.stringify(t.record(row, undefined, NOW)));
  }
  return out;
}

const N = 3000;
const SEED = 'store-roundtrip';
let dir: string;
let listings: GeneratedListing[];
let store: Store;

beforeAll(async () => {
  dir = tempDir();
  generateDataset({ listings: N, seed: SEED, outDir: dir });
  listings = [...generateListings({ listings: N, seed: SEED })];
  store = await loadDataDirectory(dir);
});

describe('round trip', () => {
  it(`gives back every record of a generated data set of ${N} listings exactly`, () => {
    const inputs = inputsOf(listings, generateRoster({ listings: N, seed: SEED }));
    expect(store.Member.rowCount).toBeGreaterThan(0);
    expect(store.Office.rowCount).toBeGreaterThan(0);
    expect(store.Media.rowCount).toBeGreaterThan(N * 10);
    expect(store.OpenHouse.rowCount).toBeGreaterThan(0);
    for (const r of RECORD_RESOURCES) expect(roundTripProblems(store.table(r), inputs[r])).toEqual([]);
    expect(store.report.skipped.total).toBe(0);
    expect(store.report.localFields).toEqual([]);
  });

  it('gives back every record of fixtures/default exactly', async () => {
    const fixture = path.join(root, 'fixtures/default');
    const loaded = await loadDataDirectory(fixture);
    for (const r of RECORD_RESOURCES) {
      expect(roundTripProblems(loaded.table(r), readJsonl(path.join(fixture, `${r}.jsonl`)))).toEqual([]);
    }
    expect(loaded.Property.rowCount).toBe(2000);
    expect(loaded.accounts).toEqual(JSON.parse(readFileSync(path.join(fixture, 'accounts.json'), 'utf8')));
    expect(loaded.profiles).toEqual(JSON.parse(readFileSync(path.join(fixture, 'mls_profiles.json'), 'utf8')));
  });

  it('keeps timestamps with offsets, without seconds or with other fractions as written', () => {
    const stamps = [
      '2025-05-29T11:00:00-05:00',
      '2025-05-29T11:00Z',
      '2025-05-29T11:00:00Z',
      '2025-05-29T11:00:00.5+05:30',
      '2025-05-29T11:00:00.12Z',
      '2025-05-29T11:00:00.123456Z',
      '2025-05-29T11:00:00.000+00:00',
      '2025-05-29T11:00:00-00:00',
      '1900-02-28T23:59:59.999Z',
    ];
    const records = stamps.map((t, i) => ({ ListingKey: `K${i}`, ModificationTimestamp: t, ListingContractDate: '2024-02-29' }));
    const s = loadRecords({ Property: records });
    expect(stamps.map((_, i) => s.Property.value(i, 'ModificationTimestamp'))).toEqual(stamps);
    const ms = s.Property.columnOf('ModificationTimestamp', 'timestamp')!;
    expect(ms.get(0)).toBe(Date.parse('2025-05-29T16:00:00Z'));
    expect(ms.get(3)).toBe(Date.parse('2025-05-29T05:30:00.500Z'));
    expect(ms.get(5)).toBe(Date.parse('2025-05-29T11:00:00.123Z'));
    expect(s.Property.columnOf('ListingContractDate', 'date')!.get(0)).toBe(Date.parse('2024-02-29') / 86_400_000);
  });

  it('keeps strings, escapes and numbers exactly on both paths', async () => {
    const odd = [
      listing('A', { PublicRemarks: 'Quote " backslash \\ newline \n tab \t unicode é 😀 \u2028 \u0000 end', City: 'Zürich' }),
      listing('B', { ListPrice: 1e21, LivingArea: 0.1 + 0.2, Latitude: 12.345678901234567, Longitude: 1e-7 }),
      listing('C', { Appliances: ['Dishwasher', 'Dish "washer"', 'Éé', ''], UnitNumber: '' }),
    ];
    const text =
      odd.map((r) => JSON.stringify(r)).join('\n') +
      '\n' +
      // Whitespace and number spellings JSON.stringify never writes.
      '{ "ListingKey" : "D" ,\t"ListPrice": 1.50E+3, "LivingArea": 10.000, "BedroomsTotal": 3.0, "LotSizeSquareFeet": -0, "City": "\\u0041ustin" }\r\n';
    const d = tempDir();
    writeFileSync(path.join(d, 'Property.jsonl'), text);
    const expected = text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as Rec);
    for (const fastPath of [true, false]) {
      const s = await loadDataDirectory(d, { fastPath });
      expect(roundTripProblems(s.Property, expected)).toEqual([]);
      expect(Object.is(s.Property.value(3, 'LotSizeSquareFeet'), -0)).toBe(true);
    }
  });
});

const listing = (key: string, extra: Rec): Rec => ({ ListingKey: key, ModificationTimestamp: '2024-05-01T10:00:00.000Z', ...extra });

describe('input paths and formats', () => {
  it('the fast byte path and JSON.parse give identical stores', async () => {
    const generic = await loadDataDirectory(dir, { fastPath: false });
    expect(dump(generic)).toEqual(dump(store));
  });

  it('loading Media in a worker thread gives the same store and report', async () => {
    const parallel = await loadDataDirectory(dir, { parallel: true });
    expect(parallel.report.parallel).toBe(true);
    expect(store.report.parallel).toBe(false);
    expect(dump(parallel)).toEqual(dump(store));
    expect({ ...parallel.report, parallel: false }).toEqual(store.report);
    expect([...(parallel.children.Media as ChildIndex).rows]).toEqual([...(store.children.Media as ChildIndex).rows]);
  });

  it('in-memory records give the same store as the files', () => {
    const s = loadRecords(inputsOf(listings, generateRoster({ listings: N, seed: SEED })));
    expect(dump(s)).toEqual(dump(store));
  });

  it('.jsonl.gz, .json arrays and .json.gz give the same store as .jsonl', async () => {
    const small = tempDir();
    generateDataset({ listings: 400, seed: 'formats', outDir: small });
    const reference = dump(await loadDataDirectory(small));
    const variants: Array<[string, (text: string, records: Rec[]) => Buffer | string]> = [
      ['.jsonl.gz', (text) => gzipSync(text)],
      ['.json', (_, records) => JSON.stringify(records, null, 2)],
      ['.json.gz', (_, records) => gzipSync(JSON.stringify(records))],
    ];
    for (const [ext, encode] of variants) {
      const d = tempDir();
      for (const f of readdirSync(small)) {
        const text = readFileSync(path.join(small, f), 'utf8');
        if (f.endsWith('.jsonl'))
          writeFileSync(
            path.join(d, f.replace(/\.jsonl$/, ext)),
            encode(
              text,
              text
                .split('\n')
                .filter(Boolean)
                .map((l) => JSON.parse(l) as Rec),
            ),
          );
        else writeFileSync(path.join(d, f), text);
      }
      const loaded = await loadDataDirectory(d);
      expect(dump(loaded), ext).toEqual(reference);
      expect(loaded.report.resources.Property.file).toBe(`Property${ext}`);
      const parallel = await loadDataDirectory(d, { parallel: true });
      expect(parallel.report.parallel).toBe(true);
      expect(dump(parallel), `${ext} in a worker`).toEqual(reference);
    }
  });

  it('reports progress per file', async () => {
    const seen = new Set<string>();
    let last = 0;
    await loadDataDirectory(dir, {
      onProgress: (p) => {
        seen.add(p.resource);
        expect(p.bytesRead).toBeLessThanOrEqual(p.bytesTotal);
        if (p.resource === 'Property') last = p.bytesRead;
      },
    });
    expect([...seen]).toEqual(['Property', 'Media', 'OpenHouse', 'PropertyChange', 'Member', 'Office']);
    expect(last).toBe(readFileSync(path.join(dir, 'Property.jsonl')).length);
  });
});

describe('children', () => {
  const compareKey = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

  it('finds each listing’s children in O(1), grouped as the generator made them, in default order', () => {
    const { Media, OpenHouse, PropertyChange } = store.children as unknown as Record<string, ChildIndex>;
    expect(Media.offsets.length).toBe(N + 1);
    for (let i = 0; i < N; i++) {
      const l = listings[i];
      const media = [...l.media].sort((a, b) => (a.Order as number) - (b.Order as number) || compareKey(a.MediaKey as string, b.MediaKey as string));
      expect([...Media.childrenOf(i)].map((r) => store.Media.keyOf(r))).toEqual(media.map((m) => m.MediaKey));
      const oh = [...l.openHouses].sort(
        (a, b) =>
          Date.parse(a.OpenHouseStartTime as string) - Date.parse(b.OpenHouseStartTime as string) ||
          compareKey(a.OpenHouseKey as string, b.OpenHouseKey as string),
      );
      expect([...OpenHouse.childrenOf(i)].map((r) => store.OpenHouse.keyOf(r))).toEqual(oh.map((o) => o.OpenHouseKey));
      const changes = [...l.changes].sort(
        (a, b) =>
          Date.parse(b.ModificationTimestamp as string) - Date.parse(a.ModificationTimestamp as string) ||
          compareKey(a.PropertyChangeKey as string, b.PropertyChangeKey as string),
      );
      expect([...PropertyChange.childrenOf(i)].map((r) => store.PropertyChange.keyOf(r))).toEqual(changes.map((c) => c.PropertyChangeKey));
      expect(Media.count(i)).toBe(l.media.length);
    }
  });

  it('sorts nulls first in ascending orders and last in descending ones, ties by key', () => {
    const s = loadRecords({
      Property: [{ ListingKey: 'L' }],
      Media: [
        { MediaKey: 'm3', ResourceName: 'Property', ResourceRecordKey: 'L', Order: 2 },
        { MediaKey: 'm2', ResourceName: 'Property', ResourceRecordKey: 'L', Order: 1 },
        { MediaKey: 'm1', ResourceName: 'Property', ResourceRecordKey: 'L', Order: 2 },
        { MediaKey: 'm0', ResourceName: 'Property', ResourceRecordKey: 'L' },
        { MediaKey: 'x', ResourceName: 'Member', ResourceRecordKey: 'M1', Order: 0 },
      ],
      PropertyChange: [
        { PropertyChangeKey: 'c1', ListingKey: 'L' },
        { PropertyChangeKey: 'c2', ListingKey: 'L', ModificationTimestamp: '2024-01-01T00:00:00Z' },
        { PropertyChangeKey: 'c3', ListingKey: 'L', ModificationTimestamp: '2024-01-02T00:00:00+05:00' },
        { PropertyChangeKey: 'c0', ListingKey: 'L', ModificationTimestamp: '2024-01-01T00:00:00Z' },
      ],
    });
    expect([...s.children.Media.childrenOf(0)].map((r) => s.Media.keyOf(r))).toEqual(['m0', 'm2', 'm1', 'm3']);
    expect([...s.children.PropertyChange.childrenOf(0)].map((r) => s.PropertyChange.keyOf(r))).toEqual(['c3', 'c0', 'c2', 'c1']);
    // Media of another resource is kept (with its ResourceRecordKey) but belongs to no listing.
    expect(s.Media.value(4, 'ResourceRecordKey')).toBe('M1');
    expect(s.Media.value(0, 'ResourceRecordKey')).toBe('L');
    expect((s.children.Media as ChildIndex).rows.length).toBe(4);
  });
});
