/**
 * Arrays with room (src/store/append/growable.ts): a view of `n` zeroed elements whose whole array
 * has room after it, which the first Backing over the view adopts (appending in place) and a
 * second one copies. A `RoomArena` carves them out of shared buffers: each view stays within its
 * own slice (aligned for its element type, a new buffer when one is full, a large array made on
 * its own), so appending into one never writes another.
 */
import { describe, expect, it } from 'vitest';
import { Backing, ByteBacking, RoomArena, withRoom } from '../../src/store/append/growable.js';

describe('arrays with room', () => {
  it('a view with room after it, adopted by the first backing and copied by a second', () => {
    const view = withRoom(Uint32Array, 100);
    expect(view.length).toBe(100);
    expect(view.every((x) => x === 0)).toBe(true);
    const first = new Backing(view);
    expect(first.array.length).toBeGreaterThan(100);
    expect(first.room(100, 110)).toBe(first.array); // in place: the room was there
    const second = new Backing(view);
    expect(second.array).toBe(view); // not adopted twice
    expect(second.room(100, 110)).not.toBe(view);
  });

  it('an arena carves aligned, disjoint views from a shared buffer, and appends stay in their slices', () => {
    const arena = new RoomArena(1 << 20);
    const bytes = arena.bytesWithRoom(3);
    const u16 = arena.withRoom(Uint16Array, 1500); // 1,687 elements with room: 3,374 bytes
    const f64 = arena.withRoom(Float64Array, 5);
    const i32 = arena.withRoom(Int32Array, 9);
    expect(f64.buffer).toBe(u16.buffer);
    expect(f64.buffer).toBe(bytes.buffer);
    expect(f64.byteOffset % 8).toBe(0);
    expect(i32.byteOffset % 4).toBe(0);
    // each one filled to the end of its room through its backing: no other view changes
    const wholes = [new ByteBacking(bytes).bytes, new Backing(f64).array, new Backing(u16).array, new Backing(i32).array];
    for (const w of wholes) expect(w.buffer).toBe(f64.buffer);
    wholes.forEach((w, k) => w.fill(k + 1));
    wholes.forEach((w, k) => expect(Array.from(w).every((x) => x === k + 1)).toBe(true));
    const ranges = wholes.map((w) => [w.byteOffset, w.byteOffset + w.byteLength]).sort((a, b) => a[0] - b[0]);
    for (let k = 1; k < ranges.length; k++) expect(ranges[k][0]).toBeGreaterThanOrEqual(ranges[k - 1][1]);
  });

  it('an arena starts a new buffer when one is full, and makes a large array on its own', () => {
    const arena = new RoomArena(64 << 10);
    const a = arena.withRoom(Float64Array, 1500); // 1,687 elements with room: 13.5 KB
    const b = arena.withRoom(Float64Array, 1500);
    const c = arena.withRoom(Float64Array, 1500);
    const d = arena.withRoom(Float64Array, 1500);
    const e = arena.withRoom(Float64Array, 1500); // the fifth no longer fits in 64 KB
    expect(new Set([a.buffer, b.buffer, c.buffer, d.buffer]).size).toBe(1);
    expect(e.buffer).not.toBe(a.buffer);
    const large = arena.withRoom(Float64Array, 4000); // over a quarter of a buffer
    expect(large.buffer.byteLength).toBe(4500 * 8); // its own array: 4,000 elements and 1/8 room
    expect(large.buffer).not.toBe(e.buffer);
    for (const v of [a, b, c, d, e, large]) expect(v.every((x) => x === 0)).toBe(true);
  });
});
