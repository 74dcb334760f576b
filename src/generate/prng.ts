import { partitionPoint } from '../util/binary-search.js';

/**
 * A small seeded PRNG (sfc32, seeded through cyrb128 string hashing). Only 32-bit integer
 * arithmetic, so the stream is identical on every machine and JavaScript engine; nothing here
 * touches Math.random, the clock, the locale or the time zone.
 */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: string) {
    const [a, b, c, d] = cyrb128(seed);
    this.a = a;
    this.b = b;
    this.c = c;
    this.d = d;
    for (let i = 0; i < 12; i++) this.nextUint32();
  }

  nextUint32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform integer in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** Uniform in [lo, hi). */
  range(lo: number, hi: number): number {
    return lo + this.next() * (hi - lo);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }

  /** Approximately standard normal (Irwin–Hall sum of six uniforms): arithmetic only, so portable. */
  normal(): number {
    let s = 0;
    for (let i = 0; i < 6; i++) s += this.next();
    return (s - 3) * Math.SQRT2;
  }

  /** k distinct items in their table order (a stable-looking subset, as feeds list lookups). */
  subset<T>(items: readonly T[], k: number): T[] {
    const chosen = new Set<number>();
    const n = Math.min(k, items.length);
    while (chosen.size < n) chosen.add(Math.floor(this.next() * items.length));
    return [...chosen].sort((x, y) => x - y).map((i) => items[i]);
  }
}

/** A weighted choice table built once: O(log n) picks by binary search on cumulative weights. */
export class Weighted<T> {
  private readonly items: readonly T[];
  private readonly cumulative: Float64Array;

  constructor(entries: ReadonlyArray<readonly [T, number]>) {
    this.items = entries.map(([item]) => item);
    this.cumulative = new Float64Array(entries.length);
    let total = 0;
    entries.forEach(([, w], i) => {
      total += w;
      this.cumulative[i] = total;
    });
    for (let i = 0; i < this.cumulative.length; i++) this.cumulative[i] /= total;
  }

  /** Zipf weights (1/rank) over items in rank order: realistic word and phrase frequencies. */
  static zipf<T>(items: readonly T[]): Weighted<T> {
    return new Weighted(items.map((item, i) => [item, 1 / (i + 1)] as const));
  }

  pick(rng: Rng): T {
    const u = rng.next();
    // The first item whose cumulative weight exceeds u; the last one when rounding leaves none.
    return this.items[partitionPoint(0, this.cumulative.length - 1, (i) => this.cumulative[i] <= u)];
  }
}

/** cyrb128: a fast, well-mixed 128-bit string hash, used only to seed sfc32. */
function cyrb128(str: string): [number, number, number, number] {
  let h1 = 1779033703;
  let h2 = 3144134277;
  let h3 = 1013904242;
  let h4 = 2773480762;
  for (let i = 0; i < str.length; i++) {
    const k = str.charCodeAt(i);
    h1 = h2 ^ Math.imul(h1 ^ k, 597399067);
    h2 = h3 ^ Math.imul(h2 ^ k, 2869860233);
    h3 = h4 ^ Math.imul(h3 ^ k, 951274213);
    h4 = h1 ^ Math.imul(h4 ^ k, 2716044179);
  }
  h1 = Math.imul(h3 ^ (h1 >>> 18), 597399067);
  h2 = Math.imul(h4 ^ (h2 >>> 22), 2869860233);
  h3 = Math.imul(h1 ^ (h3 >>> 17), 951274213);
  h4 = Math.imul(h2 ^ (h4 >>> 19), 2716044179);
  h1 ^= h2 ^ h3 ^ h4;
  h2 ^= h1;
  h3 ^= h1;
  h4 ^= h1;
  return [h1 >>> 0, h2 >>> 0, h3 >>> 0, h4 >>> 0];
}
