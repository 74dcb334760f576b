/**
 * Access structures over a table, built on first use and kept (tables are immutable): the rank of
 * each row's key (the final tie-break of every order), sorted permutations of sortable numeric
 * columns (ordered walks for `$orderby X&$top=k`, range candidates),
 * per-value bitsets of dictionary columns (equality and `in`), and
 * for Property the six search indexes and the KD-trees of Location and RawLocation.
 */
import { getBit, newBitmap, popcount32, setBit } from '../util/bits.js';
import { compareUtf8 } from '../store/bytes.js';
import type { Store } from '../store/store.js';
import type { Table } from '../store/table.js';
import { PointIndex } from '../geo/point-index.js';
import { runNow, type Steps } from '../util/steps.js';
import { sortSteps } from '../util/sort-steps.js';
import { PointView } from '../geo/live-points.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../schema/search-fields.js';
import { buildSearchIndexesOfTable, type SearchIndexes } from '../search/indexes.js';
import { SearchView } from '../search/live.js';
import { blockCountsSteps, extendSteps, foldBound, SplitOrder } from './split-order.js';
import { Backing, withRoom } from '../store/append/growable.js';
import { ParentKeyColumn, Utf8TextColumn } from '../store/columns.js';
import type { ChildResourceName } from '../schema/types.js';
import { addTextRowsSteps, TextRows } from './text-rows.js';

/** Rows (or words) of plain copying or filling between two check points of carrying a structure over (a power of two). */
const STEP_ROWS = 1 << 13;

/** Keys compared between two check points of building a key order (a power of two). */
const KEY_SCAN_ROWS = 2048;

/** Per-value bitsets kept per table (each is rowCount bits; the oldest made is dropped first). */
const MAX_VALUE_BITSETS = 64;

/** Composite counts kept per table (the oldest made is dropped first). */
const MAX_COMPOSITE_COUNTS = 256;

/**
 * Walk counts kept per table: entries, and bytes of their bitsets and block counts (the oldest
 * made is dropped first).
 */
const MAX_WALK_COUNTS = 32;
const MAX_WALK_COUNT_BYTES = 16 << 20;

/**
 * What ordered walks of one lookup over one sorted order keep in a generation (src/exec/walk.ts
 * decides what and when): the lookup's bitset, the positions plain walks have read so far, and
 * once they are worth it, the block counts of the bitset over the whole order.
 */
export interface WalkCounts {
  /** The lookup and the order walked (the next generation makes its own counts from them). */
  readonly of: WalkOf;
  paid: number;
  /** Set by keepWalkCounts only (it keeps the byte count). */
  bits: Uint32Array | null;
  counts: Uint32Array | null;
}

/** What walk counts count: the rows holding one of each term's values, over the sorted order of `field`, one way. */
export interface WalkOf {
  readonly terms: ReadonlyArray<{ readonly field: string; readonly values: readonly string[] }>;
  readonly field: string;
  readonly descending: boolean;
}

/** One dictionary column's codes a composite count holds rows of. */
export interface CodeTerm {
  readonly field: string;
  readonly codes: readonly number[];
}

/** A composite count: the live rows holding one of each term's codes. */
interface CompositeCount {
  readonly terms: readonly CodeTerm[];
  readonly count: number;
}

/**
 * The key ranks of a line of generations of a table: one growable array (a column's Backing),
 * where each next generation writes the ranks of its appended rows after the rows the previous one
 * ranked (older generations read only their own rows). Ranks are spaced `gap` apart when made, so
 * that a row added later gets a rank between its neighbours' without renumbering them.
 */
interface RankLine {
  readonly ranks: Backing<Uint32Array>;
  /** Rows ranked by the newest generation of the line. */
  rows: number;
  readonly gap: number;
}

