/**
 * `$apply`'s grouping (SERVICE.md §3) as SQL: the rows a `FROM ... WHERE ...` clause selects,
 * grouped by the groupby fields, each aggregate computed per group, the groups ordered and cut to
 * a page, with the in-memory engine's answers (src/exec/aggregate.ts, runApply) to the bit:
 *
 * - Groups: GROUP BY the fields' values as compileValue gives them (stored columns, DaysOnMarket
 *   from the clock); NULL is a group of its own. Order: `$orderby` over the result properties,
 *   then the group values ascending; nulls lowest (`NULLS FIRST` ascending, `NULLS LAST`
 *   descending); strings in JavaScript's UTF-16 order (`utf16Order`), as are string min/max.
 * - Numbers leave PostgreSQL as float8 (the loader stores each number as the shortest text of its
 *   double, so numeric and bigint columns hold exactly the engine's doubles); date and timestamp
 *   aggregates are epoch milliseconds; as group values dates read `YYYY-MM-DD` and timestamps the
 *   canonical UTC text, whatever offset the feed wrote.
 * - sum and average of decimals add float8 values in key order (`sum(x ORDER BY key)`), one
 *   addition at a time as the engine adds doubles in row order: equal to the bit wherever the
 *   engine's rows are in key order (a load of data in key order, and every compaction); otherwise
 *   the two orders may round differently in the last bits. Sums of integers are exact in any
 *   order (below 2^53), so they take the plain `sum`.
 * - Percentiles are `percentile_disc(p / 100)`, whose rank `ceil(fl(p/100) × n)` is the engine's
 *   `ceil(p × n / 100)` for every p the grammar has (`percentileFraction` says why).
 *
 * Spread over servers (DESIGN.md, "Scale-out"), the same statements give the same groups: counts,
 * min, max and sums of integers are combined from each server's part, exactly; count(DISTINCT)
 * from each server's distinct values; percentile_disc has no combine function, so Citus gathers
 * the groups' rows to the coordinator (row-gather). A sum of decimals added per server and then
 * combined would round in another order, so a grouping with one first gathers its operands and
 * the key in a subquery with OFFSET 0 (which Citus computes on its own, before the grouping, and
 * PostgreSQL does not merge into it) and groups them in one place, in key order.
 */
import type { BoundAggregate, BoundGrouping } from '../plan/bind-apply.js';
import { valueTypeOf } from '../plan/bind.js';
import { isIntegerType, type FieldDef } from '../schema/types.js';
import type { JsonValue } from '../store/columns.js';
import { CANONICAL_STYLE, formatDate, formatTimestamp } from '../store/temporal.js';
import { compileValue, utf16Order, type FilterContext } from './filter.js';
import { column, isStored, quote } from './layout.js';

/** The statements of one grouping and the reader of their rows. */
export interface ApplySql {
  /** The groups of the page, in result order: one array-mode row per group. */
  readonly rowsSql: string;
  /** One row, one column: the number of groups before OFFSET/LIMIT (float8). */
  readonly countSql: string;
  /** The record of a `rowsSql` row: result properties in order, the selected ones, nulls dropped under $ignorenulls. */
  decode(row: unknown[]): Record<string, JsonValue>;
}

/** How a field's values are compared, aggregated and shown. */
type Kind = 'string' | 'boolean' | 'integer' | 'decimal' | 'date' | 'timestamp';

/** A field's value in SQL (computed once: a derived field's SQL carries parameters, and GROUP BY matches expressions textually). */
interface Operand {
  readonly kind: Kind;
  readonly sql: string;
}

/** One output column of `rowsSql` and how it becomes a JSON value. */
interface Output {
  readonly property: string;
  readonly sql: string;
  readonly read: (v: unknown) => JsonValue;
  /** Sorts as text (ordinal). */
  readonly text: boolean;
}

const EPOCH_DATE = "DATE '1970-01-01'";
/** The alias of the gathered operands (sums of decimals: compileApply). */
const GATHERED = 'g';

function kindOf(field: FieldDef): Kind {
  const type = field.type;
  if (field.collection) throw new Error(`${field.name} is a collection: it cannot be grouped or aggregated`);
  if (type === 'Edm.String') return 'string';
  if (type === 'Edm.Boolean') return 'boolean';
  if (type === 'Edm.Date') return 'date';
  if (type === 'Edm.DateTimeOffset') return 'timestamp';
  if (isIntegerType(type)) return 'integer';
  if (type === 'Edm.Decimal' || type === 'Edm.Double') return 'decimal';
  throw new Error(`${field.name} (${type}) cannot be grouped or aggregated`);
}

/**
 * The float8 fraction percentile_disc takes for p. PostgreSQL picks 1-based rank
 * `ceil(fl(p/100) × n)` (the product rounded to double), the engine `ceil(p × n / 100)` (exact up to
 * 2^53). They agree: where p × n / 100 is an integer k, fl(p/100) exceeds p/100 by a relative error
 * of at most 2^-54 (p = 10: exactly 2^-54; 25, 50, 75: none; 90: 2.5e-17; 95: below p/100), less
 * than half an ulp of k, so the product rounds back to k (or below it, for 95); elsewhere the exact
 * value is at least 1/20 from an integer, which no rounding error crosses below 2^50 rows.
 */
