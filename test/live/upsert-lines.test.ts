/**
 * An upsert's records given as JSON Lines bytes (`{ resource, upsertLines }`, src/live/upsert-input.ts):
 * the same generation as the records given as values (blank lines, CRLF line ends and a byte
 * order mark skipped, the last version of a key kept), errors numbered by line in `<Resource>.jsonl`
 * with nothing applied, the operation's shape checked before anything is read, and bytes edited
 * at random either applied or refused with a coded error, never a crash.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueryError } from '../../src/errors.js';
import type { Engine } from '../../src/engine.js';
import type { ChangeOperation } from '../../src/live/change.js';
import { dataSetOf, generated, openEngine, rejectionOf, type Rec } from './helpers.js';

const BASE = generated(60, 'lines', { mediaPerListing: 2 });
const ADDED = generated(20, 'lines', { from: 60, mediaPerListing: 2 });

const jsonLines = (rows: ReadonlyArray<Rec | string>, end = '\n'): Buffer =>
  Buffer.from(rows.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join(end));

/** Every record of the three queried resources, in key order, and the change log. */
function contents(engine: Engine): unknown {
  const all = (resource: 'Property' | 'Media' | 'OpenHouse', key: string): unknown => engine.query(resource, `$orderby=${key}&$top=1000&$count=true`);
  return {
    generation: engine.generation,
    Property: all('Property', 'ListingKey'),
    Media: all('Media', 'MediaKey'),
    OpenHouse: all('OpenHouse', 'OpenHouseKey'),
    events: engine.query('EntityEvent', '$orderby=EntityEventSequence&$top=10000'),
  };
}