export class TableAccess {
  /** The key rank of each row (a view of the line's array), spaced: only the order of two ranks means anything. */
  private keyRankCache: Uint32Array | null = null;
  private rankLine: RankLine | null = null;
  private keyOrderCache: SplitOrder | null = null;
  /** Whether the key order or rank was asked for through `keyOrder` / `keyRank` (queries, merges), not only built by a compaction for itself. */
  private keyOrderRead = false;
  private readonly sorted = new Map<string, SplitOrder>();
  private readonly sortedDesc = new Map<string, SplitOrder>();
  private readonly valueBitsCache = new Map<string, Uint32Array>();
  private readonly countsCache = new Map<string, Uint32Array>();
  private readonly textIndexes = new Map<string, TextRows>();
  private readonly composite = new Map<string, CompositeCount>();
  private readonly walkCountsCache = new Map<string, WalkCounts>();
  private walkCountBytes = 0;
  private liveCache: Uint32Array | null = null;
  private deadCountCache: number | null = null;

  constructor(
    readonly table: Table,
    /** The generation's dead rows (bit set: replaced or removed), or null when none is dead. */
    readonly dead: Uint32Array | null = null,
  ) {}

  /** How many rows are dead in this generation. */
  get deadCount(): number {
    if (this.deadCountCache === null) {
      let n = 0;
      if (this.dead !== null) for (let w = 0; w < this.dead.length; w++) if (this.dead[w] !== 0) n += popcount32(this.dead[w]);
      this.deadCountCache = n;
    }
    return this.deadCountCache;
  }

  /** Whether a row is dead in this generation. */
  isDead(row: number): boolean {
    return this.dead !== null && getBit(this.dead, row);
  }

  /** The live rows as a bitset (the complement of `dead`), or null when every row is live. */
  get liveBits(): Uint32Array | null {
    const dead = this.dead;
    if (dead === null) return null;
    if (this.liveCache === null) {
      const n = this.table.rowCount;
      const live = newBitmap(n);
      for (let w = 0; w < live.length; w++) live[w] = ~dead[w];
      if ((n & 31) !== 0) live[live.length - 1] &= (1 << (n & 31)) - 1;
      this.liveCache = live;
    }
    return this.liveCache;
  }

  /**
   * The access of the next generation of this table (`table` holds this one's rows and more,
   * unchanged, then appended rows), with `steps` that carry every structure this access has built
   * over to it, extended by the appended rows (sorted orders: the new rows merged into their tails,
   * a copy of the whole order only when a tail folds; key ranks: written for the new rows in the
   * line's array), so queries on the new generation never pay for building them. Run every step
   * before the new generation is published; the steps check in every few thousand rows
   * (STEP_ROWS), so a caller can give the event loop a turn within one structure's work. Nothing
   * this access reads is changed.
   */
  next(table: Table, dead: Uint32Array | null): { access: TableAccess; steps: Steps<void> } {
    const access = new TableAccess(table, dead);
    return { access, steps: this.nextSteps(access, table, dead) };
  }

