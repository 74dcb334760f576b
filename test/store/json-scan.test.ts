/**
 * topLevelString (src/store/json-scan.ts) against `JSON.parse`: the same answer for JSON objects
 * of every shape, for the edge cases of the grammar, and for text edited at random into JSON or
 * not (fast-check, fixed seeds).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { topLevelString } from '../../src/store/json-scan.js';

const NAME = 'ListingKey';

/** What the writers took before: `JSON.parse(text)[name]` when a string. */
function parsedKey(text: string, name = NAME): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const field = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[name] : undefined;
  return typeof field === 'string' ? field : undefined;
}

function scanned(text: string | Buffer, name = NAME): string | undefined {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  // the text inside a larger buffer, as a line of a feed is
  const framed = Buffer.concat([Buffer.from('x\n'), bytes, Buffer.from('\n{"ListingKey":"after"}')]);
  return topLevelString(framed, 2, 2 + bytes.length, name);
}

describe('topLevelString', () => {
  it.each([
    ['{"ListingKey":"A1"}', 'A1'],
    [' \t\r\n{ "ListingKey" : "A1" , "x": [1, {"ListingKey": "inner"}] }\r\n', 'A1'],
    ['{"ListingKey":"A1","ListingKey":"A2"}', 'A2'],
    ['{"ListingKey":"A1","ListingKey":7}', undefined],
    ['{"ListingKey":7,"ListingKey":"A2"}', 'A2'],
    ['{"ListingKey":{"ListingKey":"A"}}', undefined],
    ['{"List\\u0069ngKey":"escaped name"}', 'escaped name'],
    ['{"ListingKey":"tab\\there \\"quoted\\" \\u00e9 \\ud83d\\ude00 \\/"}', 'tab\there "quoted" é 😀 /'],
    ['{"ListingKey":"ünïcödé 😀"}', 'ünïcödé 😀'],
    ['{"ListingKey":""}', ''],
    ['{"ListingKey":null}', undefined],
    ['{"ListingKeys":"A"}', undefined],
    ['{"ListingKe":"A"}', undefined],
    ['{}', undefined],
    ['[{"ListingKey":"A"}]', undefined],
    ['"ListingKey"', undefined],
    ['{"a":-0.5e+10,"b":[true,false,null,0,-1,1.25,1E3],"c":{},"d":[],"ListingKey":"K"}', 'K'],
    // not JSON: the key is not taken
    ['{"ListingKey":"A1",}', undefined],
    ['{"ListingKey":"A1"} x', undefined],
    ['{"ListingKey":"A1"}{}', undefined],
    ['{"ListingKey":"A1"', undefined],
    ['{"ListingKey":"A1","a":01}', undefined],
    ['{"ListingKey":"A1","a":1.}', undefined],
    ['{"ListingKey":"A1","a":.5}', undefined],
    ['{"ListingKey":"A1","a":+1}', undefined],
    ['{"ListingKey":"A1","a":1e}', undefined],
    ['{"ListingKey":"A1","a":-}', undefined],
    ['{"ListingKey":"A1","a":tru}', undefined],
    ['{"ListingKey":"A1","a":nulls}', undefined],
    ['{"ListingKey":"A\\x"}', undefined],
    ['{"ListingKey":"A\\u12G4"}', undefined],
    ['{"ListingKey":"A\tB"}', undefined],
    ['{"ListingKey":"A1","a":[1,]}', undefined],
    ['{"ListingKey":"A1","a":[1 2]}', undefined],
    ['{"ListingKey":"A1","a":{"b"}}', undefined],
    ['{"ListingKey":"A1","a":{1:2}}', undefined],
    ['{"ListingKey":"A1","a":[}', undefined],
    ["{'ListingKey':'A1'}", undefined],
    ['\uFEFF{"ListingKey":"A1"}', undefined],
    ['', undefined],
  ])('%j gives what JSON.parse gives', (text, expected) => {
    expect(parsedKey(text)).toBe(expected);
    expect(scanned(text)).toBe(expected);
  });

  it('reads bytes that are not UTF-8 as JSON.parse reads their decoded text', () => {
    const bytes = Buffer.concat([
      Buffer.from('{"a":"'),
      Buffer.from([0xff, 0xc3]),
      Buffer.from('","ListingKey":"K'),
      Buffer.from([0xe2, 0x82]),
      Buffer.from('"}'),
    ]);
    expect(scanned(bytes)).toBe(parsedKey(bytes.toString('utf8')));
    expect(scanned(bytes)).toBe('K\uFFFD');
  });

  it('has no nesting limit', () => {
    const deep = `{"a":${'['.repeat(10_000)}${']'.repeat(10_000)},"ListingKey":"deep"}`;
    expect(scanned(deep)).toBe('deep');
    expect(scanned(`{"a":${'['.repeat(10_000)}${']'.repeat(9_999)},"ListingKey":"deep"}`)).toBeUndefined();
  });

  const key = fc.oneof({ arbitrary: fc.constant(NAME), weight: 3 }, fc.constantFrom('ListingKe', 'ListingKeyX', 'Media', 'a', ''));
  const text = fc.string({ unit: fc.constantFrom('a', 'é', '😀', '"', '\\', '\n', '\u0001', '/', ' ') });
  const member = fc.oneof(text, fc.jsonValue({ maxDepth: 3 }), fc.dictionary(key, fc.oneof(text, fc.integer()), { maxKeys: 3 }));
  const record = fc.array(fc.tuple(key, member), { maxLength: 6 });
  const spaced = (members: ReadonlyArray<readonly [string, unknown]>, pad: string): string =>
    `${pad}{${members.map(([k, v]) => `${pad}${JSON.stringify(k)}${pad}:${pad}${JSON.stringify(v)}`).join(`,${pad}`)}}${pad}`;

  it('gives what JSON.parse gives for JSON objects of any shape', () => {
    fc.assert(
      fc.property(record, fc.constantFrom('', ' ', '\r\n\t '), (members, pad) => {
        const t = spaced(members, pad);
        expect(scanned(t)).toBe(parsedKey(t));
      }),
      { seed: 11, numRuns: 2000 },
    );
  });

  it('gives what JSON.parse gives for text edited at random', () => {
    const edit = fc.record({
      at: fc.nat(),
      drop: fc.nat({ max: 3 }),
      insert: fc.array(fc.constantFrom(...'{}[]":,\\ 0123456789.eE+-tfnul'.split(''), '\u0000', '\u00ff', '\uD800'), { maxLength: 3 }),
    });
    fc.assert(
      fc.property(record, fc.array(edit, { minLength: 1, maxLength: 3 }), (members, edits) => {
        let t = spaced(members, ' ');
        for (const { at, drop, insert } of edits) {
          const p = at % (t.length + 1);
          t = t.slice(0, p) + insert.join('') + t.slice(p + drop);
        }
        // the text as a feed's bytes (a lone surrogate is written as U+FFFD)
        const bytes = Buffer.from(t, 'utf8');
        expect(scanned(bytes)).toBe(parsedKey(bytes.toString('utf8')));
      }),
      { seed: 12, numRuns: 5000 },
    );
  });
});
