/**
 * Bound filters and value expressions (src/plan/bound.ts) compiled to parameterized SQL for the
 * PostgreSQL backend, with the in-memory evaluator's semantics (src/exec/compile.ts) to the bit:
 * OData 4.01 nulls and three-valued logic, JavaScript doubles for every number, UTF-16 string
 * order, JavaScript case mapping and trimming, UTC date parts, DaysOnMarket from the clock, and
 * geo.distance with the same haversine, operation by operation, as src/geo/distance.ts.
 *
 * Every value of the query is a bind parameter with an explicit cast (a subtree that reads no row
 * is evaluated once by the in-memory evaluator and sent as one parameter), so a statement's text
 * depends only on the query's shape. Identifiers come from the layout (src/pg/layout.ts).
 *
 * Statements are ones Citus pushes down to every shard as they are (DESIGN.md, Scale-out): a filter
 * atom that computes values (a comparison, an `in`, a function, geo.distance's haversine) is one
 * scalar subquery over one chain of FROM subqueries, each computed value a column of a level
 * (computed once per row), number constants columns of the first level (out of reach of constant
 * folding); levels are kept apart by ORDER BY a constant (Citus refuses OFFSET and aggregates in a
 * subquery over the row), no subquery holds another (Citus refuses subqueries in a level whose FROM
 * reads no distributed table), the first level calls immutable functions only, and every value of
 * a level is total (a level is computed whether or not a CASE reads it). A lambda is
 * `true = ANY|ALL (SELECT <predicate> FROM <chain over unnest(collection)>)`.
 *
 * Where PostgreSQL's own operations differ from JavaScript's, the SQL says what JavaScript does:
 * - float8 `*`, `/` and `+` raise errors on overflow and underflow where JavaScript gives
 *   ±Infinity and ±0, and PostgreSQL has no float `%`: arithmetic takes the plain operator in the
 *   range where it cannot fail, and otherwise decides overflow and underflow exactly on operands
 *   scaled by powers of two (`%` through the exact binary values in numeric);
 * - PostgreSQL calls NaN equal to itself and greater than every number: comparisons of values
 *   that may be NaN (arithmetic results) test for it;
 * - `COLLATE "C"` orders by code point, JavaScript by UTF-16 code unit: the two differ only where
 *   one string has U+E000..U+FFFF and the other a supplementary character at the first
 *   difference, and such comparisons go through `utf16Order` (an order-preserving rewrite);
 * - lower()/upper() follow ICU's root locale (`und-x-icu`, the same full case mapping as
 *   JavaScript's) plus the pairs Unicode added after the server's ICU (`CASE_PAIRS`);
 * - sin, cos and asin are fdlibm's (Node's Math functions) rewritten in SQL; the server's libm
 *   differs from them in the last bit for about one argument in fifty.
 */
import { constantValue } from '../exec/execute.js';
import type { ArithmeticOperator, CompareOperator } from '../odata/ast.js';
import type { Bound, Value, ValueType } from '../plan/bound.js';
import type { TableSchema } from '../schema/table-schema.js';
import { isIntegerType, type FieldDef } from '../schema/types.js';
import { column, isStored, quote, SHARDED_RESOURCES, shardColumn, utf16Order } from './layout.js';

export { utf16Order };
import type { Params } from './sql.js';

export interface FilterContext {
  /** The resource's loaded schema. */
  readonly schema: TableSchema;
  /** The table alias in the statement, e.g. 't' (columns are `${alias}.${column(f)}`). */
  readonly alias: string;
  /** The resource's table (a lambda holding a lambda reads the row from it again, joined on its key). */
  readonly table: string;
  /** Every literal goes here. */
  readonly params: Params;
  /** The engine clock: now(), DaysOnMarket. */
  readonly nowMs: number;
  /** SQL of a search.text node: a boolean expression that is never NULL (provided by src/pg/search.ts). */
  readonly search: (node: Extract<Bound, { kind: 'search' }>) => string;
}

/**
 * The filter as a boolean SQL expression whose three-valued result is the in-memory evaluator's
 * (true, false, null) for every row: TRUE exactly where the in-memory filter is true.
 */
export function compileFilter(b: Bound, ctx: FilterContext): string {
  return new Compiler(ctx).boolean(b);
}

/**
 * A value expression (for $orderby keys and $apply aggregates): the in-memory evaluator's value,
 * NULL where it gives null. A stored field is its column as it is (so an index can order it;
 * Edm.Decimal is numeric holding the double's shortest decimal, integers integer/bigint), anything
 * computed is float8 (NaN given as NULL, as the in-memory order treats it); dates are date,
 * timestamps timestamptz, strings text COLLATE "C" (code point order: wrap in `utf16Order` for the
 * in-memory string order), booleans boolean. Nulls sort lowest in memory: NULLS FIRST ascending.
 */
export function compileValue(b: Bound, ctx: FilterContext): string {
  const c = new Compiler(ctx);
  if (b.type === 'boolean') return c.boolean(b);
  const domain = domainOf(b.type);
  if (domain === null) {
    if (b.type === 'null') return 'NULL';
    throw new Error(`no value SQL for ${b.type}`);
  }
  if (b.kind === 'field' && isStored(b.field)) return c.column(b.field);
  return c.atom(() => {
    const v = c.value(b, domain);
    return v.nan ? `NULLIF(${v.text}, ${NAN})` : v.text;
  });
}

/** `utf16Order` in JavaScript, for constants. */
function utf16OrderOf(s: string): string {
  return s.replace(/\u{10FFFF}/gu, '\u{10FFFF}\u0001').replace(/[\uE000-\uFFFF]/g, (ch) => `\u{10FFFF}${ch}`);
}

/** Whether code point order and UTF-16 order may disagree on a comparison with this string. */
const HIGH_CHARACTERS = /[\uE000-\uFFFF\uD800-\uDFFF]/;
/** The same test in SQL (a regular expression of ours). */
const HIGH_SQL = `'[\\uE000-\\U0010FFFF]'`;

// ---------------------------------------------------------------------------------------------
// Doubles

/** A double with the given high and low 32-bit words (fdlibm compares high words). */
function fromWords(high: number, low: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setUint32(0, high >>> 0);
  view.setUint32(4, low >>> 0);
  return view.getFloat64(0);
}

/** 2^k, exactly (k in -1074..1023). */
function pow2(k: number): number {
  let v = 1;
  for (; k > 0; k--) v *= 2;
  for (; k < 0; k++) v /= 2;
  return v;
}

/** A float8 constant of ours as SQL that reads back as exactly that double. */
function f8(n: number): string {
  return Object.is(n, -0) ? `'-0'::float8` : `'${String(n)}'::float8`;
}

const INF = `'Infinity'::float8`;
const NEG_INF = `'-Infinity'::float8`;
const NAN = `'NaN'::float8`;
const MAX = Number.MAX_VALUE;
/** Operands whose magnitudes lie here multiply and divide without reaching the ends of the range. */
const SAFE_LOW = f8(1e-150);
const SAFE_HIGH = f8(1e150);

/**
 * A magnitude class of a finite nonzero double for exact scaling: below 2^-511 it is multiplied by
 * 2^600, from 2^511 by 2^-600, so that products and quotients of scaled operands are normal
 * doubles (correctly rounded as with an unbounded exponent).
 */
function scaleExponent(v: string): string {
  return `(CASE WHEN abs(${v}) < ${f8(pow2(-511))} THEN 600 WHEN abs(${v}) >= ${f8(pow2(511))} THEN -600 ELSE 0 END)`;
}
function scaled(v: string): string {
  return `(${v} * CASE WHEN abs(${v}) < ${f8(pow2(-511))} THEN ${f8(pow2(600))} WHEN abs(${v}) >= ${f8(pow2(511))} THEN ${f8(pow2(-600))} ELSE 1::float8 END)`;
}

/** Whether |v| (nonzero, finite) is a power of two: only a product of two of them is one exactly. */
function isPowerOfTwo(v: string): string {
  return `(abs(${v}) = power(2::float8, round(ln(abs(${v})) / ln(2::float8))))`;
}

/**
 * The IEEE result of `x * y` or `x / y` for finite nonzero operands from q, the correctly rounded
 * result of the scaled operands (a normal double), and s, the power of two the true result is q
 * times: ±Infinity when s > 0 and |q| exceeds the scaled maximum, ±0 when s < 0 and the true
 * result is at most half the smallest subnormal (a tie rounds to even: to zero), else `direct`,
 * the plain operator, which then neither overflows nor underflows. q and s are written out where
 * they are used: they are computed only when a CASE reaches them (rarely), not for every row.
 */
