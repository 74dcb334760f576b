/**
 * $apply execution (SERVICE.md §3): the matching rows grouped by the groupby fields, each
 * aggregate computed per group, the groups ordered. Everything runs over typed arrays indexed by
 * the position of a row among the matches:
 *
 * - A group field becomes ordinal ids (0 = null, then 1.. in ascending value order): dictionary
 *   codes through the column's rank table, numbers, dates and timestamps by one sort of their
 *   distinct values, free text through one Map of its distinct strings. Several fields combine as
 *   mixed-radix numbers, compressed to dense ids after each field, so a group id order is the
 *   lexicographic order of the group values with nulls lowest — the default result order.
 * - sum/average/min/max/$count: one pass. countdistinct: positions bucketed by value id (counting
 *   sort), then one pass marking each group's last seen id. Percentiles: each group's non-null
 *   values bucketed, the value at the nearest rank selected in its bucket (Floyd-Rivest,
 *   `selectFloat64`).
 *
 * Every array as long as the matches comes from `ScratchArrays`, kept from query to query, and is
 * read only while `runApply` runs: what the result reads afterwards (`record`) is per group.
 */
import { lowerBound } from '../util/binary-search.js';
import { getBit } from '../util/bits.js';
import { ScratchArrays, type Take } from '../util/scratch-arrays.js';
import { selectFloat64 } from '../util/select.js';
import type { Column, JsonValue } from '../store/columns.js';
import { CANONICAL_STYLE, DAY_MS, formatDate, formatTimestamp } from '../store/temporal.js';
import type { Table } from '../store/table.js';
import type { BoundAggregate, BoundGrouping } from '../plan/bind-apply.js';
import type { Value } from '../plan/bound.js';
import { orderRows, type SortKey } from './order.js';

export interface ApplyResult {
  /** Result rows (groups) in all, before $skip/$top. */
  readonly count: number;
  /** Group ids in result order: the first `limit` of them. */
  readonly order: Uint32Array;
  /** The result row of a group: its group fields and aliases (the selected ones), in result order. */
  record(group: number): Record<string, JsonValue>;
}

export interface ApplyOptions {
  /** The engine clock's now (DaysOnMarket). */
  readonly nowMs: number;
  /** How many ordered groups are wanted (skip + page + 1). */
  readonly limit: number;
  /** $ignorenulls: leave null-valued properties out. */
  readonly ignoreNulls: boolean;
}

/** A column's values at the matching positions as ordinal ids: 0 is null, 1.. ascending by value. */
interface Ranked {
  readonly ids: Uint32Array;
  /** Every id is below `card`. */
  readonly card: number;
  /** The JSON value of an id, as a record would show it (dates as text, timestamps canonical). */
  readonly json: (id: number) => JsonValue;
}

/** Numeric values at the matching positions: numbers, dates in days, timestamps in ms, booleans 0/1. */
interface Numbers {
  readonly values: Float64Array;
  readonly valid: Uint8Array;
  /** Multiplier to epoch ms for aggregate results (DAY_MS for dates, else 1). */
  readonly scale: number;
}

/** The arrays of a run, kept between runs up to 2^21 elements each (16 MB of Float64Array). */
const scratch = new ScratchArrays(1 << 21);

/** Runs the grouping of `$apply` over `rows` (the matching rows, ascending). */
export function runApply(table: Table, matches: Uint32Array, grouping: BoundGrouping, options: ApplyOptions): ApplyResult {
  return scratch.run((take) => group(table, matches, grouping, options, take));
}

