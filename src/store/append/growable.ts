/**
 * Growable arrays behind the columns of every generation: elements (and bits) below an older
 * view's end are never written again, so a generation handed out stays valid while appends write
 * past it; a backing array that runs out of room is replaced by a larger copy. An array the
 * appender did not allocate (the loaded segment's, maybe a view into a shared buffer) is copied
 * before the first write, unless it was made with room for the appender (`withRoom`: a
 * compaction's columns, an engine snapshot's large arrays), which the first backing over it
 * adopts.
 *
 * Every array made here is a view of a SharedArrayBuffer (`sharedArray`, `sharedBytes`), so that a
 * compaction on a worker thread (src/live/compact-thread.ts) reads a generation's columns where
 * they are instead of a copy of them; the worker's arrays come back the same way.
 */
import { QueryError } from '../../errors.js';
import { clearBit, getBit, setBit, wordsFor } from '../../util/bits.js';
import type { Steps } from '../../util/steps.js';

export type Elements = Float64Array | Uint32Array | Uint16Array | Int32Array;

const MIN_CAPACITY = 1024;
/** Elements (or bytes) a reserving copy moves between two check points (about 128 KB: well under the step budget). */
const COPY_STEP = 1 << 15;
const COPY_STEP_BYTES = 1 << 17;
const MAX_BYTES = 0xffff_ffff;

/** Elements for `needed`: an array of ours doubles; the first copy of a loaded one gets 1/8 more. */
export function capacity(owned: boolean, length: number, needed: number): number {
  return owned ? Math.max(needed, length * 2) : Math.max(needed + (needed >>> 3), MIN_CAPACITY);
}

/**
 * The whole arrays behind views made with room (`withRoom`, `bytesWithRoom`), until a backing
 * adopts one: only the first backing made over a view may write past it (a second one, over a
 * view two columns share, copies as usual).
 */
const ROOM = new WeakMap<object, ArrayBufferView>();

/**
 * A zeroed array of `n` elements that is a view of one with room after it (as the first copy of a
 * loaded array gets, 1/8 more): the first Backing over the view takes the whole array as its own
 * instead of copying, so the first change after a compaction (or a snapshot's load) copies
 * nothing. Older generations read only their own rows, so nothing they read is written.
 */
export function withRoom<T extends Elements | Uint8Array>(make: ArrayMaker<T>, n: number): T {
  return SEPARATE.withRoom(make, n);
}

/** `withRoom` for text bytes. */
export function bytesWithRoom(n: number): Buffer {
  return SEPARATE.bytesWithRoom(n);
}

/** A typed array's constructor: of a length, or a view of a buffer. */
export interface ArrayMaker<T> {
  new (n: number): T;
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): T;
  readonly BYTES_PER_ELEMENT: number;
}

/**
 * Arrays with room (as `withRoom` makes them) carved out of a few large buffers. V8 counts every new
 * ArrayBuffer's bytes as memory outside its heap and starts a collection whenever 64 MB more of
 * it has been made: a compaction that made each column's arrays on their own (about 600 MB at 100k
 * listings, ten times that at 1M) paid a mark-compact for every 64 MB of them. A buffer lives as
 * long as any array carved from it, so an arena is for arrays that live and die together (the
 * tables of one compaction). An array larger than a quarter of a buffer is made on its own.
 */
export class RoomArena {
  private buffer: SharedArrayBuffer | null = null;
  private used = 0;

  /** @param bufferBytes the size of each buffer (0: every array on its own, as `withRoom`). */
  constructor(private readonly bufferBytes: number) {}

  withRoom<T extends Elements | Uint8Array>(make: ArrayMaker<T>, n: number): T {
    const whole = this.take(make, capacity(false, 0, n));
    const view = whole.subarray(0, n) as T;
    ROOM.set(view, whole);
    return view;
  }

  /** `withRoom` for text bytes. */
  bytesWithRoom(n: number): Buffer {
    const size = Math.min(MAX_BYTES, capacity(false, 0, n));
    const carved = this.carve(Uint8Array, size);
    const whole = carved === null ? sharedBytes(size) : Buffer.from(carved.buffer, carved.byteOffset, size);
    const view = whole.subarray(0, n);
    ROOM.set(view, whole);
    return view;
  }

  private take<T>(make: ArrayMaker<T>, length: number): T {
    return this.carve(make, length) ?? sharedArray(make, length);
  }

  /** `length` elements from the current buffer (a new one when it is full), or null for an array to make on its own. */
  private carve<T>(make: ArrayMaker<T>, length: number): T | null {
    const bytes = length * make.BYTES_PER_ELEMENT;
    if (bytes * 4 > this.bufferBytes) return null;
    let at = (this.used + 7) & ~7;
    if (this.buffer === null || at + bytes > this.buffer.byteLength) {
      this.buffer = new SharedArrayBuffer(this.bufferBytes);
      at = 0;
    }
    this.used = at + bytes;
    return new make(this.buffer, at, length);
  }
}

/** Each array on its own. */
const SEPARATE = new RoomArena(0);

/** A zeroed array of `length` elements over a SharedArrayBuffer of its own. */
export function sharedArray<T>(make: ArrayMaker<T>, length: number): T {
  return new make(new SharedArrayBuffer(length * make.BYTES_PER_ELEMENT), 0, length);
}

/** A zeroed Buffer of `size` bytes over a SharedArrayBuffer of its own. */
export function sharedBytes(size: number): Buffer {
  return Buffer.from(new SharedArrayBuffer(size));
}

