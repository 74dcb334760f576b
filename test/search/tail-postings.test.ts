/**
 * The live tail's posting lists in shared chunks (`TailPostingArena`) against a plain model: lists
 * that grow through many moves, a list larger than a chunk, lists made after others moved, and
 * reads bounded by every row count a view could have.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { TailPostingArena, type TailPostings } from '../../src/search/tail-postings.js';

type Model = Map<number, Array<[row: number, tf: number]>>;

function entries(p: TailPostings | null): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  if (p !== null) for (let i = p.start; i < p.end; i++) out.push([p.rows[i], p.tfs[i]]);
  return out;
}

function expectSame(arena: TailPostingArena, model: Model, ids: readonly number[], bounds: readonly number[]): void {
  for (const id of ids) {
    const list = model.get(id) ?? [];
    for (const bound of bounds) {
      const want = list.filter(([row]) => row < bound);
      expect(entries(arena.read(id, bound)), `term ${id} below row ${bound}`).toEqual(want);
      expect(arena.count(id, bound)).toBe(want.length);
      if (want.length === 0) expect(arena.read(id, bound)).toBeNull();
    }
  }
}

describe('TailPostingArena', () => {
  it('reads no postings for a term it never had', () => {
    const arena = new TailPostingArena();
    expect(arena.read(0, 100)).toBeNull();
    expect(arena.count(5, 100)).toBe(0);
    arena.push(3, 10, 1);
    expect(arena.read(2, 100)).toBeNull();
    expect(arena.read(1_000_000, 100)).toBeNull();
    expect(entries(arena.read(3, 100))).toEqual([[10, 1]]);
    expect(arena.read(3, 10)).toBeNull();
  });

  it('keeps a list larger than a chunk, moved many times among small ones', () => {
    const arena = new TailPostingArena();
    const model: Model = new Map();
    const push = (id: number, row: number, tf: number): void => {
      arena.push(id, row, tf);
      const list = model.get(id) ?? [];
      list.push([row, tf]);
      model.set(id, list);
    };
    // term 7 in every row (200,000 postings: more than a chunk); terms 0-999 in every 97th row
    for (let row = 0; row < 200_000; row++) {
      push(7, row, (row % 5) + 1);
      if (row % 97 === 0) push(row % 1000, row, 2);
    }
    expectSame(arena, model, [7, 0, 1, 7 + 97, 999, 500], [0, 1, 2, 65_535, 65_536, 65_537, 131_072, 199_999, 200_000, 1 << 30]);
  });

  it('answers as a model of per-term lists for any order of appends (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 0xffff })), { maxLength: 600 }),
        (appends) => {
          const arena = new TailPostingArena();
          const model: Model = new Map();
          let row = 0;
          // each append is (term, rows to skip, tf): rows only grow, so every list stays ascending
          for (const [id, skip, tf] of appends) {
            row += skip;
            arena.push(id, row, tf);
            const list = model.get(id) ?? [];
            list.push([row, tf]);
            model.set(id, list);
          }
          const bounds = [0, 1, Math.floor(row / 3), Math.floor(row / 2), row, row + 1];
          expectSame(
            arena,
            model,
            Array.from({ length: 42 }, (_, i) => i),
            bounds,
          );
        },
      ),
      { seed: 18, numRuns: 300 },
    );
  });
});
