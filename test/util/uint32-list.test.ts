import { describe, expect, it } from 'vitest';
import { Uint32List } from '../../src/util/uint32-list.js';

describe('Uint32List', () => {
  it('keeps every number pushed, in order, past its first capacity', () => {
    const list = new Uint32List(2);
    const pushed: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const v = (i * 2654435761) >>> 0;
      list.push(v);
      pushed.push(v);
    }
    expect(list.length).toBe(1000);
    expect(Array.from(list.done())).toEqual(pushed);
  });

  it('gives a view when the array is at least half full and a copy of the numbers otherwise', () => {
    const full = new Uint32List(4);
    for (const v of [1, 2, 3]) full.push(v);
    const view = full.done();
    expect(Array.from(view)).toEqual([1, 2, 3]);
    expect(view.buffer).toBe(full.array.buffer);

    const sparse = new Uint32List(64);
    sparse.push(7);
    const copy = sparse.done();
    expect(Array.from(copy)).toEqual([7]);
    expect(copy.buffer).not.toBe(sparse.array.buffer);
    expect(copy.buffer.byteLength).toBe(4);
  });

  it('gives an empty array when nothing was pushed', () => {
    expect(new Uint32List(0).done().length).toBe(0);
    expect(new Uint32List().done().length).toBe(0);
  });
});
