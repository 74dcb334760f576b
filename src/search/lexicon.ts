/**
 * Term look-ups beyond exact match, for RawAddressSearchText: prefixes of the last query term
 * (type-ahead) over term lists sorted by text, and words within one Damerau edit (optimal string
 * alignment: insert, delete, substitute, or swap two neighbours) through a symmetric-deletion
 * index, so a look-up touches only true candidates instead of the whole vocabulary.
 *
 * A lexicon can grow: `extend()` takes in terms appended to its vocabulary since (the tail
 * vocabulary of live updates, src/search/live.ts). The terms sorted at construction form one run;
 * each extension adds a sorted run, and runs merge like a binary counter (a run merges into the one
 * before it while that one is no longer), so there are O(log n) runs and each term is merged
 * O(log n) times over its life.
 *
 * A frozen index's lexicon is built on first use (`lexiconOf`): about 10-20 ms for the address
 * field at 100k listings. A compaction builds the new index's lexicon in steps before it publishes,
 * when the old one's was in use (`lexiconSteps`), so that the first address search after it does
 * not build one on the event loop.
 */
import { partitionPoint } from '../util/binary-search.js';
import { sortSteps } from '../util/sort-steps.js';
import { runNow, type Steps } from '../util/steps.js';
import type { FieldIndex } from './postings.js';

/** Terms taken into the one-deletion index between two check points. */
const DELETION_TERMS_PER_STEP = 8;

const LETTERS_ONLY = /^\p{L}+$/u;
export const FUZZY_MIN_LETTERS = 5;

export function isFuzzyCandidate(word: string): boolean {
  return word.length >= FUZZY_MIN_LETTERS && LETTERS_ONLY.test(word);
}

/** Terms by id: the term of id `firstId + i` is `terms[i]`; `idOf` gives a term's id, -1 for none. */
export interface Vocabulary {
  readonly terms: readonly string[];
  idOf(term: string): number;
}

export class Lexicon {
  /** Term ids, each run in ascending order of term text. */
  private runs: Uint32Array[] = [];
  /** One-deletion variant -> ids (ascending) of fuzzy-eligible terms having it. */
  private readonly deletions = new Map<string, number[]>();
  /** Terms of the vocabulary taken in so far. */
  private size = 0;

  /** A lexicon of the vocabulary's terms so far (`extended`: taken in at once; false: none yet, `extendSteps` takes them in). */
  constructor(
    private readonly vocabulary: Vocabulary,
    private readonly firstId = 0,
    extended = true,
  ) {
    if (extended) this.extend();
  }

  /** Takes in the terms appended to the vocabulary since the last call (or construction). */
  extend(): void {
    runNow(this.extendSteps());
  }

  /** `extend` in steps: the new terms sorted (`sortSteps`), then taken into the deletion index a few at a time. */
  *extendSteps(): Steps<void> {
    const { terms } = this.vocabulary;
    const end = terms.length;
    if (this.size === end) return;
    const first = this.firstId;
    const text = (id: number): string => terms[id - first];
    const run = new Uint32Array(end - this.size);
    for (let i = 0; i < run.length; i++) run[i] = first + this.size + i;
    yield* sortSteps(run, (a, b) => (text(a) < text(b) ? -1 : text(a) > text(b) ? 1 : 0));
    for (let id = first + this.size; id < first + end; id++) {
      if ((id - first) % DELETION_TERMS_PER_STEP === 0) yield;
      const term = text(id);
      if (!isFuzzyCandidate(term)) continue;
      for (const d of deletionsOf(term)) {
        const list = this.deletions.get(d);
        if (list) {
          if (list[list.length - 1] !== id) list.push(id);
        } else this.deletions.set(d, [id]);
      }
    }
    this.size = end;
    const runs = this.runs;
    runs.push(run);
    while (runs.length > 1 && runs[runs.length - 2].length <= runs[runs.length - 1].length) {
      const b = runs.pop()!;
      const a = runs.pop()!;
      runs.push(mergeRuns(a, b, text));
    }
  }

  /** Ids of terms that start with `prefix` (the prefix itself included when it is a term). */
  withPrefix(prefix: string, out: number[]): number[] {
    const { terms } = this.vocabulary;
    const first = this.firstId;
    for (const sorted of this.runs) {
      const lo = partitionPoint(0, sorted.length, (i) => terms[sorted[i] - first] < prefix);
      for (let i = lo; i < sorted.length && terms[sorted[i] - first].startsWith(prefix); i++) out.push(sorted[i]);
    }
    return out;
  }

  /** Ids of fuzzy-eligible terms within one Damerau (OSA) edit of `word`, excluding `word` itself. */
  withinOneEdit(word: string, out: number[]): number[] {
    if (!isFuzzyCandidate(word)) return out;
    const { terms } = this.vocabulary;
    const found = new Set<number>();
    const consider = (id: number): void => {
      if (id < 0 || found.has(id) || id - this.firstId >= this.size) return;
      const term = terms[id - this.firstId];
      if (term !== word && isFuzzyCandidate(term) && osaDistanceAtMostOne(word, term)) found.add(id);
    };
    // word is a term with one letter inserted (term = word minus one letter)
    for (const d of deletionsOf(word)) {
      consider(this.vocabulary.idOf(d));
      for (const id of this.deletions.get(d) ?? []) consider(id); // substitution or swap
    }
    for (const id of this.deletions.get(word) ?? []) consider(id); // term = word plus one letter
    for (const id of found) out.push(id);
    return out;
  }
}

/** Two runs merged into one, in ascending order of term text. */
function mergeRuns(a: Uint32Array, b: Uint32Array, text: (id: number) => string): Uint32Array {
  const out = new Uint32Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = text(b[j]) < text(a[i]) ? b[j++] : a[i++];
  while (i < a.length) out[k++] = a[i++];
  while (j < b.length) out[k++] = b[j++];
  return out;
}

const lexicons = new WeakMap<FieldIndex, Lexicon>();
/** Lexicons of frozen indexes built so far (tests read it). */
let built = 0;

/** The lexicon of a frozen index, built on first use. */
export function lexiconOf(index: FieldIndex): Lexicon {
  return lexicons.get(index) ?? runNow(lexiconSteps(index));
}

/** Whether the lexicon of a frozen index is built (a look-up by prefix or edit distance used it). */
export function hasLexicon(index: FieldIndex): boolean {
  return lexicons.has(index);
}

/**
 * Steps that build the lexicon of a frozen index, or return the one built. Between two steps a
 * query could build it too: only for an index no query reads yet (a compaction's, before it is
 * published), or run at once (`lexiconOf`).
 */
export function* lexiconSteps(index: FieldIndex): Steps<Lexicon> {
  const known = lexicons.get(index);
  if (known !== undefined) return known;
  const { terms } = index;
  const lex = new Lexicon({ terms: yield* terms.listSteps(), idOf: (term) => terms.id(term) }, 0, false);
  yield* lex.extendSteps();
  lexicons.set(index, lex);
  built++;
  return lex;
}

/** Lexicons of frozen indexes built so far in this process. */
export function lexiconsBuilt(): number {
  return built;
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
