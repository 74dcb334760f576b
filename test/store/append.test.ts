import { describe, expect, it } from 'vitest';
import { generateListings } from '../../src/generate/dataset.js';
import { gatherTableSteps } from '../../src/live/compact.js';
import { runNow } from '../../src/util/steps.js';
import { loadBatch } from '../../src/store/append/batch.js';
import { TableAppender } from '../../src/store/append/table-appender.js';
import { ByteIndex } from '../../src/store/byte-index.js';
import type { CollectionColumn, DictionaryColumn, ParentKeyColumn, Utf8TextColumn } from '../../src/store/columns.js';
import { DataError } from '../../src/store/errors.js';
import { loadRecords } from '../../src/store/load.js';
import type { Table } from '../../src/store/table.js';
import { queryErrorOf } from '../odata/helpers.js';
import { listing } from './helpers.js';

const NOW = Date.parse('2025-06-01T00:00:00Z');
const now = (): number => NOW;
type Rec = Record<string, unknown>;
type Inputs = { Property: Rec[]; Media?: Rec[]; OpenHouse?: Rec[] };

const KEY: Record<string, string> = { Property: 'ListingKey', Media: 'MediaKey', OpenHouse: 'OpenHouseKey' };

/** What a generation answers: every record, and the row of every key asked about (as text and as bytes). */
interface Seen {
  readonly records: string[];
  readonly rows: number[];
  readonly byteRows: number[];
  /** Per column, the lengths of its arrays, dictionaries, style tables and sparse maps. */
  readonly shape: string[];
}

function shapeOf(t: Table): string[] {
  return t.columns.map((c) =>
    Object.entries(c)
      .filter(([name]) => !name.startsWith('rank'))
      .map(([name, v]: [string, unknown]) => {
        if (ArrayBuffer.isView(v)) return `${name}:${v.constructor.name}:${v.byteLength}`;
        if (Array.isArray(v)) return `${name}:${v.length}`;
        if (v instanceof Map) return `${name}:${v.size}`;
        return `${name}:${v === null ? 'null' : typeof v}`;
      })
      .join(' '),
  );
}

function observe(t: Table, keys: readonly string[]): Seen {
  const records: string[] = [];
  for (let row = 0; row < t.rowCount; row++) records.push(JSON.stringify(t.record(row, undefined, NOW)));
  const byteRows = keys.map((k) => {
    const b = Buffer.from(`<<${k}>>`);
    return t.rowOfKeyBytes(b, 2, b.length - 2);
  });
  return { records, rows: keys.map((k) => t.rowOfKey(k)), byteRows, shape: shapeOf(t) };
}

/** Every generation handed out, with what it answered when it was new; they must keep answering that. */
class Generations {
  private readonly list: Array<{ table: Table; seen: Seen }> = [];
  constructor(private readonly keys: readonly string[]) {}

  get tables(): Table[] {
    return this.list.map((g) => g.table);
  }

  add(table: Table): void {
    this.list.push({ table, seen: observe(table, this.keys) });
  }

  checkUnchanged(): void {
    for (const { table, seen } of this.list) expect(observe(table, this.keys)).toEqual(seen);
  }
}

/** Records with a key sent again renamed `key~1`, `key~2`, ..., so the loader takes them in one go. */
function renamed(records: readonly Rec[], key: string): Rec[] {
  const seen = new Map<string, number>();
  return records.map((r) => {
    const k = r[key] as string;
    const c = seen.get(k) ?? 0;
    seen.set(k, c + 1);
    return c === 0 ? r : { ...r, [key]: `${k}~${c}` };
  });
}

/**
 * The reference: every record of the base and the batches, in order, loaded in one go (keys sent
 * again renamed for the load and restored in the records), as each resource's records.
 */
function oneGo(inputs: Inputs): Record<string, { fields: string[]; records: string[] }> {
  const store = loadRecords(
    {
      Property: renamed(inputs.Property, 'ListingKey'),
      Media: inputs.Media && renamed(inputs.Media, 'MediaKey'),
      OpenHouse: inputs.OpenHouse && renamed(inputs.OpenHouse, 'OpenHouseKey'),
    },
    { now },
  );
  const out: Record<string, { fields: string[]; records: string[] }> = {};
  for (const r of ['Property', 'Media', 'OpenHouse'] as const) {
    const list = inputs[r];
    if (list === undefined) continue;
    const t = store.table(r);
    const records: string[] = [];
    for (let row = 0; row < t.rowCount; row++) {
      const rec = t.record(row, undefined, NOW);
      rec[KEY[r]] = list[row][KEY[r]] as string;
      records.push(JSON.stringify(rec));
    }
    out[r] = { fields: t.schema.fields.map((f) => f.name), records };
  }
  return out;
}

