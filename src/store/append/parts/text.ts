/** The part of UTF-8 text columns (the key column among them): bytes, offsets and validity. */
import type { Steps } from '../../../util/steps.js';
import { writeUtf8 } from '../../bytes.js';
import { Utf8TextColumn, type Column } from '../../columns.js';
import { Backing, Bits, ByteBacking } from '../growable.js';
import { Part, stringsOf, type Batch, type Write } from './part.js';

/** UTF-8 text (Utf8TextColumn), the key column among them. */
export class TextPart extends Part {
  private readonly bytes: ByteBacking;
  private readonly offsets: Backing<Uint32Array>;
  private readonly validity: Bits;

  constructor(field: string, base: Utf8TextColumn) {
    super(field);
    this.bytes = new ByteBacking(base.bytes);
    this.offsets = new Backing(base.offsets);
    this.validity = new Bits(base.validity);
  }

  override *reserve(n: number, m: number): Steps<void> {
    yield* this.offsets.roomSteps(n + 1, n + m + 1);
    const end = this.offsets.array[n];
    yield* this.validity.roomSteps(n, n + m);
    yield* this.bytes.roomSteps(end, end);
  }

  prepare(src: Column | null, batch: Batch): Write {
    const m = batch.rows;
    if (src instanceof Utf8TextColumn) {
      const o0 = src.offsets[0];
      const size = src.offsets[m] - o0;
      const write: Write = (n) => {
        const offsets = this.offsets.room(n + 1, n + m + 1);
        const end = offsets[n];
        const bytes = this.bytes.room(end, end + size);
        src.bytes.copy(bytes, end, o0, o0 + size);
        for (let r = 0; r < m; r++) offsets[n + 1 + r] = end + src.offsets[r + 1] - o0;
        this.validity.room(n, n + m);
        this.validity.copy(src.validity, m, n);
      };
      // the batch's bytes are known: room for them in steps (a column's bytes can be 70 MB at 100k)
      write.reserveSteps = (n) => this.bytes.roomSteps(this.offsets.array[n], this.offsets.array[n] + size);
      return write;
    }
    const strings = src === null ? null : stringsOf(src);
    if (src !== null && strings === null) throw this.cannotHold(batch, 'text', src);
    return (n) => {
      const offsets = this.offsets.room(n + 1, n + m + 1);
      this.validity.room(n, n + m);
      let end = offsets[n];
      for (let r = 0; r < m; r++) {
        const s = strings === null ? null : strings(r);
        if (s !== null) end = writeUtf8(s, this.bytes.room(end, end + s.length * 3), end);
        this.validity.put(n + r, s !== null);
        offsets[n + 1 + r] = end;
      }
    };
  }

  protected build(n: number): Column {
    const offsets = this.offsets.array.subarray(0, n + 1);
    return new Utf8TextColumn(this.bytes.bytes.subarray(0, offsets[n]), offsets, this.validity.view(n));
  }
}
