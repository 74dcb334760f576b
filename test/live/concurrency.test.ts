/**
 * Concurrency: queries during a large change see all of it or none of it. A change is built in
 * steps with check points every few records and rows, and the event loop gets a turn at a check
 * point once the step budget is used; here the budget is 0 (a turn at every check point), so
 * queries issued from setImmediate turns run while it applies deterministically (the number of
 * turns follows from the record count, not from timing). Every query answered while the change was in
 * flight must show the old data entirely or the new data entirely, and the one its generation
 * says; a change that fails leaves every concurrent and later query on the old data; changes
 * issued back to back apply one after the other, in the order asked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setStepBudgetMs } from '../../src/util/steps.js';
import type { Engine } from '../../src/engine.js';
import { CHUNK_RECORDS, type ChangeOperation } from '../../src/live/change.js';
import { dataSetOf, generated, keysOf, openEngine, rejectionOf, type DataSet, type Listing, type Rec } from './helpers.js';

const BASE = generated(1000, 'concurrency', { mediaPerListing: 1 });
/** New listings (keys after the base ones), with their Media. */
const ADDED = generated(2000, 'concurrency', { from: 1000, mediaPerListing: 1 });
const DATA: DataSet = dataSetOf(BASE);
const MARKER = 'Markerville';
/** A word no generated listing has: every replaced and every added listing carries it. */
const WORD = 'zanzibarite';
const REMOVED = BASE.slice(0, 50);
const SOURCES = ['HAR', 'NWMLS'];

let budgetBefore: number;
beforeAll(() => {
  budgetBefore = setStepBudgetMs(0);
});
afterAll(() => {
  setStepBudgetMs(budgetBefore);
});

const keyOf = (l: Listing): string => l.property.ListingKey as string;
const marked = (r: Rec): Rec => ({ ...r, City: MARKER, PublicRemarks: `${String(r.PublicRemarks ?? '')} ${WORD}`.trim() });

/**
 * The large change: every base listing replaced with the marker, 2,000 listings added with their
 * Media, then 50 of the replaced listings removed, as one apply() of many chunks.
 */
const BIG: ChangeOperation[] = [
  { resource: 'Property', upsert: BASE.map((l) => marked(l.property)) },
  { resource: 'Property', upsert: ADDED.map((l) => marked(l.property)) },
  { resource: 'Media', upsert: ADDED.flatMap((l) => l.media) },
  { resource: 'Property', remove: REMOVED.map(keyOf) },
];
const BIG_RECORDS = BASE.length + ADDED.length + ADDED.flatMap((l) => l.media).length;

/** Listings whose expansions are watched: one replaced, one added, one removed by the change (each with Media). */
const replaced = BASE.slice(REMOVED.length).find((l) => l.media.length > 0)!;
const added = ADDED.find((l) => l.media.length > 0)!;
const removed = REMOVED.find((l) => l.media.length > 0)!;

const count = (engine: Engine, resource: 'Property' | 'Media', filter: string, sources?: string[]): number =>
  engine.query(resource, `${filter ? `$filter=${filter}&` : ''}$count=true&$top=0`, { sources })['@odata.count']!;