function decideScaled(q: string, s: string, exactTie: (threshold: string) => string, positive: string, direct: string): string {
  const over600 = f8(MAX * pow2(-600));
  const over1200 = f8(MAX * pow2(-600) * pow2(-600));
  const zero600 = f8(pow2(-475));
  const zero1200 = f8(pow2(125));
  const zeroWhen = (threshold: string): string => `(abs(${q}) < ${threshold} OR (abs(${q}) = ${threshold} AND ${exactTie(threshold)}))`;
  return (
    `(CASE WHEN (${s} = 600 AND abs(${q}) > ${over600}) OR (${s} = 1200 AND abs(${q}) > ${over1200}) ` +
    `THEN CASE WHEN ${positive} THEN ${INF} ELSE ${NEG_INF} END ` +
    `WHEN (${s} = -600 AND ${zeroWhen(zero600)}) OR (${s} = -1200 AND ${zeroWhen(zero1200)}) ` +
    `THEN CASE WHEN ${positive} THEN 0::float8 ELSE ${f8(-0)} END ELSE ${direct} END)`
  );
}

/** JavaScript's `x + y` (operands repeatable SQL): PostgreSQL raises an error where the sum overflows. */
function ieeeAdd(x: string, y: string): string {
  const big = f8(pow2(1023));
  const half = `(CASE WHEN abs(${x}) < 1 THEN ${y} * 0.5::float8 WHEN abs(${y}) < 1 THEN ${x} * 0.5::float8 ELSE ${x} * 0.5::float8 + ${y} * 0.5::float8 END)`;
  return (
    `(CASE WHEN abs(${x}) < ${big} AND abs(${y}) < ${big} THEN ${x} + ${y} ` +
    `WHEN NOT (abs(${x}) < ${INF} AND abs(${y}) < ${INF}) THEN ${x} + ${y} ` +
    // a summand below 1 is lost beside one from 2^1023; halves are exact there and cannot overflow
    `ELSE CASE WHEN abs(${half}) > ${f8(MAX / 2)} THEN CASE WHEN ${half} > 0 THEN ${INF} ELSE ${NEG_INF} END ELSE ${half} * 2 END END)`
  );
}

/** JavaScript's `x * y`. */
function ieeeMul(x: string, y: string): string {
  const safe = (v: string): string => `abs(${v}) BETWEEN ${SAFE_LOW} AND ${SAFE_HIGH}`;
  const tie = (): string => `${isPowerOfTwo(scaled(x))} AND ${isPowerOfTwo(scaled(y))}`;
  return (
    `(CASE WHEN ${safe(x)} AND ${safe(y)} THEN ${x} * ${y} ` +
    // (nulls would otherwise go through the exact path below)
    `WHEN ${x} IS NULL OR ${y} IS NULL THEN NULL::float8 ` +
    `WHEN ${x} = 0 OR ${y} = 0 OR NOT (abs(${x}) < ${INF} AND abs(${y}) < ${INF}) THEN ${x} * ${y} ` +
    `ELSE ${decideScaled(`(${scaled(x)} * ${scaled(y)})`, `-(${scaleExponent(x)} + ${scaleExponent(y)})`, tie, `(${x} < 0) = (${y} < 0)`, `${x} * ${y}`)} END)`
  );
}

/** JavaScript's `x / y` for y not zero. */
function ieeeDiv(x: string, y: string): string {
  const tie = (threshold: string): string => `${threshold} * abs(${scaled(y)}) = abs(${scaled(x)})`;
  return (
    `(CASE WHEN abs(${x}) <= ${SAFE_HIGH} AND (${x} = 0 OR abs(${x}) >= ${SAFE_LOW}) AND abs(${y}) BETWEEN ${SAFE_LOW} AND ${SAFE_HIGH} THEN ${x} / ${y} ` +
    `WHEN ${x} IS NULL OR ${y} IS NULL THEN NULL::float8 ` +
    `WHEN ${x} = 0 OR NOT (abs(${x}) < ${INF} AND abs(${y}) < ${INF}) THEN ${x} / ${y} ` +
    `ELSE ${decideScaled(`(${scaled(x)} / ${scaled(y)})`, `(${scaleExponent(y)} - ${scaleExponent(x)})`, tie, `(${x} < 0) = (${y} < 0)`, `${x} / ${y}`)} END)`
  );
}

/**
 * JavaScript's `x % y` for y not zero (fmod: exact, the sign of x). Integers below 2^63 use
 * bigint `%`; other finite operands their exact binary values, m·2^e read from the IEEE bits, as
 * numeric integers scaled to a common exponent.
 */
function ieeeMod(x: string, y: string): string {
  const magnitude = (v: string): string => `abs(${v})::bigint`;
  const small = (v: string): string => `${v} = trunc(${v}) AND abs(${v}) < ${f8(pow2(63))}`;
  // written out where used, not values of the chain: computed only when the last branch below is
  // reached (a level of the chain costs every row, and integers are the common case)
  const bits = (v: string): string => `('x' || encode(float8send(${v}), 'hex'))::bit(64)::bigint`;
  const mantissa = (b: string): string => `((${b} & 4503599627370495) + CASE WHEN ((${b} >> 52) & 2047) = 0 THEN 0 ELSE 4503599627370496 END)::numeric`;
  const exponent = (b: string): string => `(GREATEST((${b} >> 52) & 2047, 1) - 1075)`;
  const ex = exponent(bits(x));
  const ey = exponent(bits(y));
  // scaled to the lower exponent k = LEAST(ex, ey)
  const r = `mod(${mantissa(bits(x))} * power(2::numeric, GREATEST(${ex} - ${ey}, 0)), ${mantissa(bits(y))} * power(2::numeric, GREATEST(${ey} - ${ex}, 0)))`;
  const k = `LEAST(${ex}, ${ey})`;
  // r·2^k is exactly a double: numeric to float8 reads its decimal digits correctly rounded
  const value = `(CASE WHEN ${k} >= 0 THEN (${r} * power(2::numeric, ${k}))::float8 ELSE ((${r} * power(5::numeric, -${k}))::text || 'e' || (${k})::text)::float8 END)`;
  return (
    `(CASE WHEN ${x} IS NULL OR ${y} IS NULL THEN NULL::float8 ` +
    `WHEN NOT abs(${x}) < ${INF} OR ${y} = ${NAN} THEN ${NAN} ` +
    `WHEN abs(${y}) = ${INF} OR ${x} = 0 OR abs(${x}) < abs(${y}) THEN ${x} ` +
    `WHEN ${small(x)} AND ${small(y)} ` +
    `THEN CASE WHEN ${x} < 0 THEN -((${magnitude(x)} % ${magnitude(y)})::float8) ELSE (${magnitude(x)} % ${magnitude(y)})::float8 END ` +
    `ELSE CASE WHEN ${x} < 0 THEN -1::float8 ELSE 1::float8 END * ${value} END)`
  );
}

/** The largest double whose product with c (0 < c < 1) rounds to zero. */
function zeroProductBelow(c: number): number {
  let k = 1;
  while (k * Number.MIN_VALUE * c === 0) k++;
  return (k - 1) * Number.MIN_VALUE;
}

/** JavaScript's `x * c` for a constant 0 < c < 1 (no overflow; a product that rounds to zero is made without PostgreSQL's underflow error). */
function mulSmallConstant(x: string, c: number): string {
  return `(CASE WHEN abs(${x}) <= ${f8(zeroProductBelow(c))} THEN ${x} * 0::float8 ELSE ${x} * ${f8(c)} END)`;
}

// ---------------------------------------------------------------------------------------------
// Values computed in stages

/**
 * What keeps a subquery in FROM a level of its own: PostgreSQL merges a plain one into the query
 * above, copying each of its expressions into every use (computed once per use) and making its
 * constants constants again (folded when the statement is planned, even in CASE branches never
 * taken). An ORDER BY keeps it apart; ordering by a constant costs no sort. OFFSET 0 would do the
 * same, but Citus refuses OFFSET (and aggregates without GROUP BY) in a subquery that refers to an
 * outer query.
 */
const FENCE = 'ORDER BY NOT true';

/** Whether a lambda's predicate holds a lambda with a predicate of its own (a subquery). */
function holdsLambda(b: Bound): boolean {
  switch (b.kind) {
    case 'lambda':
      return b.predicate !== null;
    case 'call':
      return b.args.some(holdsLambda);
    case 'compare':
    case 'and':
    case 'or':
    case 'arith':
      return holdsLambda(b.left) || holdsLambda(b.right);
    case 'not':
    case 'negate':
      return holdsLambda(b.operand);
    case 'in':
      return holdsLambda(b.left);
    case 'member':
      return holdsLambda(b.value);
    default:
      return false;
  }
}

