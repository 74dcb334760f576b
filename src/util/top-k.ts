/**
 * Top-k selection with a bounded binary heap: O(n log k) instead of sorting all n candidates, and
 * no allocation beyond the k slots. Order: value descending, then tie rank ascending (the rank of
 * the row's key, so equal scores come back in key order and pages are stable).
 */
export class TopKHeap {
  private readonly ids: Uint32Array;
  private readonly values: Float64Array;
  private readonly ties: Float64Array;
  private len = 0;

  constructor(readonly k: number) {
    this.ids = new Uint32Array(k);
    this.values = new Float64Array(k);
    this.ties = new Float64Array(k);
  }

  get size(): number {
    return this.len;
  }

  get full(): boolean {
    return this.len === this.k;
  }

  /** The value an offer must reach to enter a full heap (it enters on equality with a lower tie rank). */
  get threshold(): number {
    return this.len === 0 ? -Infinity : this.values[0];
  }

  /** i is worse than (value, tie) */
  private worse(i: number, value: number, tie: number): boolean {
    return this.values[i] < value || (this.values[i] === value && this.ties[i] > tie);
  }

  offer(id: number, value: number, tie: number): void {
    if (this.k === 0) return;
    if (this.len < this.k) {
      let i = this.len++;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (!(value < this.values[p] || (value === this.values[p] && tie > this.ties[p]))) break;
        this.move(p, i);
        i = p;
      }
      this.set(i, id, value, tie);
    } else if (this.worse(0, value, tie)) {
      this.siftDown(id, value, tie);
    }
  }

  /** Drains the heap, best first. */
  drain(): { ids: Uint32Array; values: Float64Array } {
    const n = this.len;
    const ids = new Uint32Array(n);
    const values = new Float64Array(n);
    for (let out = n - 1; out >= 0; out--) {
      ids[out] = this.ids[0];
      values[out] = this.values[0];
      const last = --this.len;
      if (last > 0) this.siftDown(this.ids[last], this.values[last], this.ties[last]);
    }
    return { ids, values };
  }

  private siftDown(id: number, value: number, tie: number): void {
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= this.len) break;
      const r = l + 1;
      const c = r < this.len && (this.values[r] < this.values[l] || (this.values[r] === this.values[l] && this.ties[r] > this.ties[l])) ? r : l;
      if (!(this.values[c] < value || (this.values[c] === value && this.ties[c] > tie))) break;
      this.move(c, i);
      i = c;
    }
    this.set(i, id, value, tie);
  }

  private move(from: number, to: number): void {
    this.ids[to] = this.ids[from];
    this.values[to] = this.values[from];
    this.ties[to] = this.ties[from];
  }

  private set(i: number, id: number, value: number, tie: number): void {
    this.ids[i] = id;
    this.values[i] = value;
    this.ties[i] = tie;
  }
}

/** Indices of the k largest values (ties by ascending tie rank), best first. */
export function topKDescending(values: Float64Array, ties: ArrayLike<number>, k: number): Uint32Array {
  const heap = new TopKHeap(Math.min(k, values.length));
  for (let i = 0; i < values.length; i++) heap.offer(i, values[i], ties[i]);
  return heap.drain().ids;
}
