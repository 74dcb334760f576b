/**
 * The rows of a text column by value (src/access/text-rows.ts), shared by the generations of a
 * lineage: made over a first generation's column, extended by each later one's appended rows, and
 * read by any of them, each seeing exactly its own rows holding the value, ascending. Checked
 * against a scan of the values for UTF-8 columns (repeated values, nulls, the empty string,
 * non-ASCII and astral text) and for a child's link to its listing (the map kept for it).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addTextRowsSteps, textRowsOf } from '../../src/access/text-rows.js';
import { ByteIndex } from '../../src/store/byte-index.js';
import { hashBytes } from '../../src/store/bytes.js';
import { ParentKeyColumn, Utf8TextColumn, type TextColumn } from '../../src/store/columns.js';
import { newBitmap, setBit } from '../../src/util/bits.js';
import { runNow } from '../../src/util/steps.js';

const VALUES = ['A-1', 'A-2', 'B-10', '', 'é', 'Ωmega', '😀x', 'A-1 '];

function utf8Column(values: ReadonlyArray<string | null>): Utf8TextColumn {
  const parts = values.map((v) => Buffer.from(v ?? '', 'utf8'));
  const offsets = new Uint32Array(values.length + 1);
  const validity = newBitmap(values.length);
  values.forEach((v, r) => {
    offsets[r + 1] = offsets[r] + parts[r].length;
    if (v !== null) setBit(validity, r);
  });
  return new Utf8TextColumn(Buffer.concat(parts), offsets, validity);
}

/** A link column: a parent row per child (its key the value), -1 for an unlinked child whose value is kept as is (or null). */
function linkColumn(values: ReadonlyArray<string | null>): ParentKeyColumn {
  const keys = [...new Set(values.filter((v): v is string => v !== null && !v.startsWith('A')))];
  const parentRow = Int32Array.from(values, (v) => (v === null ? -1 : keys.indexOf(v)));
  const unlinked = new Map<number, string>();
  values.forEach((v, r) => {
    if (v !== null && parentRow[r] < 0) unlinked.set(r, v);
  });
  return new ParentKeyColumn(parentRow, utf8Column(keys), unlinked);
}

const scan = (values: ReadonlyArray<string | null>, value: string, n: number): number[] => values.slice(0, n).flatMap((v, r) => (v === value ? [r] : []));

/** Generations of growing row counts over `values` (the last holds them all), the column of each made by `columnOf`. */
function checkLineage(values: ReadonlyArray<string | null>, cuts: readonly number[], columnOf: (values: ReadonlyArray<string | null>) => TextColumn): void {
  const ends = [...new Set([...cuts.map((c) => c % (values.length + 1)), values.length])].sort((a, b) => a - b);
  const columns = ends.map((n) => columnOf(values.slice(0, n)));
  const index = textRowsOf(columns[0], ends[0]);
  runNow(addTextRowsSteps(index, columns[0], ends[0]));
  for (let g = 0; g < ends.length; g++) {
    if (g > 0) runNow(addTextRowsSteps(index, columns[g], ends[g]));
    expect(index.covered).toBe(ends[g]);
    // this generation and every older one, after the index was extended for this one
    for (let older = 0; older <= g; older++) {
      for (const value of [...VALUES, 'absent', 'A-']) expect(index.rows(value, ends[older])).toEqual(scan(values, value, ends[older]));
    }
  }
}

const valuesArb = fc.array(fc.option(fc.constantFrom(...VALUES), { nil: null, freq: 6 }), { maxLength: 700 });
const cutsArb = fc.array(fc.nat(700), { maxLength: 5 });

describe('rows of a text column by value', () => {
  it('a UTF-8 column: each generation of a lineage finds exactly its rows of a value, ascending', () => {
    fc.assert(
      fc.property(valuesArb, cutsArb, (values, cuts) => checkLineage(values, cuts, utf8Column)),
      { numRuns: 150 },
    );
  });

  it('a link column (a parent row per child, unlinked values kept apart) reads the same', () => {
    fc.assert(
      fc.property(valuesArb, cutsArb, (values, cuts) => checkLineage(values, cuts, linkColumn)),
      { numRuns: 100 },
    );
  });

  it('grows past the room it was made with, and makes room in steps', () => {
    const values = Array.from({ length: 5000 }, (_, r) => (r % 7 === 0 ? null : `L-${r % 1300}`));
    const small = utf8Column(values.slice(0, 10));
    const index = textRowsOf(small, 10);
    index.add(small, 10);
    const all = utf8Column(values);
    const steps = [...addTextRowsSteps(index, all, values.length)].length;
    expect(steps).toBeGreaterThan(values.length / 256);
    for (const value of ['L-0', 'L-1', 'L-1299', 'L-1300', 'L-7']) expect(index.rows(value, values.length)).toEqual(scan(values, value, values.length));
    expect(index.rows('L-1', 10)).toEqual([1]);
  });
});

describe('ByteIndex.replace', () => {
  it('points a value at another entry with the same bytes, and refuses an entry it does not hold', () => {
    const column = utf8Column(['x', 'y', 'x']);
    const index = new ByteIndex(column);
    const h = (r: number): number => hashBytes(column.bytes, column.offsets[r], column.offsets[r + 1]);
    index.add(0, h(0));
    index.add(1, h(1));
    index.replace(0, 2, h(0));
    expect(index.findString('x')).toBe(2);
    expect(index.findString('y')).toBe(1);
    expect(() => index.replace(0, 2, h(0))).toThrow('entry 0 is not in the index');
  });
});
