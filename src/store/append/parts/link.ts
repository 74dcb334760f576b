/**
 * The part of a child table's link to its listing (ParentKeyColumn): each batch row's listing key
 * is resolved to a row of the Property table given with the append (MissingParent when it has
 * none), unless the batch was linked to that same table as it was loaded (batch.ts).
 */
import type { Steps } from '../../../util/steps.js';
import type { ParentLink } from '../../../schema/types.js';
import { ParentKeyColumn, Utf8TextColumn, type Column, type TextColumn } from '../../columns.js';
import { DataError } from '../../errors.js';
import type { Table } from '../../table.js';
import { linkedTo } from '../batch.js';
import { Backing } from '../growable.js';
import { Part, stringsOf, type Batch, type Write } from './part.js';

/** A child's link to its listing: Property rows, resolved against the Property table given. */
export class LinkPart extends Part {
  private readonly parentRow: Backing<Int32Array>;
  private unlinked: ReadonlyMap<number, string> | null;
  private parentKeys: TextColumn | null = null;
  private parentRows = 0;

  constructor(
    field: string,
    base: ParentKeyColumn,
    private readonly link: ParentLink,
  ) {
    super(field);
    this.parentRow = new Backing(base.parentRow);
    this.unlinked = base.unlinked;
  }

  override *reserve(n: number, m: number): Steps<void> {
    yield* this.parentRow.roomSteps(n, n + m);
  }

  prepare(src: Column | null, batch: Batch): Write {
    const parent = batch.parent;
    if (parent === undefined || parent.resource !== 'Property') {
      throw new Error(`appending ${batch.resource} needs the Property table its children link to (options.parent)`);
    }
    if (parent.rowCount < this.parentRows) throw new Error(`${batch.resource}: options.parent is older than the Property table given before`);
    const m = batch.rows;
    const rows = new Int32Array(m).fill(-1);
    const unlinked: Array<[number, string]> = [];
    if (src instanceof ParentKeyColumn) {
      if (linkedTo.get(batch.table) === parent) {
        rows.set(src.parentRow.subarray(0, m));
      } else {
        // Linked to the batch's own Property records: resolve their keys (children come grouped by listing).
        let last = -1;
        let lastRow = -1;
        for (let r = 0; r < m; r++) {
          const p = src.parentRow[r];
          if (p < 0) continue;
          if (p !== last) {
            last = p;
            lastRow = this.resolve(batch, parent, src.get(r)!, r);
          }
          rows[r] = lastRow;
        }
      }
      if (src.unlinked !== null) for (const [row, text] of src.unlinked) if (row < m) unlinked.push([row, text]);
    } else if (src !== null) {
      // Kept as text (loadBatch without a parent): resolve each linkable row's key here.
      const strings = stringsOf(src);
      if (strings === null) throw this.cannotHold(batch, 'text', src);
      const when = this.link.when;
      for (let r = 0; r < m; r++) {
        const linkable = when === null || batch.table.value(r, when.field) === when.equals;
        if (!linkable) {
          const text = strings(r);
          if (text !== null) unlinked.push([r, text]);
          continue;
        }
        if (src instanceof Utf8TextColumn && !src.isNull(r)) {
          const s = src.offsets[r];
          const e = src.offsets[r + 1];
          const p = parent.rowOfKeyBytes(src.bytes, s, e);
          rows[r] = p >= 0 ? p : this.resolve(batch, parent, src.get(r)!, r);
        } else {
          const text = strings(r);
          if (text === null)
            throw new DataError({
              code: 'MissingParent',
              file: `${batch.resource} batch`,
              line: 0,
              field: this.field,
              reason: `batch row ${r + 1} has no ${this.field}`,
            });
          rows[r] = this.resolve(batch, parent, text, r);
        }
      }
    }
    return (n) => {
      this.parentRow.room(n, n + m).set(rows, n);
      if (unlinked.length > 0) {
        const map = new Map(this.unlinked ?? []);
        for (const [row, text] of unlinked) map.set(n + row, text);
        this.unlinked = map;
      }
      this.parentKeys = parent.keyColumn;
      this.parentRows = parent.rowCount;
    };
  }

  override checkpoint(): () => void {
    const restore = super.checkpoint();
    const { unlinked, parentKeys, parentRows } = this;
    return () => {
      restore();
      Object.assign(this, { unlinked, parentKeys, parentRows });
    };
  }

  private resolve(batch: Batch, parent: Table, key: string, row: number): number {
    const p = parent.rowOfKey(key);
    if (p < 0) {
      throw new DataError({
        code: 'MissingParent',
        file: `${batch.resource} batch`,
        line: 0,
        field: this.field,
        reason: `${this.field} '${key}' (batch row ${row + 1}) matches no Property record`,
      });
    }
    return p;
  }

  protected build(n: number): Column {
    return new ParentKeyColumn(this.parentRow.array.subarray(0, n), this.parentKeys!, this.unlinked);
  }
}
