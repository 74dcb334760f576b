/**
 * The rows of a text column by value (src/access/text-rows.ts), shared by the generations of a
 * lineage: made over a first generation's column, extended by each later one's appended rows, and
 * read by any of them, each seeing exactly its own rows holding the value, ascending. Checked
 * against a scan of the values (repeated values, nulls, the empty string, non-ASCII and astral
 * text). A child's link to its listing (`Media?$filter=ResourceRecordKey eq 'K'`) reads the
 * listing's children instead (`StoreAccess.textRows`): checked through the engine against the
 * same filter run as a scan, across changes that replace, remove and add listings and their Media,
 * with Media of a member (linked to no listing).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addTextRowsSteps, TextRows } from '../../src/access/text-rows.js';
import type { Engine } from '../../src/engine.js';
import { ByteIndex } from '../../src/store/byte-index.js';
import { hashBytes } from '../../src/store/bytes.js';
import { Utf8TextColumn } from '../../src/store/columns.js';
import { newBitmap, setBit } from '../../src/util/bits.js';
import { runNow } from '../../src/util/steps.js';
import { dataSetOf, generated, openEngine } from '../live/helpers.js';

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

const scan = (values: ReadonlyArray<string | null>, value: string, n: number): number[] => values.slice(0, n).flatMap((v, r) => (v === value ? [r] : []));

/** Generations of growing row counts over `values` (the last holds them all). */
function checkLineage(values: ReadonlyArray<string | null>, cuts: readonly number[]): void {
  const ends = [...new Set([...cuts.map((c) => c % (values.length + 1)), values.length])].sort((a, b) => a - b);
  const columns = ends.map((n) => utf8Column(values.slice(0, n)));
  const index = new TextRows(columns[0], ends[0]);
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
  it('each generation of a lineage finds exactly its rows of a value, ascending', () => {
    fc.assert(
      fc.property(valuesArb, cutsArb, (values, cuts) => checkLineage(values, cuts)),
      { numRuns: 150 },
    );
  });

  it('grows past the room it was made with, and makes room in steps', () => {
    const values = Array.from({ length: 5000 }, (_, r) => (r % 7 === 0 ? null : `L-${r % 1300}`));
    const small = utf8Column(values.slice(0, 10));
    const index = new TextRows(small, 10);
    index.add(small, 10);
    const all = utf8Column(values);
    const steps = [...addTextRowsSteps(index, all, values.length)].length;
    expect(steps).toBeGreaterThan(values.length / 256);
    for (const value of ['L-0', 'L-1', 'L-1299', 'L-1300', 'L-7']) expect(index.rows(value, values.length)).toEqual(scan(values, value, values.length));
    expect(index.rows('L-1', 10)).toEqual([1]);
  });
});

describe('a value looked up again', () => {
  it('is found in the rows added since it was last looked up', () => {
    const values = ['a', 'b', 'a', 'c', 'b', 'a'];
    const index = new TextRows(utf8Column(values.slice(0, 2)), 2);
    index.add(utf8Column(values.slice(0, 2)), 2);
    expect(index.rows('c', 2)).toEqual([]);
    expect(index.rows('a', 2)).toEqual([0]);
    expect(index.rows('a', 2)).toEqual([0]);
    const all = utf8Column(values);
    index.add(all, 4);
    expect(index.rows('a', 4)).toEqual([0, 2]);
    expect(index.rows('c', 4)).toEqual([3]);
    index.add(all, 6);
    expect(index.rows('c', 6)).toEqual([3]);
    expect(index.rows('a', 6)).toEqual([0, 2, 5]);
    expect(index.rows('a', 3)).toEqual([0, 2]);
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

describe("a child's link to its listing", () => {
  const base = generated(60, 'text-rows-link', { mediaPerListing: 3 });
  const added = generated(5, 'text-rows-link', { from: 60, mediaPerListing: 3 });
  const withMedia = base.filter((l) => l.media.length > 0);
  const memberMedia = (key: string, n: number): Record<string, unknown> => ({
    ...withMedia[0].media[0],
    MediaKey: key,
    ResourceName: 'Member',
    ResourceRecordKey: `AGENT-${n}`,
  });
  const keys = [...base, ...added].map((l) => l.property.ListingKey as string).concat(['AGENT-1', 'AGENT-2', 'NOPE']);
  /** The Media of a key through the link's index (its children), against the same filter as a scan (the planner's text path takes only `field eq literal`). */
  const check = (engine: Engine): void => {
    for (const key of keys) {
      const viaChildren = engine.query('Media', `$filter=ResourceRecordKey eq '${key}'&$select=MediaKey&$count=true&$top=50`);
      const viaScan = engine.query('Media', `$filter=concat(ResourceRecordKey,'') eq '${key}'&$select=MediaKey&$count=true&$top=50`);
      expect(viaChildren.value, key).toEqual(viaScan.value);
      expect(viaChildren['@odata.count'], key).toBe(viaScan['@odata.count']);
    }
    expect(engine.explain('Media', `$filter=ResourceRecordKey eq '${keys[3]}'`)).toContain('hash lookup ResourceRecordKey');
  };

  it('finds the live Media of a listing (and of a member) as a scan does, across changes', async () => {
    const data = dataSetOf(base);
    data.Media = [...(data.Media ?? []), memberMedia('MM-1', 1), memberMedia('MM-2', 1), memberMedia('MM-3', 2)];
    const engine = await openEngine(data, { compactFraction: false });
    expect(engine.query('Media', "$filter=ResourceRecordKey eq 'AGENT-1'&$select=MediaKey").value).toEqual([{ MediaKey: 'MM-1' }, { MediaKey: 'MM-2' }]);
    check(engine);
    // replaced listings (their Media handed to the new row), one with a Media replaced and one added,
    // a removed listing (its Media go with it), new listings with their Media, a member's Media added
    const replaced = withMedia.slice(0, 10).map((l) => ({ ...l.property, ListPrice: 1 }));
    const media = [
      { ...withMedia[1].media[0], Order: 9 },
      { ...withMedia[2].media[0], MediaKey: `${withMedia[2].property.ListingKey as string}-extra` },
      memberMedia('MM-4', 2),
    ];
    await engine.apply([
      { resource: 'Property', upsert: [...replaced, ...added.map((l) => l.property)] },
      { resource: 'Media', upsert: [...media, ...added.flatMap((l) => l.media)] },
      { resource: 'Property', remove: [withMedia[3].property.ListingKey as string] },
    ]);
    check(engine);
    expect(engine.query('Media', `$filter=ResourceRecordKey eq '${withMedia[3].property.ListingKey as string}'&$count=true&$top=0`)['@odata.count']).toBe(0);
    expect(engine.query('Media', `$filter=ResourceRecordKey eq '${withMedia[2].property.ListingKey as string}'&$count=true&$top=0`)['@odata.count']).toBe(
      withMedia[2].media.length + 1,
    );
    await engine.compact();
    check(engine);
  });
});
