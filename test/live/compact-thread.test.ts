/**
 * Compaction on a worker thread (src/live/compact-thread.ts), past COMPACT_THREAD_MIN_ROWS
 * listings: it makes byte for byte what a compaction on the event loop makes (a snapshot of the
 * changed engine is its compacted image, made on the event loop), the next change appends into the
 * arrays that came back, and a second compaction, over arrays shared with the thread, matches too;
 * the impact orders of the terms searched before a compaction are sorted on the thread for the new
 * index, so the first search after it sorts none on the event loop, and the new address index's
 * lexicon is built before the publish when the old one's was in use; and the arrays the thread made
 * come back in shared memory, which V8 does not count against the event loop's heap.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Engine as EngineType } from '../../src/engine.js';
import type { Generations } from '../../src/live/generations.js';
import type { ChildIndex as ChildIndexType } from '../../src/store/children.js';

const onEventLoop = vi.hoisted(() => ({ compactions: 0 }));
vi.mock('../../src/live/compact.js', async (original) => (await import('./count-compactions.js')).countedOnEventLoop(await original(), onEventLoop));

const { Engine } = await import('../../src/engine.js');
const { COMPACT_THREAD_MIN_ROWS, compactOnThread } = await import('../../src/live/compact-thread.js');
const { compactInputSteps, EVENT_RETENTION_MS } = await import('../../src/live/compact.js');
const { runNow } = await import('../../src/util/steps.js');
const { SEARCH_FIELDS } = await import('../../src/schema/search-fields.js');
const { CHILD_RESOURCES, RESOURCE_NAMES } = await import('../../src/schema/types.js');
const { dataset } = await import('../replicate/helpers.js');
const { answers, change } = await import('./compaction-cases.js');
const { IMPACT_MIN_POSTINGS, impactOrdersSorted } = await import('../../src/search/ranked.js');
const { lexiconsBuilt } = await import('../../src/search/lexicon.js');

const now = (): Date => new Date('2025-06-01T00:00:00Z');

describe('compaction on a worker thread', () => {
  const base = dataset(COMPACT_THREAD_MIN_ROWS + 100, 'compact-thread');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'reso-compact-thread-'));
  const file = (name: string): string => path.join(dir, `${name}.snapshot`);
  let threaded: EngineType;
  let reference: EngineType;

  beforeAll(async () => {
    threaded = await Engine.open({ data: base, now, compactFraction: false });
    reference = await Engine.open({ data: base, now, compactFraction: false });
    for (const e of [threaded, reference]) await change(e, base);
  }, 120_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('makes exactly what the event loop makes, and answers as before', async () => {
    const before = answers(threaded);
    reference.save(file('reference-1')); // compacts the changed generation on the event loop
    const generation = threaded.generation;
    onEventLoop.compactions = 0;
    await threaded.compact();
    expect(onEventLoop.compactions).toBe(0);
    expect(threaded.generation).toBe(generation + 1);
    expect(threaded.compactions.count).toBe(1);
    expect(answers(threaded)).toEqual(before);
    threaded.save(file('threaded-1')); // the compacted generation as it is
    expect(readFileSync(file('threaded-1')).equals(readFileSync(file('reference-1')))).toBe(true);
  }, 120_000);

  it('takes the next change into the arrays that came back, and compacts again over arrays it shares with the thread', async () => {
    const more = dataset(200, 'compact-thread-more');
    for (const e of [threaded, reference]) {
      await e.apply([
        { resource: 'Property', upsert: [...base.Property.slice(500, 700).map((p) => ({ ...p, ListPrice: 123_456 })), ...more.Property] },
        { resource: 'Media', upsert: more.Media },
        { resource: 'Property', remove: base.Property.slice(900, 950).map((p) => p.ListingKey as string) },
      ]);
    }
    expect(answers(threaded)).toEqual(answers(reference));
    onEventLoop.compactions = 0;
    await threaded.compact();
    expect(onEventLoop.compactions).toBe(0);
    expect(answers(threaded)).toEqual(answers(reference));
    threaded.save(file('threaded-2'));
    reference.save(file('reference-2'));
    expect(readFileSync(file('threaded-2')).equals(readFileSync(file('reference-2')))).toBe(true);
  }, 120_000);

  it('sorts the impact orders of the terms searched before it on the thread, and only those', async () => {
    const search = (term: string): string => `$filter=search.text(KeywordSearchText,'${term}')&$orderby=relevance desc&$top=10`;
    const keys = (term: string): string[] => threaded.query('Property', search(term)).value.map((r) => r.ListingKey as string);
    const postings = (term: string): number => threaded.query('Property', `${search(term)}&$count=true`)['@odata.count']!;
    // both terms are common enough to be walked in impact order
    expect(postings('kitchen')).toBeGreaterThanOrEqual(IMPACT_MIN_POSTINGS);
    expect(postings('updated')).toBeGreaterThanOrEqual(IMPACT_MIN_POSTINGS);
    await threaded.apply([{ resource: 'Property', remove: base.Property.slice(1000, 1100).map((p) => p.ListingKey as string) }]);
    const before = keys('kitchen');
    const sortedBefore = impactOrdersSorted();
    keys('kitchen');
    expect(impactOrdersSorted()).toBe(sortedBefore); // made once per index and term
    onEventLoop.compactions = 0;
    await threaded.compact();
    expect(onEventLoop.compactions).toBe(0);
    const afterCompaction = impactOrdersSorted();
    expect(keys('kitchen')).toEqual(before); // the same answer, from the order the thread sorted
    expect(impactOrdersSorted()).toBe(afterCompaction);
    keys('updated'); // not searched before the compaction: sorted here, on first use
    expect(impactOrdersSorted()).toBe(afterCompaction + 1);
  }, 120_000);

  it("builds the new address index's lexicon before it publishes when the old one's was in use, and only then", async () => {
    const street = String(base.Property[0].UnparsedAddress).split(' ').slice(0, 3).join(' ');
    const address = (e: EngineType): string[] =>
      e
        .query('Property', `$filter=search.text(RawAddressSearchText,'${street.slice(0, -1)}')&$orderby=relevance desc&$top=10`)
        .value.map((r) => r.ListingKey as string);
    const before = address(threaded); // a prefix of the last word: the lexicon is in use
    expect(before.length).toBeGreaterThan(0);
    await threaded.apply([{ resource: 'Property', remove: base.Property.slice(1100, 1200).map((p) => p.ListingKey as string) }]);
    const built = lexiconsBuilt();
    await threaded.compact();
    expect(lexiconsBuilt()).toBe(built + 1); // the address field's, the only one in use
    expect(address(threaded)).toEqual(before);
    expect(lexiconsBuilt()).toBe(built + 1); // the first address search after the compaction built none

    // an engine whose address lexicon was never used: its compaction builds none
    const small = dataset(300, 'compact-thread-lexicon');
    const unused = await Engine.open({ data: small, now, compactFraction: false });
    await unused.apply([{ resource: 'Property', remove: small.Property.slice(0, 10).map((p) => p.ListingKey as string) }]);
    const generation = unused.generation;
    await unused.compact();
    expect(unused.generation).toBe(generation + 1);
    expect(lexiconsBuilt()).toBe(built + 1);
  }, 120_000);

  it('hands back the arrays it made (postings, child groupings, row maps) in shared memory, not as plain buffers', async () => {
    await threaded.apply([{ resource: 'Property', remove: base.Property.slice(1200, 1300).map((p) => p.ListingKey as string) }]);
    const gen = (threaded as unknown as { generations: Generations }).generations.current;
    const input = runNow(compactInputSteps(gen.store, gen.access, { retentionMs: EVENT_RETENTION_MS, nowMs: now().getTime() }));
    const hotTerms = Object.fromEntries(SEARCH_FIELDS.map((f) => [f, ['kitchen']])) as Record<(typeof SEARCH_FIELDS)[number], string[]>;
    const done = await compactOnThread(gen.store, input, hotTerms);
    expect(done).not.toBeNull();
    const arrays: ArrayBufferView[] = [];
    for (const f of SEARCH_FIELDS) {
      const x = done!.indexes.search[f];
      arrays.push(x.offsets, x.rows, x.tfs, x.lengths);
    }
    for (const r of CHILD_RESOURCES) {
      const c = done!.store.children[r] as ChildIndexType;
      arrays.push(c.offsets, c.rows);
    }
    for (const r of RESOURCE_NAMES) arrays.push(done!.rows[r]);
    expect(arrays.filter((a) => a.byteLength > Buffer.poolSize).length).toBeGreaterThan(10);
    for (const a of arrays) if (a.byteLength > Buffer.poolSize) expect(a.buffer).toBeInstanceOf(SharedArrayBuffer);
  }, 120_000);
});
