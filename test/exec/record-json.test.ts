import { beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine.js';
import type { QueryResult } from '../../src/exec/page.js';
import { RecordTexts, recordTexts, type RecordSource } from '../../src/exec/record-json.js';

const DAY = 86_400_000;
let ms = Date.parse('2025-06-01T00:00:00Z');
let engine: Engine;

beforeAll(async () => {
  engine = await Engine.open({ now: () => new Date(ms) });
});

/** Pages whose records are the rows' fields: their texts may come from the cache. */
const PLAIN = [
  "$filter=StandardStatus eq 'Active'&$orderby=ListPrice desc&$top=25",
  '$orderby=ListingKey&$skip=10&$top=20&$count=true',
  '$select=ListingKey,ListPrice,DaysOnMarket&$orderby=ListPrice&$top=30',
  '$select=DaysOnMarket&$orderby=ListingKey&$top=5',
  '$select=ListPrice,ListingKey,City&$top=10',
  '$select=*&$top=3',
  '$filter=PublicRemarks ne null&$select=PublicRemarks,DaysOnMarket,Appliances,Location,ModificationTimestamp&$top=40',
];
/** Pages whose records are shaped further: written by stringifying the records. */
const SHAPED = [
  '$select=ListingKey,City&$ignorenulls=true&$top=10',
  '$expand=Media($top=2)&$top=3',
  '$select=ListingKey,Media&$top=3',
  '$apply=groupby((City))&$top=5',
];

/** The records as JSON.stringify writes them: the service's bytes without the cache. */
const stringified = (r: QueryResult): string[] => r.value.map((x) => JSON.stringify(x));

/** A query's result and its records' cached texts, taken as the service takes them (QueryOptions `onPage`); null texts when the engine handed over no page or the cache has none yet. */
function queryTexts(query: string): { result: QueryResult; texts: string[] | null } {
  let page: RecordSource | undefined;
  const result = engine.query('Property', query, { onPage: (p) => (page = p) });
  return { result, texts: page === undefined ? null : recordTexts.texts(page) };
}

/** The page's texts (asked until given: a page none of whose rows was written before has none), checked against the records. */
function expectSameTexts(query: string): string[] {
  let { result, texts } = queryTexts(query);
  if (texts === null) ({ result, texts } = queryTexts(query));
  expect(texts, query).not.toBeNull();
  expect(result.value.length).toBe(texts!.length);
  expect(texts).toEqual(stringified(engine.query('Property', query)));
  expect(texts).toEqual(stringified(result));
  return texts!;
}

describe('cached record texts', () => {
  it('are the records as JSON.stringify writes them, with or without $select, cold and warm', () => {
    for (const q of PLAIN) {
      expectSameTexts(q);
      expectSameTexts(q); // from the cache
    }
    for (const q of SHAPED) {
      queryTexts(q);
      expect(queryTexts(q).texts, q).toBeNull();
    }
  });

  it('write DaysOnMarket as of each request, however old the text', () => {
    const q = '$select=ListingKey,DaysOnMarket,ListPrice&$orderby=ListingKey&$top=50';
    const before = expectSameTexts(q);
    expect(before.some((t) => /"DaysOnMarket":[1-9]/.test(t))).toBe(true);
    const whole = expectSameTexts('$orderby=ListingKey&$top=50');
    ms += 3 * DAY + 1;
    const after = expectSameTexts(q);
    expect(after).not.toEqual(before);
    const days = (t: string): unknown => (JSON.parse(t) as { DaysOnMarket: unknown }).DaysOnMarket;
    for (let i = 0; i < before.length; i++) {
      const [b, a] = [days(before[i]), days(after[i])];
      if (b === null) expect(a).toBeNull();
      else expect(a).toBe((b as number) + 3);
    }
    expect(expectSameTexts('$orderby=ListingKey&$top=50')).not.toEqual(whole);
  });

  it('never serve a text of an older generation after a change', async () => {
    const q = '$orderby=ListingKey&$top=10';
    const texts = expectSameTexts(q);
    const first = JSON.parse(texts[0]) as Record<string, unknown>;
    // a value that spells the key inside a string must not be taken for it
    const remarks = 'Quoted: ,"DaysOnMarket":7, and {"DaysOnMarket":0}';
    await engine.upsert('Property', [{ ...withoutDerived(first), ListPrice: 123_456, PublicRemarks: remarks }]);
    const fresh = expectSameTexts(q);
    const changed = JSON.parse(fresh[0]) as Record<string, unknown>;
    expect([changed.ListingKey, changed.ListPrice, changed.PublicRemarks]).toEqual([first.ListingKey, 123_456, remarks]);
    expect(changed.DaysOnMarket).toEqual(first.DaysOnMarket);
    expect(fresh.slice(1)).toEqual(texts.slice(1));
  });

  it('serve the rows a change left alone from the texts kept before it: the same page is the same buffer on the next generation', async () => {
    const q = '$select=ListingKey,City,ListPrice&$orderby=ListingKey&$top=15';
    const head = '{"value":[';
    const bytesOf = (): Buffer | null => {
      let page: RecordSource | undefined;
      engine.query('Property', q, { onPage: (p) => (page = p), plainPagesAsRows: true });
      return recordTexts.pageBytes(page!, head, ']}');
    };
    const whole = (key: unknown): Record<string, unknown> => engine.query('Property', `$filter=ListingKey eq '${String(key)}'`).value[0];
    bytesOf();
    const before = bytesOf();
    expect(before).not.toBeNull();
    const generation = engine.generation;
    const outside = engine.query('Property', '$orderby=ListingKey desc&$top=1').value[0];
    await engine.upsert('Property', [{ ...withoutDerived(outside), ListPrice: 777_777 }]);
    expect(engine.generation).toBeGreaterThan(generation);
    expect(bytesOf()).toBe(before);
    const inside = engine.query('Property', q).value[3];
    await engine.upsert('Property', [{ ...withoutDerived(whole(inside.ListingKey)), ListPrice: 888_888 }]);
    const after = bytesOf();
    expect(after).not.toBe(before);
    expect(after!.toString()).toBe(`${head}${stringified(engine.query('Property', q)).join(',')}]}`);
    expect(after!.toString()).toContain('888888');
  });

  it('write a page as the UTF-8 bytes of its texts joined, non-ASCII text and DaysOnMarket included', async () => {
    const q = '$select=ListingKey,PublicRemarks,DaysOnMarket,ListPrice&$orderby=ListingKey&$top=12';
    const first = JSON.parse(expectSameTexts('$orderby=ListingKey&$top=1')[0]) as Record<string, unknown>;
    await engine.upsert('Property', [{ ...withoutDerived(first), PublicRemarks: 'Café — 🏡 "quoted", ünïcödé\u2028 and \\ backslash' }]);
    const head = '{"@odata.context":"$metadata#Property(ListingKey,PublicRemarks,DaysOnMarket,ListPrice)","value":[';
    for (let round = 0; round < 3; round++) {
      let page: RecordSource | undefined;
      const built = engine.query('Property', q);
      engine.query('Property', q, { onPage: (p) => (page = p), plainPagesAsRows: true });
      const bytes = recordTexts.pageBytes(page!, head, ']}');
      if (round === 0 && bytes === null) continue; // a first sight of these rows: the caller stringifies
      expect(bytes).not.toBeNull();
      expect(bytes!.toString('utf8')).toBe(`${head}${stringified(built).join(',')}]}`);
      ms += DAY;
    }
  });

  it('give a page written again as it was the same bytes, and new ones when its rows, head or DaysOnMarket change', () => {
    const q = '$select=ListingKey,DaysOnMarket&$orderby=ListingKey&$top=15';
    const head = '{"value":[';
    const bytesOf = (query: string, h = head): { bytes: Buffer | null; built: string } => {
      let page: RecordSource | undefined;
      engine.query('Property', query, { onPage: (p) => (page = p), plainPagesAsRows: true });
      return { bytes: recordTexts.pageBytes(page!, h, ']}'), built: `${h}${stringified(engine.query('Property', query)).join(',')}]}` };
    };
    bytesOf(q);
    const first = bytesOf(q);
    expect(first.bytes!.toString()).toBe(first.built);
    expect(bytesOf(q).bytes).toBe(first.bytes); // the very same buffer
    const otherHead = bytesOf(q, '{"@odata.count":1,"value":[');
    expect(otherHead.bytes).not.toBe(first.bytes);
    expect(otherHead.bytes!.toString()).toBe(otherHead.built);
    bytesOf('$select=ListingKey,DaysOnMarket&$orderby=ListingKey&$skip=1&$top=15');
    const shifted = bytesOf('$select=ListingKey,DaysOnMarket&$orderby=ListingKey&$skip=1&$top=15');
    expect(shifted.bytes!.toString()).toBe(shifted.built);
    ms += DAY;
    const later = bytesOf(q);
    expect(later.bytes).not.toBe(first.bytes);
    expect(later.bytes!.toString()).toBe(later.built);
    expect(later.built).not.toBe(first.built);
  });

  it('keep two pages of the same head and tail apart, each written again as the same buffer', () => {
    const head = '{"value":[';
    const bytesOf = (query: string): Buffer | null => {
      let page: RecordSource | undefined;
      engine.query('Property', query, { onPage: (p) => (page = p), plainPagesAsRows: true });
      return recordTexts.pageBytes(page!, head, ']}');
    };
    const a = '$select=ListingKey,DaysOnMarket,ListPrice&$orderby=ListPrice desc,ListingKey&$top=7';
    const b = '$select=ListingKey,DaysOnMarket,ListPrice&$orderby=ListPrice,ListingKey&$top=7';
    bytesOf(a);
    bytesOf(b);
    const first = [bytesOf(a), bytesOf(b)];
    for (let round = 0; round < 3; round++) {
      // taking turns, neither evicts the other
      expect(bytesOf(a)).toBe(first[0]);
      expect(bytesOf(b)).toBe(first[1]);
    }
    expect(first[0]!.toString()).toBe(`${head}${stringified(engine.query('Property', a)).join(',')}]}`);
    expect(first[1]!.toString()).toBe(`${head}${stringified(engine.query('Property', b)).join(',')}]}`);
    ms += DAY;
    const later = bytesOf(a);
    expect(later).not.toBe(first[0]);
    expect(later!.toString()).toBe(`${head}${stringified(engine.query('Property', a)).join(',')}]}`);
  });

  it('stay within their bound, the oldest dropped first, and stay exact', () => {
    const small = new RecordTexts(40_000);
    const table = engine.store.Property;
    const fields = ['ListingKey', 'DaysOnMarket', 'PublicRemarks'];
    const rows = Uint32Array.from({ length: 200 }, (_, i) => (i * 37) % table.rowCount);
    const page = (from: number): Uint32Array => rows.subarray(from, from + 25);
    expect(small.texts({ table, fields, nowMs: ms, rows: page(0) })).toBeNull(); // first time: the caller stringifies
    expect(small.heldSize).toBe(0);
    // rows written before and rows not: each text as the record stringifies
    const mixed = Uint32Array.from([...page(0).subarray(0, 10), ...page(25)]);
    expect(small.texts({ table, fields, nowMs: ms, rows: mixed })).toEqual(Array.from(mixed, (row) => JSON.stringify(table.record(row, fields, ms))));
    for (let pass = 0; pass < 3; pass++) {
      const texts = small.texts({ table, fields, nowMs: ms, rows });
      expect(texts).toEqual(Array.from(rows, (row) => JSON.stringify(table.record(row, fields, ms))));
      expect(small.heldSize).toBeLessThanOrEqual(40_000);
      expect(small.heldSize).toBeGreaterThan(0);
    }
  });
});

describe('plainPagesAsRows', () => {
  /** The query with the option: its result and the page handed over (if any). */
  const asRows = (query: string, navigation?: string): { result: QueryResult; page: RecordSource | undefined } => {
    let page: RecordSource | undefined;
    const options = { onPage: (p: RecordSource) => (page = p), plainPagesAsRows: true };
    const key = engine.query('Property', '$orderby=ListingKey&$top=1&$select=ListingKey').value[0].ListingKey as string;
    const result = navigation === undefined ? engine.query('Property', query, options) : engine.navigate('Property', key, navigation, query, options);
    return { result, page };
  };

  it('hand plain pages over as rows, without records, which are the records the engine builds otherwise', () => {
    for (const q of PLAIN) {
      const { result, page } = asRows(q);
      const built = engine.query('Property', q);
      expect(page, q).toBeDefined();
      expect(result.value, q).toEqual([]);
      expect({ ...result, value: [] }).toEqual({ ...built, value: [] }); // context, count and nextLink as without the option
      expect(Array.from(page!.rows, (row) => page!.table.record(row, page!.fields, page!.nowMs))).toEqual(built.value);
    }
    // a navigation path's children too
    const { result, page } = asRows('$orderby=MediaKey&$top=5', 'Media');
    expect(result.value).toEqual([]);
    const key = engine.query('Property', '$orderby=ListingKey&$top=1&$select=ListingKey').value[0].ListingKey as string;
    expect(Array.from(page!.rows, (row) => page!.table.record(row, page!.fields, page!.nowMs))).toEqual(
      engine.navigate('Property', key, 'Media', '$orderby=MediaKey&$top=5').value,
    );
  });

  it('leave shaped pages built, and change nothing without onPage', () => {
    for (const q of SHAPED) {
      const { result, page } = asRows(q);
      expect(page, q).toBeUndefined();
      expect(result).toEqual(engine.query('Property', q));
    }
    for (const q of PLAIN) expect(engine.query('Property', q, { plainPagesAsRows: true })).toEqual(engine.query('Property', q));
  });
});

/** A record as a feed would send it again: the fields the engine derives left out. */
function withoutDerived(record: Record<string, unknown>): Record<string, unknown> {
  const schema = engine.schemaOf('Property');
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(record)) if (schema.field(k)?.origin !== 'derived' && !k.startsWith('service_')) out[k] = v;
  return out;
}
