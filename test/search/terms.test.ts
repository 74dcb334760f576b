/**
 * A search field's term dictionary (src/search/terms.ts): ids in list order, look-ups by a string's
 * UTF-8 bytes, the stepped build equal to the whole one, and a snapshot's packed terms read back
 * with a repeated term found.
 */
import { describe, expect, it } from 'vitest';
import { TermDictionary } from '../../src/search/terms.js';
import { runNow } from '../../src/util/steps.js';

const TERMS = ['main', 'street', '', 'café', 'naïve', '北京', '🏠home', 'mainstreet', 'mai', 'Main'];

describe('TermDictionary', () => {
  it('gives each term its index in the list as id, and -1 for a string that is not a term', () => {
    const dict = TermDictionary.of(TERMS);
    expect(dict.size).toBe(TERMS.length);
    TERMS.forEach((term, id) => {
      expect(dict.id(term)).toBe(id);
      expect(dict.term(id)).toBe(term);
    });
    for (const other of ['ma', 'mains', 'MAIN', 'cafe', 'naive', '北', 'home', ' main', 'main ']) expect(dict.id(other)).toBe(-1);
    expect(dict.list()).toEqual(TERMS);
    expect(dict.list()).toBe(dict.list()); // made once
  });

  it('answers over many terms, built in steps as at once', () => {
    const terms = Array.from({ length: 5000 }, (_, i) => `t${(i * 7919) % 100_003}x${i % 13}`);
    const steps = TermDictionary.ofSteps(terms, 64);
    let yields = 0;
    let next = steps.next();
    for (; !next.done; next = steps.next()) yields++;
    const stepped = next.value;
    expect(yields).toBe(Math.floor(terms.length / 64) * 3);
    const whole = TermDictionary.of(terms);
    expect(Buffer.compare(stepped.bytes, whole.bytes)).toBe(0);
    expect([...stepped.offsets]).toEqual([...whole.offsets]);
    for (let i = 0; i < terms.length; i += 37) expect(stepped.id(terms[i])).toBe(i);
    expect(stepped.id('t1x0x')).toBe(-1);
  });

  it('reads packed terms as a snapshot holds them, and names the first two ids of a repeated term', () => {
    const dict = TermDictionary.of(TERMS);
    const again = TermDictionary.fromPacked(dict.bytes, dict.offsets);
    expect(again).toBeInstanceOf(TermDictionary);
    expect((again as TermDictionary).list()).toEqual(TERMS);
    const repeated = TermDictionary.of(['alpha', 'beta', 'gamma', 'delta']);
    // 'gamma' overwritten by 'alpha' in place (same length): ids 0 and 2 now hold equal bytes
    const bytes = Buffer.from(repeated.bytes);
    bytes.write('alpha', repeated.offsets[2], 'utf8');
    expect(TermDictionary.fromPacked(bytes, repeated.offsets)).toEqual({ first: 0, second: 2 });
  });

  it('keeps an empty dictionary', () => {
    const dict = runNow(TermDictionary.ofSteps([], 8));
    expect(dict.size).toBe(0);
    expect(dict.id('anything')).toBe(-1);
    expect(dict.list()).toEqual([]);
  });
});