function group(table: Table, matches: Uint32Array, grouping: BoundGrouping, options: ApplyOptions, take: Take): ApplyResult {
  // ascending rows, so sums add up in row order whatever the candidate source returned
  let rows = matches;
  for (let i = 1; i < matches.length; i++) {
    if (matches[i] < matches[i - 1]) {
      rows = take(Uint32Array, matches.length);
      rows.set(matches);
      rows.sort();
      break;
    }
  }
  const n = rows.length;
  const numbersCache = new Map<string, Numbers | null>();
  const rankedCache = new Map<string, Ranked>();
  const numbersOf = (name: string): Numbers | null => {
    if (!numbersCache.has(name)) numbersCache.set(name, readNumbers(table.column(name), rows, options.nowMs, take));
    return numbersCache.get(name)!;
  };
  const rankedOf = (name: string): Ranked => {
    let r = rankedCache.get(name);
    if (!r) {
      const column = table.column(name);
      const nums = column ? numbersOf(name) : null;
      r = !column ? allNull(n, take) : nums ? rankNumbers(nums, column, take) : rankStrings(column, rows, take);
      rankedCache.set(name, r);
    }
    return r;
  };

  // group ids
  const keys = grouping.groupBy.map((f) => rankedOf(f.name));
  let gid: Uint32Array;
  let groups: number;
  if (keys.length === 0) {
    gid = take(Uint32Array, n);
    groups = 1; // a bare aggregate(...) has one row, even over no rows
  } else {
    // the first field's ids may skip values no matching row holds (dictionary codes): compress
    let dense = compress(keys[0].ids, keys[0].card, take);
    for (let k = 1; k < keys.length; k++) {
      const { ids, card } = keys[k];
      const mixed = take(Float64Array, n);
      for (let i = 0; i < n; i++) mixed[i] = dense.ids[i] * card + ids[i];
      dense = compress(mixed, dense.count * card, take);
    }
    gid = dense.ids;
    groups = dense.count;
  }
  const rep = new Int32Array(groups).fill(-1);
  for (let i = 0; i < n; i++) if (rep[gid[i]] < 0) rep[gid[i]] = i;

  // result properties: a JSON reader and a sort reader per property
  const json = new Map<string, (g: number) => JsonValue>();
  const sortValue = new Map<string, (g: number) => Value>();
  grouping.groupBy.forEach((f, k) => {
    // each group's id of the field, read now: the ids by match are scratch
    const key = keys[k];
    const ids = new Uint32Array(groups);
    for (let g = 0; g < groups; g++) ids[g] = key.ids[rep[g]];
    json.set(f.name, (g) => key.json(ids[g]));
    sortValue.set(f.name, (g) => (ids[g] === 0 ? null : ids[g]));
  });
  const percentileBuckets = new Map<string, { offsets: Uint32Array; values: Float64Array }>();
  for (const agg of grouping.aggregates) {
    const read = aggregate(agg, gid, groups, { numbersOf, rankedOf, percentileBuckets, take });
    json.set(agg.alias, read);
    sortValue.set(agg.alias, read);
  }

  // order: group ids are already in ascending group-value order
  const limit = Math.min(options.limit, groups);
  let order: Uint32Array;
  if (grouping.order.length === 0) {
    order = new Uint32Array(limit);
    for (let g = 0; g < limit; g++) order[g] = g;
  } else {
    const all = new Uint32Array(groups);
    for (let g = 0; g < groups; g++) all[g] = g;
    const sortKeys: SortKey[] = grouping.order.map((k) => ({ read: sortValue.get(k.property)!, descending: k.descending }));
    order = orderRows(all, sortKeys, all, limit);
  }

  const props = grouping.select ?? grouping.properties;
  const readers = props.map((p) => [p, json.get(p)!] as const);
  return {
    count: groups,
    order,
    record(g: number): Record<string, JsonValue> {
      const out: Record<string, JsonValue> = {};
      for (const [name, read] of readers) {
        const v = read(g);
        if (v === null && options.ignoreNulls) continue;
        if (name === '__proto__') Object.defineProperty(out, name, { value: v, enumerable: true, writable: true, configurable: true });
        else out[name] = v;
      }
      return out;
    },
  };
}