/**
 * Values computed in order, each a column of a level of one chain of FROM subqueries (a level
 * reads the ones below it and the outer row), the first level without FROM (or over the given
 * FROM item: a lambda's elements). Every level is computed for every row that reaches the chain,
 * whatever CASE reads its values, so each value's expression is total (never raises an error).
 * The chain holds no subquery of its own (Citus refuses subqueries in a level whose FROM reads no
 * distributed table) and its first level, when without FROM, only immutable functions.
 */
class Stages {
  private readonly levels: string[][] = [];
  private readonly levelOf = new Map<string, number>();
  private readonly names: RegExp;
  private count = 0;

  constructor(
    private readonly id: string,
    private readonly from: string | null = null,
  ) {
    this.names = new RegExp(`"#${id}_\\d+"`, 'g');
  }

  get empty(): boolean {
    return this.count === 0;
  }

  /** A value from `sql`, which may read earlier values (by the names `let` returns) and the outer row; its level is the one above the highest it reads. */
  let(sql: string): string {
    let level = 0;
    for (const m of sql.matchAll(this.names)) {
      const l = this.levelOf.get(m[0]);
      if (l !== undefined) level = Math.max(level, l + 1);
    }
    const name = quote(`#${this.id}_${this.count++}`);
    (this.levels[level] ??= []).push(`${sql} AS ${name}`);
    this.levelOf.set(name, level);
    return name;
  }

  /** The rows of `result`, an expression over the values: `SELECT <result> FROM <chain> [WHERE <conditions>]`. */
  rows(result: string, conditions: readonly string[] = []): string {
    let from = '';
    for (let i = 0; i < this.levels.length; i++) {
      const columns = this.levels[i] ?? [];
      if (i === 0) {
        from = `(SELECT ${columns.join(', ')}${this.from === null ? '' : ` FROM ${this.from}`} ${FENCE})`;
        continue;
      }
      const below = quote(`#${this.id}L${i - 1}`);
      from = `(SELECT ${[`${below}.*`, ...columns].join(', ')} FROM ${from} AS ${below} ${FENCE})`;
    }
    const where = conditions.length ? ` WHERE ${conditions.join(' AND ')}` : '';
    return `SELECT ${result} FROM ${from} AS ${quote(`#${this.id}L${this.levels.length - 1}`)}${where}`;
  }

  /** The scalar subquery of `result` (without FROM, one row). */
  select(result: string): string {
    return `(${this.rows(result)})`;
  }
}

// ---------------------------------------------------------------------------------------------
// fdlibm's sin, cos and asin (what Node's Math functions compute), operation by operation

const PIO2_1 = f8(1.57079632673412561417);
const PIO2_1T = f8(6.07710050650619224932e-11);
const PIO2_2 = f8(6.0771005063039659766e-11);
const PIO2_2T = f8(2.02226624879595063154e-21);
const PIO2_3 = f8(2.0222662487111664558e-21);
const PIO2_3T = f8(8.47842766036889956997e-32);
const INVPIO2 = f8(6.36619772367581382433e-1);
const NPIO2_HW = [
  0x3ff921fb, 0x400921fb, 0x4012d97c, 0x401921fb, 0x401f6a7a, 0x4022d97c, 0x4025fdbb, 0x402921fb, 0x402c463a, 0x402f6a7a, 0x4031475c, 0x4032d97c, 0x40346b9c,
  0x4035fdbb, 0x40378fdb, 0x403921fb, 0x403ab41b, 0x403c463a, 0x403dd85a, 0x403f6a7a, 0x40407e4c, 0x4041475c, 0x4042106c, 0x4042d97c, 0x4043a28c, 0x40446b9c,
  0x404534ac, 0x4045fdbb, 0x4046c6cb, 0x40478fdb, 0x404858eb, 0x404921fb,
];
/** |x| has the high word hw exactly when fromWords(hw, 0) <= |x| < fromWords(hw + 1, 0). */
const floatArray = (values: readonly number[]): string => `'{${values.map(String).join(',')}}'::float8[]`;
const NPIO2_LOW = floatArray(NPIO2_HW.map((hw) => fromWords(hw, 0)));
const NPIO2_HIGH = floatArray(NPIO2_HW.map((hw) => fromWords(hw + 1, 0)));
const S = [
  -1.66666666666666324348e-1, 8.33333333332248946124e-3, -1.98412698298579493134e-4, 2.75573137070700676789e-6, -2.50507602534068634195e-8,
  1.58969099521155010221e-10,
].map(f8);
const C = [
  4.16666666666666019037e-2, -1.38888888888741095749e-3, 2.48015872894767294178e-5, -2.75573143513906633035e-7, 2.0875723212981748279e-9,
  -1.13596475577881948265e-11,
].map(f8);
const PIO2_HI = f8(1.570796326794896558);
const PIO2_LO = f8(6.12323399573676603587e-17);
const PIO4_HI = f8(7.85398163397448278999e-1);
const PS = [
  1.66666666666666657415e-1, -3.25565818622400915405e-1, 2.01212532134862925881e-1, -4.00555345006794114027e-2, 7.91534994289814532176e-4,
  3.4793310759602116757e-5,
].map(f8);
const QS = [-2.40339491173441421878, 2.02094576023350569471, -6.8828397160545329303e-1, 7.70381505559019352791e-2].map(f8);
const TINY = f8(pow2(-27));

/** v with the low 32 bits of its significand cleared (fdlibm's SET_LOW_WORD(v, 0)), for 2^low <= v < 2^(high+1). */
function clearLowWord(v: string, low: number, high: number): string {
  const parts: string[] = [];
  for (let e = low; e < high; e++) parts.push(`WHEN ${v} < ${f8(pow2(e + 1))} THEN floor(${v} * ${f8(pow2(20 - e))}) * ${f8(pow2(e - 20))}`);
  return `(CASE ${parts.join(' ')} ELSE floor(${v} * ${f8(pow2(20 - high))}) * ${f8(pow2(high - 20))} END)`;
}

/** fdlibm __kernel_sin(x, y, iy) for |x| <= pi/4 (x, y repeatable SQL). */
function kernelSin(x: string, y: string, iy: 0 | 1): string {
  const z = `(${x} * ${x})`;
  const v = `(${z} * ${x})`;
  const r = `(${S[1]} + ${z} * (${S[2]} + ${z} * (${S[3]} + ${z} * (${S[4]} + ${z} * ${S[5]}))))`;
  const value = iy === 0 ? `${x} + ${v} * (${S[0]} + ${z} * ${r})` : `${x} - ((${z} * (0.5::float8 * ${y} - ${v} * ${r}) - ${y}) - ${v} * ${S[0]})`;
  return `(CASE WHEN abs(${x}) < ${TINY} THEN ${x} ELSE ${value} END)`;
}

/** fdlibm __kernel_cos(x, y) for |x| <= pi/4. */
function kernelCos(x: string, y: string): string {
  const z = `(${x} * ${x})`;
  const r = `(${z} * (${C[0]} + ${z} * (${C[1]} + ${z} * (${C[2]} + ${z} * (${C[3]} + ${z} * (${C[4]} + ${z} * ${C[5]}))))))`;
  const qx = `(CASE WHEN abs(${x}) >= ${f8(fromWords(0x3fe90001, 0))} THEN 0.28125::float8 ELSE ${clearLowWord(`abs(${x})`, -2, -1)} * 0.25::float8 END)`;
  return (
    `(CASE WHEN abs(${x}) < ${TINY} THEN 1::float8 ` +
    `WHEN abs(${x}) < ${f8(fromWords(0x3fd33333, 0))} THEN 1::float8 - (0.5::float8 * ${z} - (${z} * ${r} - ${x} * ${y})) ` +
    `ELSE (1::float8 - ${qx}) - ((0.5::float8 * ${z} - ${qx}) - (${z} * ${r} - ${x} * ${y})) END)`
  );
}

/** 2^floor(log2 t) for 1 <= t < 2^21 (fdlibm reads it from the exponent bits). */
function powerOfTwoBelow(t: string): string {
  const parts: string[] = [];
  for (let e = 0; e < 21; e++) parts.push(`WHEN ${t} < ${f8(pow2(e + 1))} THEN ${f8(pow2(e))}`);
  return `(CASE ${parts.join(' ')} ELSE ${f8(pow2(21))} END)`;
}