  private *nextSteps(access: TableAccess, table: Table, dead: Uint32Array | null): Steps<void> {
    const from = this.table.rowCount;
    const to = table.rowCount;
    const maxTail = foldBound(to);
    if (this.keyOrderCache !== null) {
      const compare = keyComparator(table);
      const order = yield* extendSteps(this.keyOrderCache, yield* addedRows(from, to, compare), compare, maxTail);
      access.keyOrderCache = order;
      access.keyOrderRead = this.keyOrderRead;
      if (this.rankLine !== null) yield* access.nextRankSteps(this.rankLine, from);
    }
    for (const [field, perm] of this.sorted) {
      const c = table.column(field) as { values: Float64Array; validity: Uint32Array };
      const ascending = valueOrder(c.values, c.validity, access.keyRank);
      access.sorted.set(field, yield* extendSteps(perm, yield* addedRows(from, to, ascending), ascending, maxTail));
      const desc = this.sortedDesc.get(field);
      if (desc !== undefined) {
        const descending = descendingOrder(c.values, c.validity, access.keyRank);
        access.sortedDesc.set(field, yield* extendSteps(desc, yield* addedRows(from, to, descending), descending, maxTail));
      }
    }
    for (const [key, bits] of this.valueBitsCache) {
      const at = key.indexOf('\u0000');
      const codes = table.columnOf(key.slice(0, at), 'dictionary')!.codes;
      const code = Number(key.slice(at + 1));
      const grown = newBitmap(to);
      grown.set(bits);
      for (let r = from; r < to; r++) if (codes[r] === code) setBit(grown, r);
      access.valueBitsCache.set(key, grown);
      yield;
    }
    for (const [field, counts] of this.countsCache) {
      const c = table.columnOf(field, 'dictionary')!;
      const grown = new Uint32Array(c.dictionary.length);
      grown.set(counts);
      for (let r = from; r < to; r++) grown[c.codes[r]]++;
      access.countsCache.set(field, grown);
      yield;
    }
    if (this.composite.size > 0) {
      const prevDead = this.dead;
      // Exact under the change: less the counted rows it killed, plus the live rows it appended
      // that hold the terms' codes (rows never change in place; a replaced one is dead).
      const killed: number[] = [];
      if (dead !== null) {
        const words = (from + 31) >>> 5;
        for (let w = 0; w < words; w++) {
          let word = dead[w] & ~(prevDead === null ? 0 : prevDead[w]);
          while (word !== 0) {
            const row = (w << 5) | (31 - Math.clz32(word & -word));
            if (row < from) killed.push(row);
            word &= word - 1;
          }
          if ((w & (STEP_ROWS - 1)) === STEP_ROWS - 1) yield;
        }
      }
      for (const [key, { terms, count }] of this.composite) {
        const holds = rowTest(table, terms);
        let n = count;
        for (const row of killed) if (holds(row)) n--;
        for (let r = from; r < to; r++) if ((dead === null || !getBit(dead, r)) && holds(r)) n++;
        access.composite.set(key, { terms, count: n });
        yield;
      }
    }
    for (const [key, w] of this.walkCountsCache) {
      if (w.counts === null || w.bits === null) continue;
      const order = (w.of.descending ? access.sortedDesc : access.sorted).get(w.of.field);
      if (order === undefined) continue;
      // The lookup's rows: the older ones less those the change killed, plus the appended live
      // rows that hold its values (codes looked up in this table's dictionaries: a change may add a value).
      const bits = newBitmap(to);
      bits.set(w.bits);
      if (dead !== null) for (let i = 0, words = (from + 31) >>> 5; i < words; i++) bits[i] &= ~dead[i];
      const holds = rowTest(table, codeTerms(table, w.of.terms));
      for (let r = from; r < to; r++) if ((dead === null || !getBit(dead, r)) && holds(r)) setBit(bits, r);
      yield;
      const fresh: WalkCounts = { of: w.of, paid: 0, bits: null, counts: null };
      access.walkCountsCache.set(key, fresh);
      access.keepWalkCounts(fresh, bits, yield* blockCountsSteps(order, bits));
    }
    for (const [field, index] of this.textIndexes) {
      // an index a later generation of the lineage extended (a change rolled back since) is not carried: made again on use
      if (index.covered !== from) continue;
      yield* addTextRowsSteps(index, table.column(field) as Utf8TextColumn, to);
      access.textIndexes.set(field, index);
    }
  }