interface Sources {
  readonly numbersOf: (name: string) => Numbers | null;
  readonly rankedOf: (name: string) => Ranked;
  readonly percentileBuckets: Map<string, { offsets: Uint32Array; values: Float64Array }>;
  readonly take: Take;
}

/** Computes one aggregate for every group; returns its per-group value (null where none). */
function aggregate(agg: BoundAggregate, gid: Uint32Array, groups: number, src: Sources): (g: number) => number | string | null {
  const n = gid.length;
  if (agg.op === 'count' || agg.field === null) {
    const counts = new Float64Array(groups);
    for (let i = 0; i < n; i++) counts[gid[i]]++;
    return (g) => counts[g];
  }
  const name = agg.field.name;
  switch (agg.op) {
    case 'sum':
    case 'average': {
      const { values, valid } = src.numbersOf(name)!;
      const sums = new Float64Array(groups);
      const counts = new Float64Array(groups);
      for (let i = 0; i < n; i++) {
        if (valid[i] === 0) continue;
        sums[gid[i]] += values[i];
        counts[gid[i]]++;
      }
      return agg.op === 'sum' ? (g) => (counts[g] === 0 ? null : sums[g]) : (g) => (counts[g] === 0 ? null : sums[g] / counts[g]);
    }
    case 'min':
    case 'max': {
      const max = agg.op === 'max';
      const nums = src.numbersOf(name);
      if (nums) {
        const { values, valid, scale } = nums;
        const best = new Float64Array(groups).fill(NaN);
        for (let i = 0; i < n; i++) {
          if (valid[i] === 0) continue;
          const g = gid[i];
          const b = best[g];
          if (b !== b || (max ? values[i] > b : values[i] < b)) best[g] = values[i];
        }
        return (g) => (best[g] !== best[g] ? null : best[g] * scale);
      }
      const { ids, json } = src.rankedOf(name);
      const best = new Uint32Array(groups);
      for (let i = 0; i < n; i++) {
        const id = ids[i];
        if (id === 0) continue;
        const g = gid[i];
        if (best[g] === 0 || (max ? id > best[g] : id < best[g])) best[g] = id;
      }
      return (g) => (best[g] === 0 ? null : (json(best[g]) as string));
    }
    case 'countdistinct': {
      const { ids, card } = src.rankedOf(name);
      // positions bucketed by value id, then each group counts the ids it meets (ids ascending)
      const starts = new Uint32Array(card + 1);
      for (let i = 0; i < n; i++) starts[ids[i] + 1]++;
      for (let v = 0; v < card; v++) starts[v + 1] += starts[v];
      const fill = starts.slice(0, card);
      const byId = src.take(Uint32Array, n);
      for (let i = 0; i < n; i++) byId[fill[ids[i]]++] = i;
      const last = new Uint32Array(groups);
      const distinct = new Float64Array(groups);
      for (let v = 1; v < card; v++) {
        for (let j = starts[v]; j < starts[v + 1]; j++) {
          const g = gid[byId[j]];
          if (last[g] !== v) {
            last[g] = v;
            distinct[g]++;
          }
        }
      }
      return (g) => distinct[g];
    }
    case 'percentile': {
      const nums = src.numbersOf(name)!;
      let buckets = src.percentileBuckets.get(name);
      if (!buckets) {
        buckets = groupedValues(nums, gid, groups, src.take);
        src.percentileBuckets.set(name, buckets);
      }
      const { offsets, values } = buckets;
      const p = agg.p;
      const at = new Float64Array(groups);
      for (let g = 0; g < groups; g++) {
        const start = offsets[g];
        const m = offsets[g + 1] - start;
        if (m === 0) continue;
        // nearest rank: the value at 1-based rank ceil(p/100 × m); p × m is an exact integer
        const k = start + Math.ceil((p * m) / 100) - 1;
        if (m > 1) selectFloat64(values, k, start, start + m - 1);
        at[g] = values[k];
      }
      const scale = nums.scale;
      return (g) => (offsets[g + 1] === offsets[g] ? null : at[g] * scale);
    }
  }
}