/**
 * fdlibm sin or cos of the stage value `a`, as a stage value: __ieee754_rem_pio2's reduction by
 * pi/2 (none up to pi/4, n = ±1 up to 3pi/4, the medium branch up to about 2^20·pi/2 with its
 * second and third iterations), then the kernels. Arguments beyond that (never a coordinate's)
 * use the server's sin/cos.
 */
function trig(st: Stages, a: string, fn: 'sin' | 'cos'): string {
  const ax = st.let(`abs(${a})`);
  // n = ±1: 33+53 bits of pi/2, or 33+33+53 near pi/2 (high word 0x3FF921FB)
  const near = `(${ax} >= ${f8(fromWords(0x3ff921fb, 0))} AND ${ax} < ${f8(fromWords(0x3ff921fc, 0))})`;
  const z1 = st.let(`CASE WHEN ${a} > 0 THEN ${a} - ${PIO2_1} ELSE ${a} + ${PIO2_1} END`);
  const z2 = st.let(`CASE WHEN ${near} THEN CASE WHEN ${a} > 0 THEN ${z1} - ${PIO2_2} ELSE ${z1} + ${PIO2_2} END ELSE ${z1} END`);
  const tail = st.let(`CASE WHEN ${near} THEN ${PIO2_2T} ELSE ${PIO2_1T} END`);
  const y0n1 = st.let(`CASE WHEN ${a} > 0 THEN ${z2} - ${tail} ELSE ${z2} + ${tail} END`);
  const y1n1 = st.let(`CASE WHEN ${a} > 0 THEN (${z2} - ${y0n1}) - ${tail} ELSE (${z2} - ${y0n1}) + ${tail} END`);
  // medium: n = nearest integer to |a|·2/pi, up to three rounds of pi/2 in pieces
  const n = st.let(`trunc(${ax} * ${INVPIO2} + 0.5::float8)`);
  const r1 = st.let(`${ax} - ${n} * ${PIO2_1}`);
  const w1 = st.let(`${n} * ${PIO2_1T}`);
  const quick = st.let(`(CASE WHEN ${n} < 32 THEN NOT (${ax} >= (${NPIO2_LOW})[${n}::int] AND ${ax} < (${NPIO2_HIGH})[${n}::int]) ELSE false END)`);
  const top = st.let(powerOfTwoBelow(ax));
  const y0a = st.let(`${r1} - ${w1}`);
  const w2 = st.let(`${n} * ${PIO2_2}`);
  const r2 = st.let(`${r1} - ${w2}`);
  const w2b = st.let(`${n} * ${PIO2_2T} - ((${r1} - ${r2}) - ${w2})`);
  const y0b = st.let(`${r2} - ${w2b}`);
  const w3 = st.let(`${n} * ${PIO2_3}`);
  const r3 = st.let(`${r2} - ${w3}`);
  const w3b = st.let(`${n} * ${PIO2_3T} - ((${r2} - ${r3}) - ${w3})`);
  const y0c = st.let(`${r3} - ${w3b}`);
  // a second round when y0 lost more than 16 bits to cancellation (exponents 16 apart), a third past 49
  const round = st.let(
    `CASE WHEN ${quick} OR NOT abs(${y0a}) < ${top} * ${f8(pow2(-16))} THEN 1 WHEN NOT abs(${y0b}) < ${top} * ${f8(pow2(-49))} THEN 2 ELSE 3 END`,
  );
  const r = st.let(`CASE ${round} WHEN 1 THEN ${r1} WHEN 2 THEN ${r2} ELSE ${r3} END`);
  const w = st.let(`CASE ${round} WHEN 1 THEN ${w1} WHEN 2 THEN ${w2b} ELSE ${w3b} END`);
  const y0m = st.let(`CASE ${round} WHEN 1 THEN ${y0a} WHEN 2 THEN ${y0b} ELSE ${y0c} END`);
  const y1m = st.let(`(${r} - ${y0m}) - ${w}`);
  // 0: no reduction, 1: n = ±1, 2: medium, 3: beyond (or not finite)
  const branch = st.let(
    `CASE WHEN ${ax} < ${f8(fromWords(0x3fe921fc, 0))} THEN 0 WHEN ${ax} < ${f8(fromWords(0x4002d97c, 0))} THEN 1 WHEN ${ax} < ${f8(fromWords(0x413921fc, 0))} THEN 2 ELSE 3 END`,
  );
  const quadrant = st.let(
    `CASE ${branch} WHEN 1 THEN CASE WHEN ${a} > 0 THEN 1 ELSE 3 END WHEN 2 THEN CASE WHEN ${a} < 0 THEN (4 - ${n}::int % 4) % 4 ELSE ${n}::int % 4 END ELSE 0 END`,
  );
  const y0 = st.let(`CASE ${branch} WHEN 1 THEN ${y0n1} WHEN 2 THEN CASE WHEN ${a} < 0 THEN -${y0m} ELSE ${y0m} END ELSE 0::float8 END`);
  const y1 = st.let(`CASE ${branch} WHEN 1 THEN ${y1n1} WHEN 2 THEN CASE WHEN ${a} < 0 THEN -${y1m} ELSE ${y1m} END ELSE 0::float8 END`);
  const sin = kernelSin(y0, y1, 1);
  const cos = kernelCos(y0, y1);
  const byQuadrant = fn === 'sin' ? [sin, cos, `-${sin}`, `-${cos}`] : [cos, `-${sin}`, `-${cos}`, sin];
  const unreduced = fn === 'sin' ? kernelSin(a, '0::float8', 0) : kernelCos(a, '0::float8');
  return st.let(
    `CASE ${branch} WHEN 0 THEN ${unreduced} WHEN 3 THEN CASE WHEN abs(${a}) < ${INF} THEN ${fn}(${a}) ELSE ${NAN} END ` +
      `ELSE CASE ${quadrant} ${byQuadrant.map((v, i) => `WHEN ${i} THEN ${v}`).join(' ')} END END`,
  );
}

/** fdlibm asin of the stage value `m`, 0 <= m <= 1, as a stage value. */
function asin(st: Stages, m: string): string {
  const poly = (t: string): string => `(${t} * (${PS[0]} + ${t} * (${PS[1]} + ${t} * (${PS[2]} + ${t} * (${PS[3]} + ${t} * (${PS[4]} + ${t} * ${PS[5]}))))))`;
  const den = (t: string): string => `(1::float8 + ${t} * (${QS[0]} + ${t} * (${QS[1]} + ${t} * (${QS[2]} + ${t} * ${QS[3]}))))`;
  // below 0.5: t = m², the series; from 0.5: t = (1 - m)/2, s = sqrt(t)
  const tLow = st.let(`CASE WHEN ${m} < ${TINY} THEN 0::float8 ELSE ${m} * ${m} END`);
  const tHigh = st.let(`(1::float8 - ${m}) * 0.5::float8`);
  const pLow = st.let(poly(tLow));
  const qLow = st.let(den(tLow));
  const pHigh = st.let(poly(tHigh));
  const qHigh = st.let(den(tHigh));
  const s = st.let(`sqrt(${tHigh})`);
  const f = clearLowWord(s, -4, -1);
  const c = `((${tHigh} - ${f} * ${f}) / (${s} + ${f}))`;
  return st.let(
    `CASE WHEN ${m} >= 1 THEN ${PIO2_HI} + ${PIO2_LO} ` +
      `WHEN ${m} < 0.5::float8 THEN CASE WHEN ${m} < ${TINY} THEN ${m} ELSE ${m} + ${m} * (${pLow} / ${qLow}) END ` +
      `WHEN ${m} >= ${f8(fromWords(0x3fef3333, 0))} THEN ${PIO2_HI} - (2::float8 * (${s} + ${s} * (${pHigh} / ${qHigh})) - ${PIO2_LO}) ` +
      `ELSE ${PIO4_HI} - ((2::float8 * ${s} * (${pHigh} / ${qHigh}) - (${PIO2_LO} - 2::float8 * ${c})) - (${PIO4_HI} - 2::float8 * ${f})) END`,
  );
}

/** Degrees to radians as src/geo/distance.ts has it. */
const RAD = Math.PI / 180;
/** 2 × 6,371,008.8 m (src/geo/distance.ts multiplies the radius by 2 first). */
const DIAMETER = 2 * 6_371_008.8;

/**
 * Whether the point column is within `meters` of (lon, lat) by src/geo/distance.ts's haversine,
 * computed as JavaScript computes it: false for NaN (coordinates out of every range).
 */