  /**
   * Steps that give `next`, the access of this table compacted (its live rows in key order: row i
   * of the compacted table was row `rows[i]` here), every structure this access has built, derived
   * from this one's in O(rows) — permutations filtered and renumbered, bitsets renumbered, counts
   * made afresh, composite counts as they are (compaction keeps exactly the live rows) — so that
   * queries on the compacted generation find them built, as they do after a change (`next`).
   * Walk counts, a cache of their own, are left to be made on use.
   */
  *compactedSteps(next: TableAccess, rows: Uint32Array): Steps<void> {
    // the new row + 1 of each old row, 0 for a row dropped (no fill of the whole array at once)
    const newRowOf = new Uint32Array(this.table.rowCount);
    for (let i = 0; i < rows.length; i++) {
      newRowOf[rows[i]] = i + 1;
      if ((i & (STEP_ROWS - 1)) === STEP_ROWS - 1) yield;
    }
    function* renumbered(perm: SplitOrder): Steps<SplitOrder> {
      const out = new Uint32Array(rows.length);
      let k = 0;
      const c = perm.cursor();
      for (let i = 0; i < perm.length; i++) {
        const row = newRowOf[c.next()];
        if (row > 0) out[k++] = row - 1;
        if ((i & (STEP_ROWS - 1)) === STEP_ROWS - 1) yield;
      }
      return new SplitOrder(out);
    }
    // compaction builds every table's key order for itself: carried only where it was asked for
    if (this.keyOrderRead) yield* next.keyOrderSteps();
    if (this.rankLine !== null) yield* next.keyRankSteps();
    for (const [field, perm] of this.sorted) next.sorted.set(field, yield* renumbered(perm));
    for (const [field, perm] of this.sortedDesc) next.sortedDesc.set(field, yield* renumbered(perm));
    for (const [key, bits] of this.valueBitsCache) {
      const out = newBitmap(rows.length);
      for (let i = 0; i < rows.length; i++) {
        if (getBit(bits, rows[i])) setBit(out, i);
        if ((i & (STEP_ROWS - 1)) === STEP_ROWS - 1) yield;
      }
      next.valueBitsCache.set(key, out);
    }
    for (const field of this.countsCache.keys()) {
      const c = next.table.columnOf(field, 'dictionary')!;
      const counts = new Uint32Array(c.dictionary.length);
      for (let r = 0; r < next.table.rowCount; r++) {
        counts[c.codes[r]]++;
        if ((r & (STEP_ROWS - 1)) === STEP_ROWS - 1) yield;
      }
      next.countsCache.set(field, counts);
    }
    for (const [key, count] of this.composite) next.composite.set(key, count);
    for (const field of this.textIndexes.keys()) {
      const column = next.table.column(field) as Utf8TextColumn;
      const index = new TextRows(column, next.table.rowCount);
      yield* addTextRowsSteps(index, column, next.table.rowCount);
      next.textIndexes.set(field, index);
    }
  }

  /**
   * A rank of each row's key in ascending ordinal order (ties by row): a row's key comes before
   * another's exactly when its rank is lower. Ranks are spaced, not positions.
   */
  get keyRank(): Uint32Array {
    this.keyOrderRead = true;
    return this.keyRankCache ?? runNow(this.keyRankSteps());
  }

  /** Rows in ascending key order (ties by row). */
  get keyOrder(): SplitOrder {
    this.keyOrderRead = true;
    return this.keyOrderCache ?? runNow(this.keyOrderSteps());
  }

  /** The key ranks, made in steps from the key order when not made yet: (position + 1) × gap. */
  *keyRankSteps(): Steps<Uint32Array> {
    if (this.keyRankCache) return this.keyRankCache;
    const order = yield* this.keyOrderSteps();
    const n = this.table.rowCount;
    const gap = rankGap(n);
    const ranks = new Backing(withRoom(Uint32Array, n));
    const array = ranks.array;
    const c = order.cursor();
    for (let p = 0; p < n; p++) {
      array[c.next()] = (p + 1) * gap;
      if ((p & (STEP_ROWS - 1)) === STEP_ROWS - 1) yield;
    }
    this.rankLine = { ranks, rows: n, gap };
    this.keyRankCache = array.subarray(0, n);
    return this.keyRankCache;
  }

  /**
   * This (next) generation's key ranks from the previous one's line: the ranks of its appended
   * rows [from, rowCount) placed between their neighbours' in its key order, written in the line's
   * array when the previous generation is the line's newest and the array has room (else in a
   * copy with room). When the key order folded, or a gap between two neighbours is too narrow
   * for the rows placed in it, the ranks are made afresh (keyRankSteps).
   */
  private *nextRankSteps(line: RankLine, from: number): Steps<void> {
    const order = this.keyOrderCache!;
    const to = this.table.rowCount;
    if (order.tail.length > 0) {
      // not the line's newest generation (a change rolled back since): a copy of its own
      if (line.rows !== from) line = { ranks: new Backing(line.ranks.array), rows: from, gap: line.gap };
      yield* line.ranks.roomSteps(from, to);
      const array = line.ranks.array;
      if (placeRanks(order, array, from, line.gap)) {
        line.rows = to;
        this.rankLine = line;
        this.keyRankCache = array.subarray(0, to);
        return;
      }
    }
    yield* this.keyRankSteps();
  }

