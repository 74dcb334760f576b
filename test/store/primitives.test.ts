import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ByteIndex } from '../../src/store/byte-index.js';
import { compareUtf8, hashBytes } from '../../src/store/bytes.js';
import { Dictionary, TextBuilder } from '../../src/store/builders.js';
import { TableBuilder } from '../../src/store/ingest.js';
import { SkipLog } from '../../src/store/record.js';
import { loadRecords } from '../../src/store/load.js';
import { formatDate, formatTimestamp, parseDateString, parseTimestamp, parseTimestampString, TimestampParts } from '../../src/store/temporal.js';

describe('dates and timestamps', () => {
  it('parse ISO 8601 with Z or an offset into epoch ms, and nothing else', () => {
    const valid = [
      '2024-05-01T10:00:00Z',
      '2024-05-01T10:00Z',
      '2024-05-01T10:00:00.1Z',
      '2024-05-01T10:00:00.123456789Z',
      '2024-05-01T10:00:00+05:30',
      '2024-05-01T10:00:00-08:00',
      '0001-01-01T00:00:00Z',
      '9999-12-31T23:59:59.999+14:00',
      '2024-02-29T12:00:00Z',
      '2000-02-29T00:00:00Z',
    ];
    for (const t of valid) expect([t, parseTimestampString(t)]).toEqual([t, Date.parse(t)]);
    const invalid = [
      '2024-05-01T10:00:00',
      '2024-05-01',
      '2024-05-01 10:00:00Z',
      '2024-5-01T10:00:00Z',
      '2024-05-01T10:00:00z',
      '2024-05-01t10:00:00Z',
      '2023-02-29T00:00:00Z',
      '1900-02-29T00:00:00Z',
      '2024-04-31T00:00:00Z',
      '2024-13-01T00:00:00Z',
      '2024-05-01T24:00:00Z',
      '2024-05-01T10:60:00Z',
      '2024-05-01T10:00:60Z',
      '2024-05-01T10:00:00.Z',
      '2024-05-01T10:00:00+0530',
      '2024-05-01T10:00:00+24:00',
      '+2024-05-01T10:00:00Z',
      '2024-05-01T10:00:00ZZ',
      '',
      'now',
    ];
    for (const t of invalid) expect([t, parseTimestampString(t)]).toEqual([t, Number.NaN]);
  });

  it('format back to the exact text in the style it was written', () => {
    const parts = new TimestampParts();
    for (const t of [
      '2024-05-01T10:00Z',
      '2024-05-01T10:00:07Z',
      '2024-05-01T10:00:07.5Z',
      '2024-05-01T10:00:07.25-03:00',
      '2024-12-31T23:30:00.000+05:45',
      '1970-01-01T00:00:00-00:00',
    ]) {
      const b = Buffer.from(t);
      expect(parseTimestamp(b, 0, b.length, parts)).toBe(true);
      expect(parts.exact).toBe(true);
      expect(formatTimestamp(parts.ms, parts.style)).toBe(t);
    }
    // Every instant of a wide range in the canonical style.
    for (let ms = -62135596800000; ms < 253402300799999; ms += 987654321987) {
      const iso = new Date(ms).toISOString();
      expect(formatTimestamp(parseTimestampString(iso), 1 | (3 << 1))).toBe(iso);
    }
  });

  it('parse dates into days since the epoch and back', () => {
    for (const d of ['1970-01-01', '2024-02-29', '0001-01-01', '9999-12-31', '1969-12-31', '2000-03-01']) {
      expect(parseDateString(d)).toBe(Date.parse(`${d}T00:00:00Z`) / 86_400_000);
      expect(formatDate(parseDateString(d))).toBe(d);
    }
    for (const d of ['2023-02-29', '2024-00-10', '2024-01-32', '24-01-01', '2024-01-01T00:00:00Z', '2024/01/01']) expect(parseDateString(d)).toBeNaN();
  });
});

describe('byte helpers', () => {
  it('compare UTF-8 in JavaScript string order, astral characters included', () => {
    const words = ['a', 'b', 'ab', '', 'é', 'z', '\uffff', '😀', '\ue000', 'Z', 'a😀', 'a\uffff'];
    const sorted = [...words].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
    const viaBytes = [...words].sort((x, y) => {
      const a = Buffer.from(x);
      const b = Buffer.from(y);
      return compareUtf8(a, 0, a.length, b, 0, b.length);
    });
    expect(viaBytes).toEqual(sorted);
  });

  it('index 20,000 keys by their bytes', () => {
    const text = new TextBuilder(16);
    const index = new ByteIndex(text);
    for (let i = 0; i < 20_000; i++) {
      const key = `K${(i * 7919) % 100_003}-é`;
      text.writeString(i, key);
      const b = Buffer.from(key);
      expect(index.find(b, 0, b.length, hashBytes(b, 0, b.length))).toBe(-1);
      index.add(i, hashBytes(b, 0, b.length));
    }
    for (let i = 0; i < 20_000; i += 97) expect(index.findString(`K${(i * 7919) % 100_003}-é`)).toBe(i);
    expect(index.findString('K1')).toBe(-1);
  });

  it('builds an index at once whose bytes depend only on the keys, and finds the first duplicate', () => {
    const keys = Array.from({ length: 20_000 }, (_, i) => `K${(i * 7919) % 100_003}-é`);
    const store = (list: readonly string[]): TextBuilder => {
      const text = new TextBuilder(16);
      list.forEach((k, i) => text.writeString(i, k));
      return text;
    };
    const text = store(keys);
    const built = ByteIndex.build(text, keys.length);
    if (!(built instanceof ByteIndex)) throw new Error('no duplicate expected');
    expect(built.size).toBe(keys.length);
    for (let i = 0; i < keys.length; i += 97) expect(built.findString(keys[i])).toBe(i);
    expect(built.findString('K1')).toBe(-1);
    // the same keys in the same rows give the same table, however often it is built
    const again = ByteIndex.build(store(keys), keys.length) as ByteIndex;
    expect(Buffer.from(again.state.table.buffer).equals(Buffer.from(built.state.table.buffer))).toBe(true);
    // entries added afterwards are found as in any index
    text.writeString(keys.length, 'new');
    built.add(keys.length, hashBytes(Buffer.from('new'), 0, 3));
    expect(built.findString('new')).toBe(keys.length);
    expect(ByteIndex.build(store([...keys.slice(0, 500), keys[120], ...keys.slice(500, 600), keys[7]]), 602)).toEqual({ first: 120, second: 500 });
  });
});

