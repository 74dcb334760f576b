/**
 * The load is deterministic to the byte: the same data directory gives the same store and indexes
 * (every array of the engine snapshot encoding equal, byte for byte) however it is loaded: twice
 * the same way, with Media in a worker (its links and the event log written there, the listings'
 * indexes built meanwhile) or on one thread, through the fast byte path or JSON.parse. And the initial EntityEvent log, written straight from the loaded columns, equals the
 * log written as JSON records, for keys that need quoting and percent-encoding in their URL.
 */
import { describe, expect, it } from 'vitest';
import { buildStoreIndexes, StoreAccess, type StoreIndexes } from '../../src/access/access.js';
import { generateDataset } from '../../src/generate/dataset.js';
import { encodeEngine } from '../../src/snapshot/state.js';
import { recordUrl } from '../../src/store/events.js';
import { loadDataDirectory, type LoadDirectoryOptions } from '../../src/store/load.js';
import type { Store } from '../../src/store/store.js';
import { dataDir, jsonl, listing, tempDir } from './helpers.js';

const NOW = Date.parse('2025-06-01T00:00:00Z');

/**
 * Every array of the store's snapshot encoding (with its search and point indexes), and the meta
 * as JSON (but for the report's `parallel`, which says how the load ran).
 */
function encoded(store: Store, indexes?: StoreIndexes): { meta: string; arrays: Map<string, Buffer> } {
  const { meta, arrays } = encodeEngine(store, indexes ?? new StoreAccess(store).base);
  const bytes = new Map<string, Buffer>();
  for (const [name, a] of arrays) bytes.set(`${name} ${a.constructor.name}`, Buffer.from(a.buffer, a.byteOffset, a.byteLength));
  return { meta: JSON.stringify({ ...meta, report: { ...meta.report, parallel: null } }), arrays: bytes };
}

function expectSameBytes(a: Store, b: Store, what: string, bIndexes?: StoreIndexes): void {
  const x = encoded(a);
  const y = encoded(b, bIndexes);
  expect(y.meta === x.meta, `${what}: meta`).toBe(true);
  expect([...y.arrays.keys()], what).toEqual([...x.arrays.keys()]);
  for (const [name, bytes] of x.arrays) expect(y.arrays.get(name)!.equals(bytes), `${what}: ${name}`).toBe(true);
}

const load = (dir: string, options: LoadDirectoryOptions = {}): Promise<Store> => loadDataDirectory(dir, { now: () => NOW, ...options });

describe('load determinism', () => {
  it('gives the same bytes twice, in a worker or on one thread, and through JSON.parse', async () => {
    const dir = tempDir();
    generateDataset({ listings: 600, seed: 'load-determinism', outDir: dir });
    const reference = await load(dir, { parallel: false });
    expect(reference.EntityEvent.rowCount).toBeGreaterThan(600 * 10);
    expectSameBytes(reference, await load(dir, { parallel: false }), 'one thread, twice');
    // as Engine.open: the listings' indexes built while the worker loads Media
    let indexes: StoreIndexes | undefined;
    const parallel = await load(dir, { parallel: true, onListings: (property) => (indexes = buildStoreIndexes(property)) });
    expect(parallel.report.parallel).toBe(true);
    expect(indexes).toBeDefined();
    expectSameBytes(reference, parallel, 'Media in a worker', indexes);
    expectSameBytes(reference, await load(dir, { parallel: false, fastPath: false }), 'JSON.parse');
  });

  it('writes the EntityEvent log from the columns as the JSON records would, for any key', async () => {
    const keys = ["it's", 'a b', '100%', 'é/ü?', '😀+&=', 'x\\"y', '\u0001', "''", "(!~*'._-)"];
    const dir = dataDir({
      'Property.jsonl': jsonl(keys.map((k, i) => listing(k, { OriginatingSystemName: i % 3 === 0 ? null : `MLS ${i % 2}` }))),
      'Media.jsonl': jsonl(keys.map((k, i) => ({ MediaKey: `m ${k}`, ResourceName: 'Property', ResourceRecordKey: k, Order: i }))),
      'Member.jsonl': jsonl([{ MemberKey: "o'brien", OriginatingSystemName: 'MLS 0' }]),
    });
    const direct = await load(dir);
    const json = await load(dir, { fastPath: false });
    const events = (s: Store): unknown[] => Array.from({ length: s.EntityEvent.rowCount }, (_, row) => s.EntityEvent.record(row, undefined, NOW));
    expect(events(direct)).toEqual(events(json));
    expect(direct.EntityEvent.rowCount).toBe(2 * keys.length + 1);
    for (let row = 0; row < keys.length; row++) {
      expect(direct.EntityEvent.value(row, 'ResourceRecordUrl')).toBe(recordUrl('Property', keys[row]));
      expect(direct.EntityEvent.value(keys.length + row, 'ResourceRecordUrl')).toBe(recordUrl('Media', `m ${keys[row]}`));
    }
    expectSameBytes(json, direct, 'EntityEvent from columns');
  });

  it('writes the log from the columns as the JSON records would when the sources are text, and with no event', async () => {
    // 72,000 distinct sources: Property keeps them as text, and so does the log past 65,535 of them
    const n = 80_000;
    const property = Array.from({ length: n }, (_, i) => listing(`L${i}`, { OriginatingSystemName: i % 10 === 0 ? null : `MLS ${i}` }));
    const media = Array.from({ length: 300 }, (_, i) => ({ MediaKey: `M${i}`, ResourceName: 'Property', ResourceRecordKey: `L${i * 7}`, Order: 1 }));
    const dir = dataDir({ 'Property.jsonl': jsonl(property), 'Media.jsonl': jsonl(media) });
    const direct = await load(dir);
    expect(direct.Property.column('OriginatingSystemName')?.kind).toBe('text');
    expect(direct.EntityEvent.column('OriginatingSystemName')?.kind).toBe('text');
    expectSameBytes(await load(dir, { fastPath: false }), direct, 'text sources');
    const empty = dataDir({ 'Property.jsonl': '' });
    expect((await load(empty)).EntityEvent.rowCount).toBe(0);
    expectSameBytes(await load(empty, { fastPath: false }), await load(empty), 'no event');
  });
});