/** The newest generation: the one-go records, and for each key its last row. */
function checkNewest(t: Table, reference: { fields: string[]; records: string[] }, inputs: readonly Rec[], keys: readonly string[]): void {
  expect(t.schema.fields.map((f) => f.name)).toEqual(reference.fields);
  expect(t.rowCount).toBe(inputs.length);
  const seen = observe(t, keys);
  expect(seen.records).toEqual(reference.records);
  const key = KEY[t.resource];
  const last = keys.map((k) => inputs.findLastIndex((r) => r[key] === k));
  expect(seen.rows).toEqual(last);
  expect(seen.byteRows).toEqual(last);
}

/** Only the fields `table` has (a batch must not carry others; see the SchemaMismatch tests). */
function fieldsOf(table: Table): (r: Rec) => Rec {
  const names = new Set(table.schema.fields.map((f) => f.name));
  return (r) => Object.fromEntries(Object.entries(r).filter(([k]) => names.has(k)));
}

function thrown(fn: () => unknown): DataError {
  const err = queryErrorOf(fn);
  expect(err).toBeInstanceOf(DataError);
  return err as DataError;
}

describe('TableAppender: Property', () => {
  const props = [...generateListings({ listings: 320, seed: 'append' })].map((l) => l.property);
  // Local fields of every inferred type in the base.
  const withLocals = (r: Rec, i: number): Rec =>
    i % 3 !== 0
      ? r
      : {
          ...r,
          X_Int: i,
          X_Dec: i + 0.5,
          X_Str: `s${i % 5}`,
          X_Tags: [`t${i % 3}`, 'common'],
          X_Date: `2024-01-0${(i % 9) + 1}`,
          X_Flag: i % 2 === 0,
          X_When: '2024-03-01T10:00:00+02:00',
        };
  const base = props.slice(0, 120).map(withLocals);
  const baseTable = loadRecords({ Property: base }, { now }).Property;
  const strip = fieldsOf(baseTable);
  const edit = (r: Rec, changes: Rec): Rec => ({ ...strip(r), ...changes });

  const b1 = props.slice(120, 170).map(strip);
  b1[0] = edit(b1[0], { City: 'Appendville', MlsStatus: 'Appended' });
  b1[2] = edit(b1[2], { ModificationTimestamp: '2024-05-01T10:00-05:00' });
  b1[3] = edit(b1[3], { ModificationTimestamp: '2024-05-01T10:00:00.1234567Z' });
  b1[4] = edit(b1[4], { X_Dec: 7, X_Int: 12, X_Tags: ['t-new', 'common'], X_Flag: true, X_Date: '2023-12-31', X_When: '2024-03-01T10:00:00Z' });
  b1[5] = edit(b1[5], { X_Str: '2024-02-03' });

  const huge = 'Große Küche — '.repeat(40_000);
  const b2 = [
    ...props.slice(0, 15).map((r, i) => edit(r, { ListPrice: 1000 + i, City: 'Upsertville', PublicRemarks: `changed ${i}`, X_Str: 'upserted' })),
    ...props.slice(170, 220).map(strip),
  ];
  b2[20] = edit(b2[20], { PublicRemarks: huge, X_Str: '2024-02-03T04:05:06.7+01:00' });

  // Fields the batch does not carry (absent or null in every record): all nulls.
  const b3 = [
    ...props.slice(220, 260).map((r) => {
      const out = strip(r);
      delete out.PublicRemarks;
      for (const k of Object.keys(out)) if (k.startsWith('X_')) delete out[k];
      return strip({ ...out, Latitude: null, Longitude: null, Cooling: null });
    }),
    edit(props[120], { ListPrice: 1, PublicRemarks: 'second version of an appended row' }),
    edit(props[0], { ListPrice: 2, PublicRemarks: 'third version of a base row' }),
  ];
  const b4 = [
    ...props.slice(260, 320).map(strip),
    edit(props[225], { City: 'Relisted', ModificationTimestamp: '2024-06-01T00:00:00.0000001+05:30' }),
    edit(props[0], { ListPrice: 3 }),
  ];
  const batches = [b1, b2, b3, b4];
  const keys = [...new Set([...base, ...batches.flat()].map((r) => r.ListingKey as string)), 'NOT-A-KEY'];

  it('appends batches: each generation reads as the records loaded in one go; older ones are unchanged', () => {
    const appender = new TableAppender(baseTable);
    const generations = new Generations(keys);
    generations.add(baseTable);
    const inputs = [...base];
    const cityLengths: Array<[DictionaryColumn, number]> = [];
    let generationAfterB1: Table | undefined;
    for (const batch of batches) {
      const before = appender.table;
      cityLengths.push([before.columnOf('City', 'dictionary')!, before.columnOf('City', 'dictionary')!.dictionary.length]);
      const t = appender.append(loadBatch('Property', batch, { now }));
      expect(t).not.toBe(before);
      expect(appender.table).toBe(t);
      inputs.push(...batch);
      checkNewest(t, oneGo({ Property: inputs }).Property, inputs, keys);
      generations.add(t);
      generations.checkUnchanged();
      generationAfterB1 ??= t;
    }
    for (const [column, length] of cityLengths) expect(column.dictionary.length).toBe(length);

    const t = appender.table;
    const city = t.columnOf('City', 'dictionary')!;
    expect(city.dictionary).toContain('Appendville');
    expect(baseTable.columnOf('City', 'dictionary')!.dictionary).not.toContain('Appendville');
    expect(city.ranks.length).toBe(city.dictionary.length);
    // The upserted base key: the newest generation finds the last version, the base its own.
    const k0 = props[0].ListingKey as string;
    expect(t.rowOfKey(k0)).toBe(inputs.length - 1);
    expect(baseTable.rowOfKey(k0)).toBe(0);
    expect(t.record(t.rowOfKey(k0)).ListPrice).toBe(3);
    expect(t.keyIndex.size).toBe(new Set(inputs.map((r) => r.ListingKey)).size);
    // A generation's index as a plain one (what a snapshot stores) finds the same rows.
    for (const g of [t, generationAfterB1!]) {
      const plain = ByteIndex.fromState(g.keyColumn, g.keyIndex.state);
      expect(plain.size).toBe(g.keyIndex.size);
      expect(keys.map((k) => plain.findString(k))).toEqual(keys.map((k) => g.rowOfKey(k)));
    }
    // An empty batch changes nothing.
    expect(appender.append(loadBatch('Property', [], { now }))).toBe(t);
    // Styles and exceptions arrived with the batch.
    const modified = t.columnOf('ModificationTimestamp', 'timestamp')!;
    expect(baseTable.columnOf('ModificationTimestamp', 'timestamp')!.styles).toBeNull();
    expect(modified.styles).not.toBeNull();
    expect(modified.text(123)).toBe('2024-05-01T10:00:00.1234567Z');
    expect(t.record(122).ModificationTimestamp).toBe('2024-05-01T10:00-05:00');
  });

  it("appends in place to a compacted table's arrays (made with room), and the compacted table reads as it did", () => {
    // the compaction's gather of every row: the same records, in arrays with room after them
    const compacted = runNow(
      gatherTableSteps(
        baseTable,
        Uint32Array.from({ length: baseTable.rowCount }, (_, i) => i),
        null,
      ),
    );
    expect(observe(compacted, keys).records).toEqual(observe(baseTable, keys).records);
    const appender = new TableAppender(compacted);
    const generations = new Generations(keys);
    generations.add(compacted);
    const inputs = [...base];
    for (const batch of batches) {
      const t = appender.append(loadBatch('Property', batch, { now }));
      inputs.push(...batch);
      checkNewest(t, oneGo({ Property: inputs }).Property, inputs, keys);
      generations.add(t);
      generations.checkUnchanged();
    }
    const first = generations.tables[1];
    const buffers = (t: Table): ArrayBufferLike[] => [
      t.columnOf('ListPrice', 'number')!.values.buffer,
      t.columnOf('ListPrice', 'number')!.validity.buffer,
      t.columnOf('City', 'dictionary')!.codes.buffer,
      (t.column('PublicRemarks') as Utf8TextColumn).offsets.buffer,
      t.columnOf('ModificationTimestamp', 'timestamp')!.values.buffer,
    ];
    // the first append wrote into the compacted arrays' room (no copy); a loaded table's are copied
    for (const [i, b] of buffers(first).entries()) expect(b).toBe(buffers(compacted)[i]);
    const copied = new TableAppender(baseTable).append(loadBatch('Property', b1, { now }));
    for (const [i, b] of buffers(copied).entries()) expect(b).not.toBe(buffers(baseTable)[i]);
    // text bytes too, while the batch's text fits the room (b1's remarks do not: 1/8 more)
    const remarks = (t: Table): ArrayBufferLike => (t.column('PublicRemarks') as Utf8TextColumn).bytes.buffer;
    const again = runNow(
      gatherTableSteps(
        baseTable,
        Uint32Array.from({ length: baseTable.rowCount }, (_, i) => i),
        null,
      ),
    );
    const short = new TableAppender(again).append(loadBatch('Property', [edit(props[130], { PublicRemarks: 'short' })], { now }));
    expect(remarks(short)).toBe(remarks(again));
    expect(remarks(first)).not.toBe(remarks(compacted));
    // a second appender over the same compacted table does not write into what the first adopted
    const other = new TableAppender(compacted).append(loadBatch('Property', b1, { now }));
    for (const [i, b] of buffers(other).entries()) expect(b).not.toBe(buffers(compacted)[i]);
    generations.checkUnchanged();
  });

  it("copies a text column's bytes into a larger array in steps before the batch's write, not in the write", () => {
    // a table whose remarks fill 2 MB, then batches that fit the room the first append leaves and one that does not
    const big = props.slice(0, 50).map((r, i) => ({ ...strip(r), PublicRemarks: `${i} `.padEnd(40_000, 'x') }));
    const appender = new TableAppender(loadRecords({ Property: big }, { now }).Property);
    const steps = (batch: Rec[]): number => {
      let yields = 0;
      const it = appender.appendSteps(loadBatch('Property', batch, { now }));
      while (!it.next().done) yields++;
      return yields;
    };
    const small = (from: number): Rec[] => props.slice(from, from + 2).map((r) => ({ ...strip(r), PublicRemarks: 'short' }));
    steps(small(60)); // the first append copies every loaded array (with 1/8 room)
    const fits = steps(small(70));
    const grows = steps(props.slice(80, 82).map((r) => ({ ...strip(r), PublicRemarks: 'y'.repeat(400_000) })));
    // the 2 MB of bytes are copied in slices of 128 KB, each a step of its own
    expect(grows - fits).toBeGreaterThanOrEqual(16);
    expect(appender.table.record(appender.table.rowCount - 1).PublicRemarks).toBe('y'.repeat(400_000));
    expect(appender.table.record(0).PublicRemarks).toBe(big[0].PublicRemarks);
  });

  it('keeps Location, RawLocation and DaysOnMarket on the appended Latitude, Longitude and reference arrays', () => {
    const appender = new TableAppender(baseTable);
    let t = baseTable;
    for (const batch of batches) t = appender.append(loadBatch('Property', batch, { now }));
    const lat = t.columnOf('Latitude', 'number')!;
    const lon = t.columnOf('Longitude', 'number')!;
    for (const name of ['Location', 'RawLocation']) {
      const p = t.columnOf(name, 'point')!;
      expect(p.lat).toBe(lat.values);
      expect(p.lon).toBe(lon.values);
      expect(p.lat.length).toBe(t.rowCount);
    }
    const reference = t.columnOf('service_DaysOnMarketReferenceTimestamp', 'timestamp')!;
    const dom = t.columnOf('DaysOnMarket', 'daysOnMarket')!;
    expect(dom.reference).toBe(reference.values);
    expect(dom.validity).toBe(reference.validity);
    // Shared with the base's arrays before, with the appended backing arrays now.
    expect(baseTable.columnOf('Location', 'point')!.lat).toBe(baseTable.columnOf('Latitude', 'number')!.values);
    expect(lat.values.buffer).not.toBe(baseTable.columnOf('Latitude', 'number')!.values.buffer);
    const row = t.rowOfKey(props[300].ListingKey as string);
    expect(t.value(row, 'Location')).toEqual({ type: 'Point', coordinates: [props[300].Longitude, props[300].Latitude] });
    expect(t.columnOf('Location', 'point')!.isNull(t.rowOfKey(props[230].ListingKey as string))).toBe(true);
  });

  it("adds the fields a batch carries that the table lacks: nulls in older rows, the loader's field order, older tables unchanged", () => {
    const small = loadRecords({ Property: [listing('A', { X_Str: 'a' })] }, { now }).Property;
    expect(small.schema.field('BedroomsTotal')).toBeUndefined();
    const appender = new TableAppender(small);
    const added = [listing('B', { BedroomsTotal: 3, X_New: 'value', X_Tags: ['p', 'q'], X_When: '2024-01-01T00:00:00Z' }), listing('C', { X_New: 'other' })];
    const t = appender.append(loadBatch('Property', added, { now }));
    const inputs = [listing('A', { X_Str: 'a' }), ...added];
    const types = loadRecords({ Property: inputs }, { now }).Property.schema.fields.map((f) => [f.name, f.type, f.origin]);
    expect(t.schema.fields.map((f) => [f.name, f.type, f.origin])).toEqual(types);
    checkNewest(t, oneGo({ Property: inputs }).Property, inputs, ['A', 'B', 'C']);
    expect(t.record(0).BedroomsTotal).toBeNull();
    expect(small.schema.field('BedroomsTotal')).toBeUndefined();
    expect(small.record(0)).toEqual(loadRecords({ Property: [listing('A', { X_Str: 'a' })] }, { now }).Property.record(0));
    // a batch that fails after its fields were added leaves the schema as it was
    expect(thrown(() => appender.append(loadBatch('Property', [listing('D', { X_Other: 1, X_Str: 5 })], { now }))).code).toBe('SchemaMismatch');
    expect(appender.schema.field('X_Other')).toBeUndefined();
    expect(appender.table).toBe(t);
  });

  it('rejects batch values of types the table cannot hold, before writing anything', () => {
    const small = loadRecords(
      {
        Property: [listing('A', { X_Int: 1, X_Dec: 1.5, X_Date: '2024-01-01', X_Str: 'a', X_Tags: ['x'], X_When: '2024-01-01T00:00:00Z' })],
      },
      { now },
    ).Property;
    const appender = new TableAppender(small);
    const cases: Array<[Rec, string, RegExp]> = [
      [{ X_Int: 1.5 }, 'X_Int', /X_Int is Edm\.Int64 in the Property table; the batch's values are Edm\.Decimal/],
      [{ X_Date: 'not a date' }, 'X_Date', /Edm\.Date .* Edm\.String/],
      [{ X_Date: '2024-01-01T00:00:00Z' }, 'X_Date', /Edm\.Date .* Edm\.DateTimeOffset/],
      [{ X_When: '2024-01-01' }, 'X_When', /Edm\.DateTimeOffset .* Edm\.Date/],
      [{ X_Str: 5 }, 'X_Str', /Edm\.String .* Edm\.Int64/],
      [{ X_Str: ['a'] }, 'X_Str', /Edm\.String .* Collection\(Edm\.String\)/],
      [{ X_Tags: 'x' }, 'X_Tags', /Collection\(Edm\.String\) .* Edm\.String/],
      [{ X_Dec: true }, 'X_Dec', /Edm\.Decimal .* Edm\.Boolean/],
    ];
    for (const [extra, field, reason] of cases) {
      // The mismatch is in the second record; the first one is fine.
      const batch = loadBatch('Property', [listing('B'), listing('C', extra)], { now });
      const err = thrown(() => appender.append(batch));
      expect(err.code).toBe('SchemaMismatch');
      expect(err.field).toBe(field);
      expect(err.reason).toMatch(reason);
      expect(err.message).toContain(`field ${field}`);
      expect(appender.table).toBe(small);
    }
    const media = loadRecords({ Property: [listing('A')], Media: [{ MediaKey: 'M', ResourceName: 'Property', ResourceRecordKey: 'A' }] }).Media;
    expect(thrown(() => appender.append(media)).code).toBe('SchemaMismatch');

    // Nulls need no field (null is absence); values the table's type holds are taken.
    const good = [
      listing('B', { X_New: null, X_Int: null, BedroomsTotal: null }),
      listing('C', { X_Dec: 2, X_Str: '2024-05-06' }),
      listing('D', { X_Str: '2024-05-06T07:08:09.100+02:00' }),
    ];
    const t = appender.append(loadBatch('Property', good, { now }));
    const inputs = [
      ...[listing('A', { X_Int: 1, X_Dec: 1.5, X_Date: '2024-01-01', X_Str: 'a', X_Tags: ['x'], X_When: '2024-01-01T00:00:00Z' })],
      ...good.map(fieldsOf(small)),
    ];
    checkNewest(t, oneGo({ Property: inputs }).Property, inputs, ['A', 'B', 'C', 'D']);
    expect(t.schema.field('X_New')).toBeUndefined();
    expect(t.record(3).X_Str).toBe('2024-05-06T07:08:09.100+02:00');
    expect(small.rowCount).toBe(1);
    expect(small.rowOfKey('B')).toBe(-1);
  });

  it('gives an appended table the lineage of the one before, so records kept for older rows serve it; a new one after added fields or a roll-back', () => {
    const readAll = (t: Table): void => {
      // twice: a row's record is kept from its second read on
      for (let pass = 0; pass < 2; pass++) for (let row = 0; row < t.rowCount; row++) t.record(row, undefined, NOW);
    };
    const exact = (t: Table): void => {
      for (let row = 0; row < t.rowCount; row++) expect(t.record(row, undefined, NOW)).toEqual(t.builtRecord(row, undefined, NOW));
    };
    const table = loadRecords({ Property: base }, { now }).Property;
    const appender = new TableAppender(table);
    readAll(table);
    const kept = table.lineage.shapes.get('')!.kept;
    expect(kept.size).toBeGreaterThan(0);

    const t1 = appender.append(loadBatch('Property', props.slice(120, 130).map(strip), { now }));
    expect(t1.lineage).toBe(table.lineage);
    readAll(t1);
    exact(t1);
    // a roll-back: the rows past the checkpoint are written again, so the next table starts afresh
    const restore = appender.checkpoint();
    appender.append(loadBatch('Property', props.slice(130, 140).map(strip), { now }));
    restore();
    const t2 = appender.append(
      loadBatch(
        'Property',
        props.slice(140, 150).map((r) => edit(r, { PublicRemarks: 'after the roll-back' })),
        { now },
      ),
    );
    expect(t2.lineage).not.toBe(t1.lineage);
    expect(t2.record(t1.rowCount, undefined, NOW).PublicRemarks).toBe('after the roll-back');
    exact(t2);
    const t3 = appender.append(loadBatch('Property', props.slice(150, 155).map(strip), { now }));
    expect(t3.lineage).toBe(t2.lineage);
    // a field the table lacks: older rows read it as null, so their records differ
    readAll(t3);
    const t4 = appender.append(loadBatch('Property', [{ ...strip(props[155]), X_New: 1 }], { now }));
    expect(t4.lineage).not.toBe(t3.lineage);
    expect(t4.record(0, undefined, NOW)).toHaveProperty('X_New', null);
    exact(t4);
  });

  it('widens dictionary and collection codes past 65,535 values and converts between dictionary and text', () => {
    const N = 66_000;
    const base = Array.from({ length: N }, (_, i) => ({ ListingKey: `K${i}`, ListPrice: i, X_Code: `c${i % 7}`, X_Big: `big-${i}`, X_Tags: [`t${i % 5}`] }));
    const batch = Array.from({ length: N }, (_, j) => {
      const i = N + j;
      return { ListingKey: `K${i}`, ListPrice: i, X_Code: `code-${i}`, X_Big: `b${i % 3}`, X_Tags: [`tag-${i}`, 't1'] };
    });
    const table = loadRecords({ Property: base }, { now }).Property;
    // The loader made X_Big text (distinct values) and X_Code a dictionary; the batch the other way round.
    expect(table.column('X_Big')!.kind).toBe('text');
    expect(table.columnOf('X_Code', 'dictionary')!.codes).toBeInstanceOf(Uint16Array);
    const loaded = loadBatch('Property', batch, { now });
    expect(loaded.column('X_Code')!.kind).toBe('text');
    expect(loaded.column('X_Big')!.kind).toBe('dictionary');

    const keys = ['K0', `K${N - 1}`, `K${N}`, `K${2 * N - 1}`, `K${2 * N}`];
    const generations = new Generations(keys);
    generations.add(table);
    const t = new TableAppender(table).append(loaded);
    const inputs = [...base, ...batch];
    checkNewest(t, oneGo({ Property: inputs }).Property, inputs, keys);
    generations.checkUnchanged();

    const code = t.columnOf('X_Code', 'dictionary')!;
    expect(code.codes).toBeInstanceOf(Uint32Array);
    expect(code.dictionary.length).toBe(1 + 7 + N);
    expect(code.ranks.length).toBe(code.dictionary.length);
    const oldCode = table.columnOf('X_Code', 'dictionary')!;
    expect(oldCode.codes).toBeInstanceOf(Uint16Array);
    expect(oldCode.dictionary.length).toBe(8);
    const tags = t.columnOf('X_Tags', 'collection') as CollectionColumn;
    expect(tags.codes).toBeInstanceOf(Uint32Array);
    expect(tags.dictionary.length).toBe(5 + N);
    expect((table.columnOf('X_Tags', 'collection') as CollectionColumn).codes).toBeInstanceOf(Uint16Array);
    expect(t.column('X_Big')!.kind).toBe('text');
  });
});

describe('TableAppender: a large dictionary', () => {
  const N = 10_000;
  const base = Array.from({ length: N }, (_, i) => ({ ListingKey: `K${i}`, ListPrice: i, ListAgentKey: `agent-${i}`, X_Tags: [`tag-${i}`] }));
  const table = (): Table => loadRecords({ Property: base }, { now }).Property;
  const steps = (t: Table, batch: Table): number => {
    let n = 0;
    const run = new TableAppender(t).appendSteps(batch);
    for (let next = run.next(); !next.done; next = run.next()) n++;
    return n;
  };

  it('copies its entries in steps when a batch brings a new value, and not at all when none is new', () => {
    const t = table();
    const agents = t.columnOf('ListAgentKey', 'dictionary')!;
    expect(agents.dictionary.length).toBe(N + 1);
    const known = loadBatch('Property', [{ ListingKey: 'K1', ListPrice: 1, ListAgentKey: 'agent-7', X_Tags: ['tag-7'] }], { now });
    const fresh = loadBatch('Property', [{ ListingKey: 'K1', ListPrice: 1, ListAgentKey: 'agent-new', X_Tags: ['tag-new'] }], { now });
    const knownSteps = steps(t, known);
    const freshSteps = steps(table(), fresh);
    // two dictionaries (the agents' and the tags') of 10,000 entries, 2,048 a check point
    expect(freshSteps - knownSteps).toBeGreaterThanOrEqual(2 * Math.floor(N / 2048));

    const same = new TableAppender(t).append(known);
    expect(same.columnOf('ListAgentKey', 'dictionary')!.dictionary).toBe(agents.dictionary);
    expect(same.record(N, undefined, NOW)).toMatchObject({ ListingKey: 'K1', ListAgentKey: 'agent-7' });
    const grown = new TableAppender(t).append(fresh);
    const after = grown.columnOf('ListAgentKey', 'dictionary')!;
    expect(after.dictionary.length).toBe(N + 2);
    expect(after.dictionary[after.codes[N]]).toBe('agent-new');
    expect((grown.columnOf('X_Tags', 'collection') as CollectionColumn).get(N)).toEqual(['tag-new']);
    expect(agents.dictionary.length).toBe(N + 1);
    expect(grown.record(N, undefined, NOW)).toMatchObject({ ListingKey: 'K1', ListAgentKey: 'agent-new' });
    expect(grown.record(1, undefined, NOW)).toMatchObject({ ListingKey: 'K1', ListAgentKey: 'agent-1' });
  });
});

describe('TableAppender: Media and OpenHouse', () => {
  const ls = [...generateListings({ listings: 150, seed: 'append-children' })];
  const P = (a: number, b: number): Rec[] => ls.slice(a, b).map((l) => l.property);
  const M = (a: number, b: number): Rec[] => ls.slice(a, b).flatMap((l) => l.media);
  const OH = (a: number, b: number): Rec[] => ls.slice(a, b).flatMap((l) => l.openHouses);
  const openHouse = (i: number, key: string): Rec => ({
    ...ls.flatMap((l) => l.openHouses)[0],
    OpenHouseKey: key,
    ListingKey: ls[i].property.ListingKey,
    OpenHouseStartTime: '2025-06-20T09:30-07:00',
    OpenHouseEndTime: '2025-06-20T12:00:00.5+01:00',
    OpenHouseRemarks: `open house ${key}`,
  });

  const baseInputs = { Property: P(0, 90), Media: M(0, 90), OpenHouse: OH(0, 90) };
  const baseStore = loadRecords(baseInputs, { now });
  const strip = { Property: fieldsOf(baseStore.Property), Media: fieldsOf(baseStore.Media), OpenHouse: fieldsOf(baseStore.OpenHouse) };

  // 1: loaded against the new Property generation (loadBatch with parent), upserts of base rows, a Media of another resource.
  const batch1: Required<Inputs> = {
    Property: [...P(90, 110), ...P(0, 3).map((r, i) => ({ ...r, ListPrice: 5 + i }))],
    Media: [
      ...M(90, 110),
      ...ls[0].media.slice(0, 3).map((m) => ({ ...m, Order: (m.Order as number) + 100, ImageOf: 'Changed' })),
      { MediaKey: 'MEMBER-1', ResourceName: 'Member', ResourceRecordKey: 'AGENT-7', Order: 1, MediaURL: 'https://media.example.com/agent.jpg' },
    ],
    OpenHouse: [...OH(90, 110), openHouse(95, 'OH-A'), openHouse(1, 'OH-B'), { ...baseInputs.OpenHouse[0], OpenHouseRemarks: 'rescheduled' }],
  };
  // 2: the loader's own Property records (children linked to them; append resolves the keys).
  const batch2: Required<Inputs> = {
    Property: [...P(110, 130), { ...ls[95].property, ListPrice: 7 }, { ...ls[1].property, ListPrice: 8 }],
    Media: [
      ...M(110, 130),
      { ...ls[1].media[0], MediaKey: 'NEW-MEDIA-OF-1', Order: 99 },
      { ...ls[95].media[0], ImageOf: 'Changed again' },
      { MediaKey: 'MEMBER-2', ResourceName: 'Member', ResourceRecordKey: 'AGENT-8' },
    ],
    OpenHouse: [...OH(110, 130), openHouse(112, 'OH-C'), { ...openHouse(95, 'OH-A'), OpenHouseRemarks: 'moved' }],
  };
  // 3: links kept as text (loadBatch without parent), resolved by append; a child of a listing not in this batch.
  const batch3: Required<Inputs> = {
    Property: P(130, 150),
    Media: [...M(130, 150), { ...ls[2].media[0], MediaKey: 'NEW-MEDIA-OF-2' }],
    OpenHouse: [...OH(130, 150), openHouse(140, 'OH-D'), openHouse(3, 'OH-E')],
  };

  function keysOf(resource: 'Property' | 'Media' | 'OpenHouse'): string[] {
    const all = [baseInputs, batch1, batch2, batch3].flatMap((b) => b[resource]);
    return [...new Set(all.map((r) => r[KEY[resource]] as string)), 'NOT-A-KEY'];
  }

  it('appends children linked to the newest listing rows; older generations are unchanged', () => {
    const tables = {
      Property: new TableAppender(baseStore.Property),
      Media: new TableAppender(baseStore.Media),
      OpenHouse: new TableAppender(baseStore.OpenHouse),
    };
    const children = ['Media', 'OpenHouse'] as const;
    const all = ['Property', ...children] as const;
    const generations = Object.fromEntries(all.map((r) => [r, new Generations(keysOf(r))])) as Record<string, Generations>;
    for (const r of all) generations[r].add(baseStore.table(r));
    const inputs: Required<Inputs> = { Property: [...baseInputs.Property], Media: [...baseInputs.Media], OpenHouse: [...baseInputs.OpenHouse] };

    const steps: Array<(b: Required<Inputs>) => void> = [
      (b) => {
        const p = tables.Property.append(loadBatch('Property', b.Property, { now }));
        for (const r of children) tables[r].append(loadBatch(r, b[r], { parent: p, now }), { parent: p });
      },
      (b) => {
        const store = loadRecords(b, { now });
        const p = tables.Property.append(store.Property);
        for (const r of children) tables[r].append(store.table(r), { parent: p });
      },
      (b) => {
        const p = tables.Property.append(loadBatch('Property', b.Property, { now }));
        for (const r of children) tables[r].append(loadBatch(r, b[r], { now }), { parent: p });
      },
    ];
    [batch1, batch2, batch3].forEach((raw, i) => {
      const b = { Property: raw.Property.map(strip.Property), Media: raw.Media.map(strip.Media), OpenHouse: raw.OpenHouse.map(strip.OpenHouse) };
      const before = { Media: tables.Media.table.rowCount, OpenHouse: tables.OpenHouse.table.rowCount };
      steps[i](b);
      for (const r of all) inputs[r].push(...b[r]);
      const reference = oneGo(inputs);
      for (const r of all) {
        checkNewest(tables[r].table, reference[r], inputs[r], keysOf(r));
        generations[r].add(tables[r].table);
      }
      for (const r of all) generations[r].checkUnchanged();
      // Each new child row links to the newest row of its listing.
      const p = tables.Property.table;
      for (const r of children) {
        const t = tables[r].table;
        const field = r === 'Media' ? 'ResourceRecordKey' : 'ListingKey';
        const link = t.column(field) as ParentKeyColumn;
        for (let row = before[r]; row < t.rowCount; row++) {
          const input = inputs[r][row];
          if (r === 'Media' && input.ResourceName !== 'Property') {
            expect(link.parentRow[row]).toBe(-1);
            expect(link.unlinked?.get(row)).toBe(input.ResourceRecordKey);
          } else {
            expect(link.parentRow[row]).toBe(p.rowOfKey(input[field] as string));
          }
        }
      }
    });
    // A listing upserted twice: its first children still point at the base row, read the same key.
    const media = tables.Media.table;
    const link = media.column('ResourceRecordKey') as ParentKeyColumn;
    const first = media.rowOfKey(ls[1].media[0].MediaKey as string);
    expect(link.parentRow[first]).toBe(1);
    expect(link.parentRow[media.rowOfKey('NEW-MEDIA-OF-1')]).toBe(tables.Property.table.rowOfKey(ls[1].property.ListingKey as string));
    expect(media.value(first, 'ResourceRecordKey')).toBe(ls[1].property.ListingKey);
  });

  it('rejects children whose listing the Property table lacks, and a missing or older parent table', () => {
    const property = new TableAppender(baseStore.Property);
    const p1 = property.append(loadBatch('Property', [listing('NEW-1')], { now }));
    const p2 = property.append(loadBatch('Property', [listing('NEW-2')], { now }));
    const media = new TableAppender(baseStore.Media);
    const orphan = { MediaKey: 'ORPHAN', ResourceName: 'Property', ResourceRecordKey: 'NOPE', Order: 1 };
    const deferred = loadBatch('Media', [{ ...orphan, MediaKey: 'FINE', ResourceRecordKey: 'NEW-1' }, orphan], { now });
    const err = thrown(() => media.append(deferred, { parent: p2 }));
    expect(err.code).toBe('MissingParent');
    expect(err.field).toBe('ResourceRecordKey');
    expect(err.reason).toMatch(/'NOPE' \(batch row 2\) matches no Property record/);
    // Linked to the batch's own Property records, which the table does not have.
    const own = loadRecords({ Property: [listing('NOPE')], Media: [orphan] }, { now }).Media;
    expect(thrown(() => media.append(own, { parent: p2 })).code).toBe('MissingParent');
    expect(() => media.append(own)).toThrow(/needs the Property table/);
    expect(media.table).toBe(baseStore.Media);

    const fine = loadBatch('Media', [{ ...orphan, ResourceRecordKey: 'NEW-2' }], { now });
    const t = media.append(fine, { parent: p2 });
    expect(t.value(t.rowCount - 1, 'ResourceRecordKey')).toBe('NEW-2');
    expect(() => media.append(loadBatch('Media', [{ ...orphan, MediaKey: 'LATE', ResourceRecordKey: 'NEW-1' }], { now }), { parent: p1 })).toThrow(
      /older than the Property table/,
    );
    expect(media.table).toBe(t);
  });
});
