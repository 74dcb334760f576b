/**
 * Access structures over a table, built on first use and kept (tables are immutable): the rank of
 * each row's key (the final tie-break of every order), sorted permutations of sortable numeric
 * columns (ordered walks for `$orderby X&$top=k`, range candidates),
 * per-value bitsets of dictionary columns (equality and `in`), and
 * for Property the six search indexes and the KD-trees of Location and RawLocation.
 */
import { getBit } from '../store/bits.js';
import { compareUtf8 } from '../store/bytes.js';
import type { Store } from '../store/store.js';
import type { Table } from '../store/table.js';
import { PointIndex } from '../geo/point-index.js';
import { buildSearchIndexesOfTable, type SearchIndexes } from '../search/indexes.js';

export class TableAccess {
  private keyRankCache: Uint32Array | null = null;
  private keyOrderCache: Uint32Array | null = null;
  private readonly sorted = new Map<string, Uint32Array>();
  private readonly sortedDesc = new Map<string, Uint32Array>();
  private readonly valueBitsCache = new Map<string, Uint32Array>();
  private readonly countsCache = new Map<string, Uint32Array>();
  private readonly textIndexes = new Map<string, Map<string, number | number[]>>();

  constructor(readonly table: Table) {}

  /** Rank of each row's key in ascending ordinal order. */
  get keyRank(): Uint32Array {
    if (!this.keyRankCache) this.buildKeyOrder();
    return this.keyRankCache!;
  }

  /** Rows in ascending key order (the inverse of keyRank). */
  get keyOrder(): Uint32Array {
    if (!this.keyOrderCache) this.buildKeyOrder();
    return this.keyOrderCache!;
  }

  private buildKeyOrder(): void {
    const n = this.table.rowCount;
    const { bytes, offsets } = this.table.keyColumn;
    // Loaded data is usually already in key order: check on the UTF-8 bytes, which order like
    // UTF-16 strings unless a key holds a 4-byte sequence (then compare as strings).
    let sorted = true;
    for (let r = 1; r < n && sorted; r++) {
      if (compareUtf8(bytes, offsets[r - 1], offsets[r], bytes, offsets[r], offsets[r + 1]) > 0) sorted = false;
    }
    if (sorted && n > 0) for (let i = offsets[0]; i < offsets[n] && sorted; i++) if (bytes[i] >= 0xf0) sorted = false;
    let order: Uint32Array;
    if (sorted) {
      order = new Uint32Array(n);
      for (let i = 0; i < n; i++) order[i] = i;
    } else {
      const keys = new Array<string>(n);
      for (let r = 0; r < n; r++) keys[r] = this.table.keyOf(r);
      order = Uint32Array.from(keys.keys()).sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : 0));
    }
    const rank = sorted ? order : new Uint32Array(n);
    if (!sorted) for (let i = 0; i < n; i++) rank[order[i]] = i;
    this.keyOrderCache = order;
    this.keyRankCache = rank;
  }

  /**
   * Rows of a number/date/timestamp column in ascending order of value, nulls first, ties by key
   * rank: walking it forwards gives `asc`, backwards (with nulls moved last) `desc`.
   */
  sortedBy(field: string): Uint32Array | null {
    let perm = this.sorted.get(field);
    if (perm) return perm;
    const c = this.table.column(field);
    if (!c || (c.kind !== 'number' && c.kind !== 'date' && c.kind !== 'timestamp')) return null;
    const { values, validity } = c;
    const rank = this.keyRank;
    perm = Uint32Array.from({ length: this.table.rowCount }, (_, i) => i);
    perm.sort((a, b) => {
      const va = getBit(validity, a);
      const vb = getBit(validity, b);
      if (va !== vb) return va ? 1 : -1;
      if (va && values[a] !== values[b]) return values[a] < values[b] ? -1 : 1;
      return rank[a] - rank[b];
    });
    this.sorted.set(field, perm);
    return perm;
  }

  /**
   * Rows of a sortedBy column in descending order of value, ties still by key rank ascending,
   * nulls last: what `$orderby X desc` returns, ready for a forward walk.
   */
  sortedDescending(field: string): Uint32Array | null {
    let perm = this.sortedDesc.get(field);
    if (perm) return perm;
    const asc = this.sortedBy(field);
    if (!asc) return null;
    const { values, validity } = this.table.column(field) as { values: Float64Array; validity: Uint32Array };
    perm = new Uint32Array(asc.length);
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
    this.sortedDesc.set(field, perm);
    return perm;
  }

  /**
   * Rows whose text column equals `value` (ascending): the key through the table's key index,
   * other text fields (ListingId, ...) through a hash map built on first use. Null when the field
   * is not a text column.
   */
  textRows(field: string, value: string): number[] | null {
    const c = this.table.column(field);
    if (!c || c.kind !== 'text') return null;
    if (field === this.table.schema.key) {
      const row = this.table.rowOfKey(value);
      return row < 0 ? [] : [row];
    }
    let index = this.textIndexes.get(field);
    if (!index) {
      index = new Map();
      for (let r = 0; r < this.table.rowCount; r++) {
        const v = c.get(r);
        if (v === null) continue;
        const had = index.get(v);
        if (had === undefined) index.set(v, r);
        else if (typeof had === 'number') index.set(v, [had, r]);
        else had.push(r);
      }
      this.textIndexes.set(field, index);
    }
    const hit = index.get(value);
    return hit === undefined ? [] : typeof hit === 'number' ? [hit] : hit;
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

  /** The rows holding one code of a dictionary column, as a bitset (built on first use). */
  valueBits(field: string, code: number): Uint32Array {
    const key = `${field}\u0000${code}`;
    let bits = this.valueBitsCache.get(key);
    if (!bits) {
      const c = this.table.columnOf(field, 'dictionary')!;
      bits = new Uint32Array((this.table.rowCount + 31) >>> 5);
      const codes = c.codes;
      for (let r = 0; r < codes.length; r++) if (codes[r] === code) bits[r >>> 5] |= 1 << (r & 31);
      this.valueBitsCache.set(key, bits);
    }
    return bits;
  }

}

/** The indexes StoreAccess builds when it is created (what a snapshot stores beside the store). */
export interface StoreIndexes {
  readonly search: SearchIndexes;
  readonly points: Readonly<Record<'Location' | 'RawLocation', PointIndex>>;
}

export class StoreAccess implements StoreIndexes {
  private readonly tables = new Map<Table, TableAccess>();
  readonly search: SearchIndexes;
  readonly points: Readonly<Record<'Location' | 'RawLocation', PointIndex>>;

  /** Builds the search and point indexes of the store's listings, unless `built` has them already (a snapshot). */
  constructor(readonly store: Store, built?: StoreIndexes) {
    if (built !== undefined) {
      this.search = built.search;
      this.points = built.points;
      return;
    }
    const p = store.Property;
    this.search = buildSearchIndexesOfTable(p);
    const point = (field: 'Location' | 'RawLocation'): PointIndex => {
      const c = p.columnOf(field, 'point')!;
      return new PointIndex(c.lon, c.lat, (row) => getBit(c.validity, row));
    };
    this.points = { Location: point('Location'), RawLocation: point('RawLocation') };
  }

  of(table: Table): TableAccess {
    let a = this.tables.get(table);
    if (!a) {
      a = new TableAccess(table);
      this.tables.set(table, a);
    }
    return a;
  }
}
