/** Bitmaps of Uint32 words: validity of nullable columns, boolean values, row sets. */

/** Uint32 words that hold `bits` bits. */
export function wordsFor(bits: number): number {
  return (bits + 31) >>> 5;
}

export function newBitmap(bits: number): Uint32Array {
  return new Uint32Array(wordsFor(bits));
}

/**
 * Whether bit i is set (false past the bitmap's end). The bound is checked here rather than left to
 * the read: V8 inlines this into the hot loops of every query with the feedback of all its callers,
 * and one read past the end anywhere made every inlined read return "a word or undefined", so each
 * word with its top bit set (a full validity word) came back as a heap-allocated number: 16 bytes of
 * garbage a row in those loops (BENCHMARKS.md "Live: a change's garbage").
 */
export function getBit(bitmap: Uint32Array, i: number): boolean {
  const w = i >>> 5;
  return w < bitmap.length && (bitmap[w] & (1 << (i & 31))) !== 0;
}

export function setBit(bitmap: Uint32Array, i: number): void {
  bitmap[i >>> 5] |= 1 << (i & 31);
}

export function clearBit(bitmap: Uint32Array, i: number): void {
  bitmap[i >>> 5] &= ~(1 << (i & 31));
}

/** A copy of `bitmap` with room for `bits` bits (zero-filled beyond the old ones). */
export function resizeBitmap(bitmap: Uint32Array, bits: number): Uint32Array {
  const words = wordsFor(bits);
  if (words === bitmap.length) return bitmap;
  const out = new Uint32Array(words);
  out.set(words >= bitmap.length ? bitmap : bitmap.subarray(0, words));
  return out;
}

/**
 * Writes the positions of the set bits, ascending, to out[0..] and returns how many it wrote:
 * a bitset turned into a sorted row list in O(words + set bits), without sorting. Stops at the
 * first word after `out` is full, so `out` should have room for every set bit.
 */
export function setBitPositionsInto(bitmap: Uint32Array, out: Uint32Array): number {
  let k = 0;
  for (let w = 0; w < bitmap.length && k < out.length; w++) {
    let word = bitmap[w];
    while (word !== 0) {
      out[k++] = (w << 5) | (31 - Math.clz32(word & -word));
      word &= word - 1;
    }
  }
  return k;
}

/** Number of set bits among the first `bits` bits. */
export function popcount(bitmap: Uint32Array, bits: number): number {
  let n = 0;
  const full = bits >>> 5;
  for (let w = 0; w < full; w++) n += popcount32(bitmap[w]);
  if (bits & 31) n += popcount32(bitmap[full] & ((1 << (bits & 31)) - 1));
  return n;
}

export function popcount32(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24;
}