function haversineWithin(st: Stages, point: string, lon: string, lat: string, cosLat: string, meters: string): string {
  const x = st.let(`ST_X(${point}::geometry)`);
  const y = st.let(`ST_Y(${point}::geometry)`);
  const a1 = st.let(mulSmallConstant(mulSmallConstant(`(${y} - ${lat})`, RAD), 0.5));
  const a2 = st.let(mulSmallConstant(mulSmallConstant(`(${x} - ${lon})`, RAD), 0.5));
  const a3 = st.let(mulSmallConstant(y, RAD));
  const s1 = trig(st, a1, 'sin');
  const s2 = trig(st, a2, 'sin');
  const cy = trig(st, a3, 'cos');
  const p1 = st.let(ieeeMul(cosLat, cy));
  const p2 = st.let(ieeeMul(p1, s2));
  const p3 = st.let(ieeeMul(p2, s2));
  const h = st.let(`${ieeeMul(s1, s1)} + ${p3}`);
  const ok = st.let(`(${h} >= 0 AND ${h} <> ${NAN})`);
  const m = st.let(`CASE WHEN ${ok} THEN LEAST(1::float8, sqrt(${h})) ELSE 0::float8 END`);
  const angle = asin(st, m);
  return `(${ok} AND ${f8(DIAMETER)} * ${angle} <= ${meters})`;
}

// ---------------------------------------------------------------------------------------------
// Strings, dates and timestamps as parameters

