/**
 * Typed arrays a synchronous computation takes for the length of one run and gives back whole at
 * its end, kept from run to run: a grouping over half a million matches takes about 12 MB of
 * arrays a run, and allocating (then releasing) that per query is ArrayBuffer churn V8 answers
 * with mark-compacts (it starts one for about every 64 MB of ArrayBuffers allocated).
 *
 * A run's n-th take of one array type gets the n-th kept array of that type, grown when it is too
 * short (never shrunk), as a zeroed view of the length asked for. Nothing taken may be read after
 * the run ends: the next run writes the same memory. Arrays longer than `maxLength` are allocated
 * as usual and not kept, which bounds what stays allocated between runs.
 */
type Scratchable = Float64Array | Uint32Array | Int32Array | Uint8Array;
type Make<T extends Scratchable> = new (length: number) => T;

/** Takes an array for the length of one run: a zeroed array of `length` elements. */
export type Take = <T extends Scratchable>(make: Make<T>, length: number) => T;

export class ScratchArrays {
  private readonly kept = new Map<Make<Scratchable>, Scratchable[]>();
  private readonly taken = new Map<Make<Scratchable>, number>();
  private running = false;

  constructor(
    /** The longest array kept (elements). */
    readonly maxLength: number,
  ) {}

  /** Runs `body` with the arrays it takes from `take`; they are given back when it returns or throws. Runs do not nest. */
  run<R>(body: (take: Take) => R): R {
    if (this.running) throw new Error('ScratchArrays: a run cannot start inside another');
    this.running = true;
    try {
      return body((make, length) => this.take(make, length));
    } finally {
      this.taken.clear();
      this.running = false;
    }
  }

  private take<T extends Scratchable>(make: Make<T>, length: number): T {
    if (length > this.maxLength) return new make(length);
    const n = this.taken.get(make) ?? 0;
    this.taken.set(make, n + 1);
    let arrays = this.kept.get(make);
    if (arrays === undefined) this.kept.set(make, (arrays = []));
    let array = arrays[n] as T | undefined;
    if (array === undefined || array.length < length) {
      array = new make(Math.min(this.maxLength, Math.max(length, 2 * (array?.length ?? 0))));
      arrays[n] = array;
      return array.subarray(0, length) as T;
    }
    const view = array.subarray(0, length) as T;
    view.fill(0);
    return view;
  }
}