/** What one synchronous burst of queries sees (they cannot straddle a publication: no await between them). */
function observe(engine: Engine): Rec {
  const expanded = (l: Listing): Rec[] =>
    engine.query('Property', `$filter=ListingKey eq '${keyOf(l)}'&$select=ListingKey,City&$expand=Media($select=MediaKey)`).value;
  return {
    generation: engine.generation,
    listings: count(engine, 'Property', ''),
    marked: count(engine, 'Property', `City eq '${MARKER}'`),
    notMarked: count(engine, 'Property', `City ne '${MARKER}'`),
    word: count(engine, 'Property', `search.text(KeywordSearchText,'${WORD}')`),
    ranked: keysOf(engine.query('Property', `$filter=search.text(KeywordSearchText,'${WORD} pool',1)&$orderby=relevance desc&$select=ListingKey&$top=8`)),
    byPrice: keysOf(engine.query('Property', '$orderby=ListPrice desc&$select=ListingKey&$top=8')),
    media: count(engine, 'Media', ''),
    visible: count(engine, 'Property', '', SOURCES),
    visibleMedia: count(engine, 'Media', '', SOURCES),
    cities: engine.query('Property', `$apply=groupby((City),aggregate($count as n))&$filter=City eq '${MARKER}'&$top=5`).value,
    replaced: expanded(replaced),
    added: expanded(added),
    removed: expanded(removed),
    has: [engine.has('Property', keyOf(added)), engine.has('Property', keyOf(removed))],
  };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Starts `change` (not awaited) and observes the engine at every event-loop turn until it settles. */
async function observeWhile(
  engine: Engine,
  change: () => Promise<unknown>,
  look: (engine: Engine) => Rec = observe,
): Promise<{ seen: Rec[]; outcome: PromiseSettledResult<unknown> }> {
  const seen: Rec[] = [];
  let settled = false;
  const running = Promise.allSettled([change()]).then(([outcome]) => {
    settled = true;
    return outcome;
  });
  while (!settled) {
    await turn();
    seen.push(look(engine));
  }
  return { seen, outcome: await running };
}

/** An observation without its generation (a compaction publishes the same data under a new one). */
const data = (s: Rec): Rec => ({ ...s, generation: undefined });

describe('queries during a large change see all of it or none of it', () => {
  let engine: Engine;
  let before: Rec;

  beforeAll(async () => {
    // no compaction of its own: the generations are the changes' (compaction is tested below)
    engine = await openEngine(DATA, { compactFraction: false });
    before = observe(engine);
  });

  it('the change spans many chunks', () => {
    expect(BIG_RECORDS / CHUNK_RECORDS).toBeGreaterThan(8);
    expect(before).toMatchObject({ generation: 0, listings: BASE.length, marked: 0, word: 0, has: [false, true] });
    expect((before.removed as Rec[]).length).toBe(1);
  });

  it('a failing large change: every concurrent query and every later one answers from the old data', async () => {
    // the bad record comes last, in the change's last chunk: all the others were read and appended first
    const failing: ChangeOperation[] = [
      ...BIG,
      {
        resource: 'Media',
        upsert: [
          ...ADDED.slice(0, 600).flatMap((l) => l.media.map((m) => ({ ...m, MediaKey: `${m.MediaKey as string}-again` }))),
          { ...added.media[0], MediaKey: 'ORPHAN', ResourceRecordKey: keyOf(removed) },
        ],
      },
    ];
    const { seen, outcome } = await observeWhile(engine, () => engine.apply(failing));
    expect(outcome.status).toBe('rejected');
    expect(((outcome as PromiseRejectedResult).reason as { code: string }).code).toBe('MissingParent');
    expect(seen.length).toBeGreaterThan(BIG_RECORDS / CHUNK_RECORDS);
    for (const s of seen) expect(s).toEqual(before);
    expect(observe(engine)).toEqual(before);
  });

  let after: Rec;
  it('a large change: each concurrent query sees the old data or the new data, as its generation says', async () => {
    const { seen, outcome } = await observeWhile(engine, () => engine.apply(BIG));
    expect(outcome).toEqual({ status: 'fulfilled', value: { generation: 1, upserted: BIG_RECORDS, removed: REMOVED.length, notFound: 0 } });
    after = observe(engine);
    const listings = BASE.length - REMOVED.length + ADDED.length;
    expect(after).toMatchObject({
      generation: 1,
      listings,
      marked: listings,
      notMarked: 0,
      word: listings,
      cities: [{ City: MARKER, n: listings }],
      has: [true, false],
      removed: [],
    });
    expect((after.ranked as string[]).length).toBe(8);
    expect(after.replaced).toEqual([{ ListingKey: keyOf(replaced), City: MARKER, Media: replaced.media.map((m) => ({ MediaKey: m.MediaKey })) }]);
    expect(after.added).toEqual([{ ListingKey: keyOf(added), City: MARKER, Media: added.media.map((m) => ({ MediaKey: m.MediaKey })) }]);
    // queries ran while the change was in flight, and both sides were seen
    const old = seen.filter((s) => s.generation === 0);
    expect(old.length).toBeGreaterThan(BIG_RECORDS / CHUNK_RECORDS);
    for (const s of seen) expect(s).toEqual(s.generation === 0 ? before : after);
    expect(seen[seen.length - 1]).toEqual(after);
  });

  it('a compaction runs in steps between queries: every concurrent query answers as before it', async () => {
    const { seen, outcome } = await observeWhile(engine, () => engine.compact());
    expect(outcome.status).toBe('fulfilled');
    expect(engine.generation).toBe(2);
    expect(seen.filter((s) => s.generation === 1).length).toBeGreaterThan(0);
    for (const s of seen) expect(data(s)).toEqual(data(after));
    expect(data(observe(engine))).toEqual(data(after));
  });

  it('the same records upserted again publish a generation that answers the same', async () => {
    const summary = await engine.upsert(
      'Property',
      BASE.slice(REMOVED.length).map((l) => marked(l.property)),
    );
    expect(summary.generation).toBe(3);
    expect(data(observe(engine))).toEqual(data(after));
  });
});

describe('a compaction the engine starts itself after a large change', () => {
  it('queries see the change whole, then the same data compacted; a change asked meanwhile waits for it', async () => {
    const engine = await openEngine(DATA);
    const before = observe(engine);
    const { seen, outcome } = await observeWhile(engine, () => engine.apply(BIG));
    expect(outcome).toMatchObject({ status: 'fulfilled', value: { generation: 1 } });
    const after = observe(engine);
    for (const s of seen) expect(s).toEqual(s.generation === 0 ? before : after);
    // the compaction it started (dead and appended rows are far past a quarter of the tables)
    const during: Rec[] = [];
    for (let i = 0; engine.generation === 1 && i < 100_000; i++) {
      await turn();
      during.push(observe(engine));
    }
    expect(engine.generation).toBe(2);
    expect(during.filter((s) => s.generation === 1).length).toBeGreaterThan(0);
    for (const s of during) expect(data(s)).toEqual(data(after));
    // a change issued while a compaction runs applies after it
    const again = await observeWhile(engine, async () => {
      const compacting = engine.compact(); // nothing to do: generation 2 is compacted
      const change = engine.upsert('Property', [{ ...marked(replaced.property), ListPrice: 7 }]);
      await compacting;
      return change;
    });
    expect(again.outcome).toMatchObject({ status: 'fulfilled', value: { generation: 3 } });
    expect(engine.query('Property', `$filter=ListingKey eq '${keyOf(replaced)}'&$select=ListPrice`).value).toEqual([
      { ListingKey: keyOf(replaced), ListPrice: 7 },
    ]);
  });
});

describe("changes issued back to back (no compaction of the engine's own: generations are the changes)", () => {
  const l0 = BASE[100].property;
  const l1 = BASE[101].property;
  const price = (engine: Engine, key: string): unknown => engine.query('Property', `$filter=ListingKey eq '${key}'&$select=ListPrice`).value[0]?.ListPrice;

  it('apply one after the other, in the order asked: a later change sees what an earlier one added', async () => {
    const engine = await openEngine(DATA, { compactFraction: false });
    const fresh = ADDED[0];
    const changes = [
      engine.upsert('Property', [...ADDED.slice(0, 600).map((l) => l.property)]), // two chunks
      engine.upsert(
        'Media',
        fresh.media.map((m) => ({ ...m, Order: 99 })),
      ), // needs the listing the first one adds
      engine.upsert('Property', [{ ...l0, ListPrice: 1 }]),
      engine.upsert('Property', [{ ...l0, ListPrice: 2 }]),
      engine.remove('Property', [keyOf(fresh)]),
      engine.upsert('Property', [{ ...fresh.property, ListPrice: 3 }]), // back, without its Media (they went with it)
    ];
    const summaries = await Promise.all(changes);
    expect(summaries.map((s) => s.generation)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(summaries.map((s) => [s.upserted, s.removed])).toEqual([
      [600, 0],
      [fresh.media.length, 0],
      [1, 0],
      [1, 0],
      [0, 1],
      [1, 0],
    ]);
    expect(engine.generation).toBe(6);
    expect(price(engine, keyOf({ property: l0 } as Listing))).toBe(2);
    expect(price(engine, keyOf(fresh))).toBe(3);
    expect(count(engine, 'Media', `ResourceRecordKey eq '${keyOf(fresh)}'`)).toBe(0);
    expect(count(engine, 'Property', '')).toBe(BASE.length + 600);
  });

  it('a change that fails in the middle of the queue fails alone: the ones before and after it apply', async () => {
    const engine = await openEngine(DATA, { compactFraction: false });
    const first = engine.upsert('Property', [{ ...l0, ListPrice: 10 }]);
    const failing = engine.apply([
      { resource: 'Property', upsert: [{ ...l1, ListPrice: 20 }] },
      { resource: 'OpenHouse', upsert: [{ ...DATA.OpenHouse[0], OpenHouseKey: 'X', ListingKey: 'NO-SUCH-LISTING' }] },
    ]);
    const last = engine.upsert('Property', [{ ...l1, ListPrice: 30 }]);
    expect((await first).generation).toBe(1);
    expect((await rejectionOf(failing)).code).toBe('MissingParent');
    expect((await last).generation).toBe(2);
    expect([price(engine, l0.ListingKey as string), price(engine, l1.ListingKey as string)]).toEqual([10, 30]);
  });

  it('queries between queued changes see each published generation whole', async () => {
    const engine = await openEngine(DATA, { compactFraction: false }); // generations are the three changes
    // three large changes queued at once, each pricing every listing at its own price
    const prices = [111, 222, 333];
    const groups = (e: Engine): Rec => ({
      generation: e.generation,
      prices: e.query('Property', '$apply=groupby((ListPrice),aggregate($count as n))&$top=5000').value,
    });
    const start = groups(engine);
    expect((start.prices as Rec[]).length).toBeGreaterThan(100);
    const { seen, outcome } = await observeWhile(
      engine,
      () =>
        Promise.all(
          prices.map((p) =>
            engine.upsert(
              'Property',
              BASE.map((l) => ({ ...l.property, ListPrice: p })),
            ),
          ),
        ),
      groups,
    );
    expect(outcome).toMatchObject({ status: 'fulfilled' });
    const want = (g: number): Rec => (g === 0 ? start : { generation: g, prices: [{ ListPrice: prices[g - 1], n: BASE.length }] });
    for (const s of seen) expect(s).toEqual(want(s.generation as number));
    // every generation was read by some query while the changes were applied
    expect(new Set(seen.map((s) => s.generation))).toEqual(new Set([0, 1, 2, 3]));
  });
});
