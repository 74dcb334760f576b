/**
 * Engine snapshots: an engine reopened from `engine.save(path)` holds the same state (re-encoding
 * it gives the same meta and the same bytes) and answers every query exactly as the original, on
 * the default data set and on a data directory with local fields and rare values; bad files are
 * SnapshotErrors with the right codes at Engine.open, never a crash later; the CLI's snapshot and
 * serve --snapshot.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATA_DIR, Engine, type QueryResource } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import type { StoreIndexes } from '../../src/access/access.js';
import { evaluateSearch, prepareSearch } from '../../src/search/bm25.js';
import { SEARCH_FIELDS } from '../../src/schema/search-fields.js';
import { statusOf } from '../../src/service/errors.js';
import { readSnapshotFile, SnapshotError, writeSnapshotFile, type SnapshotArray, type SnapshotErrorCode } from '../../src/snapshot/file.js';
import { encodeEngine } from '../../src/snapshot/state.js';
import * as api from '../../src/index.js';
import { fixedFilters } from '../exec/filter-cases.js';
import { collectCli, DEMO_SOURCES, startServe } from '../service/helpers.js';

const NOW = Date.parse('2025-06-01T00:00:00Z');
const now = (): Date => new Date(NOW);
type Rec = Record<string, unknown>;
const readJsonl = (file: string): Rec[] =>
  fs
    .readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Rec);
const jsonl = (records: readonly Rec[]): string => records.map((r) => JSON.stringify(r)).join('\n') + '\n';
const properties = readJsonl(path.join(DEFAULT_DATA_DIR, 'Property.jsonl'));

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'reso-engine-snapshot-'));
  dirs.push(d);
  return d;
}

const indexesOf = (e: Engine): StoreIndexes => (e as unknown as { gen: { access: { base: StoreIndexes } } }).gen.access.base;

/** The outcome of a query (or its plan) as text: the envelope, or the error's code, option and position. */
function outcome(e: Engine, resource: QueryResource, q: string, sources?: string[], how: 'query' | 'explain' = 'query'): string {
  try {
    return how === 'query' ? JSON.stringify(e.query(resource, q, { sources })) : e.explain(resource, q, { sources });
  } catch (err) {
    if (!(err instanceof QueryError)) throw err;
    return `error ${err.code} ${err.option} ${err.position}`;
  }
}

/** The same meta and the same array names, types and bytes when both engines are encoded again. */
function expectSameState(a: Engine, b: Engine): void {
  const x = encodeEngine(a.store, indexesOf(a));
  const y = encodeEngine(b.store, indexesOf(b));
  expect(JSON.parse(JSON.stringify(y.meta))).toEqual(JSON.parse(JSON.stringify(x.meta)));
  expect([...y.arrays.keys()]).toEqual([...x.arrays.keys()]);
  for (const [name, arr] of x.arrays) {
    const other = y.arrays.get(name)!;
    expect(other.constructor, name).toBe(arr.constructor);
    expect(Buffer.from(other.buffer, other.byteOffset, other.byteLength).equals(Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength)), name).toBe(true);
  }
}

const SOURCES = [undefined, ['HAR', 'CRMLS'], []] as const;