describe('upserts given as JSON Lines bytes', () => {
  it('make the same generation as the records given as values', async () => {
    const replaced = BASE.slice(0, 10).map((l) => ({ ...l.property, ListPrice: 654_321, City: 'Lineton' }));
    const fresh = ADDED.map((l) => ({ ...l.property }));
    const twice = { ...fresh[0], City: 'Second version' };
    const listings: Rec[] = [...replaced, ...fresh, twice];
    const media = ADDED.flatMap((l) => l.media.map((m) => ({ ...m })));
    const values: ChangeOperation[] = [
      { resource: 'Property', upsert: listings },
      { resource: 'Property', remove: [BASE[20].property.ListingKey as string, 'NO-SUCH-KEY'] },
      { resource: 'Media', upsert: media },
    ];
    // blank and whitespace-only lines, CRLF line ends and a byte order mark, as a feed may send them
    const withBlanks = (rows: Rec[]): Array<Rec | string> => rows.flatMap((r, i) => (i % 7 === 3 ? ['', r, ' \t'] : [r]));
    const lines: ChangeOperation[] = [
      { resource: 'Property', upsertLines: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), jsonLines(withBlanks(listings), '\r\n')]) },
      values[1],
      { resource: 'Media', upsertLines: jsonLines(media) },
    ];
    // more than the 64 KB slice the lines are split in: a line spans two slices
    expect((lines[0] as { upsertLines: Uint8Array }).upsertLines.length).toBeGreaterThan(64 * 1024);
    const a = await openEngine(dataSetOf(BASE), { compactFraction: false });
    const b = await openEngine(dataSetOf(BASE), { compactFraction: false });
    const summary = await a.apply(values);
    expect(await b.apply(lines)).toEqual(summary);
    expect(summary).toEqual({ generation: 1, upserted: listings.length + media.length, removed: 1, notFound: 1 });
    expect(contents(b)).toEqual(contents(a));
    // the last version of a key given twice is the one kept
    const row = b.query('Property', `$filter=ListingKey eq '${String(fresh[0].ListingKey)}'&$select=City`);
    expect(row.value).toEqual([{ ListingKey: fresh[0].ListingKey, City: 'Second version' }]);
    // and engine.upsert of lines through apply after a compaction reads the same again
    await a.compact();
    await b.compact();
    const again = ADDED.slice(0, 5).map((l) => ({ ...l.property, ListPrice: 1 }));
    await a.apply([{ resource: 'Property', upsert: again }]);
    await b.apply([{ resource: 'Property', upsertLines: jsonLines(again) }]);
    expect(contents(b)).toEqual(contents(a));
  });

  it('refuse a bad line with its number in <Resource>.jsonl, and apply nothing', async () => {
    const engine = await openEngine(dataSetOf(BASE), { compactFraction: false });
    const before = contents(engine);
    const p = (i: number, extra: Rec = {}): Rec => ({ ...ADDED[i].property, ...extra });
    const cases: Array<[string, ChangeOperation[], string, string]> = [
      ['malformed JSON', [{ resource: 'Property', upsertLines: jsonLines([p(0), '', '{"ListingKey": "X",']) }], 'BadDataLine', 'Property.jsonl line 3'],
      ['not an object', [{ resource: 'Property', upsertLines: jsonLines([p(0), '[1, 2]']) }], 'BadDataLine', 'Property.jsonl line 2'],
      ['a bad value', [{ resource: 'Property', upsertLines: jsonLines([p(0), p(1, { ListPrice: 'cheap' })]) }], 'BadFieldValue', 'Property.jsonl line 2'],
      ['no key', [{ resource: 'Property', upsertLines: jsonLines(['', p(0, { ListingKey: null })]) }], 'MissingKey', 'Property.jsonl line 2'],
      [
        'a child of no listing, after a good operation',
        [
          { resource: 'Property', upsertLines: jsonLines([p(0)]) },
          { resource: 'Media', upsertLines: jsonLines([{ ...ADDED[1].media[0], ResourceRecordKey: 'NO-SUCH-LISTING' }]) },
        ],
        'MissingParent',
        'Media.jsonl line 1',
      ],
      // the first bad record in order is reported, a later malformed line after it
      ['the first error', [{ resource: 'Property', upsertLines: jsonLines([p(0, { ListPrice: 'x' }), '{']) }], 'BadFieldValue', 'Property.jsonl line 1'],
    ];
    for (const [label, ops, code, where] of cases) {
      const err = await rejectionOf(engine.apply(ops));
      expect(err.code, label).toBe(code);
      expect(err.message, label).toContain(where);
      expect(contents(engine), label).toEqual(before);
    }
  });

  it('are checked before anything is read', async () => {
    const engine = await openEngine(dataSetOf(BASE), { compactFraction: false });
    const refused = async (op: unknown): Promise<string> => (await rejectionOf(engine.apply([op as ChangeOperation]))).message;
    expect(await refused({ resource: 'Property', upsertLines: JSON.stringify(ADDED[0].property) })).toMatch(/upsertLines must be bytes/);
    expect(await refused({ resource: 'Property', upsertLines: jsonLines([]), upsert: [] })).toMatch(/exactly one of upsert/);
    expect(await refused({ resource: 'Property', upsertLines: [ADDED[0].property] })).toMatch(/upsertLines must be bytes/);
    expect(engine.generation).toBe(0);
    // empty bytes, or only blank lines: nothing to apply
    expect(await engine.apply([{ resource: 'Property', upsertLines: Buffer.from('\n \n') }])).toEqual({ generation: 0, upserted: 0, removed: 0, notFound: 0 });
  });
  it('bytes edited at random are applied, or refused with a coded error and nothing applied', async () => {
    const engine = await openEngine(dataSetOf(BASE), { compactFraction: false });
    const body = jsonLines([{ ...BASE[0].property, ListPrice: 111_111 }, { ...ADDED[0].property }, { ...BASE[1].property, City: 'Fuzzton' }]);
    const edit = fc.record({
      at: fc.nat({ max: body.length }),
      cut: fc.nat({ max: 40 }),
      text: fc.constantFrom('', '"', '\\', '{', '}', '[', ']', ',', ':', '\n', 'null', '1e400', '-', '\u00e9', '\ud83c', '\u0000', ' "x": 1'),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(edit, { minLength: 1, maxLength: 4 }), async (edits) => {
        let bytes = body;
        for (const e of edits) {
          const at = Math.min(e.at, bytes.length);
          bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from(e.text, 'utf8'), bytes.subarray(Math.min(bytes.length, at + e.cut))]);
        }
        // (150 runs with this seed: 23 applied, 127 refused as BadDataLine, BadFieldValue or MissingKey)
        const generation = engine.generation;
        try {
          await engine.apply([{ resource: 'Property', upsertLines: bytes }]);
        } catch (e) {
          expect(e).toBeInstanceOf(QueryError);
          expect((e as QueryError).code).toMatch(/^[A-Z][A-Za-z]+$/);
          expect((e as QueryError).message).toMatch(/^Property\.jsonl line \d+/);
          expect(engine.generation).toBe(generation);
        }
      }),
      { numRuns: 150, seed: 7 },
    );
  });
});
