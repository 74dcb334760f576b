/**
 * A change's records are the engine's to drop once its first step has read them (DESIGN.md,
 * "Change"): held until the change is published, they outlived the young generation's
 * collections and were promoted. Watched at every turn the change gives the event loop (a step
 * budget of 0: a turn at each check point), with a full collection at each: the records are alive
 * while they are read and collected before the later steps (children lists, carried structures,
 * search and point views) are done.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { Engine } from '../../src/engine.js';
import type { ChangeOperation } from '../../src/live/change.js';
import { setStepBudgetMs } from '../../src/util/steps.js';
import { dataSetOf, generated, openEngine } from './helpers.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const TURNS_APART = 25;
const BASE = generated(300, 'dropped', { mediaPerListing: 2 });
const ADDED = generated(200, 'dropped', { from: 300, mediaPerListing: 2 });

/**
 * Applies a change made in a function of its own (the test keeps only weak references to its
 * records) and tells, at each turn the change gives the event loop, after a full collection,
 * whether any of them is still alive (at every TURNS_APART-th turn).
 */
async function aliveAtEachTurn(engine: Engine): Promise<boolean[]> {
  const hand = (): { records: WeakRef<object>[]; applied: Promise<unknown> } => {
    const listings = [...BASE.slice(0, 150).map((l) => ({ ...l.property, ListPrice: 123_456 })), ...ADDED.map((l) => ({ ...l.property }))];
    const media = ADDED.flatMap((l) => l.media.map((m) => ({ ...m })));
    const operations: ChangeOperation[] = [
      { resource: 'Property', upsert: listings },
      { resource: 'Media', upsert: media },
    ];
    return { records: [listings[0], listings[listings.length - 1], media[0]].map((r) => new WeakRef(r)), applied: engine.apply(operations) };
  };
  const { records, applied } = hand();
  let done = false;
  void applied.then(() => (done = true));
  const alive: boolean[] = [];
  for (let turn = 0; !done; turn++) {
    await new Promise((resolve) => setImmediate(resolve));
    // a full collection at every turn would take minutes: at every TURNS_APART-th
    if (turn % TURNS_APART === 0) {
      gc();
      alive.push(records.some((r) => r.deref() !== undefined));
    }
  }
  await applied;
  return alive;
}

describe('a change drops its records once read', () => {
  it('collects the records before the change is published, while the caller keeps none', async () => {
    const engine = await openEngine(dataSetOf(BASE), { compactFraction: false });
    const was = setStepBudgetMs(0);
    let alive: boolean[];
    try {
      alive = await aliveAtEachTurn(engine);
    } finally {
      setStepBudgetMs(was);
    }
    // read at the first turns, gone well before the last: the steps after reading ran without them
    expect(alive[0]).toBe(true);
    const lastAlive = alive.lastIndexOf(true);
    expect(lastAlive).toBeLessThan(alive.length - 5);
    expect(alive.slice(lastAlive + 1).every((a) => !a)).toBe(true);
    // and the change is whole
    expect(engine.query('Property', '$filter=ListPrice eq 123456&$count=true&$top=0')['@odata.count']).toBe(150);
    expect(engine.query('Media', '$count=true&$top=0')['@odata.count']).toBe([...BASE, ...ADDED].reduce((n, l) => n + l.media.length, 0));
  });
});