/** Queries beyond the filter table: search with relevance, expansions, $apply, children, paging. */
const EXTRA: ReadonlyArray<readonly [QueryResource, string]> = [
  ['Property', ''],
  ['Property', '$top=0&$count=true'],
  ['Property', '$skip=1990&$select=ListingKey,City'],
  ['Property', '$select=*&$ignorenulls=true&$top=7&$skip=11'],
  ['Property', '$orderby=DaysOnMarket desc,ListingKey desc&$top=25&$select=ListingKey,DaysOnMarket,service_OriginalEntryTimestamp'],
  ['Property', '$orderby=ListPrice&$top=30&$select=ListingKey,ListPrice'],
  ['Property', '$orderby=ModificationTimestamp desc&$top=30&$filter=ListPrice gt 400000 and ListPrice le 900000'],
  ['Property', '$orderby=City desc,BedroomsTotal&$top=30&$select=ListingKey,City,BedroomsTotal,RawLocation,Location'],
  ['Property', "$filter=search.text(RawAddressSearchText,'maple st sea')&$orderby=relevance desc&$top=25&$count=true"],
  ['Property', "$filter=search.text(RawAddressSearchText,'Vista Stret Houston 1')&$orderby=relevance desc&$top=10"],
  ['Property', "$filter=search.text(RawAddressSearchText,'north oak avenue')&$orderby=relevance desc,ListPrice&$top=40"],
  ['Property', "$filter=search.text(KeywordSearchText,'pool granite')&$orderby=relevance desc&$top=25&$count=true"],
  ['Property', "$filter=search.text(KeywordSearchText,'granite',1) and StandardStatus eq 'Active'&$orderby=relevance desc&$top=5"],
  ['Property', "$filter=search.text(ListAgentSearchText,'maria')&$orderby=relevance desc&$top=25"],
  ['Property', "$filter=search.text(BuyerAgentSearchText,'john smith',1)&$orderby=relevance desc&$top=25&$count=true"],
  ['Property', "$filter=search.text(ListOfficeSearchText,'realty')&$orderby=relevance desc&$top=25"],
  ['Property', "$filter=search.text(BuyerOfficeSearchText,'homes group',1)&$orderby=relevance desc&$top=25"],
  ['Property', "$filter=search.text(KeywordSearchText,'pool') or search.text(ListOfficeSearchText,'realty')&$orderby=relevance desc&$top=25&$count=true"],
  ['Property', "$filter=geo.distance(RawLocation, geography'POINT(-95.3698 29.7604)') le 20000&$orderby=ListPrice desc&$top=50&$count=true"],
  ['Property', "$filter=geo.distance(Location, geography'POINT(-112.074 33.4484)') le 15000 and BedroomsTotal ge 3&$select=ListingKey,Location"],
  ['Property', '$expand=Media,OpenHouse,PropertyChange,PreferredMedia&$top=15&$skip=40'],
  [
    'Property',
    "$filter=StandardStatus eq 'Active'&$expand=OpenHouse($select=OpenHouseStartTime,OpenHouseEndTime),Media($filter=Order le 3;$orderby=Order desc;$select=MediaKey,Order)&$top=20",
  ],
  ['Property', '$expand=PropertyChange($top=2;$skip=1;$orderby=ModificationTimestamp),PreferredMedia($select=MediaURL)&$ignorenulls=true&$top=20'],
  ['Property', '$apply=groupby((City),aggregate(ListPrice with median as Median,ListPrice with p90 as P90,$count as N))'],
  [
    'Property',
    '$apply=groupby((StandardStatus,PropertyType),aggregate(ListPrice with sum as Total,ListingContractDate with min as First))&$orderby=Total desc&$top=10&$count=true',
  ],
  ['Property', "$apply=filter(search.text(KeywordSearchText,'pool'))/aggregate(DaysOnMarket with average as Dom,ListingKey with countdistinct as Keys)"],
  ['Property', '$apply=groupby((PoolPrivateYN,YearBuilt))&$skip=5&$top=20'],
  ['Media', "$filter=MediaCategory eq 'Photo' and Order le 2&$orderby=ImageWidth desc&$top=40&$count=true"],
  ['Media', "$filter=startswith(ResourceRecordKey,'P00000001')&$select=MediaKey,ResourceRecordKey,PreferredPhotoYN"],
  ['Media', '$apply=groupby((MediaCategory),aggregate($count as N))'],
  ['OpenHouse', '$orderby=OpenHouseStartTime desc&$top=30'],
  ['OpenHouse', '$filter=OpenHouseDate ge 2025-06-01 and hour(OpenHouseStartTime) ge 12&$count=true&$select=OpenHouseKey,ListingKey,OpenHouseStartTime'],
  ['Property', '$filter=NoSuchField eq 1'],
  ['Property', '$orderby=relevance desc'],
];

