/**
 * Unsigned 32-bit numbers (rows, term ids) gathered one by one into a typed array that doubles as
 * it fills. A JS array of numbers would do the same, but past about 32k entries each of its
 * backing stores is a large object, allocated in the old generation at once: query and change
 * temporaries that only a full collection frees (DESIGN.md, "Change": garbage and pauses).
 */
export class Uint32List {
  array: Uint32Array;
  length = 0;

  constructor(capacity = 64) {
    this.array = new Uint32Array(Math.max(1, capacity));
  }

  push(value: number): void {
    if (this.length === this.array.length) {
      const grown = new Uint32Array(this.length * 2);
      grown.set(this.array);
      this.array = grown;
    }
    this.array[this.length++] = value;
  }

  /** The numbers gathered: a view of the list's array when it is at least half full, else a copy. */
  done(): Uint32Array {
    return this.length * 2 >= this.array.length ? this.array.subarray(0, this.length) : this.array.slice(0, this.length);
  }
}