describe('string storage', () => {
  it('keeps low-cardinality strings in a dictionary and turns a near-unique column into text', () => {
    const n = 70_000;
    const records = Array.from({ length: n }, (_, i) => ({
      ListingKey: `L${i}`,
      StreetName: `Street ${i}`,
      City: i % 2 ? 'Austin' : 'Boston',
      StandardStatus: `Status ${i}`,
    }));
    const s = loadRecords({ Property: records });
    const t = s.Property;
    expect(t.column('StreetName')!.kind).toBe('text');
    expect(t.column('City')!.kind).toBe('dictionary');
    const status = t.columnOf('StandardStatus', 'dictionary')!;
    expect(status.codes).toBeInstanceOf(Uint32Array);
    expect(status.dictionary.length).toBe(n + 1);
    for (const row of [0, 1, 65_535, 65_536, n - 1]) {
      expect(t.record(row, ['ListingKey', 'StreetName', 'City', 'StandardStatus'])).toEqual(records[row]);
    }
    expect(status.ranks[status.codes[0]]).toBe(1);
  });
});

describe('dictionary copies', () => {
  const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');
  const entry = (d: Dictionary, text: string): number => d.entryOf(bytes(text), 0, bytes(text).length);

  it('hold the same entries and grow apart from the original', () => {
    const original = new Dictionary();
    const words = Array.from({ length: 300 }, (_, i) => `field ${i} é`);
    for (const w of words) entry(original, w);
    const copy = original.copy();
    expect(copy.strings).toEqual(words);
    words.forEach((w, i) => expect(copy.indexOf(bytes(w), 0, bytes(w).length)).toBe(i));
    // each side adds its own entries (the copy past its bytes' room too): the other never sees them
    const extra = Array.from({ length: 2_000 }, (_, i) => `only in the copy ${i}`);
    extra.forEach((w, i) => expect(entry(copy, w)).toBe(300 + i));
    expect(entry(original, 'only in the original')).toBe(300);
    expect(original.indexOf(bytes(extra[0]), 0, bytes(extra[0]).length)).toBe(-1);
    expect(copy.indexOf(bytes('only in the original'), 0, 20)).toBe(-1);
    expect(original.strings).toEqual([...words, 'only in the original']);
    expect(copy.strings.slice(300)).toEqual(extra);
  });
});

describe('table builders of one resource', () => {
  it('start from the catalog fields each, a local field one of them met staying its own', () => {
    const options = { skipBadRecords: false, skipLog: new SkipLog(), now: () => 0 };
    const first = new TableBuilder('Property', options);
    first.addValue({ ListingKey: 'A', X_Local: 'one', City: 'Austin' }, 1);
    const second = new TableBuilder('Property', options);
    second.addValue({ ListingKey: 'B', City: 'Boston', X_Other: 2 }, 1);
    const a = first.finish();
    const b = second.finish();
    expect(a.schema.localFields.map((f) => f.name)).toEqual(['X_Local']);
    expect(b.schema.localFields.map((f) => f.name)).toEqual(['X_Other']);
    expect(a.record(0, ['ListingKey', 'City', 'X_Local'])).toEqual({ ListingKey: 'A', City: 'Austin', X_Local: 'one' });
    expect(b.record(0, ['ListingKey', 'City', 'X_Other'])).toEqual({ ListingKey: 'B', City: 'Boston', X_Other: 2 });
  });
});

describe('fast path', () => {
  it('takes every record of the default data set without falling back to JSON.parse', () => {
    const dir = path.resolve(import.meta.dirname, '../../fixtures/default');
    const options = { skipBadRecords: false, skipLog: new SkipLog(), now: () => 0 };
    const property = new TableBuilder('Property', options);
    const feed = (b: TableBuilder, file: string): void => {
      const buf = readFileSync(path.join(dir, file));
      let pos = 0;
      let line = 0;
      for (let nl = buf.indexOf(10); nl >= 0; nl = buf.indexOf(10, pos)) {
        b.addBytes(buf, pos, nl, ++line);
        pos = nl + 1;
      }
    };
    feed(property, 'Property.jsonl');
    const parent = property.finish();
    const media = new TableBuilder('Media', { ...options, parent });
    feed(media, 'Media.jsonl');
    expect(property.fallbacks).toBe(0);
    expect(media.fallbacks).toBe(0);
    expect(media.finish().rowCount).toBe(35_466);
  });
});