describe('the default data set through a snapshot', () => {
  let original: Engine;
  let restored: Engine;
  let file: string;

  beforeAll(async () => {
    original = await Engine.open({ now });
    file = path.join(tempDir(), 'default.snapshot');
    const { bytes } = original.save(file);
    expect(bytes).toBe(fs.statSync(file).size);
    restored = await Engine.open({ snapshot: file, now });
  });

  it('restores the same state: every array, dictionary, schema, report, accounts and profiles', () => {
    expectSameState(original, restored);
    // shared arrays stay shared
    const p = restored.store.Property;
    expect(p.columnOf('Location', 'point')!.lat).toBe(p.columnOf('Latitude', 'number')!.values);
    expect(p.columnOf('RawLocation', 'point')!.lon).toBe(p.columnOf('Location', 'point')!.lon);
    expect(restored.store.derived.daysOnMarket.reference).toBe(restored.store.derived.daysOnMarketReferenceTimestamp.values);
    expect(restored.store.accounts).toEqual(original.store.accounts);
    expect(restored.store.report).toEqual(original.store.report);
  });

  const table = fixedFilters(properties).flatMap((f) =>
    SOURCES.flatMap(
      (sources) =>
        [
          [`$filter=${f}`, sources],
          [`$filter=${f}&$orderby=ListPrice desc,City&$skip=3&$top=40&$count=true&$select=ListingKey,ListPrice,City,DaysOnMarket,Location`, sources],
        ] as const,
    ),
  );
  it('the query table is broad', () => expect(table.length + EXTRA.length * SOURCES.length).toBeGreaterThanOrEqual(400));

  it.each(table)('%s (sources %j)', (q, sources) => {
    expect(outcome(restored, 'Property', q, sources ? [...sources] : undefined)).toBe(outcome(original, 'Property', q, sources ? [...sources] : undefined));
  });

  it.each(EXTRA.flatMap(([r, q]) => SOURCES.map((s) => [r, q, s] as const)))('%s %s (sources %j)', (resource, q, sources) => {
    const list = sources ? [...sources] : undefined;
    expect(outcome(restored, resource, q, list)).toBe(outcome(original, resource, q, list));
    expect(outcome(restored, resource, q, list, 'explain')).toBe(outcome(original, resource, q, list, 'explain'));
  });

  it('gives every search field the same matches and BM25 scores, bit for bit', () => {
    const queries = ['pool granite', 'maria', 'smith', 'realty group', 'main st', 'seattle 98101', 'vista', 'homes'];
    let nonEmpty = 0;
    for (const field of SEARCH_FIELDS) {
      for (const text of queries) {
        const a = indexesOf(original).search[field];
        const b = indexesOf(restored).search[field];
        const ma = evaluateSearch(a, prepareSearch(a, text, 1));
        const mb = evaluateSearch(b, prepareSearch(b, text, 1));
        expect(Array.from(mb.rows), `${field} ${text}`).toEqual(Array.from(ma.rows));
        expect(Array.from(mb.scores), `${field} ${text}`).toEqual(Array.from(ma.scores));
        if (ma.rows.length > 0) nonEmpty++;
      }
    }
    expect(nonEmpty).toBeGreaterThan(SEARCH_FIELDS.length);
  });

  it('keeps the now option: DaysOnMarket and now() follow the clock it is opened with', async () => {
    const later = (): Date => new Date(NOW + 40 * 86_400_000);
    const a = await Engine.open({ now: later });
    const b = await Engine.open({ snapshot: file, now: later });
    const q = '$filter=DaysOnMarket gt 30 and ModificationTimestamp lt now()&$orderby=DaysOnMarket desc&$top=50&$select=ListingKey,DaysOnMarket&$count=true';
    expect(outcome(b, 'Property', q)).toBe(outcome(a, 'Property', q));
    expect(outcome(b, 'Property', q)).not.toBe(outcome(restored, 'Property', q));
    expect(b.now()).toBe(NOW + 40 * 86_400_000);
  });

  it('takes its first change into the large arrays it read (room after them, no copy), answering as the engine it was saved from', async () => {
    const opened = await Engine.open({ snapshot: file, now, compactFraction: false });
    const fromData = await Engine.open({ now, compactFraction: false });
    const media = opened.store.Media;
    const large = media.columns.flatMap((c) => ((c.kind === 'number' || c.kind === 'timestamp') && c.values.byteLength >= 1 << 16 ? [c] : []));
    expect(large.length).toBeGreaterThan(0);
    const before = [0, 1, media.rowCount - 1].map((row) => JSON.stringify(media.record(row, undefined, NOW)));
    const listing = properties[3];
    const change = [
      { resource: 'Property' as const, upsert: [{ ...listing, ListPrice: 123_456 }] },
      { resource: 'Media' as const, upsert: [{ MediaKey: 'SNAP-ROOM-1', ResourceRecordKey: listing.ListingKey, Order: 99 }] },
    ];
    await opened.apply(change);
    await fromData.apply(change);
    const after = opened.store.Media;
    expect(after.rowCount).toBe(media.rowCount + 1);
    for (const c of large) {
      const name = media.schema.fields[media.columns.indexOf(c)].name;
      expect((after.column(name) as { values: Float64Array }).values.buffer, name).toBe(c.values.buffer);
    }
    expect([0, 1, media.rowCount - 1].map((row) => JSON.stringify(media.record(row, undefined, NOW)))).toEqual(before);
    for (const q of ['$filter=ListPrice eq 123456&$expand=Media($orderby=Order desc)', '$orderby=ListPrice desc&$top=20&$select=ListingKey,ListPrice']) {
      expect(outcome(opened, 'Property', q)).toBe(outcome(fromData, 'Property', q));
    }
  });

  it('saves a restored engine to the same bytes', () => {
    const again = path.join(tempDir(), 'again.snapshot');
    restored.save(again);
    expect(fs.readFileSync(again).equals(fs.readFileSync(file))).toBe(true);
  });

  it('refuses data and snapshot together, and a snapshot that is not a path', async () => {
    await expect(Engine.open({ data: DEFAULT_DATA_DIR, snapshot: file })).rejects.toThrow(/either data or snapshot, not both/);
    await expect(Engine.open({ snapshot: 42 as unknown as string })).rejects.toThrow(TypeError);
  });

  it('exports SnapshotError from the package entry, and the service maps it to a 500', () => {
    expect(api.SnapshotError).toBe(SnapshotError);
    expect(statusOf(new SnapshotError('SnapshotCorrupt', 'x', 'y'))).toBe(500);
    expect(statusOf(new SnapshotError('SnapshotNotFound', 'x', 'y'))).toBe(500);
  });

  describe('bad files are SnapshotErrors at open', () => {
    const openError = async (f: string): Promise<SnapshotError> => {
      let err: unknown;
      try {
        await Engine.open({ snapshot: f, now });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(SnapshotError);
      expect((err as SnapshotError).message).toContain(f);
      return err as SnapshotError;
    };
    const variant = (name: string, bytes: Uint8Array): string => {
      const f = path.join(tempDir(), name);
      fs.writeFileSync(f, bytes);
      return f;
    };

    it('missing, foreign, truncated, flipped and other-version files', async () => {
      const bytes = fs.readFileSync(file);
      expect((await openError(path.join(tempDir(), 'none.snapshot'))).code).toBe('SnapshotNotFound');
      expect((await openError(path.join(DEFAULT_DATA_DIR, 'Property.jsonl'))).code).toBe('SnapshotForeign');
      expect((await openError(variant('empty', new Uint8Array(0)))).code).toBe('SnapshotForeign');
      for (const cut of [5, 16, 300, bytes.length >>> 1, bytes.length - 1]) {
        expect((await openError(variant(`cut-${cut}`, bytes.subarray(0, cut)))).code, `cut at ${cut}`).toBe('SnapshotTruncated');
      }
      for (const at of [30, 4096, bytes.length >>> 1, bytes.length - 2]) {
        const flipped = Buffer.from(bytes);
        flipped[at] ^= 0x10;
        expect((await openError(variant(`flip-${at}`, flipped))).code, `flip at ${at}`).toBe('SnapshotCorrupt');
      }
      const version = Buffer.from(bytes);
      version.writeUInt32LE(2, 8);
      expect((await openError(variant('version', version))).code).toBe('SnapshotVersion');
      expect((await openError(variant('longer', Buffer.concat([bytes, Buffer.from([0])])))).code).toBe('SnapshotCorrupt');
    });

    /** A container with the original's contents, changed by `edit` (meta cloned, arrays copied when changed). */
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the meta is JSON, edited freely
    const crafted = (name: string, edit: (meta: any, arrays: Map<string, SnapshotArray>) => void): string => {
      const contents = readSnapshotFile(file);
      const meta = JSON.parse(JSON.stringify(contents.meta));
      const arrays = new Map(contents.arrays);
      edit(meta, arrays);
      const f = path.join(tempDir(), name);
      writeSnapshotFile(f, { meta, arrays });
      return f;
    };
    /** Replaces array `name` by a copy that `change` edits. */
    const mutate = <T extends SnapshotArray>(arrays: Map<string, SnapshotArray>, name: string, change: (a: T) => void): void => {
      const copy = (arrays.get(name)! as T).slice() as T;
      change(copy);
      arrays.set(name, copy);
    };
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the meta is JSON, edited freely
    const columnOf = (meta: any, resource: string, field: string): any =>
      meta.tables[resource].columns[meta.tables[resource].fields.findIndex((f: { name: string }) => f.name === field)];

    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the meta is JSON, edited freely
    const cases: ReadonlyArray<readonly [string, SnapshotErrorCode, RegExp, (meta: any, arrays: Map<string, SnapshotArray>) => void]> = [
      [
        'another kind of meta',
        'SnapshotForeign',
        /not an engine snapshot/,
        (m) => {
          m.kind = 'something-else';
        },
      ],
      [
        'meta that is not an object',
        'SnapshotForeign',
        /not an engine snapshot/,
        (m, a) => {
          for (const k of Object.keys(m)) delete m[k];
          a.clear();
        },
      ],
      [
        'another content version',
        'SnapshotVersion',
        /content version 99/,
        (m) => {
          m.version = 99;
        },
      ],
      [
        'a field this build declares differently',
        'SnapshotVersion',
        /Property\.ListPrice is declared differently/,
        (m) => {
          m.tables.Property.fields.find((f: { name: string }) => f.name === 'ListPrice').type = 'Edm.Double';
        },
      ],
      [
        'a column of the wrong kind',
        'SnapshotCorrupt',
        /ListPrice .* stored as a dictionary/,
        (m) => {
          const i = m.tables.Property.fields.findIndex((f: { name: string }) => f.name === 'ListPrice');
          m.tables.Property.columns[i] = columnOf(m, 'Property', 'City');
        },
      ],
      [
        'a missing array',
        'SnapshotCorrupt',
        /is missing/,
        (m, a) => {
          a.delete(columnOf(m, 'Property', 'ListPrice').values);
        },
      ],
      [
        'an array nothing refers to',
        'SnapshotCorrupt',
        /nothing refers to: stray/,
        (_m, a) => {
          a.set('stray', new Uint8Array(3));
        },
      ],
      [
        'an array of the wrong length',
        'SnapshotCorrupt',
        /has 1999 elements, not 2000/,
        (m, a) => {
          const n = columnOf(m, 'Property', 'ListPrice').values;
          a.set(n, (a.get(n) as Float64Array).slice(1));
        },
      ],
      [
        'an array of the wrong type',
        'SnapshotCorrupt',
        /is a Float32Array, not a Float64Array/,
        (m, a) => {
          const n = columnOf(m, 'Property', 'ListPrice').values;
          a.set(n, Float32Array.from(a.get(n) as Float64Array));
        },
      ],
      [
        'a wrong row count',
        'SnapshotCorrupt',
        /elements, not/,
        (m) => {
          m.tables.OpenHouse.rowCount += 1;
        },
      ],
      [
        'a dictionary code out of range',
        'SnapshotCorrupt',
        /City codes hold code/,
        (m, a) => {
          const c = columnOf(m, 'Property', 'City');
          mutate<Uint16Array>(a, c.codes, (x) => {
            x[7] = c.dictionary.length;
          });
        },
      ],
      [
        'a dictionary without its null entry',
        'SnapshotCorrupt',
        /dictionary is not \[null/,
        (m) => {
          columnOf(m, 'Property', 'City').dictionary[0] = 'x';
        },
      ],
      [
        'collection codes out of range',
        'SnapshotCorrupt',
        /Appliances codes hold code/,
        (m, a) => {
          const c = columnOf(m, 'Property', 'Appliances');
          mutate<Uint16Array>(a, c.codes, (x) => {
            x[0] = 60000;
          });
        },
      ],
      [
        'collection offsets that decrease',
        'SnapshotCorrupt',
        /Appliances offsets decrease/,
        (m, a) => {
          mutate<Uint32Array>(a, columnOf(m, 'Property', 'Appliances').offsets, (x) => {
            x[5] = x[6] + 1;
          });
        },
      ],
      [
        'text offsets past the bytes',
        'SnapshotCorrupt',
        /PublicRemarks offsets end at .* past/,
        (m, a) => {
          mutate<Uint32Array>(a, columnOf(m, 'Property', 'PublicRemarks').offsets, (x) => {
            x[x.length - 1] += 1;
          });
        },
      ],
      [
        'a timestamp style out of range',
        'SnapshotCorrupt',
        /OpenHouseStartTime styles hold code/,
        (m, a) => {
          const c = columnOf(m, 'OpenHouse', 'OpenHouseStartTime');
          mutate<Uint16Array>(a, c.styles, (x) => {
            x[0] = c.styleTable.length;
          });
        },
      ],
      [
        'a parent row out of range',
        'SnapshotCorrupt',
        /links row 3 to listing row 2000/,
        (m, a) => {
          mutate<Int32Array>(a, columnOf(m, 'Media', 'ResourceRecordKey').parentRow, (x) => {
            x[3] = 2000;
          });
        },
      ],
      [
        'a key index without an empty slot',
        'SnapshotCorrupt',
        /key index/,
        (m, a) => {
          const k = m.tables.OpenHouse.keyIndex;
          mutate<Int32Array>(a, k.table, (x) => {
            for (let i = 0; i < x.length; i += 2) if (x[i] === 0) x[i] = 1;
          });
        },
      ],
      [
        'a key index entry out of range',
        'SnapshotCorrupt',
        /key index slot \d+ holds row/,
        (m, a) => {
          mutate<Int32Array>(a, m.tables.Property.keyIndex.table, (x) => {
            const i = x.findIndex((v, j) => j % 2 === 0 && v !== 0);
            x[i] = 5000;
          });
        },
      ],
      [
        'a key index with the wrong size',
        'SnapshotCorrupt',
        /holds 1999 keys for 2000 rows/,
        (m) => {
          m.tables.Property.keyIndex.size = 1999;
        },
      ],
      [
        'child offsets that do not cover the rows',
        'SnapshotCorrupt',
        /Media children offsets end at/,
        (m, a) => {
          mutate<Uint32Array>(a, m.children.Media.offsets, (x) => {
            x[x.length - 1] += 1;
          });
        },
      ],
      [
        'a child row out of range',
        'SnapshotCorrupt',
        /OpenHouse children rows hold code/,
        (m, a) => {
          mutate<Uint32Array>(a, m.children.OpenHouse.rows, (x) => {
            x[0] = 1_000_000;
          });
        },
      ],
      [
        'postings out of order',
        'SnapshotCorrupt',
        /KeywordSearchText postings of .* are not ascending/,
        (m, a) => {
          mutate<Uint32Array>(a, m.search.KeywordSearchText.rows, (x) => {
            const o = a.get(m.search.KeywordSearchText.offsets) as Uint32Array;
            const t = o.findIndex((v, i) => o[i + 1] - v >= 2);
            [x[o[t]], x[o[t] + 1]] = [x[o[t] + 1], x[o[t]]];
          });
        },
      ],
      [
        'a posting past the listings',
        'SnapshotCorrupt',
        /hold row 2000 of 2000/,
        (m, a) => {
          mutate<Uint32Array>(a, m.search.ListAgentSearchText.rows, (x) => {
            x[x.length - 1] = 2000;
          });
        },
      ],
      [
        'a repeated term',
        'SnapshotCorrupt',
        /repeats a term/,
        (m, a) => {
          const { bytes, offsets } = m.search.ListOfficeSearchText.terms;
          const o = a.get(offsets) as Uint32Array;
          const b = Buffer.from(a.get(bytes) as Uint8Array);
          const terms = Array.from({ length: o.length - 1 }, (_, i) => b.toString('utf8', o[i], o[i + 1]));
          terms[1] = terms[0];
          a.set(bytes, new Uint8Array(Buffer.from(terms.join(''))));
          a.set(offsets, Uint32Array.from([0, ...terms.map((t, i) => Buffer.byteLength(terms.slice(0, i + 1).join('')))]));
        },
      ],
      [
        'term offsets past the term bytes',
        'SnapshotCorrupt',
        /ListOfficeSearchText term offsets/,
        (m, a) => {
          mutate<Uint32Array>(a, m.search.ListOfficeSearchText.terms.offsets, (x) => {
            x[x.length - 1] += 1;
          });
        },
      ],
      [
        'a term list written as JSON strings (content version 4)',
        'SnapshotCorrupt',
        /KeywordSearchText terms is not an object/,
        (m) => {
          m.search.KeywordSearchText.terms = ['pool', 'granite'];
        },
      ],
      [
        'a search index of another size',
        'SnapshotCorrupt',
        /covers 10 listings/,
        (m) => {
          m.search.BuyerOfficeSearchText.rowCount = 10;
        },
      ],
      [
        'a bad mean length',
        'SnapshotCorrupt',
        /mean length/,
        (m) => {
          m.search.RawAddressSearchText.avgLength = -1;
        },
      ],
      [
        'a KD-tree id out of range',
        'SnapshotCorrupt',
        /Location index: tree id/,
        (m, a) => {
          mutate<Uint8Array>(a, m.points.Location.tree, (x) => {
            new Uint16Array(x.buffer, 8, 1)[0] = 65000;
          });
        },
      ],
      [
        'a KD-tree buffer that is not one',
        'SnapshotCorrupt',
        /RawLocation index/,
        (m, a) => {
          mutate<Uint8Array>(a, m.points.RawLocation.tree, (x) => {
            x[0] = 0;
          });
        },
      ],
      [
        'a KD-tree row out of range',
        'SnapshotCorrupt',
        /Location index: row/,
        (m, a) => {
          mutate<Uint32Array>(a, m.points.Location.rowOf, (x) => {
            x[0] = 99_999;
          });
        },
      ],
      [
        'fields out of schema order',
        'SnapshotCorrupt',
        /not in schema order/,
        (m) => {
          const t = m.tables.Media;
          [t.fields[1], t.fields[2]] = [t.fields[2], t.fields[1]];
          [t.columns[1], t.columns[2]] = [t.columns[2], t.columns[1]];
        },
      ],
      [
        'a derived field missing',
        'SnapshotCorrupt',
        /lacks the derived field Location/,
        (m) => {
          const t = m.tables.Property;
          const i = t.fields.findIndex((f: { name: string }) => f.name === 'Location');
          t.fields.splice(i, 1);
          t.columns.splice(i, 1);
        },
      ],
      [
        'malformed accounts',
        'SnapshotCorrupt',
        /accounts\.json/,
        (m) => {
          m.accounts = { accounts: [{ username: 'x' }] };
        },
      ],
      [
        'an incomplete load report',
        'SnapshotCorrupt',
        /load report/,
        (m) => {
          m.report = {};
        },
      ],
    ];

    it.each(cases)('%s: %s', async (name, code, reason, edit) => {
      const err = await openError(crafted(name.replace(/\W+/g, '-'), edit));
      expect(err.code).toBe(code);
      expect(err.reason).toMatch(reason);
    });
  });
});

describe('a data directory with local fields, rare values and unlinked media', () => {
  let dir: string;
  let original: Engine;
  let restored: Engine;

  beforeAll(async () => {
    dir = tempDir();
    const listings = properties.slice(0, 300).map((p, i) => {
      const r: Rec = { ...p };
      if (i % 3 === 0) r.X_Flag = i % 2 === 0;
      if (i % 4 === 0) r.X_Count = i;
      if (i % 5 === 0) r.X_Ratio = i / 7;
      if (i % 2 === 0) r.X_Note = `note ${i % 11}`;
      if (i % 6 === 0) r.X_Tags = [`t${i % 5}`, `u${i % 3}`];
      if (i % 7 === 0) r.X_Seen = `2024-0${1 + (i % 9)}-1${i % 10}`;
      if (i % 8 === 0) r.X_When = `2024-05-0${1 + (i % 9)}T10:00:0${i % 10}.5${i % 10}+02:00`;
      r.X_Mixed = i < 50 ? '2024-01-01' : `text ${i}`; // a date column widened to text
      if (i === 9) r.ModificationTimestamp = '2025-05-01T10:00:00.123456Z'; // kept as written (sparse map)
      return r;
    });
    const keys = new Set(listings.map((l) => l.ListingKey));
    const child = (name: string, link: string): Rec[] => readJsonl(path.join(DEFAULT_DATA_DIR, `${name}.jsonl`)).filter((r) => keys.has(r[link]));
    const media = child('Media', 'ResourceRecordKey');
    media.push({ MediaKey: 'OFFICE-1-M1', ResourceName: 'Office', ResourceRecordKey: 'OFFICE-1', Order: 1, MediaCategory: 'Photo', X_Credit: 'studio' });
    fs.writeFileSync(path.join(dir, 'Property.jsonl'), jsonl(listings));
    fs.writeFileSync(path.join(dir, 'Media.jsonl'), jsonl(media));
    fs.writeFileSync(path.join(dir, 'OpenHouse.jsonl'), jsonl(child('OpenHouse', 'ListingKey')));
    fs.writeFileSync(path.join(dir, 'PropertyChange.jsonl'), jsonl(child('PropertyChange', 'ListingKey')));
    original = await Engine.open({ data: dir, now });
    const file = path.join(dir, 'local.snapshot');
    original.save(file);
    restored = await Engine.open({ snapshot: file, now });
  });

  it('has the local fields it was meant to have, and restores them with the rest', () => {
    const local = original.store.Property.schema.localFields.map((f) => `${f.name}:${f.collection ? 'Collection' : f.type}`);
    expect(local).toEqual([
      'X_Flag:Edm.Boolean',
      'X_Count:Edm.Int64',
      'X_Ratio:Edm.Decimal',
      'X_Note:Edm.String',
      'X_Tags:Collection',
      'X_Seen:Edm.Date',
      'X_When:Edm.DateTimeOffset',
      'X_Mixed:Edm.String',
    ]);
    expect(restored.store.Property.schema.fields).toEqual(original.store.Property.schema.fields);
    expect(restored.store.Media.schema.localFields.map((f) => f.name)).toEqual(['X_Credit']);
    expect(restored.store.report.localFields).toEqual(original.store.report.localFields);
    expectSameState(original, restored);
  });

  it.each([
    ['Property', '$filter=X_Flag eq true or X_Count gt 100&$select=ListingKey,X_Flag,X_Count,X_Ratio&$top=100'],
    ['Property', "$filter=X_Tags/any(t: t eq 't1') and X_Note ne null&$select=ListingKey,X_Tags,X_Note"],
    ['Property', '$filter=X_Seen ge 2024-03-01&$orderby=X_When desc,X_Ratio&$select=ListingKey,X_Seen,X_When&$top=100'],
    ['Property', "$filter=startswith(X_Mixed,'2024')&$select=ListingKey,X_Mixed,ModificationTimestamp&$top=100"],
    ['Property', "$filter=ListingKey eq '" + String(properties[9].ListingKey) + "'&$select=ModificationTimestamp"],
    ['Property', '$apply=groupby((X_Note),aggregate(X_Ratio with average as A,X_When with max as Last,$count as N))'],
    ['Property', '$expand=Media($select=MediaKey,Order),OpenHouse,PropertyChange&$top=30&$skip=100'],
    ['Media', "$filter=ResourceName ne 'Property' or X_Credit ne null"],
    ['Media', '$orderby=MediaKey desc&$top=5&$select=MediaKey,ResourceRecordKey,X_Credit'],
    ['OpenHouse', '$top=50'],
  ] as const)('%s %s', (resource, q) => {
    for (const sources of SOURCES) {
      const a = outcome(original, resource, q, sources ? [...sources] : undefined);
      expect(outcome(restored, resource, q, sources ? [...sources] : undefined)).toBe(a);
    }
  });
});

describe('the CLI', () => {
  it('snapshot writes a file that query --snapshot and serve --snapshot answer from as the data would', async () => {
    const file = path.join(tempDir(), 'cli.snapshot');
    const made = await collectCli(['snapshot', '--out', file]);
    expect(made.code, made.err).toBe(0);
    expect(made.out).toMatch(/^wrote a snapshot of 2,000 listings to .*cli\.snapshot \(\d+\.\d MB; loaded in/);
    const engine = await Engine.open({ now });
    const filter = "search.text(KeywordSearchText,'pool') and ListPrice gt 300000";
    const q = `$filter=${filter}&$orderby=relevance desc&$top=5&$select=ListingKey,ListPrice,DaysOnMarket&$count=true`;

    const queried = await collectCli(['query', '--snapshot', file, '--now', '2025-06-01T00:00:00Z', '--sources', 'HAR,CRMLS', q]);
    expect(queried.code, queried.err).toBe(0);
    expect(JSON.parse(queried.out)).toEqual(engine.query('Property', q, { sources: ['HAR', 'CRMLS'] }));

    const served = await startServe(['--snapshot', file, '--port', '0', '--now', '2025-06-01T00:00:00Z']);
    const { child, url, exited } = served;
    try {
      expect(served.err()).toContain(`opening snapshot ${file}`);
      expect(served.out()).toContain('demo / demo-password'); // the accounts came with the snapshot
      const t = await fetch(`${url}/v1/token`, { method: 'POST', body: new URLSearchParams({ username: 'demo', password: 'demo-password' }) });
      const { access_token } = (await t.json()) as { access_token: string };
      const options = { $filter: filter, $orderby: 'relevance desc', $top: '5', $select: 'ListingKey,ListPrice,DaysOnMarket', $count: 'true' };
      const res = await fetch(`${url}/v1/listings/data/Property?${new URLSearchParams(options).toString()}`, {
        headers: { authorization: `Bearer ${access_token}` },
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { value: unknown[]; '@odata.count': number };
      const want = engine.query('Property', q, { sources: DEMO_SOURCES });
      expect(body.value).toEqual(want.value);
      expect(body['@odata.count']).toBe(want['@odata.count']);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('a bad snapshot is one line on stderr with its code and exit code 1; --data with --snapshot is a usage error', async () => {
    const missing = await collectCli(['serve', '--snapshot', path.join(tempDir(), 'none.snapshot'), '--port', '0']);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/^opening snapshot .*\nreso-engine: SnapshotNotFound: Snapshot .*none\.snapshot: no such file\.\n$/);
    const foreign = await collectCli(['query', '--snapshot', path.join(DEFAULT_DATA_DIR, 'accounts.json'), '$top=1']);
    expect(foreign.code).toBe(1);
    expect(foreign.err).toMatch(/^reso-engine: SnapshotForeign: /);
    const both = await collectCli(['serve', '--data', DEFAULT_DATA_DIR, '--snapshot', 'x']);
    expect(both.code).toBe(2);
    expect(both.err).toContain('give --data DIR or --snapshot FILE, not both');
    const noOut = await collectCli(['snapshot']);
    expect(noOut.code).toBe(2);
    expect(noOut.err).toContain('--out FILE is required');
  });
});