  /**
   * The key order, built in steps when not built yet (compaction). Loaded data is usually in key
   * order already: the rows up to the first out of order are the base as they are, and the rest
   * are sorted in steps (`sortSteps`) and merged in (`extendSteps`). Keys compare on their UTF-8 bytes
   * (`compareUtf8`, ordinal like UTF-16 strings), ties by row.
   */
  *keyOrderSteps(): Steps<SplitOrder> {
    if (this.keyOrderCache) return this.keyOrderCache;
    const n = this.table.rowCount;
    const compare = keyComparator(this.table);
    let sorted = Math.min(1, n);
    while (sorted < n && compare(sorted - 1, sorted) < 0) {
      sorted++;
      if ((sorted & (KEY_SCAN_ROWS - 1)) === 0) yield;
    }
    const base = new Uint32Array(sorted);
    for (let i = 0; i < sorted; i++) {
      base[i] = i;
      if ((i & (STEP_ROWS - 1)) === STEP_ROWS - 1) yield;
    }
    const order = yield* extendSteps(new SplitOrder(base), yield* addedRows(sorted, n, compare), compare, foldBound(n));
    this.keyOrderCache = order;
    return order;
  }

  /**
   * Rows of a number/date/timestamp column in ascending order of value, nulls first, ties by key
   * rank: walking it forwards gives `asc`, backwards (with nulls moved last) `desc`.
   */
  sortedBy(field: string): SplitOrder | null {
    const kept = this.sorted.get(field);
    if (kept) return kept;
    const c = this.table.column(field);
    if (!c || (c.kind !== 'number' && c.kind !== 'date' && c.kind !== 'timestamp')) return null;
    const perm = Uint32Array.from({ length: this.table.rowCount }, (_, i) => i);
    perm.sort(valueOrder(c.values, c.validity, this.keyRank));
    const order = new SplitOrder(perm);
    this.sorted.set(field, order);
    return order;
  }

  /**
   * Rows of a sortedBy column in descending order of value, ties still by key rank ascending,
   * nulls last: what `$orderby X desc` returns, ready for a forward walk.
   */
  sortedDescending(field: string): SplitOrder | null {
    const kept = this.sortedDesc.get(field);
    if (kept) return kept;
    const ascending = this.sortedBy(field);
    if (!ascending) return null;
    const asc = ascending.toArray();
    const { values, validity } = this.table.column(field) as { values: Float64Array; validity: Uint32Array };
    const perm = new Uint32Array(asc.length);
    let k = 0;
    let firstValid = 0;
    while (firstValid < asc.length && !getBit(validity, asc[firstValid])) firstValid++;
    // equal values form runs in the ascending order; emit the runs last to first, each as it is
    let end = asc.length;
    while (end > firstValid) {
      let start = end - 1;
      while (start > firstValid && values[asc[start - 1]] === values[asc[end - 1]]) start--;
      for (let i = start; i < end; i++) perm[k++] = asc[i];
      end = start;
    }
    for (let i = 0; i < firstValid; i++) perm[k++] = asc[i];
    const order = new SplitOrder(perm);
    this.sortedDesc.set(field, order);
    return order;
  }

  /**
   * Rows whose UTF-8 text column equals `value` (ascending): the key through the table's key index,
   * other text fields (ListingId, ...) through an index of the column made on first use
   * (`text-rows.ts`). Null when the field is not a UTF-8 text column (a child's link to its
   * listing: `StoreAccess.textRows`).
   */
  textRows(field: string, value: string): readonly number[] | null {
    const c = this.table.column(field);
    if (!(c instanceof Utf8TextColumn)) return null;
    if (field === this.table.schema.key) {
      const row = this.table.rowOfKey(value);
      return row < 0 ? [] : [row];
    }
    let index = this.textIndexes.get(field);
    if (!index) {
      index = new TextRows(c, this.table.rowCount);
      index.add(c, this.table.rowCount);
      this.textIndexes.set(field, index);
    }
    return index.rows(value, this.table.rowCount);
  }

