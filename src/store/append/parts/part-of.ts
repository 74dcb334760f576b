/**
 * The part of a stored column by its kind, and the all-null column a field that a batch adds starts
 * from (its older rows had no value).
 */
import { newBitmap } from '../../../util/bits.js';
import { BooleanColumn, CollectionColumn, DateColumn, DictionaryColumn, NumberColumn, TimestampColumn, Utf8TextColumn, type Column } from '../../columns.js';
import { BooleanPart } from './boolean.js';
import { CollectionPart, DictionaryPart } from './coded.js';
import { NumberPart, TimestampPart } from './number.js';
import type { Part } from './part.js';
import { TextPart } from './text.js';

/** The part of a stored (not derived, not link) column. */
export function partOf(name: string, c: Column): Part {
  switch (c.kind) {
    case 'number':
    case 'date':
      return new NumberPart(name, c.kind, c);
    case 'timestamp':
      return new TimestampPart(name, c);
    case 'boolean':
      return new BooleanPart(name, c);
    case 'dictionary':
      return new DictionaryPart(name, c);
    case 'collection':
      return new CollectionPart(name, c);
    case 'text':
      if (c instanceof Utf8TextColumn) return new TextPart(name, c);
      break;
  }
  throw new Error(`${name}: cannot append to a ${c.kind} column of this class`);
}

/** A column of `n` nulls of a storage kind (a field a batch adds: older rows had no value). */
export function nullColumn(kind: Column['kind'], n: number): Column {
  const none = (): Uint32Array => newBitmap(n);
  switch (kind) {
    case 'number':
      return new NumberColumn(new Float64Array(n), none());
    case 'date':
      return new DateColumn(new Float64Array(n), none());
    case 'timestamp':
      return new TimestampColumn(new Float64Array(n), none(), null, [], null);
    case 'boolean':
      return new BooleanColumn(none(), none());
    case 'dictionary':
      return new DictionaryColumn(new Uint16Array(n), [null]);
    case 'collection':
      return new CollectionColumn(new Uint32Array(n + 1), new Uint16Array(0), [], none());
    case 'text':
      return new Utf8TextColumn(Buffer.alloc(0), new Uint32Array(n + 1), none());
    default:
      throw new Error(`no null column of kind ${kind}`);
  }
}