/** Each group's non-null values, grouped (offsets per group), in no order within a group. */
function groupedValues(nums: Numbers, gid: Uint32Array, groups: number, take: Take): { offsets: Uint32Array; values: Float64Array } {
  const { values, valid } = nums;
  const n = gid.length;
  const offsets = new Uint32Array(groups + 1);
  for (let i = 0; i < n; i++) if (valid[i] !== 0) offsets[gid[i] + 1]++;
  for (let g = 0; g < groups; g++) offsets[g + 1] += offsets[g];
  const fill = offsets.slice(0, groups);
  const out = take(Float64Array, offsets[groups]);
  for (let i = 0; i < n; i++) if (valid[i] !== 0) out[fill[gid[i]]++] = values[i];
  return { offsets, values: out };
}

/** A numeric-like column's values at the positions, or null when the column is not numeric-like. */
function readNumbers(column: Column | undefined, rows: Uint32Array, nowMs: number, take: Take): Numbers | null {
  const n = rows.length;
  const values = take(Float64Array, n);
  const valid = take(Uint8Array, n);
  if (column === undefined) return { values, valid, scale: 1 }; // declared but absent from the data: all null
  switch (column.kind) {
    case 'number':
    case 'date':
    case 'timestamp': {
      const { values: src, validity } = column;
      for (let i = 0; i < n; i++) {
        const row = rows[i];
        if (!getBit(validity, row)) continue;
        values[i] = src[row] + 0; // -0 → 0, so equal values group and count as one
        valid[i] = 1;
      }
      return { values, valid, scale: column.kind === 'date' ? DAY_MS : 1 };
    }
    case 'daysOnMarket':
      for (let i = 0; i < n; i++) {
        const v = column.get(rows[i], nowMs);
        if (v === null) continue;
        values[i] = v;
        valid[i] = 1;
      }
      return { values, valid, scale: 1 };
    case 'boolean': {
      const { bits, validity } = column;
      for (let i = 0; i < n; i++) {
        const row = rows[i];
        if (!getBit(validity, row)) continue;
        values[i] = getBit(bits, row) ? 1 : 0;
        valid[i] = 1;
      }
      return { values, valid, scale: 1 };
    }
    default:
      return null;
  }
}

/**
 * Ordinal ids of numeric values. Integers over a modest range (dates in days, counts, years,
 * booleans) go through a table indexed by value; anything else takes one sort of the values and
 * a binary search each.
 */
function rankNumbers(nums: Numbers, column: Column, take: Take): Ranked {
  const { values, valid } = nums;
  const n = values.length;
  const ids = take(Uint32Array, n);
  let lo = Infinity;
  let hi = -Infinity;
  let integral = true;
  for (let i = 0; i < n; i++) {
    if (valid[i] === 0) continue;
    const v = values[i];
    if (v < lo) lo = v;
    if (v > hi) hi = v;
    if (integral && !Number.isInteger(v)) integral = false;
  }
  let distinct: Float64Array;
  if (lo > hi) {
    distinct = new Float64Array(0);
  } else if (integral && hi - lo < Math.max(1 << 16, 4 * n)) {
    const slot = take(Int32Array, hi - lo + 1);
    for (let i = 0; i < n; i++) if (valid[i] !== 0) slot[values[i] - lo] = 1;
    const found: number[] = [];
    for (let k = 0; k < slot.length; k++) if (slot[k] !== 0) slot[k] = found.push(lo + k);
    distinct = Float64Array.from(found);
    for (let i = 0; i < n; i++) if (valid[i] !== 0) ids[i] = slot[values[i] - lo];
  } else {
    let m = 0;
    const sorted = take(Float64Array, n);
    for (let i = 0; i < n; i++) if (valid[i] !== 0) sorted[m++] = values[i];
    distinct = uniqueSorted(sorted.subarray(0, m).sort()).slice(); // json reads it after the run
    for (let i = 0; i < n; i++) if (valid[i] !== 0) ids[i] = 1 + lowerBound(distinct, values[i]);
  }
  const text = (v: number): JsonValue => {
    switch (column.kind) {
      case 'date':
        return formatDate(v);
      case 'timestamp':
        return formatTimestamp(v, CANONICAL_STYLE);
      case 'boolean':
        return v === 1;
      default:
        return v;
    }
  };
  return { ids, card: distinct.length + 1, json: (id) => (id === 0 ? null : text(distinct[id - 1])) };
}

