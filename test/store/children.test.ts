import { describe, expect, it } from 'vitest';
import { ChildIndex, ChildOverlay } from '../../src/store/children.js';

/** Listing p of the base has children [10p, 10p + 1]. */
const base = (listings: number): ChildIndex => {
  const offsets = Uint32Array.from({ length: listings + 1 }, (_, p) => 2 * p);
  const rows = Uint32Array.from({ length: 2 * listings }, (_, i) => 10 * (i >> 1) + (i & 1));
  return new ChildIndex(offsets, rows);
};

describe('children overlays', () => {
  it('stack a layer per change and flatten every eighth in steps, the newest list of each listing winning', () => {
    const listings = 3_000;
    let children: ChildIndex | ChildOverlay = base(listings);
    const expected = new Map<number, number[]>();
    let flattenings = 0;
    for (let change = 1; change <= 17; change++) {
      // each change rewrites 400 listings' lists, overlapping the changes before
      const changed = new Map<number, Uint32Array>();
      for (let k = 0; k < 400; k++) {
        const p = (change * 137 + k * 7) % listings;
        const list = [100_000 * change + p];
        changed.set(p, Uint32Array.from(list));
        expected.set(p, list);
      }
      const steps = ChildOverlay.overSteps(children, changed);
      let checkPoints = 0;
      let next = steps.next();
      for (; !next.done; next = steps.next()) checkPoints++;
      const overlay = next.value;
      if (overlay.depth === 1 && change > 1) {
        flattenings++;
        // a flattening copies every listing changed so far, with a check point every 512
        expect(checkPoints).toBeGreaterThanOrEqual(Math.floor((expected.size - 400) / 512));
      } else expect(checkPoints).toBe(0);
      expect(overlay.depth).toBeLessThanOrEqual(8);
      expect(overlay).toEqual(ChildOverlay.over(children, changed));
      for (let p = 0; p < listings; p++) {
        expect(Array.from(overlay.childrenOf(p))).toEqual(expected.get(p) ?? [10 * p, 10 * p + 1]);
      }
      children = overlay;
    }
    expect(flattenings).toBe(2);
  });
});
