/**
 * One inverted index per search field, built once over row ids and then frozen: a term
 * dictionary, postings in CSR form (per term a slice of ascending row ids with their term
 * frequencies) and the field's token count per row. FlexSearch cannot give BM25 scores, so the
 * postings are ours (see DESIGN.md, "Text search").
 */
import { runNow, type Steps } from '../util/steps.js';
import { normalizeAddressToken, tokenizeInto } from './tokenize.js';

export interface FieldIndex {
  /** Number of rows (listings) the index covers: BM25's N. */
  readonly rowCount: number;
  /** Whether address normalization, prefix and fuzzy matching apply (RawAddressSearchText). */
  readonly address: boolean;
  readonly termIds: ReadonlyMap<string, number>;
  readonly terms: readonly string[];
  /** Postings of term t are rows[offsets[t]..offsets[t+1]) with frequencies tfs[...]. */
  readonly offsets: Uint32Array;
  readonly rows: Uint32Array;
  readonly tfs: Uint16Array;
  /** Token count of the field per row. */
  readonly lengths: Uint32Array;
  /** Mean field length over all rowCount rows. */
  readonly avgLength: number;
}

/** Growable typed buffer for the first pass. */
class Buffer32 {
  data = new Uint32Array(1024);
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const next = new Uint32Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }
}

/**
 * Builds the index of one field. `textsOf(row, out)` appends the row's source strings for the
 * field, in source order; tokens of all of them together form the field. With `tokenized`, the
 * callback appends tokens already (callers that cache the tokens of repeated values).
 */
export function buildFieldIndex(
  rowCount: number,
  textsOf: (row: number, out: string[]) => void,
  options: { address: boolean; tokenized?: boolean },
): FieldIndex {
  return runNow(buildFieldIndexSteps(rowCount, textsOf, options));
}

/** Rows buildFieldIndexSteps reads or writes between two yields. */
export const BUILD_STEP_ROWS = 64;

/**
 * buildFieldIndex as steps: it yields after every BUILD_STEP_ROWS rows of each pass, so a caller
 * can let other work run while a large index is built (compaction); the return value is the index.
 */
export function* buildFieldIndexSteps(
  rowCount: number,
  textsOf: (row: number, out: string[]) => void,
  options: { address: boolean; tokenized?: boolean },
): Steps<FieldIndex> {
  const termIds = new Map<string, number>();
  const terms: string[] = [];
  const lengths = new Uint32Array(rowCount);
  const pairTerms = new Buffer32();
  const pairTfs = new Buffer32();
  const rowStart = new Uint32Array(rowCount + 1);
  let df = new Uint32Array(1024);
  let seen = new Int32Array(1024).fill(-1); // term -> index in rowTerms for the current row, or -1
  const rowTerms: number[] = [];
  const rowCounts: number[] = [];
  const texts: string[] = [];
  const tokens: string[] = [];
  let total = 0;

  for (let row = 0; row < rowCount; row++) {
    if (row % BUILD_STEP_ROWS === BUILD_STEP_ROWS - 1) yield;
    tokens.length = 0;
    if (options.tokenized) textsOf(row, tokens);
    else {
      texts.length = 0;
      textsOf(row, texts);
      for (const t of texts) tokenizeInto(t, tokens);
    }
    rowTerms.length = 0;
    rowCounts.length = 0;
    for (let token of tokens) {
      if (options.address) token = normalizeAddressToken(token);
      let id = termIds.get(token);
      if (id === undefined) {
        id = terms.length;
        termIds.set(token, id);
        terms.push(token);
        if (id >= df.length) {
          const grownDf = new Uint32Array(df.length * 2);
          grownDf.set(df);
          df = grownDf;
          const grownSeen = new Int32Array(seen.length * 2).fill(-1);
          grownSeen.set(seen);
          seen = grownSeen;
        }
      }
      const at = seen[id];
      if (at >= 0) rowCounts[at]++;
      else {
        seen[id] = rowTerms.length;
        rowTerms.push(id);
        rowCounts.push(1);
      }
    }
    for (let k = 0; k < rowTerms.length; k++) {
      const id = rowTerms[k];
      seen[id] = -1;
      df[id]++;
      pairTerms.push(id);
      pairTfs.push(Math.min(rowCounts[k], 0xffff));
    }
    lengths[row] = tokens.length;
    total += tokens.length;
    rowStart[row + 1] = pairTerms.length;
  }

  const offsets = new Uint32Array(terms.length + 1);
  for (let t = 0; t < terms.length; t++) offsets[t + 1] = offsets[t] + df[t];
  const cursor = offsets.slice(0, terms.length);
  const postings = pairTerms.length;
  const rows = new Uint32Array(postings);
  const tfs = new Uint16Array(postings);
  for (let row = 0; row < rowCount; row++) {
    if (row % (BUILD_STEP_ROWS * 8) === BUILD_STEP_ROWS * 8 - 1) yield;
    for (let k = rowStart[row]; k < rowStart[row + 1]; k++) {
      const pos = cursor[pairTerms.data[k]]++;
      rows[pos] = row;
      tfs[pos] = pairTfs.data[k];
    }
  }
  return {
    rowCount,
    address: options.address,
    termIds,
    terms,
    offsets,
    rows,
    tfs,
    lengths,
    avgLength: rowCount === 0 ? 0 : total / rowCount,
  };
}