function percentileFraction(p: number): string {
  if (!Number.isInteger(p) || p <= 0 || p > 100) throw new Error(`percentile ${p} is not an integer in (0, 100]`);
  return `${p}::float8 / 100`;
}

/** `x` as the float8 the engine aggregates to: numbers as they are, dates and timestamps in epoch ms. */
function asNumber(kind: Kind, x: string): string {
  switch (kind) {
    case 'date':
      return `((${x}) - ${EPOCH_DATE})::float8 * 86400000`;
    case 'timestamp':
      return `(extract(epoch FROM ${x}) * 1000)::float8`;
    default:
      return `(${x})::float8`;
  }
}

/** A float8 from node-postgres as a JSON number (-0 as 0, as the engine's typed arrays give it). */
function readNumber(v: unknown): JsonValue {
  if (v === null) return null;
  return Number(v) + 0;
}

const readAsIs = (v: unknown): JsonValue => (v === null ? null : (v as JsonValue));

/** The output column of a group value and its reader: the value as records show it. */
function groupOutput(property: string, op: Operand): Output {
  const x = op.sql;
  switch (op.kind) {
    case 'string':
    case 'boolean':
      return { property, sql: x, read: readAsIs, text: op.kind === 'string' };
    case 'date':
      return { property, sql: `(${x}) - ${EPOCH_DATE}`, read: (v) => (v === null ? null : formatDate(Number(v))), text: false };
    case 'timestamp':
      return { property, sql: asNumber('timestamp', x), read: (v) => (v === null ? null : formatTimestamp(Number(v), CANONICAL_STYLE)), text: false };
    default:
      return { property, sql: asNumber(op.kind, x), read: readNumber, text: false };
  }
}

/** Strings holding a supplementary character (the only ones whose code point order is not their UTF-16 order). */
const SUPPLEMENTARY = `'[\\U00010000-\\U0010FFFF]'`;

/** The inverse of `utf16Order` (src/pg/filter.ts): the marks it inserts before U+E000..U+FFFF and after U+10FFFF removed. */
function fromUtf16Order(x: string): string {
  return `replace(regexp_replace(${x}, '\\U0010FFFF([\\uE000-\\uFFFF])', '\\1', 'g'), U&'\\+10FFFF\\0001', U&'\\+10FFFF')`;
}

/**
 * min/max of strings in the engine's order (UTF-16 code units; COLLATE "C" is code points). The
 * two orders agree on strings without a supplementary character, so those take the plain
 * aggregate and only the others pay for the order-preserving rewrite; the two candidates are then
 * compared once per group.
 */
function stringExtreme(op: 'min' | 'max', x: string): string {
  const plain = `${op}(${x}) FILTER (WHERE ${x} !~ ${SUPPLEMENTARY})`;
  const rewritten = `${op}(${utf16Order(x)}) FILTER (WHERE ${x} ~ ${SUPPLEMENTARY})`;
  const wins = `${rewritten} ${op === 'min' ? '<' : '>'} ${utf16Order(plain)}`;
  return `CASE WHEN ${rewritten} IS NULL THEN ${plain} WHEN ${plain} IS NULL OR ${wins} THEN ${fromUtf16Order(rewritten)} ELSE ${plain} END`;
}

/** The output column of an aggregate. `key` is the table's key column (the order sums add up in). */
function aggregateOutput(agg: BoundAggregate, op: Operand | null, key: string): Output {
  const number = (sql: string): Output => ({ property: agg.alias, sql, read: readNumber, text: false });
  if (agg.op === 'count' || op === null) return number('count(*)::float8');
  const { kind, sql: x } = op;
  switch (agg.op) {
    case 'sum':
    case 'average': {
      // integers: exact in any order (below 2^53); decimals: float8 additions in key order
      const sum = kind === 'integer' ? `sum(${x})::float8` : `sum((${x})::float8 ORDER BY ${key})`;
      return number(agg.op === 'sum' ? sum : `${sum} / count(${x})::float8`);
    }
    case 'min':
    case 'max':
      if (kind === 'string') return { property: agg.alias, sql: stringExtreme(agg.op, x), read: readAsIs, text: true };
      return number(asNumber(kind, `${agg.op}(${x})`));
    case 'countdistinct':
      return number(`count(DISTINCT ${x})::float8`);
    case 'percentile':
      return number(asNumber(kind, `percentile_disc(${percentileFraction(agg.p)}) WITHIN GROUP (ORDER BY ${x})`));
  }
}

/**
 * The statements of a grouping over the rows that `from` selects (`from` is a complete
 * `FROM <table> t ... WHERE ...` clause over the table alias `ctx.alias`, with its parameters
 * already in `ctx.params`): the result rows (groups) in result order for OFFSET/LIMIT as given, and
 * the number of result rows. Both statements take the same parameter list (all of `ctx.params`
 * after this call). decode turns an array-mode result row into the exact record the in-memory
 * engine gives for that group.
 */
