/**
 * Changes in time-budgeted steps: the event loop gets a turn at a change's check points once the
 * step budget is used. A change applied with a budget of 0 (a turn at every check point: records
 * read, merges of sorted permutations and key orders, children lists, search view slices, dead
 * bitmaps) must leave exactly the data and answers of the same change applied in one go (a budget
 * of Infinity), including the structures carried over from the generation before (sorted
 * permutations both ways, key order, per-value bitsets, counts); and a query run at any of those
 * turns reads the previous generation, whole, until the new one is published.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Engine } from '../../src/engine.js';
import type { ChangeOperation } from '../../src/live/change.js';
import { setStepBudgetMs } from '../../src/util/steps.js';
import { dataSetOf, generated, openEngine, type Rec } from './helpers.js';

const BASE = generated(400, 'steps', { mediaPerListing: 2 });
const ADDED = generated(300, 'steps', { from: 400, mediaPerListing: 2 });
const DATA = dataSetOf(BASE);
const keyOf = (r: Rec): string => r.ListingKey as string;

/** Replaces every other listing (new price and remarks), adds 300 with their Media, removes 40. */
const CHANGE: ChangeOperation[] = [
  {
    resource: 'Property',
    upsert: BASE.filter((_, i) => i % 2 === 0).map((l, i) => ({ ...l.property, ListPrice: 100_000 + i * 997, PublicRemarks: `quartzite kitchen ${i}` })),
  },
  { resource: 'Property', upsert: ADDED.map((l) => ({ ...l.property, PublicRemarks: `${String(l.property.PublicRemarks ?? '')} quartzite` })) },
  { resource: 'Media', upsert: ADDED.flatMap((l) => l.media) },
  {
    resource: 'Property',
    remove: BASE.slice(1, 81)
      .filter((_, i) => i % 2 === 0)
      .map((l) => keyOf(l.property)),
  },
];

/** Queries over every structure a change carries over or extends. */
const QUERIES: ReadonlyArray<readonly ['Property' | 'Media', string]> = [
  ['Property', '$orderby=ListPrice desc&$top=40&$select=ListingKey,ListPrice&$count=true'],
  ['Property', '$orderby=ListPrice&$top=40&$select=ListingKey,ListPrice'],
  ['Property', '$orderby=ModificationTimestamp desc,ListingKey&$top=30&$select=ListingKey'],
  ['Property', "$filter=StandardStatus eq 'Active' and City eq '" + String(BASE[0].property.City) + "'&$count=true&$top=0"],
  ['Property', "$filter=StandardStatus eq 'Active'&$count=true&$top=5&$select=ListingKey"],
  ['Property', `$filter=ListingId eq '${String(ADDED[3].property.ListingId)}'&$select=ListingKey`],
  ['Property', "$filter=search.text(KeywordSearchText,'quartzite kitchen')&$orderby=relevance desc&$top=25&$select=ListingKey&$count=true"],
  ['Property', "$filter=search.text(KeywordSearchText,'kitchen pool',1)&$orderby=relevance desc&$top=25&$select=ListingKey"],
  ['Property', `$filter=ListingKey eq '${keyOf(BASE[10].property)}'&$expand=Media($select=MediaKey)&$select=ListingKey,ListPrice`],
  ['Property', '$apply=groupby((City),aggregate($count as n))&$orderby=City'],
  ['Property', '$skip=200&$top=20&$select=ListingKey'],
  ['Media', '$count=true&$top=10&$orderby=MediaKey desc&$select=MediaKey'],
];

const answers = (engine: Engine): unknown[] =>
  QUERIES.map(([resource, q]) => {
    const r = engine.query(resource, q);
    return { value: r.value, count: r['@odata.count'] };
  });

/** An engine with the structures the queries build (so the change carries them over), then the change applied with `budgetMs`. */
async function changed(budgetMs: number): Promise<{ engine: Engine; before: unknown[]; turns: Array<{ generation: number; answers: unknown[] }> }> {
  const engine = await openEngine(DATA, { compactFraction: false });
  const before = answers(engine);
  const turns: Array<{ generation: number; answers: unknown[] }> = [];
  const was = setStepBudgetMs(budgetMs);
  try {
    let done = false;
    const applying = engine.apply(CHANGE).finally(() => (done = true));
    const watch = async (): Promise<void> => {
      while (!done) {
        turns.push({ generation: engine.generation, answers: answers(engine) });
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    await Promise.all([applying, watch()]);
  } finally {
    setStepBudgetMs(was);
  }
  return { engine, before, turns };
}

describe('a change in time-budgeted steps', () => {
  afterEach(() => void setStepBudgetMs(1));

  it('applied with a turn at every check point, answers exactly as applied in one go', async () => {
    const whole = await changed(Infinity);
    const stepped = await changed(0);
    expect(whole.engine.generation).toBe(1);
    expect(stepped.engine.generation).toBe(1);
    const want = answers(whole.engine);
    expect(answers(stepped.engine)).toEqual(want);
    // the change changed what the queries see (it is not a no-op), and structures built on the new generation agree too
    expect(want).not.toEqual(whole.before);
    const fresh = await openEngine(DATA, { compactFraction: false });
    await fresh.apply(CHANGE);
    expect(answers(fresh)).toEqual(want);
  });

  it('queries at every turn read the previous generation, whole, until the new one is published', async () => {
    const { engine, before, turns } = await changed(0);
    // many turns: at least one per few records read, and within the merges and search slices
    expect(turns.length).toBeGreaterThan(CHANGE.reduce((n, op) => n + ('upsert' in op ? op.upsert.length : 0), 0) / 8);
    const after = answers(engine);
    const old = turns.filter((t) => t.generation === 0);
    expect(old.length).toBeGreaterThan(turns.length - 3);
    for (const t of turns) expect(t.answers).toEqual(t.generation === 0 ? before : after);
  });

  it('applied in one go, gives the loop no turn', async () => {
    const { turns } = await changed(Infinity);
    expect(turns.length).toBeLessThanOrEqual(2);
  });
});