  /** How many rows hold each code of a dictionary column (index 0: nulls). */
  codeCounts(field: string): Uint32Array | null {
    let counts = this.countsCache.get(field);
    if (counts) return counts;
    const c = this.table.column(field);
    if (!c || c.kind !== 'dictionary') return null;
    counts = new Uint32Array(c.dictionary.length);
    for (let r = 0; r < c.codes.length; r++) counts[c.codes[r]]++;
    this.countsCache.set(field, counts);
    return counts;
  }

  /** A composite count kept under `key` (see `keepCount`), or undefined. */
  keptCount(key: string): number | undefined {
    return this.composite.get(key)?.count;
  }

  /**
   * Keeps the number of live rows that hold one of each term's codes, under `key` (the caller's
   * canonical spelling of the terms). The next generation's access carries it over, adjusted by
   * the rows the change killed and appended (`next`), so it stays exact.
   */
  keepCount(key: string, terms: readonly CodeTerm[], count: number): void {
    if (this.composite.size >= MAX_COMPOSITE_COUNTS) this.composite.delete(this.composite.keys().next().value!);
    this.composite.set(key, { terms, count });
  }

  /**
   * The walk counts kept under `key` (the caller's spelling of the lookup and the order), made
   * empty on first use (`of()` says what they count). Those with block counts are carried to
   * the next generation by a change (`next`), made again for its rows and order in the change's
   * steps; the others start empty there.
   */
  walkCounts(key: string, of: () => WalkOf): WalkCounts {
    let w = this.walkCountsCache.get(key);
    if (w === undefined) {
      if (this.walkCountsCache.size >= MAX_WALK_COUNTS) this.dropOldestWalkCounts();
      w = { of: of(), paid: 0, bits: null, counts: null };
      this.walkCountsCache.set(key, w);
    }
    return w;
  }

  /** Keeps a bitset and block counts in walk counts made by `walkCounts`, within the byte bound. */
  keepWalkCounts(w: WalkCounts, bits: Uint32Array, counts: Uint32Array | null): void {
    this.walkCountBytes += walkCountBytes(bits, counts) - walkCountBytes(w.bits, w.counts);
    w.bits = bits;
    w.counts = counts;
    while (this.walkCountBytes > MAX_WALK_COUNT_BYTES && this.walkCountsCache.values().next().value !== w) this.dropOldestWalkCounts();
  }

  private dropOldestWalkCounts(): void {
    const [key, w] = this.walkCountsCache.entries().next().value!;
    this.walkCountBytes -= walkCountBytes(w.bits, w.counts);
    this.walkCountsCache.delete(key);
  }

  /** The rows holding one code of a dictionary column, as a bitset (built on first use; dead rows included). */
  valueBits(field: string, code: number): Uint32Array {
    const key = `${field}\u0000${code}`;
    let bits = this.valueBitsCache.get(key);
    if (!bits) {
      if (this.valueBitsCache.size >= MAX_VALUE_BITSETS) this.valueBitsCache.delete(this.valueBitsCache.keys().next().value!);
      const c = this.table.columnOf(field, 'dictionary')!;
      bits = newBitmap(this.table.rowCount);
      const codes = c.codes;
      for (let r = 0; r < codes.length; r++) if (codes[r] === code) setBit(bits, r);
      this.valueBitsCache.set(key, bits);
    }
    return bits;
  }
}

function walkCountBytes(bits: Uint32Array | null, counts: Uint32Array | null): number {
  return (bits?.byteLength ?? 0) + (counts?.byteLength ?? 0);
}

/** Each term's values as the codes of its dictionary column in `table`, in the values' order (values not in it have none). */
export function codeTerms(table: Table, terms: WalkOf['terms']): CodeTerm[] {
  return terms.map((t) => {
    const dictionary = table.columnOf(t.field, 'dictionary')!.dictionary;
    return { field: t.field, codes: t.values.map((v) => dictionary.indexOf(v)).filter((code) => code > 0) };
  });
}

/** Whether a row holds one of each term's codes. */
function rowTest(table: Table, terms: readonly CodeTerm[]): (row: number) => boolean {
  const columns = terms.map((t) => ({ codes: table.columnOf(t.field, 'dictionary')!.codes, wanted: new Set(t.codes) }));
  return (row) => columns.every((c) => c.wanted.has(c.codes[row]));
}