/** PostgreSQL text holds neither U+0000 nor unpaired surrogates: both are sent as U+FFFD (as UTF-8 encoding does with the latter). */
function pgText(s: string): string {
  return s.replaceAll('\u0000', '\uFFFD').replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

const DAY_MS = 86_400_000;
/** PostgreSQL's first date and timestamp (4714-11-24 BC), in days since 1970; JavaScript's last is day 10^8. */
const PG_FIRST_DAY = -2_440_588;
const JS_LAST_DAY = 100_000_000;

const two = (n: number): string => String(n).padStart(2, '0');

/** A UTC date as PostgreSQL reads it: astronomical year 0 is 1 BC. */
function ymd(d: Date): { text: string; era: string } {
  const y = d.getUTCFullYear();
  return { text: `${String(y <= 0 ? 1 - y : y).padStart(4, '0')}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}`, era: y <= 0 ? ' BC' : '' };
}

/** Days since 1970 as a date parameter; beyond either end of PostgreSQL's range, ±infinity (which compare as every stored date does with them). */
function pgDate(days: number): string {
  if (days < PG_FIRST_DAY) return '-infinity';
  if (days > JS_LAST_DAY) return 'infinity';
  const { text, era } = ymd(new Date(days * DAY_MS));
  return `${text}${era}`;
}

/** Epoch milliseconds as a timestamptz parameter (±infinity beyond PostgreSQL's range). */
function pgTimestamp(ms: number): string {
  if (ms < PG_FIRST_DAY * DAY_MS) return '-infinity';
  if (ms > JS_LAST_DAY * DAY_MS) return 'infinity';
  const d = new Date(ms);
  const { text, era } = ymd(d);
  return `${text} ${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}.${String(d.getUTCMilliseconds()).padStart(3, '0')}+00${era}`;
}

/** A string of our own as a SQL literal of Unicode escapes. */
function unicodeLiteral(codePoints: readonly number[]): string {
  const hex = (cp: number): string => (cp > 0xffff ? `\\+${cp.toString(16).padStart(6, '0')}` : `\\${cp.toString(16).padStart(4, '0')}`);
  return `U&'${codePoints.map(hex).join('')}'`;
}

/** What JavaScript's trim() removes: WhiteSpace and LineTerminator. */
const TRIMMED = unicodeLiteral([
  0x9, 0xa, 0xb, 0xc, 0xd, 0x20, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f,
  0x205f, 0x3000, 0xfeff,
]);

/**
 * Case pairs [upper, lower] that Unicode added after 15.0 (the ICU of PostgreSQL 15 on Debian 12)
 * and JavaScript's case mapping has: translated after ICU's lower()/upper(), a no-op where the
 * server's ICU already maps them. The PostgreSQL suite checks every code point against JavaScript.
 */
const CASE_PAIRS: ReadonlyArray<readonly [number, number]> = [
  ...Array.from({ length: 22 }, (_, i) => [0x10d50 + i, 0x10d70 + i] as const),
  ...Array.from({ length: 25 }, (_, i) => [0x16ea0 + i, 0x16ebb + i] as const),
  [0x1c89, 0x1c8a],
  [0xa7cb, 0x0264],
  [0xa7cc, 0xa7cd],
  [0xa7ce, 0xa7cf],
  [0xa7d2, 0xa7d3],
  [0xa7d4, 0xa7d5],
  [0xa7da, 0xa7db],
  [0xa7dc, 0x019b],
];
const UPPERS = unicodeLiteral(CASE_PAIRS.map((p) => p[0]));
const LOWERS = unicodeLiteral(CASE_PAIRS.map((p) => p[1]));

// ---------------------------------------------------------------------------------------------
// Integer ranges (index-friendly comparisons of integer, date and timestamp columns)

const INT8_MIN = -(2n ** 63n);
const INT8_MAX = 2n ** 63n - 1n;

/** The integers v with `v op k` as an inclusive range (clamped to int8), or null for none; `ne` gives eq's range. */
function integerRange(op: CompareOperator, k: number): [bigint, bigint] | null {
  if (Number.isNaN(k)) return null;
  const ceil = (v: number): bigint => (v === Infinity ? INT8_MAX + 1n : v === -Infinity ? INT8_MIN - 1n : BigInt(Math.ceil(v)));
  const floor = (v: number): bigint => (v === Infinity ? INT8_MAX + 1n : v === -Infinity ? INT8_MIN - 1n : BigInt(Math.floor(v)));
  let lo = INT8_MIN;
  let hi = INT8_MAX;
  switch (op) {
    case 'eq':
    case 'ne':
      if (!Number.isInteger(k)) return null;
      lo = hi = BigInt(k);
      break;
    case 'lt':
      hi = ceil(k) - 1n;
      break;
    case 'le':
      hi = floor(k);
      break;
    case 'gt':
      lo = floor(k) + 1n;
      break;
    case 'ge':
      lo = ceil(k);
      break;
  }
  if (lo < INT8_MIN) lo = INT8_MIN;
  if (hi > INT8_MAX) hi = INT8_MAX;
  return lo > hi ? null : [lo, hi];
}

/** A bigint of milliseconds or days as a timestamptz or date parameter (±infinity outside the range). */
function boundText(v: bigint, unit: 'date' | 'timestamptz'): string {
  const scale = unit === 'date' ? 1n : BigInt(DAY_MS);
  if (v < BigInt(PG_FIRST_DAY) * scale) return '-infinity';
  if (v > BigInt(JS_LAST_DAY) * scale) return 'infinity';
  return unit === 'date' ? pgDate(Number(v)) : pgTimestamp(Number(v));
}

const FLIP: Record<CompareOperator, CompareOperator> = { eq: 'eq', ne: 'ne', gt: 'lt', ge: 'le', lt: 'gt', le: 'ge' };
const SQL_OP: Record<CompareOperator, string> = { eq: '=', ne: '<>', gt: '>', ge: '>=', lt: '<', le: '<=' };

// ---------------------------------------------------------------------------------------------
// The compiler

/** What a value's SQL is compared and computed as. */
type Domain = 'number' | 'text' | 'boolean' | 'date' | 'timestamp';
const CAST: Record<Domain, string> = { number: 'float8', text: 'text', boolean: 'boolean', date: 'date', timestamp: 'timestamptz' };

function domainOf(t: ValueType): Domain | null {
  switch (t) {
    case 'integer':
    case 'decimal':
      return 'number';
    case 'string':
      return 'text';
    case 'boolean':
      return 'boolean';
    case 'date':
      return 'date';
    case 'dateTimeOffset':
      return 'timestamp';
    case 'point':
    case 'null':
      return null;
  }
}

interface Sql {
  readonly text: string;
  /** Cheap to repeat in a statement: a column, a parameter, a cast or negation of one. */
  readonly simple: boolean;
  /** May be NaN (arithmetic): PostgreSQL calls NaN equal to itself and above every number. */
  readonly nan: boolean;
}

const plain = (text: string, simple = false): Sql => ({ text, simple, nan: false });

/** Whether an expression reads no row (its value is one for the whole query). */
function isConstant(b: Bound): boolean {
  switch (b.kind) {
    case 'const':
      return true;
    case 'field':
    case 'var':
    case 'member':
    case 'lambda':
    case 'search':
    case 'geo':
      return false;
    case 'call':
      return b.args.every(isConstant);
    case 'compare':
    case 'and':
    case 'or':
    case 'arith':
      return isConstant(b.left) && isConstant(b.right);
    case 'not':
    case 'negate':
      return isConstant(b.operand);
    case 'in':
      return isConstant(b.left);
  }
}

const DOM_REFERENCE = 'service_DaysOnMarketReferenceTimestamp';
/** The date part functions (of a date or, from hour on, a timestamp; in UTC). */
const DATE_PARTS: ReadonlySet<string> = new Set(['year', 'month', 'day', 'hour', 'minute', 'second']);

class Compiler {
  /** Lambda variables in scope: name -> SQL of the element. */
  private readonly vars = new Map<string, string>();
  /** Makes the names of subselects unique within the statement (in order, so the text depends on the shape only). */
  private seq = 0;
  /** The chain the values of the filter atom being compiled are computed in (null between atoms). */
  private st: Stages | null = null;

  constructor(private readonly ctx: FilterContext) {}

  column(f: FieldDef): string {
    return `${this.ctx.alias}.${column(f)}`;
  }

  private param(value: unknown, cast: string): string {
    return this.ctx.params.add(value, cast);
  }

  private next(prefix: string): string {
    return `${prefix}${this.seq++}`;
  }

  /** A subtree that reads no row, evaluated in memory and sent as one parameter. */
  private constant(b: Bound, domain: Domain): Sql {
    if (b.type === 'null') return plain(`NULL::${CAST[domain]}`, true);
    const v = b.kind === 'const' ? b.value : constantValue(b, this.ctx.nowMs);
    return { text: this.param(this.encode(v, domain), CAST[domain]), simple: true, nan: b.kind !== 'const' && domain === 'number' };
  }

  private encode(v: Value, domain: Domain): unknown {
    if (v === null) return null;
    switch (domain) {
      case 'text':
        return pgText(v as string);
      case 'date':
        return pgDate(v as number);
      case 'timestamp':
        return pgTimestamp(v as number);
      default:
        return v;
    }
  }

  /**
   * `f` over operands that each appear several times in its text: simple ones inline, the others
   * values of the atom's chain (computed once). Outside an atom (booleans compared with booleans,
   * whose atoms have chains of their own) they are repeated.
   */
  private bind(ops: readonly Sql[], f: (...texts: string[]) => string): string {
    // f over placeholders first: an operand it uses once is written in place (a value of the
    // chain would be a level more, and a level costs every row)
    const mark = (i: number): string => `\u0001${i}\u0001`;
    const shape = f(...ops.map((_, i) => mark(i)));
    const texts = ops.map((o, i) => (o.simple || this.st === null || shape.split(mark(i)).length <= 2 ? o.text : this.st.let(o.text)));
    return texts.reduce((out, text, i) => out.split(mark(i)).join(text), shape);
  }

  /**
   * `f`'s SQL with the values it computes in one chain (Stages): a filter atom (a comparison, an
   * `in`, a function) is one scalar subquery over its chain, or inline when it computes nothing;
   * an atom inside another (a boolean operand, a lambda's predicate) computes in the chain open.
   */
  atom(f: () => string): string {
    if (this.st !== null) return f();
    const st = new Stages(this.next('s'));
    this.st = st;
    try {
      const result = f();
      return st.empty ? result : st.select(result);
    } finally {
      this.st = null;
    }
  }

  /** A value of the open chain. */
  private let(sql: string): string {
    if (this.st === null) throw new Error('a computed value outside a filter atom');
    return this.st.let(sql);
  }

  // ---- booleans (three-valued, as the in-memory evaluator)

  boolean(b: Bound): string {
    if (isConstant(b)) return this.constant(b, 'boolean').text;
    switch (b.kind) {
      case 'field':
        return this.column(b.field);
      case 'not':
        return `(NOT ${this.boolean(b.operand)})`;
      case 'and':
        return `(${this.boolean(b.left)} AND ${this.boolean(b.right)})`;
      case 'or':
        return `(${this.boolean(b.left)} OR ${this.boolean(b.right)})`;
      case 'compare':
        // booleans compared: each operand's atoms have chains of their own
        return b.left.type === 'boolean' || b.right.type === 'boolean' ? this.compare(b) : this.atom(() => this.compare(b));
      case 'in':
        return b.left.type === 'boolean' ? this.in(b) : this.atom(() => this.in(b));
      case 'member':
        return this.atom(() => {
          const v = this.text(b.value);
          return this.bind([v], (x) => `(${x} IS NOT NULL AND ${this.column(b.collection)} @> ARRAY[${x}])`);
        });
      case 'lambda':
        return this.lambda(b);
      case 'search':
        return `(${this.ctx.search(b)})`;
      case 'geo':
        return this.geo(b);
      case 'call':
        return this.atom(() => this.predicate(b));
      default:
        throw new Error(`not a boolean: ${b.kind}`);
    }
  }

  private predicate(b: Extract<Bound, { kind: 'call' }>): string {
    const s = this.text(b.args[0]);
    const t = this.text(b.args[1]);
    switch (b.fn) {
      case 'contains':
        return `(strpos(${s.text}, ${t.text}) > 0)`;
      case 'startswith':
        return `starts_with(${s.text}, ${t.text})`;
      case 'endswith':
        return this.bind([t], (x) => `(right(${s.text}, length(${x})) = ${x})`);
      default:
        throw new Error(`not a boolean function: ${b.fn}`);
    }
  }

  private compare(b: Extract<Bound, { kind: 'compare' }>): string {
    let { op, left, right } = b;
    if (left.type === 'point') {
      // a point compares only with null (the binder puts it on the left)
      return `(${this.column((left as Extract<Bound, { kind: 'field' }>).field)} ${op === 'ne' ? 'IS NOT NULL' : 'IS NULL'})`;
    }
    if (isConstant(left)) {
      [left, right] = [right, left];
      op = FLIP[op];
    }
    const domain = domainOf(left.type) ?? domainOf(right.type)!;
    if (isConstant(right)) {
      const k = right.kind === 'const' ? right.value : constantValue(right, this.ctx.nowMs);
      if (k === null) {
        // null rules: both null is eq, ge and le; one null is ne
        if (op === 'gt' || op === 'lt') return 'false';
        return `(${this.value(left, domain).text} ${op === 'ne' ? 'IS NOT NULL' : 'IS NULL'})`;
      }
      if (left.kind === 'field') {
        const fast = this.fieldCompare(left.field, op, k);
        if (fast !== null) return fast;
      }
    }
    // (a constant here is not null: both sides null cannot happen)
    return this.compareValues(op, this.value(left, domain), this.value(right, domain), domain, isConstant(right));
  }

  /** Two values of a domain compared as compareValues does (src/exec/compile.ts). */
  private compareValues(op: CompareOperator, l: Sql, r: Sql, domain: Domain, rightNotNull = false): string {
    return this.bind([l, r], (a, b) => {
      if (op === 'eq' || op === 'ne') {
        // NaN is not equal to itself in JavaScript
        const eq = `(${a} IS NOT DISTINCT FROM ${b}${l.nan && r.nan ? ` AND ${a} IS DISTINCT FROM ${NAN}` : ''})`;
        return op === 'eq' ? eq : `(NOT ${eq})`;
      }
      // PostgreSQL puts NaN above every number: a NaN on the greater side must not win (as NULL it
      // compares to NULL, which COALESCE makes false: NaN is not null for ge and le either)
      const greater = (x: string, may: boolean): string => (may ? `NULLIF(${x}, ${NAN})` : x);
      const test =
        domain === 'text'
          ? `CASE WHEN ${a} ~ ${HIGH_SQL} AND ${b} ~ ${HIGH_SQL} THEN ${utf16Order(a)} ${SQL_OP[op]} ${utf16Order(b)} ELSE ${a} ${SQL_OP[op]} ${b} END`
          : op === 'gt' || op === 'ge'
            ? `${greater(a, l.nan)} ${SQL_OP[op]} ${b}`
            : `${a} ${SQL_OP[op]} ${greater(b, r.nan)}`;
      const bothNull = (op === 'ge' || op === 'le') && !rightNotNull ? `${a} IS NULL AND ${b} IS NULL` : 'false';
      return `COALESCE(${test}, ${bothNull})`;
    });
  }

  /**
   * A stored column compared with a non-null constant, in a form an index can use: integer, date
   * and timestamp columns (integral values) as a range of integers, DaysOnMarket as a range of its
   * reference timestamp; null when the general comparison must do.
   */
  private fieldCompare(f: FieldDef, op: CompareOperator, k: Value): string | null {
    const range = (c: string, bounds: [string, string] | null, cast: string, empty: [string, string]): string => {
      const [lo, hi] = bounds ?? empty;
      const within = `${c} >= ${this.param(lo, cast)} AND ${c} <= ${this.param(hi, cast)}`;
      return op === 'ne' ? `(NOT (${within}) OR ${c} IS NULL)` : `(${within} AND ${c} IS NOT NULL)`;
    };
    const test = (c: string, value: unknown, cast: string): string => {
      const p = this.param(value, cast);
      return op === 'ne' ? `(${c} <> ${p} OR ${c} IS NULL)` : `(${c} ${SQL_OP[op]} ${p} AND ${c} IS NOT NULL)`;
    };
    if (!isStored(f)) {
      if (f.name !== 'DaysOnMarket' || typeof k !== 'number' || this.ctx.schema.field(DOM_REFERENCE) === undefined) return null;
      return range(`${this.ctx.alias}.${quote(DOM_REFERENCE)}`, this.daysOnMarketBounds(integerRange(op, k)), 'timestamptz', ['infinity', '-infinity']);
    }
    const c = this.column(f);
    if (f.collection) return null;
    if (typeof k === 'number') {
      if (isIntegerType(f.type)) {
        const r = integerRange(op, k);
        return range(c, r && [String(r[0]), String(r[1])], 'bigint', ['1', '0']);
      }
      if (f.type === 'Edm.Date' || f.type === 'Edm.DateTimeOffset') {
        const unit = f.type === 'Edm.Date' ? 'date' : 'timestamptz';
        const r = integerRange(op, k);
        return range(c, r && [boundText(r[0], unit), boundText(r[1], unit)], unit, ['infinity', '-infinity']);
      }
      if (f.type === 'Edm.Decimal' || f.type === 'Edm.Double') {
        // NaN compares false: as ±Infinity it does too against the finite stored values
        const v = Number.isNaN(k) ? (op === 'lt' || op === 'le' ? -Infinity : Infinity) : k;
        return test(c, f.type === 'Edm.Decimal' ? String(v) : v, f.type === 'Edm.Decimal' ? 'numeric' : 'float8');
      }
      return null;
    }
    if (typeof k === 'boolean') return f.type === 'Edm.Boolean' && (op === 'eq' || op === 'ne') ? test(c, k, 'boolean') : null;
    if (typeof k === 'string' && f.type === 'Edm.String') return this.textCompare(c, op, k);
    return null;
  }

  /** A text column or element against a constant: code point order where it is the UTF-16 order, else both sides rewritten. */
  private textCompare(c: string, op: CompareOperator, k: string): string {
    const s = pgText(k);
    const p = this.param(s, 'text');
    if (op === 'eq') return `(${c} = ${p} AND ${c} IS NOT NULL)`;
    if (op === 'ne') return `(${c} <> ${p} OR ${c} IS NULL)`;
    const direct = this.param(!HIGH_CHARACTERS.test(s), 'boolean');
    const rewritten = this.param(utf16OrderOf(s), 'text');
    return `(((${c} ${SQL_OP[op]} ${p} AND ${direct}) OR (NOT ${direct} AND ${utf16Order(c)} ${SQL_OP[op]} ${rewritten})) AND ${c} IS NOT NULL)`;
  }

  /**
   * DaysOnMarket in [lo, hi] as its reference timestamp's range: whole days from the reference to
   * now, floored, never below 0 (columns.ts daysOnMarket), so D >= lo > 0 is ref <= now - lo·day
   * and D <= hi is ref > now - (hi + 1)·day (references are whole milliseconds).
   */
  private daysOnMarketBounds(r: [bigint, bigint] | null): [string, string] | null {
    if (r === null || r[1] < 0n) return null;
    const now = BigInt(Math.floor(this.ctx.nowMs));
    const [lo, hi] = r;
    const first = hi >= INT8_MAX ? '-infinity' : boundText(now - (hi + 1n) * BigInt(DAY_MS) + 1n, 'timestamptz');
    const last = lo <= 0n ? 'infinity' : boundText(now - lo * BigInt(DAY_MS), 'timestamptz');
    return [first, last];
  }

  private in(b: Extract<Bound, { kind: 'in' }>): string {
    const domain = domainOf(b.left.type)!;
    const values = b.values.filter((v) => v !== null);
    const hasNull = this.param(b.values.includes(null), 'boolean');
    const left = b.left;
    if (left.kind === 'field' && isStored(left.field)) {
      const c = this.column(left.field);
      const list = this.columnList(left.field, values);
      if (list !== null) return `((${c} = ANY(${list}) AND ${c} IS NOT NULL) OR (${c} IS NULL AND ${hasNull}))`;
    }
    const x = this.value(left, domain);
    const list = this.param(
      values.map((v) => this.encode(v, domain)),
      `${CAST[domain]}[]`,
    );
    return this.bind([x], (a) => `(CASE WHEN ${a} IS NULL THEN ${hasNull} ELSE ${a} = ANY(${list}) END)`);
  }

  /** The values of an `in` list as an array parameter of the column's own type (those no stored value can equal left out). */
  private columnList(f: FieldDef, values: readonly Value[]): string | null {
    const numbers = values.filter((v): v is number => typeof v === 'number');
    if (isIntegerType(f.type)) {
      const ints = numbers.filter((v) => Number.isInteger(v) && v >= -(2 ** 63) && v < 2 ** 63).map((v) => BigInt(v).toString());
      return this.param(ints, 'bigint[]');
    }
    switch (f.type) {
      case 'Edm.Decimal':
        return this.param(
          numbers.map((v) => String(v)),
          'numeric[]',
        );
      case 'Edm.Double':
        return this.param(numbers, 'float8[]');
      case 'Edm.String':
        return this.param(values.filter((v): v is string => typeof v === 'string').map(pgText), 'text[]');
      case 'Edm.Boolean':
        return this.param(
          values.filter((v) => typeof v === 'boolean'),
          'boolean[]',
        );
      case 'Edm.Date':
        return this.param(numbers.filter(Number.isInteger).map(pgDate), 'date[]');
      case 'Edm.DateTimeOffset':
        return this.param(numbers.filter(Number.isInteger).map(pgTimestamp), 'timestamptz[]');
      default:
        return null;
    }
  }

  /** any/all over a collection: three-valued as the in-memory loop (a null result beside no true for any, beside no false for all). */
  private lambda(b: Extract<Bound, { kind: 'lambda' }>): string {
    const col = this.column(b.collection);
    if (b.predicate === null || b.variable === null) return `(cardinality(${col}) > 0)`;
    const p = b.predicate;
    // `x eq 'v'` for any: the collection holds 'v' (elements are never null), an index lookup
    if (b.op === 'any' && p.kind === 'compare' && p.op === 'eq') {
      const [v, k] = p.left.kind === 'var' && p.left.name === b.variable ? [p.left, p.right] : [p.right, p.left];
      if (v.kind === 'var' && v.name === b.variable && isConstant(k) && k.type === 'string') {
        const value = this.constant(k, 'text').text;
        return `(${value} IS NOT NULL AND ${col} @> ARRAY[${value}])`;
      }
    }
    // The predicate over each element, computed in a chain over unnest (its first level), and
    // three-valued as the in-memory loop: `true = ANY` is true for a true, else null for a null,
    // else false (none: false); `true = ALL` false for a false, else null for a null, else true.
    // A predicate holding a lambda holds a subquery, which Citus refuses in a level that reads no
    // distributed table (only `unnest`): that chain reads the row again from its table, joined to
    // the row on its key and its distribution column, so that every level reads the table.
    const alias = quote(this.next('#l'));
    const id = this.next('s');
    const nested = holdsLambda(p);
    const row = quote(`#r${id}`);
    const onRow = nested ? this.keyColumns().map((c) => ({ own: `${row}.${c}`, outer: `${this.ctx.alias}.${c}` })) : [];
    const st = new Stages(
      id,
      nested ? `${this.ctx.table} AS ${row} CROSS JOIN unnest(${row}.${column(b.collection)}) AS ${alias}(x)` : `unnest(${col}) AS ${alias}(x)`,
    );
    const joined = onRow.map((k) => `${st.let(k.own)} = ${k.outer}`);
    const element = st.let(`${alias}.x`);
    const saved = this.vars.get(b.variable);
    const outer = this.st;
    this.vars.set(b.variable, element);
    this.st = st;
    let test: string;
    try {
      test = this.boolean(p);
    } finally {
      this.st = outer;
      if (saved === undefined) this.vars.delete(b.variable);
      else this.vars.set(b.variable, saved);
    }
    return `(true = ${b.op === 'any' ? 'ANY' : 'ALL'} (${st.rows(test, joined)}))`;
  }

  /** The columns that find a row of the resource's table: its key, and for a table spread by listing the listing key too (its distribution column). */
  private keyColumns(): string[] {
    const resource = this.ctx.schema.resource;
    const key = column({ name: this.ctx.schema.key });
    if (!SHARDED_RESOURCES.includes(resource)) return [key];
    const shard = column({ name: shardColumn(resource) });
    return shard === key ? [key] : [key, shard];
  }

  private geo(node: Extract<Bound, { kind: 'geo' }>): string {
    const col = this.column(node.field);
    const { lon, lat, meters } = node;
    // The index prefilter on PostGIS's sphere, with slack for its radius and rounding; a centre
    // outside the coordinate ranges (which the haversine still answers) switches it off.
    const usable = Math.abs(lon) <= 180 && Math.abs(lat) <= 90 && Number.isFinite(meters);
    const reach = usable ? Math.min(1e9, Math.max(0, meters * (1 + 1e-6) + 1)) : 1e9;
    const centre = `ST_SetSRID(ST_MakePoint(${this.param(usable ? lon : 0, 'float8')}, ${this.param(usable ? lat : 0, 'float8')}), 4326)::geography`;
    const exact = this.atom(() =>
      haversineWithin(
        this.st!,
        col,
        this.param(lon, 'float8'),
        this.param(lat, 'float8'),
        // (a value of the chain, as every constant in the arithmetic: out of reach of constant folding)
        this.let(this.param(Math.cos(lat * RAD), 'float8')),
        this.param(meters, 'float8'),
      ),
    );
    return `(${col} IS NOT NULL AND ST_DWithin(${col}, ${centre}, ${this.param(reach, 'float8')}, false) AND ${exact})`;
  }

  // ---- values

  value(b: Bound, domain: Domain): Sql {
    switch (domain) {
      case 'number':
        return this.number(b);
      case 'text':
        return this.text(b);
      case 'boolean':
        return plain(this.boolean(b), b.kind === 'field');
      case 'date':
      case 'timestamp':
        return this.temporal(b, domain);
    }
  }

  private number(b: Bound): Sql {
    if (isConstant(b)) {
      // PostgreSQL folds constant subexpressions when it plans, even in CASE branches that the
      // guards of the arithmetic below never take (and a custom plan makes parameters constants):
      // a value of the chain (a column of its first level) is out of reach of that folding.
      const c = this.constant(b, 'number');
      return { ...c, text: this.let(c.text) };
    }
    switch (b.kind) {
      case 'field':
        return isStored(b.field) ? plain(`${this.column(b.field)}::float8`, true) : this.daysOnMarket();
      case 'negate': {
        const x = this.number(b.operand);
        return { text: `(-${x.text})`, simple: x.simple, nan: x.nan };
      }
      case 'arith':
        return { text: this.arith(b.op, this.number(b.left), this.number(b.right), b.type === 'integer'), simple: false, nan: true };
      case 'call':
        return plain(this.numberCall(b));
      default:
        throw new Error(`not a number: ${b.kind}`);
    }
  }

  private arith(op: ArithmeticOperator, l: Sql, r: Sql, integer: boolean): string {
    switch (op) {
      case 'add':
        return this.bind([l, r], ieeeAdd);
      case 'sub':
        return this.bind([l, r], (x, y) => ieeeAdd(x, `(-${y})`));
      case 'mul':
        return this.bind([l, r], ieeeMul);
      case 'div':
        // division by zero is null; integers divide as doubles, truncated
        return this.bind([l, r], (x, y) => `(CASE WHEN ${y} = 0 THEN NULL::float8 ELSE ${integer ? `trunc(${ieeeDiv(x, y)})` : ieeeDiv(x, y)} END)`);
      case 'mod':
        return this.bind([l, r], (x, y) => `(CASE WHEN ${y} = 0 THEN NULL::float8 ELSE ${ieeeMod(x, y)} END)`);
    }
  }

  /** DaysOnMarket: whole days from the reference timestamp to now, floored, never below 0 (store/columns.ts). */
  private daysOnMarket(): Sql {
    if (this.ctx.schema.field(DOM_REFERENCE) === undefined) return plain('NULL::float8', true);
    // (of the UTC timestamp: extract of a timestamptz is not immutable, which a chain's first level must be)
    const ref = `(extract(epoch from ${this.ctx.alias}.${quote(DOM_REFERENCE)} AT TIME ZONE 'UTC') * 1000)::float8`;
    const now = this.param(this.ctx.nowMs, 'float8');
    return plain(`(CASE WHEN ${now} <= ${ref} THEN 0::float8 ELSE floor((${now} - ${ref}) / ${f8(DAY_MS)}) END)`);
  }

  private numberCall(b: Extract<Bound, { kind: 'call' }>): string {
    switch (b.fn) {
      case 'length':
        return `length(${this.text(b.args[0]).text})::float8`;
      case 'indexof':
        return `(strpos(${this.text(b.args[0]).text}, ${this.text(b.args[1]).text}) - 1)::float8`;
      default: {
        if (!DATE_PARTS.has(b.fn)) throw new Error(`not a number function: ${b.fn}`);
        const arg = b.args[0];
        const isDate = arg.type === 'date';
        const x = this.temporal(arg, isDate ? 'date' : 'timestamp').text;
        const utc = isDate ? x : `(${x} AT TIME ZONE 'UTC')`;
        if (b.fn === 'second') return `floor(date_part('second', ${utc}))`;
        // JavaScript counts years astronomically (1 BC is year 0), PostgreSQL from -1
        if (b.fn === 'year') return `(date_part('year', ${utc}) + CASE WHEN date_part('year', ${utc}) < 0 THEN 1 ELSE 0 END)`;
        return `date_part('${b.fn}', ${utc})`;
      }
    }
  }

  private text(b: Bound): Sql {
    if (isConstant(b)) return this.constant(b, 'text');
    switch (b.kind) {
      case 'field':
        return plain(this.column(b.field), true);
      case 'var': {
        const v = this.vars.get(b.name);
        if (v === undefined) throw new Error(`unbound lambda variable ${b.name}`);
        return plain(v, true);
      }
      case 'call':
        return plain(this.textCall(b));
      default:
        throw new Error(`not a string: ${b.kind}`);
    }
  }

  private textCall(b: Extract<Bound, { kind: 'call' }>): string {
    const s = this.text(b.args[0]);
    switch (b.fn) {
      case 'tolower':
        return `(translate(lower(${s.text} COLLATE "und-x-icu"), ${UPPERS}, ${LOWERS}) COLLATE "C")`;
      case 'toupper':
        return `(translate(upper(${s.text} COLLATE "und-x-icu"), ${LOWERS}, ${UPPERS}) COLLATE "C")`;
      case 'trim':
        return `btrim(${s.text}, ${TRIMMED})`;
      case 'concat':
        return `(${s.text} || ${this.text(b.args[1]).text})`;
      case 'substring': {
        // slice(max(0, start)[, start + max(0, length)]) over characters; NaN counts as 0 there
        // (and GREATEST/LEAST skip NULLs, so nulls are tested first)
        const start = this.number(b.args[1]);
        const from = (x: string): string => `(LEAST(GREATEST(${x}, 0::float8), 1e9::float8) + 1)::int`;
        if (b.args.length < 3) {
          return this.bind([start], (x) => `substr(${s.text}, CASE WHEN ${x} IS NULL THEN NULL WHEN ${x} = ${NAN} THEN 1 ELSE ${from(x)} END)`);
        }
        const length = this.number(b.args[2]);
        return this.bind(
          [s, start, length],
          (t, x, n) =>
            `(CASE WHEN ${x} IS NULL OR ${n} IS NULL THEN NULL::text WHEN ${x} = ${NAN} OR ${n} = ${NAN} THEN left(${t}, 0) ` +
            `ELSE substr(${t}, ${from(x)}, LEAST(GREATEST(${n}, 0::float8), 1e9::float8)::int) END)`,
        );
      }
      default:
        throw new Error(`not a string function: ${b.fn}`);
    }
  }

  private temporal(b: Bound, domain: 'date' | 'timestamp'): Sql {
    if (isConstant(b)) return this.constant(b, domain);
    switch (b.kind) {
      case 'field':
        return plain(this.column(b.field), true);
      case 'call':
        if (b.fn === 'date') return plain(`((${this.temporal(b.args[0], 'timestamp').text}) AT TIME ZONE 'UTC')::date`);
        throw new Error(`not a temporal function: ${b.fn}`);
      default:
        throw new Error(`not a date or timestamp: ${b.kind}`);
    }
  }
}