export function compileApply(
  grouping: BoundGrouping,
  from: string,
  ctx: FilterContext,
  page: { readonly offset: number; readonly limit: number },
  ignoreNulls: boolean,
): ApplySql {
  const operands = new Map<string, Operand>();
  const operandOf = (field: FieldDef): Operand => {
    let op = operands.get(field.name);
    if (op === undefined) {
      const kind = kindOf(field);
      const sql = compileValue({ kind: 'field', type: valueTypeOf(field.type), field }, ctx);
      operands.set(field.name, (op = { kind, sql: isStored(field) ? sql : `(${sql})` }));
    }
    return op;
  };
  // an aggregate neither selected nor ordered by is not computed
  const selected = new Set(grouping.select ?? grouping.properties);
  const ordered = new Set(grouping.order.map((k) => k.property));
  const computed = grouping.aggregates.filter((a) => selected.has(a.alias) || ordered.has(a.alias));
  // every operand, in the order the statements use them (their parameters are added in that order)
  for (const f of grouping.groupBy) operandOf(f);
  for (const a of computed) if (a.field !== null) operandOf(a.field);
  let source = from;
  let key = `${ctx.alias}.${column({ name: ctx.schema.key })}`;
  if (computed.some((a) => (a.op === 'sum' || a.op === 'average') && a.field !== null && operandOf(a.field).kind === 'decimal')) {
    // Sums of decimals add in key order. Where the rows are spread over servers, a sum per server
    // combined afterwards would add in another order: the operands and the key are gathered to one
    // place first (a subquery with OFFSET is one Citus computes before the grouping, on the
    // coordinator), and the grouping reads them there. Only the operands cross the network.
    const columns = [...operands.values()].map((op, i) => `${op.sql} AS ${quote(`#o${i}`)}`);
    source = `FROM (SELECT ${[...columns, `${key} AS ${quote('#k')}`].join(', ')} ${from} OFFSET 0) AS ${GATHERED}`;
    [...operands.entries()].forEach(([name, op], i) => operands.set(name, { kind: op.kind, sql: `${GATHERED}.${quote(`#o${i}`)}` }));
    key = `${GATHERED}.${quote('#k')}`;
  }

  const groups = grouping.groupBy.map((f) => groupOutput(f.name, operandOf(f)));
  const aggregates = computed.map((a) => aggregateOutput(a, a.field === null ? null : operandOf(a.field), key));
  const outputs = [...groups, ...aggregates];
  const columnOf = new Map(outputs.map((o, i) => [o.property, i]));
  const name = (i: number): string => `c${i}`;

  const select = outputs.length === 0 ? '1' : outputs.map((o, i) => `${o.sql} AS ${name(i)}`).join(', ');
  const groupBy = grouping.groupBy.length === 0 ? '' : ` GROUP BY ${grouping.groupBy.map((f) => operandOf(f).sql).join(', ')}`;
  // strings in the engine's order: UTF-16 code units
  const sortKey = (i: number, descending: boolean): string =>
    `${outputs[i].text ? utf16Order(`r.${name(i)}`) : `r.${name(i)}`} ${descending ? 'DESC NULLS LAST' : 'ASC NULLS FIRST'}`;
  const order = [...grouping.order.map((k) => sortKey(columnOf.get(k.property)!, k.descending)), ...groups.map((_, i) => sortKey(i, false))];
  const orderBy = order.length === 0 ? '' : ` ORDER BY ${order.join(', ')}`;
  const inner = `SELECT ${select} ${source}${groupBy}`;
  const offset = ctx.params.add(page.offset, 'bigint');
  const limit = ctx.params.add(page.limit, 'bigint');
  const rowsSql = `SELECT r.* FROM (${inner}) r${orderBy} OFFSET ${offset} LIMIT ${limit}`;
  // Both statements take the same parameter list, so the count reads the same subquery (its
  // aggregates go unused, and PostgreSQL's planner drops unused subquery outputs) and names the
  // page's parameters in a condition that always holds.
  const countSql = `SELECT count(*)::float8 FROM (${inner}) r WHERE ${offset} >= 0 AND ${limit} >= 0`;

  const wanted = grouping.select ?? grouping.properties;
  const readers = wanted.map((p) => [p, columnOf.get(p)!, outputs[columnOf.get(p)!].read] as const);
  return {
    rowsSql,
    countSql,
    decode(row: unknown[]): Record<string, JsonValue> {
      const out: Record<string, JsonValue> = {};
      for (const [property, i, read] of readers) {
        const v = read(row[i]);
        if (v === null && ignoreNulls) continue;
        if (property === '__proto__') Object.defineProperty(out, property, { value: v, enumerable: true, writable: true, configurable: true });
        else out[property] = v;
      }
      return out;
    },
  };
}