/**
 * The key order of two rows of `table`: ordinal (UTF-16 code unit) order of their keys, compared
 * on the UTF-8 bytes without decoding them (`compareUtf8`), ties by row.
 */
function keyComparator(table: Table): (a: number, b: number) => number {
  const { bytes, offsets } = table.keyColumn;
  return (a, b) => compareUtf8(bytes, offsets[a], offsets[a + 1], bytes, offsets[b], offsets[b + 1]) || a - b;
}

/** The order of sortedBy: nulls first, then value, ties by key rank. */
function valueOrder(values: Float64Array, validity: Uint32Array, rank: Uint32Array): (a: number, b: number) => number {
  return (a, b) => {
    const va = getBit(validity, a);
    const vb = getBit(validity, b);
    if (va !== vb) return va ? 1 : -1;
    if (va && values[a] !== values[b]) return values[a] < values[b] ? -1 : 1;
    return rank[a] - rank[b];
  };
}

/** The order of sortedDescending: values high to low, nulls last, ties by key rank ascending. */
function descendingOrder(values: Float64Array, validity: Uint32Array, rank: Uint32Array): (a: number, b: number) => number {
  return (a, b) => {
    const va = getBit(validity, a);
    const vb = getBit(validity, b);
    if (va !== vb) return va ? -1 : 1;
    if (va && values[a] !== values[b]) return values[a] > values[b] ? -1 : 1;
    return rank[a] - rank[b];
  };
}

/** Rows [from, to) sorted by `compare`, in steps (`sortSteps`: a check point every hundred comparisons or so). */
function* addedRows(from: number, to: number, compare: (a: number, b: number) => number): Steps<Uint32Array> {
  const added = new Uint32Array(to - from);
  for (let i = 0; i < added.length; i++) added[i] = from + i;
  return yield* sortSteps(added, compare);
}

/** The spacing of the key ranks made for `rows` rows: as wide as leaves room for as many rows again after the last. */
function rankGap(rows: number): number {
  return Math.max(1, Math.min(1 << 16, 2 ** Math.floor(Math.log2(0xffffffff / (2 * rows + 2)))));
}

/**
 * Writes the ranks of rows [from, ...) of `order`'s tail (the rows a change appended) into
 * `rank`: each run of them that is consecutive in the order spread evenly between the ranks of
 * the rows around it (after the last row: `gap` apart). False when a gap is too narrow for its
 * run (nothing read by an older generation is written either way).
 */
function placeRanks(order: SplitOrder, rank: Uint32Array, from: number, gap: number): boolean {
  const { base, tail, tailPos } = order;
  let j = 0;
  while (j < tail.length) {
    if (tail[j] < from) {
      j++;
      continue;
    }
    let e = j + 1;
    while (e < tail.length && tail[e] >= from && tailPos[e] === tailPos[e - 1] + 1) e++;
    const len = e - j;
    const at = tailPos[j];
    // base rows before the run; the rows just before and after it (-1: none)
    const ins = at - j;
    const prev = j > 0 && tailPos[j - 1] === at - 1 ? tail[j - 1] : ins > 0 ? base[ins - 1] : -1;
    const next = e < tail.length && tailPos[e] === at + len ? tail[e] : ins < base.length ? base[ins] : -1;
    const lo = prev < 0 ? 0 : rank[prev];
    const hi = next < 0 ? lo + (len + 1) * gap : rank[next];
    if (hi > 0xffffffff || hi - lo < len + 1) return false;
    const step = (hi - lo) / (len + 1);
    for (let k = 0; k < len; k++) rank[tail[j + k]] = lo + Math.floor(step * (k + 1));
    j = e;
  }
  return true;
}

/** The indexes built over a loaded data set's listings (what a snapshot stores beside the store). */
export interface StoreIndexes {
  readonly search: SearchIndexes;
  readonly points: Readonly<Record<PointField, PointIndex>>;
}

export type PointField = 'Location' | 'RawLocation';

/** The point fields with a KD-tree (Property's). */
export const POINT_FIELDS: readonly PointField[] = ['Location', 'RawLocation'];

