/**
 * Values kept per row, in maps their owners hold (a table segment's field list), bounded in all by
 * their estimated bytes: past the bound the oldest kept go first, whatever map holds them, until a
 * quarter of the bound is free. A map its owner drops stays counted until its values' turn comes.
 * The kept records (src/store/record-cache.ts) and the HTTP service's record texts
 * (src/exec/record-json.ts) share it.
 */
export class KeptRows<V> {
  /** Kept values in the order they were kept (FIFO eviction), from `head` on. */
  private queue: Array<{ rows: Map<number, V>; row: number; value: V; size: number }> = [];
  private head = 0;
  private size = 0;

  /** Estimated bytes of kept values beyond which the oldest go; 0 keeps none. */
  constructor(private bound: number) {}

  get budget(): number {
    return this.bound;
  }

  /** A new bound (a lower one drops the oldest values at once). */
  set budget(bytes: number) {
    this.bound = bytes;
    if (this.size > bytes) this.evict();
  }

  /** Bytes held by kept values (estimated). */
  get heldSize(): number {
    return this.size;
  }

  /** Keeps `value` as `rows`' entry for `row` (absent from it), charged `size` bytes. */
  keep(rows: Map<number, V>, row: number, value: V, size: number): void {
    rows.set(row, value);
    this.queue.push({ rows, row, value, size });
    this.size += size;
    if (this.size > this.bound) this.evict();
  }

  private evict(): void {
    const target = this.bound * 0.75;
    const q = this.queue;
    while (this.size > target && this.head < q.length) {
      const { rows, row, value, size } = q[this.head];
      q[this.head++] = undefined!;
      // a row dropped and kept again has a newer slot: only the slot of the value held is taken out of its map
      if (rows.get(row) === value) rows.delete(row);
      this.size -= size;
    }
    if (this.head > q.length / 2) {
      this.queue = q.slice(this.head);
      this.head = 0;
    }
  }
}
