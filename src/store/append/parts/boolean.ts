/** The part of boolean columns: a value bitmap and a validity bitmap. */
import type { Steps } from '../../../util/steps.js';
import { BooleanColumn, type Column } from '../../columns.js';
import { Bits } from '../growable.js';
import { Part, type Batch, type Write } from './part.js';

export class BooleanPart extends Part {
  private readonly bits: Bits;
  private readonly validity: Bits;

  constructor(field: string, base: BooleanColumn) {
    super(field);
    this.bits = new Bits(base.bits);
    this.validity = new Bits(base.validity);
  }

  override *reserve(n: number, m: number): Steps<void> {
    yield* this.bits.roomSteps(n, n + m);
    yield* this.validity.roomSteps(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    if (src !== null && src.kind !== 'boolean') throw this.cannotHold(batch, 'boolean', src);
    const m = batch.rows;
    return (n) => {
      this.bits.room(n, n + m);
      this.validity.room(n, n + m);
      if (src === null) {
        this.bits.clear(n, m);
        this.validity.clear(n, m);
      } else {
        const s = src;
        this.bits.copy(s.bits, m, n);
        this.validity.copy(s.validity, m, n);
      }
    };
  }

  protected build(n: number): Column {
    return new BooleanColumn(this.bits.view(n), this.validity.view(n));
  }
}