/** One generation's search and point views, and the indexes of the loaded rows they extend. */
export interface LiveIndexes {
  readonly search: Readonly<Record<SearchFieldName, SearchView>>;
  readonly points: Readonly<Record<PointField, PointView>>;
  readonly base: StoreIndexes;
}

/** The search and point indexes of a loaded Property table. */
export function buildStoreIndexes(property: Table): StoreIndexes {
  const point = (field: PointField): PointIndex => {
    const c = property.columnOf(field, 'point')!;
    return new PointIndex(c.lon, c.lat, (row) => getBit(c.validity, row));
  };
  return { search: buildSearchIndexesOfTable(property), points: { Location: point('Location'), RawLocation: point('RawLocation') } };
}

/** The access structures of one generation of the data. */
export class StoreAccess {
  private readonly tables: Map<Table, TableAccess>;
  readonly search: Readonly<Record<SearchFieldName, SearchView>>;
  readonly points: Readonly<Record<PointField, PointView>>;
  /** The indexes of the loaded rows (a generation with no change has exactly these). */
  readonly base: StoreIndexes;

  /**
   * Builds the search and point indexes of the store's listings, unless `indexes` has them
   * already (a snapshot's, or a changed generation's views); `tables` gives the generation's
   * table access structures (with their dead rows).
   */
  constructor(
    readonly store: Store,
    indexes?: StoreIndexes | LiveIndexes,
    tables?: Map<Table, TableAccess>,
  ) {
    this.tables = tables ?? new Map<Table, TableAccess>();
    if (indexes !== undefined && 'base' in indexes) {
      this.search = indexes.search;
      this.points = indexes.points;
      this.base = indexes.base;
      return;
    }
    const p = store.Property;
    this.base = indexes ?? buildStoreIndexes(p);
    const search = {} as Record<SearchFieldName, SearchView>;
    for (const f of SEARCH_FIELDS) search[f] = SearchView.of(this.base.search[f]);
    this.search = search;
    this.points = { Location: PointView.of(this.base.points.Location, p.rowCount), RawLocation: PointView.of(this.base.points.RawLocation, p.rowCount) };
  }

  of(table: Table): TableAccess {
    let a = this.tables.get(table);
    if (!a) {
      a = new TableAccess(table);
      this.tables.set(table, a);
    }
    return a;
  }

  /**
   * Rows of `table` (of this generation) whose text field equals `value`, ascending (dead rows may
   * be among them: callers test liveness); null when the field is not text. A child's link to its
   * listing (`Media?$filter=ResourceRecordKey eq 'K'`: a `ParentKeyColumn`, which holds the
   * listing's row, not the text) reads the live listing's children, the lists `$expand` reads, and
   * the children linked to no listing; any other field, the table's index (`TableAccess.textRows`).
   */
  textRows(table: Table, field: string, value: string): readonly number[] | null {
    const column = table.column(field);
    if (!(column instanceof ParentKeyColumn)) return this.of(table).textRows(field, value);
    const listings = this.store.Property;
    const listing = listings.rowOfKey(value);
    const rows: number[] = [];
    if (listing >= 0 && !this.of(listings).isDead(listing)) rows.push(...this.store.children[table.resource as ChildResourceName].childrenOf(listing));
    if (column.unlinked !== null) rows.push(...unlinkedRows(column.unlinked, value));
    return rows.sort((a, b) => a - b);
  }
}

/** The rows of a link column's values that name no listing, by value (made once per generation's map: few rows). */
const unlinkedByValue = new WeakMap<ReadonlyMap<number, string>, Map<string, number[]>>();

function unlinkedRows(unlinked: ReadonlyMap<number, string>, value: string): readonly number[] {
  let byValue = unlinkedByValue.get(unlinked);
  if (byValue === undefined) {
    byValue = new Map();
    for (const [row, v] of unlinked) {
      const rows = byValue.get(v);
      if (rows === undefined) byValue.set(v, [row]);
      else rows.push(row);
    }
    unlinkedByValue.set(unlinked, byValue);
  }
  return byValue.get(value) ?? [];
}