/** The whole array behind a view made with room, or the view itself (a compaction's arrays, handed to another thread with their room). */
export function wholeOf<T extends object>(view: T): T {
  return (ROOM.get(view) as T | undefined) ?? view;
}

/** Gives `view` the room of `whole` (an array with room come from another thread, with the whole array behind it). */
export function giveRoom(view: ArrayBufferView, whole: ArrayBufferView): void {
  ROOM.set(view, whole);
}

/** A Buffer over the bytes of `bytes` that takes over the room `withRoom` gave them (a snapshot's text bytes). */
export function bufferOf(bytes: Uint8Array): Buffer {
  const out = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const whole = adopt(bytes);
  if (whole !== undefined) ROOM.set(out, Buffer.from(whole.buffer, whole.byteOffset, whole.byteLength));
  return out;
}

/** The whole array behind a view made with room, taken by the first caller (undefined after, or for any other array). */
function adopt<T extends object>(view: T): T | undefined {
  const whole = ROOM.get(view);
  if (whole !== undefined) ROOM.delete(view);
  return whole as T | undefined;
}

/**
 * The array behind one column array of every generation. Elements [0, used) are final (older
 * views cover them); appends write beyond. An array the appender did not allocate (the loaded
 * segment's) is never written: the first `room` copies it.
 */
export class Backing<T extends Elements> {
  private owned = false;
  constructor(public array: T) {
    const whole = adopt(array);
    if (whole !== undefined) {
      this.array = whole;
      this.owned = true;
    }
  }

  /** The array, with room for `needed` elements, the first `used` kept. */
  room(used: number, needed: number): T {
    if (this.owned && needed <= this.array.length) return this.array;
    return this.copy(used, needed, this.array.constructor as ArrayMaker<T>);
  }

  /**
   * `room` as steps (reserving before an append, when nothing writes the array): the copy in
   * slices with a check point after each, the new array taken only at the end.
   */
  *roomSteps(used: number, needed: number): Steps<void> {
    if (this.owned && needed <= this.array.length) return;
    const next = sharedArray(this.array.constructor as ArrayMaker<T>, capacity(this.owned, this.array.length, needed));
    for (let a = 0; a < used; a += COPY_STEP) {
      next.set(this.array.subarray(a, Math.min(used, a + COPY_STEP)), a);
      yield;
    }
    this.array = next;
    this.owned = true;
  }

  /** Codes past 65,535: the same elements in a Uint32Array of room for `needed`. */
  widen(this: Backing<Uint16Array | Uint32Array>, used: number, needed: number): void {
    if (this.array instanceof Uint16Array) this.copy(used, needed, Uint32Array);
  }

  private copy<U extends Elements>(used: number, needed: number, make: ArrayMaker<U>): U {
    const next = sharedArray(make, capacity(this.owned, this.array.length, needed));
    next.set(this.array.subarray(0, used));
    (this as unknown as Backing<U>).array = next;
    this.owned = true;
    return next;
  }
}

/** A bitmap behind every generation's view: bits above a view's row count may change. */
export class Bits {
  private readonly words: Backing<Uint32Array>;
  constructor(bitmap: Uint32Array) {
    this.words = new Backing(bitmap);
  }

  room(used: number, needed: number): void {
    this.words.room(wordsFor(used), wordsFor(needed));
  }

  roomSteps(used: number, needed: number): Steps<void> {
    return this.words.roomSteps(wordsFor(used), wordsFor(needed));
  }

  /** Bits [at, at + m) from src[0, m) (every bit written, so nothing stale survives). */
  copy(src: Uint32Array, m: number, at: number): void {
    const w = this.words.array;
    for (let r = 0; r < m; r++) {
      if (getBit(src, r)) setBit(w, at + r);
      else clearBit(w, at + r);
    }
  }

  clear(at: number, m: number): void {
    const w = this.words.array;
    for (let r = 0; r < m; r++) clearBit(w, at + r);
  }

  put(row: number, on: boolean): void {
    if (on) setBit(this.words.array, row);
    else clearBit(this.words.array, row);
  }

  view(n: number): Uint32Array {
    return this.words.array.subarray(0, wordsFor(n));
  }
}

/** Text bytes: as Backing, for a Buffer. */
export class ByteBacking {
  private owned = false;
  constructor(public bytes: Buffer) {
    const whole = adopt(bytes);
    if (whole !== undefined) {
      this.bytes = whole;
      this.owned = true;
    }
  }

  room(used: number, needed: number): Buffer {
    if (this.owned && needed <= this.bytes.length) return this.bytes;
    if (needed > MAX_BYTES) throw new QueryError('DataTooLarge', 'A text column holds more than 4 GiB of text.');
    const next = sharedBytes(Math.min(MAX_BYTES, capacity(this.owned, this.bytes.length, needed)));
    this.bytes.copy(next, 0, 0, used);
    this.bytes = next;
    this.owned = true;
    return next;
  }

  /** `room` as steps (see Backing.roomSteps). */
  *roomSteps(used: number, needed: number): Steps<void> {
    if (this.owned && needed <= this.bytes.length) return;
    if (needed > MAX_BYTES) throw new QueryError('DataTooLarge', 'A text column holds more than 4 GiB of text.');
    const next = sharedBytes(Math.min(MAX_BYTES, capacity(this.owned, this.bytes.length, needed)));
    for (let a = 0; a < used; a += COPY_STEP_BYTES) {
      this.bytes.copy(next, a, a, Math.min(used, a + COPY_STEP_BYTES));
      yield;
    }
    this.bytes = next;
    this.owned = true;
  }
}
