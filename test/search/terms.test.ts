/**
 * A search field's term dictionary (src/search/terms.ts): ids in list order, look-ups by a string's
 * UTF-8 bytes, terms gathered one by one past the room made for them, and a snapshot's packed
 * terms read back with a repeated term found.
 */
import { describe, expect, it } from 'vitest';
import { TermDictionary, TermDictionaryBuilder } from '../../src/search/terms.js';

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

  it('gathers terms one by one, growing past the room it was made with, a repeated term keeping its first id', () => {
    const terms = Array.from({ length: 5000 }, (_, i) => `t${(i * 7919) % 100_003}x${i % 13}${i % 97 === 0 ? 'é北' : ''}`);
    const builder = new TermDictionaryBuilder({ terms: 1, bytes: 2 });
    terms.forEach((term, i) => {
      expect(builder.add(term)).toBe(i);
      if (i % 50 === 0) expect(builder.add(terms[i >> 1])).toBe(i >> 1); // again: the id it has
    });
    expect(builder.size).toBe(terms.length);
    const built = builder.finish();
    const whole = TermDictionary.of(terms);
    expect(Buffer.compare(built.bytes, whole.bytes)).toBe(0);
    expect([...built.offsets]).toEqual([...whole.offsets]);
    for (let i = 0; i < terms.length; i += 37) expect(built.id(terms[i])).toBe(i);
    expect(built.id('t1x0x')).toBe(-1);
    expect(built.list()).toEqual(terms);
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
    const dict = new TermDictionaryBuilder().finish();
    expect(dict.size).toBe(0);
    expect(dict.id('anything')).toBe(-1);
    expect(dict.list()).toEqual([]);
  });
});