/** Ordinal ids of strings: dictionary codes through the column's rank table; free text by a Map. */
function rankStrings(column: Column, rows: Uint32Array, take: Take): Ranked {
  const n = rows.length;
  const ids = take(Uint32Array, n);
  if (column.kind === 'dictionary') {
    const { codes, dictionary, ranks } = column;
    const byRank = new Array<string | null>(dictionary.length);
    for (let c = 0; c < dictionary.length; c++) byRank[ranks[c]] = dictionary[c];
    for (let i = 0; i < n; i++) ids[i] = ranks[codes[rows[i]]];
    // null (code 0) ranks first, so its rank is 0 as the id convention wants
    return { ids, card: dictionary.length, json: (id) => byRank[id] };
  }
  if (column.kind !== 'text') throw new Error(`a ${column.kind} column cannot be grouped or aggregated as strings`);
  const seen = new Map<string, number>();
  const first: string[] = [];
  for (let i = 0; i < n; i++) {
    const s = column.get(rows[i]);
    if (s === null) continue;
    let id = seen.get(s);
    if (id === undefined) {
      id = first.length + 1;
      seen.set(s, id);
      first.push(s);
    }
    ids[i] = id;
  }
  const order = first.map((_, i) => i).sort((a, b) => (first[a] < first[b] ? -1 : first[a] > first[b] ? 1 : 0));
  const rankOfFirst = new Uint32Array(first.length + 1);
  order.forEach((f, r) => (rankOfFirst[f + 1] = r + 1));
  for (let i = 0; i < n; i++) ids[i] = rankOfFirst[ids[i]];
  const sorted = order.map((f) => first[f]);
  return { ids, card: sorted.length + 1, json: (id) => (id === 0 ? null : sorted[id - 1]) };
}

function allNull(n: number, take: Take): Ranked {
  return { ids: take(Uint32Array, n), card: 1, json: () => null };
}

/**
 * Dense ids 0..count-1 for non-negative integer keys below `card`, in ascending key order: a
 * lookup table when `card` is modest, else one sort of the keys and a binary search each.
 */
function compress(keys: Uint32Array | Float64Array, card: number, take: Take): { ids: Uint32Array; count: number } {
  const n = keys.length;
  const ids = take(Uint32Array, n);
  if (card <= Math.max(1 << 16, 4 * n)) {
    const slot = take(Int32Array, card);
    for (let i = 0; i < n; i++) slot[keys[i]] = 1;
    let count = 0;
    for (let k = 0; k < card; k++) if (slot[k] !== 0) slot[k] = ++count;
    for (let i = 0; i < n; i++) ids[i] = slot[keys[i]] - 1;
    return { ids, count };
  }
  const sorted = take(Float64Array, n);
  sorted.set(keys);
  const distinct = uniqueSorted(sorted.sort());
  for (let i = 0; i < n; i++) ids[i] = lowerBound(distinct, keys[i]);
  return { ids, count: distinct.length };
}

/** The distinct values of a sorted array (in place; returns the prefix). */
function uniqueSorted(a: Float64Array): Float64Array {
  if (a.length === 0) return a;
  let m = 1;
  for (let i = 1; i < a.length; i++) if (a[i] !== a[m - 1]) a[m++] = a[i];
  return a.subarray(0, m);
}
