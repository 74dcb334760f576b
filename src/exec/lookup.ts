/**
 * The lookup operator: top-level `Field eq 'v'` / `Field in (...)` conjuncts on dictionary columns
 * as an AND over the terms of (an OR over each term's values) of per-value bitsets, with the live
 * rows as one more term when some rows are dead. Counting needs no bitset: a popcount of the AND,
 * word by word.
 */
import { codeTerms, type CodeTerm, type TableAccess } from '../access/access.js';
import type { LookupTerm } from '../plan/plan.js';
import { popcount, popcount32, wordsFor } from '../util/bits.js';
import { Uint32List } from '../util/uint32-list.js';

/**
 * One bitset per lookup term: the value's own cached bitset when the term has one value (no
 * copy), else the OR of the values' bitsets; plus the live rows when some are dead.
 */
function termBits(access: TableAccess, terms: readonly LookupTerm[]): Uint32Array[] {
  const { table } = access;
  const words = wordsFor(table.rowCount);
  const live = access.liveBits;
  const bits = codeTerms(table, terms).map((t) => {
    const codes = t.codes;
    if (codes.length === 1) return access.valueBits(t.field, codes[0]);
    const term = new Uint32Array(words);
    for (const code of codes) {
      const valueBits = access.valueBits(t.field, code);
      for (let w = 0; w < words; w++) term[w] |= valueBits[w];
    }
    return term;
  });
  return live === null ? bits : [...bits, live];
}

/** The rows in every term, as a bitset. */
export function lookupBits(access: TableAccess, terms: readonly LookupTerm[]): Uint32Array {
  const all = termBits(access, terms);
  const out = new Uint32Array(wordsFor(access.table.rowCount));
  if (all.length === 0) return out;
  out.set(all[0]);
  for (let t = 1; t < all.length; t++) {
    const bits = all[t];
    for (let w = 0; w < out.length; w++) out[w] &= bits[w];
  }
  return out;
}

/**
 * How many live rows are in every term. Kept per generation under the terms' canonical spelling
 * (`TableAccess.keepCount`, carried exactly to the next generation), so a repeated count costs a
 * map lookup; else the AND of the terms' bitsets, rarest first, word by word: a word the rarest
 * term leaves empty is never read from the others.
 */
export function lookupCount(access: TableAccess, terms: readonly LookupTerm[]): number {
  const { table } = access;
  const coded: CodeTerm[] = codeTerms(table, terms).map((t) => ({ field: t.field, codes: [...new Set(t.codes)].sort((a, b) => a - b) }));
  coded.sort((a, b) => (a.field < b.field ? -1 : a.field > b.field ? 1 : 0));
  const key = coded.map((t) => `${t.field}\u0000${t.codes.join(',')}`).join('\u0001');
  const kept = access.keptCount(key);
  if (kept !== undefined) return kept;
  const n = countAnd(access, terms);
  access.keepCount(key, coded, n);
  return n;
}

/** The AND count of the terms' bitsets (and the live rows), rarest term first. */
function countAnd(access: TableAccess, terms: readonly LookupTerm[]): number {
  if (terms.length === 0) return 0;
  const sizes = terms.map((t) => lookupRows(access, t) ?? 0);
  const order = terms.map((_, i) => i).sort((a, b) => sizes[a] - sizes[b]);
  if (sizes[order[0]] === 0) return 0;
  const all = termBits(
    access,
    order.map((i) => terms[i]),
  );
  const words = all[0].length;
  const first = all[0];
  let n = 0;
  if (all.length === 3) {
    // the common shape (two or three lookups, or with the live rows), without the inner loop
    const [, b, c] = all;
    for (let w = 0; w < words; w++) {
      const x = first[w];
      if (x !== 0) {
        const y = x & b[w] & c[w];
        if (y !== 0) n += popcount32(y);
      }
    }
    return n;
  }
  for (let w = 0; w < words; w++) {
    let x = first[w];
    for (let t = 1; t < all.length && x !== 0; t++) x &= all[t][w];
    if (x !== 0) n += popcount32(x);
  }
  return n;
}

/** The rows of a bitset that `accept` allows, ascending. */
export function collectBits(bits: Uint32Array, accept: (row: number) => boolean): Uint32Array {
  const out = new Uint32List(popcount(bits, bits.length * 32));
  for (let w = 0; w < bits.length; w++) {
    let word = bits[w];
    while (word !== 0) {
      const row = (w << 5) | (31 - Math.clz32(word & -word));
      if (accept(row)) out.push(row);
      word &= word - 1;
    }
  }
  return out.done();
}

/** Rows holding any of the term's values (the planner's lookup statistic), or null when the field is not dictionary-coded. */
export function lookupRows(access: TableAccess, term: LookupTerm): number | null {
  const counts = access.codeCounts(term.field);
  if (counts === null) return null;
  const col = access.table.columnOf(term.field, 'dictionary')!;
  let size = 0;
  for (const v of term.values) {
    const code = col.dictionary.indexOf(v);
    if (code > 0) size += counts[code];
  }
  return size;
}
