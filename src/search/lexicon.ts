/**
 * Term look-ups beyond exact match, for RawAddressSearchText: prefixes of the last query term
 * (type-ahead) over the sorted term list, and words within one Damerau edit (optimal string
 * alignment: insert, delete, substitute, or swap two neighbours) through a symmetric-deletion
 * index, so a look-up touches only true candidates instead of the whole vocabulary.
 */
import type { FieldIndex } from './postings.js';

const LETTERS_ONLY = /^\p{L}+$/u;
export const FUZZY_MIN_LETTERS = 5;

export function isFuzzyCandidate(word: string): boolean {
  return word.length >= FUZZY_MIN_LETTERS && LETTERS_ONLY.test(word);
}

export class Lexicon {
  /** Term ids in ascending order of their term text. */
  private readonly sorted: Uint32Array;
  /** One-deletion variant -> ids of fuzzy-eligible terms having it. */
  private readonly deletions = new Map<string, number[]>();

  constructor(private readonly index: FieldIndex) {
    const { terms } = index;
    this.sorted = Uint32Array.from(terms.keys()).sort((a, b) => (terms[a] < terms[b] ? -1 : terms[a] > terms[b] ? 1 : 0));
    terms.forEach((term, id) => {
      if (!isFuzzyCandidate(term)) return;
      for (const d of deletionsOf(term)) {
        const list = this.deletions.get(d);
        if (list) {
          if (list[list.length - 1] !== id) list.push(id);
        } else this.deletions.set(d, [id]);
      }
    });
  }

  /** Ids of terms that start with `prefix` (the prefix itself included when it is a term). */
  withPrefix(prefix: string, out: number[]): number[] {
    const { terms } = this.index;
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (terms[this.sorted[mid]] < prefix) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < this.sorted.length && terms[this.sorted[i]].startsWith(prefix); i++) out.push(this.sorted[i]);
    return out;
  }

  /** Ids of fuzzy-eligible terms within one Damerau (OSA) edit of `word`, excluding `word` itself. */
  withinOneEdit(word: string, out: number[]): number[] {
    if (!isFuzzyCandidate(word)) return out;
    const { terms, termIds } = this.index;
    const found = new Set<number>();
    const consider = (id: number | undefined): void => {
      if (id === undefined || found.has(id)) return;
      const term = terms[id];
      if (term !== word && isFuzzyCandidate(term) && osaDistanceAtMostOne(word, term)) found.add(id);
    };
    // word is a term with one letter inserted (term = word minus one letter)
    for (const d of deletionsOf(word)) {
      consider(termIds.get(d));
      for (const id of this.deletions.get(d) ?? []) consider(id); // substitution or swap
    }
    for (const id of this.deletions.get(word) ?? []) consider(id); // term = word plus one letter
    for (const id of found) out.push(id);
    return out;
  }
}

function deletionsOf(word: string): Set<string> {
  const out = new Set<string>();
  for (let i = 0; i < word.length; i++) out.add(word.slice(0, i) + word.slice(i + 1));
  return out;
}

/** True when the optimal-string-alignment distance of a and b is 0 or 1. */
export function osaDistanceAtMostOne(a: string, b: string): boolean {
  if (a === b) return true;
  const la = a.length;
  const lb = b.length;
  if (Math.abs(la - lb) > 1) return false;
  let i = 0;
  while (i < la && i < lb && a[i] === b[i]) i++;
  if (la === lb) {
    // one substitution, or one swap of neighbours
    if (a.slice(i + 1) === b.slice(i + 1)) return true;
    return i + 1 < la && a[i] === b[i + 1] && a[i + 1] === b[i] && a.slice(i + 2) === b.slice(i + 2);
  }
  // one insertion or deletion
  return la > lb ? a.slice(i + 1) === b.slice(i) : a.slice(i) === b.slice(i + 1);
}
