/**
 * The Chevrotain grammar of the query options, with embedded actions that build the AST directly
 * (no CST: half the allocations, and the actions validate as they go).
 *
 * Expression precedence, loosest first, every binary level left-associative:
 *   or < and < comparison (eq ne gt ge lt le, in) < additive (add sub) < multiplicative
 *   (mul div mod) < prefix (not, -) < primary
 * An expression is read flat (`operand (op operand)*`) and folded by precedence in a loop
 * (`buildBinary`), and a run of prefix operators is one loop too, so the only recursion is
 * through parentheses (grouping, calls, lambdas, in-lists, $expand/$apply arguments): two rule
 * frames per level. Every `(` and every prefix operator adds one level of nesting, checked
 * against `maxDepth` before the parser descends, so no input can exhaust the stack.
 *
 * Performance notes (the bench wants 50,000 typical filters per second):
 * - semantic code runs in `if (this.live)` blocks rather than `ACTION(() => ...)` closures
 *   (`live` is false only while Chevrotain records the grammar in performSelfAnalysis);
 * - alternatives of OR are built once, as fields, not per call;
 * - spans go to flat arrays, not a WeakMap (see SpanRecorder in ast.ts).
 *
 * One parser instance is built at module load and reused (`input =` resets it); parsing is
 * synchronous, so there is never more than one parse in flight.
 */
import { EmbeddedActionsParser, EOF, tokenMatcher, type IOrAlt, type IRecognitionException, type IToken, type OrMethodOpts, type TokenType } from 'chevrotain';
import { QueryError } from '../errors.js';
import {
  isAggregateMethod,
  isFunctionName,
  FUNCTION_ARITY,
  type AggregateItem,
  type AggregateMethod,
  type AggregateTransformation,
  type ApplyTransformation,
  type ArithmeticOperator,
  type CompareOperator,
  type ExpandItem,
  type ExpandOptions,
  type Expr,
  type FunctionName,
  type ListExpr,
  type LiteralExpr,
  type MemberExpr,
  type OrderByItem,
  type SelectItem,
  type SpanRecorder,
} from './ast.js';
import { describeFound, queryError, type ParseErrorCode } from './errors.js';
import { isLiteralFailure, literalOfToken } from './literals.js';
import {
  AddOp,
  allTokens,
  And,
  As,
  AtName,
  BinaryOp,
  Colon,
  Comma,
  CompareOp,
  DateLike,
  DollarCount,
  DollarFilter,
  DollarName,
  DollarOrderby,
  DollarSelect,
  DollarSkip,
  DollarTop,
  Equals,
  Geography,
  Geometry,
  Identifier,
  In,
  JsonStart,
  lexer,
  LiteralToken,
  LParen,
  MulOp,
  Not,
  Null,
  NumberLit,
  Or,
  PrefixOp,
  RParen,
  Semi,
  Slash,
  SortDirection,
  Star,
  StringLit,
  With,
} from './tokens.js';

export interface ParseLimits {
  /** Nesting levels: each `(` (grouping, call, lambda, list, nested option) and prefix operator. */
  readonly maxDepth: number;
  /** Literals in one `in (...)` list. */
  readonly maxInListItems: number;
  /** Keys in one `$orderby` (top level or nested in `$expand`). */
  readonly maxOrderByItems: number;
}

/** OData names are at most 128 characters (ABNF odataIdentifier). */
const MAX_IDENTIFIER = 128;

/** OData functions (and cast/isof) the service does not have: named as such in the error. */
const UNSUPPORTED_FUNCTIONS = new Set([
  'matchesPattern',
  'fractionalseconds',
  'totalseconds',
  'time',
  'totaloffsetminutes',
  'mindatetime',
  'maxdatetime',
  'round',
  'floor',
  'ceiling',
  'geo.length',
  'geo.intersects',
  'hassubset',
  'hassubsequence',
  'case',
  'cast',
  'isof',
  'isdefined',
]);

const UNSUPPORTED_TRANSFORMATIONS = new Set([
  'compute',
  'concat',
  'identity',
  'orderby',
  'top',
  'skip',
  'search',
  'topcount',
  'topsum',
  'toppercent',
  'bottomcount',
  'bottomsum',
  'bottompercent',
  'nest',
  'addnested',
  'join',
  'outerjoin',
  'ancestors',
  'descendants',
  'traverse',
]);

/** What a failed choice in each rule was looking for, in words. */
const RULE_EXPECTATIONS: Readonly<Record<string, string>> = {
  operand: "an expression (a literal, a name, a function call, 'not', '-' or '(')",
  selectItem: "a property name or '*'",
  expandOption: 'one of $select, $filter, $orderby, $top, $skip',
  aggregateItem: "an aggregate ('Field with method [as Alias]' or '$count as Alias')",
};

/** What may follow a complete option value, per entry rule (for "unexpected ..." at the end). */
const ENTRY_FOLLOW: Readonly<Record<Entry, string>> = {
  filterEntry: 'an operator or the end of the expression',
  orderbyEntry: "an operator, 'asc', 'desc', ',' or the end of the value",
  selectEntry: "',' or the end of the value",
  expandEntry: "'(', ',' or the end of the value",
  applyEntry: "'/' or the end of the value",
};

type Entry = 'filterEntry' | 'orderbyEntry' | 'selectEntry' | 'expandEntry' | 'applyEntry';

const describeToken = (t: IToken): string => (t.tokenType === EOF ? 'end of input' : `'${t.image}'`);
const label = (t: TokenType): string => t.LABEL ?? t.name;
const isSpace = (c: string | undefined): boolean => c === ' ' || c === '\t';
/** Offset just past a token (its image is exactly the text it covers). */
const after = (t: IToken): number => t.startOffset + t.image.length;

function expectation(ruleName: string, paths: TokenType[][]): string {
  const known = RULE_EXPECTATIONS[ruleName];
  if (known) return known;
  const firsts = [...new Set(paths.map((p) => label(p[0])))];
  return firsts.length === 1 ? firsts[0] : `one of ${firsts.join(', ')}`;
}

const errorMessageProvider = {
  buildMismatchTokenMessage: (o: { expected: TokenType; actual: IToken }) => `expected ${label(o.expected)}, found ${describeToken(o.actual)}`,
  buildNotAllInputParsedMessage: (o: { firstRedundant: IToken }) => `unexpected ${describeToken(o.firstRedundant)}`,
  buildNoViableAltMessage: (o: { expectedPathsPerAlt: TokenType[][][]; actual: IToken[]; ruleName: string }) =>
    `expected ${expectation(o.ruleName, o.expectedPathsPerAlt.flat())}, found ${describeToken(o.actual[0])}`,
  buildEarlyExitMessage: (o: { expectedIterationPaths: TokenType[][]; actual: IToken[]; ruleName: string }) =>
    `expected ${expectation(o.ruleName, o.expectedIterationPaths)}, found ${describeToken(o.actual[0])}`,
};

/** One step of a binary chain: operator, right operand, its start, and the end of the left one. */
type BinaryStep = readonly [op: IToken, right: Expr | ListExpr, start: number, leftEnd: number];

/** The stacks of an expression being folded: operands (with spans) and pending operators. */
interface Fold {
  readonly values: (Expr | ListExpr)[];
  readonly starts: number[];
  readonly ends: number[];
  readonly ops: IToken[];
}

type ExpandOptionEntry = readonly [IToken, keyof ExpandOptions, ExpandOptions[keyof ExpandOptions]];

/** Stands in for a rule's result while Chevrotain records the grammar (never seen by callers). */
const RECORDING = undefined as never;

class ODataParser extends EmbeddedActionsParser {
  /** The option value being parsed, its name (for errors), limits and span recorder: per parse. */
  text = '';
  optionName = '';
  limits: ParseLimits = { maxDepth: 64, maxInListItems: 1000, maxOrderByItems: 8 };
  spans: SpanRecorder | undefined;
  private depth = 0;
  /** False while performSelfAnalysis records the grammar with placeholder tokens. */
  private live = false;
  /** The transformation being parsed; the gates of `trafoAlts` read it. */
  private trafoName = '';

  constructor() {
    super(allTokens, { maxLookahead: 1, recoveryEnabled: false, errorMessageProvider });
    this.performSelfAnalysis();
    this.live = true;
  }

  // ------------------------------------------------------------------------------------------
  // helpers (called only when `live`)

  fail(code: ParseErrorCode, position: number, what: string): QueryError {
    return queryError(code, this.optionName, this.text, position, what);
  }

  /** Offset just past the last consumed token. */
  private prevEnd(): number {
    return after(this.LA(0));
  }

  /** Records the span of `n` (see SpanRecorder); returns `n`. */
  private mark<T extends object>(n: T, start: number, end: number): T {
    const r = this.spans;
    if (r !== undefined) {
      r.nodes.push(n);
      r.offsets.push(start, end);
    }
    return n;
  }

  /** `mark` up to the last consumed token. */
  private node<T extends { readonly kind: string }>(n: T, start: number): T {
    return this.mark(n, start, this.prevEnd());
  }

  private enter(open: IToken): void {
    if (++this.depth > this.limits.maxDepth) throw this.tooDeep(open);
  }

  private tooDeep(at: IToken): QueryError {
    return this.fail(
      'NestingTooDeep',
      at.startOffset,
      `nesting deeper than ${this.limits.maxDepth} levels (parentheses, function calls, lambdas and prefix operators each add one)`,
    );
  }

  /** OData RWS: a keyword operator needs whitespace before it ... */
  private spaceBefore(t: IToken): void {
    if (!isSpace(this.text[t.startOffset - 1])) {
      throw this.fail('InvalidSyntax', t.startOffset, `expected a space before '${t.image}'`);
    }
  }

  /**
   * ... and after it. Where no operand follows at all (`a eq`, `(a eq)`), the grammar's
   * "expected an expression" is the more useful error, so this leaves those to it.
   */
  private spaceAfter(t: IToken): void {
    const c = this.text[after(t)];
    if (isSpace(c) || c === undefined || c === ')' || c === ',' || c === ';') return;
    throw this.fail('InvalidSyntax', after(t), `expected a space after '${t.image}'`);
  }

  /** No whitespace allowed between `a` and `b` (paths, `name(`, `$top=`). */
  private adjacent(a: IToken, b: IToken): void {
    if (after(a) !== b.startOffset) {
      throw this.fail('InvalidSyntax', after(a), `unexpected whitespace between '${a.image}' and '${b.image}'`);
    }
  }

  private simpleName(t: IToken, what: string): string {
    const dot = t.image.indexOf('.');
    if (dot >= 0) {
      throw this.fail('UnsupportedSyntax', t.startOffset + dot, `qualified names and type casts such as '${t.image}' are not supported (expected ${what})`);
    }
    return t.image;
  }

  private literalFrom(t: IToken): LiteralExpr {
    const start = t.startOffset;
    const tt = t.tokenType;
    let lit: LiteralExpr;
    if (tt === StringLit || tt === NumberLit || tt === DateLike || tt === Geography) {
      const r = literalOfToken(tt === StringLit ? 'string' : tt === NumberLit ? 'number' : tt === DateLike ? 'date' : 'geography', t.image);
      if (isLiteralFailure(r)) throw this.fail(r.code, start + r.offset, r.what);
      lit = r;
    } else if (tt === Null) {
      lit = { kind: 'literal', type: 'null' };
    } else {
      lit = { kind: 'literal', type: 'boolean', value: t.image === 'true' };
    }
    return this.mark(lit, start, after(t));
  }

  private unsupported(t: IToken, what: string): never {
    if (this.live) throw this.fail('UnsupportedSyntax', t.startOffset, `${describeToken(t)} ${what}`);
    return RECORDING;
  }

  /** Every path segment is a plain name (`Model.Type` casts are not supported). */
  private checkedMember(path: string[], start: number, end: number): MemberExpr {
    let at = start;
    for (const segment of path) {
      const dot = segment.indexOf('.');
      if (dot >= 0) {
        throw this.fail('UnsupportedSyntax', at + dot, `qualified names and type casts such as '${segment}' are not supported`);
      }
      at += segment.length + 1;
    }
    return this.mark({ kind: 'member', path }, start, end);
  }

  /**
   * Operator-precedence folding (shunting-yard) of `operand (op operand)*`, done as the operands
   * arrive: before `op` is pushed, every pending operator that binds at least as tightly is
   * applied, which makes equal precedence associate to the left. Iterative, so a 3,000-operator
   * chain costs no stack.
   */
  private shift(f: Fold, op: IToken, right: Expr | ListExpr, start: number, end: number): void {
    this.reduce(f, precedenceOf(op));
    f.ops.push(op);
    f.values.push(right);
    f.starts.push(start);
    f.ends.push(end);
  }

  /** Applies pending operators of precedence >= `min` (0: all of them). */
  private reduce(f: Fold, min: number): void {
    const { values, starts, ends, ops } = f;
    while (ops.length > 0 && precedenceOf(ops[ops.length - 1]) >= min) {
      const op = ops.pop() as IToken;
      const right = values.pop() as Expr | ListExpr;
      const end = ends.pop() as number;
      starts.pop();
      const top = values.length - 1;
      const left = values[top];
      if (left.kind === 'list') {
        throw this.fail('InvalidSyntax', op.startOffset, `expected a comparison or logical operator after the list, found '${op.image}'`);
      }
      values[top] = this.mark(binaryNode(op, left, right), starts[top], end);
      ends[top] = end;
    }
  }

  // ------------------------------------------------------------------------------------------
  // entry rules, one per option

  filterEntry = this.RULE('filterEntry', (): Expr => this.SUBRULE(this.expr));
  orderbyEntry = this.RULE('orderbyEntry', (): OrderByItem[] => this.SUBRULE(this.orderbyList));
  selectEntry = this.RULE('selectEntry', (): SelectItem[] => this.SUBRULE(this.selectList));
  expandEntry = this.RULE('expandEntry', (): ExpandItem[] => this.SUBRULE(this.expandList));
  applyEntry = this.RULE('applyEntry', (): ApplyTransformation[] => this.SUBRULE(this.applyChain));

  // ------------------------------------------------------------------------------------------
  // expressions

  private expr = this.RULE('expr', (): Expr => {
    const start = this.LA(1).startOffset;
    const first = this.SUBRULE(this.operand);
    let fold: Fold | undefined;
    this.MANY(() => {
      const step = this.OR(this.binaryAlts);
      if (this.live) {
        fold ??= { values: [first], starts: [start], ends: [step[3]], ops: [] };
        this.shift(fold, step[0], step[1], step[2], this.prevEnd());
      }
    });
    if (!this.live) return RECORDING;
    if (fold === undefined) return first;
    this.reduce(fold, 0);
    return fold.values[0] as Expr;
  });

  private readonly binaryAlts: IOrAlt<BinaryStep>[] = [
    {
      ALT: (): BinaryStep => {
        const leftEnd = this.live ? this.prevEnd() : 0;
        const op = this.CONSUME(BinaryOp);
        if (this.live) {
          this.spaceBefore(op);
          this.spaceAfter(op);
        }
        const at = this.LA(1).startOffset;
        const right = this.SUBRULE2(this.operand);
        return [op, right, at, leftEnd];
      },
    },
    {
      ALT: (): BinaryStep => {
        const leftEnd = this.live ? this.prevEnd() : 0;
        const op = this.CONSUME(In);
        if (this.live) {
          this.spaceBefore(op);
          this.spaceAfter(op);
        }
        const at = this.LA(1).startOffset;
        const right = this.SUBRULE(this.inRhs);
        return [op, right, at, leftEnd];
      },
    },
  ];

  /**
   * After `in`: a parenthesised list of literals, or any (collection-valued) operand. `(x)` with
   * one non-literal inside is a parenthesised expression, as in the ABNF's `listExpr /
   * commonExpr`; `(5)` is a one-item list.
   */
  private inRhs = this.RULE('inRhs', (): ListExpr | Expr => this.OR(this.inRhsAlts));

  private readonly inRhsAlts: OrMethodOpts<ListExpr | Expr> = {
    IGNORE_AMBIGUITIES: true,
    DEF: [
      {
        ALT: (): ListExpr | Expr => {
          const open = this.CONSUME(LParen);
          if (this.live) this.enter(open);
          const items: LiteralExpr[] = [];
          let first: Expr | undefined;
          let firstIsLiteral = false;
          this.OPTION(() => {
            const firstTok = this.LA(1);
            first = this.SUBRULE(this.expr);
            if (this.live) {
              firstIsLiteral = this.LA(0) === firstTok && first.kind === 'literal';
              if (firstIsLiteral) items.push(first as LiteralExpr);
            }
            this.MANY(() => {
              const comma = this.CONSUME(Comma);
              if (this.live && !firstIsLiteral) {
                throw this.fail('InvalidSyntax', comma.startOffset, "expected ')': the list after 'in' holds literals only");
              }
              const item = this.CONSUME(LiteralToken);
              if (this.live) {
                items.push(this.literalFrom(item));
                if (items.length > this.limits.maxInListItems) {
                  throw this.fail('InListTooLong', item.startOffset, `more than ${this.limits.maxInListItems} items in the list after 'in'`);
                }
              }
            });
          });
          this.CONSUME(RParen);
          if (!this.live) return RECORDING;
          this.depth--;
          if (first !== undefined && !firstIsLiteral) return first;
          return this.node({ kind: 'list' as const, items }, open.startOffset);
        },
      },
      { ALT: () => this.SUBRULE(this.operand) },
    ],
  };

  /**
   * Prefix operators then a primary. A run of `not` / `-` is read in a loop (no recursion);
   * each operator is one nesting level.
   */
  private operand = this.RULE('operand', (): Expr => {
    let ops: IToken[] | undefined;
    this.MANY(() => {
      const op = this.CONSUME(PrefixOp);
      if (this.live) {
        if (op.tokenType === Not) {
          const next = this.text[after(op)];
          if (!isSpace(next) && next !== '(' && next !== undefined) {
            throw this.fail('InvalidSyntax', after(op), "expected a space after 'not'");
          }
        }
        if (++this.depth > this.limits.maxDepth) throw this.tooDeep(op);
        (ops ??= []).push(op);
      }
    });
    let e = this.OR(this.primaryAlts);
    if (!this.live) return RECORDING;
    const next = this.LA(1);
    if (next.tokenType === Identifier && (next.image === 'has' || next.image === 'divby')) {
      throw this.fail('UnsupportedSyntax', next.startOffset, `the '${next.image}' operator is not supported`);
    }
    if (ops !== undefined) {
      this.depth -= ops.length;
      for (let i = ops.length - 1; i >= 0; i--) {
        const op = ops[i];
        e = this.node({ kind: op.tokenType === Not ? ('not' as const) : ('negate' as const), operand: e }, op.startOffset);
      }
    }
    return e;
  });

  private readonly primaryAlts: IOrAlt<Expr>[] = [
    {
      ALT: (): Expr => {
        const t = this.CONSUME(LiteralToken);
        return this.live ? this.literalFrom(t) : RECORDING;
      },
    },
    {
      ALT: (): Expr => {
        const open = this.CONSUME(LParen);
        if (this.live) this.enter(open);
        const e = this.SUBRULE(this.expr);
        this.CONSUME(RParen);
        if (this.live) this.depth--;
        return e;
      },
    },
    { ALT: () => this.SUBRULE(this.memberOrCall) },
    { ALT: () => this.unsupported(this.CONSUME(DollarName), 'is not supported') },
    { ALT: () => this.unsupported(this.CONSUME(AtName), 'is not supported (no parameter aliases or annotations)') },
    { ALT: () => this.unsupported(this.CONSUME(JsonStart), "is not supported (no JSON values; use a list after 'in' or a 'string')") },
    { ALT: () => this.unsupported(this.CONSUME(Geometry), "is not supported (use geography'POINT(lon lat)')") },
  ];

  /** `Name`, `A/B`, `f(args)`, `Coll/any(x: ...)`, `Coll/all(x: ...)`. */
  private memberOrCall = this.RULE('memberOrCall', (): Expr => {
    const first = this.CONSUME(Identifier);
    const start = first.startOffset;
    let call: Expr | undefined;
    let lambda: Expr | undefined;
    const path: string[] = [first.image];
    this.OPTION(() => {
      const open = this.CONSUME(LParen);
      if (this.live) {
        this.adjacent(first, open);
        const name = first.image;
        if (!isFunctionName(name)) {
          throw this.fail('UnknownFunction', start, UNSUPPORTED_FUNCTIONS.has(name) ? `the function '${name}' is not supported` : `unknown function '${name}'`);
        }
        this.enter(open);
      }
      const args: Expr[] = [];
      const commas: IToken[] = [];
      const firstArg = this.LA(1);
      this.OPTION2(() => {
        args.push(this.SUBRULE(this.expr));
        this.MANY(() => {
          commas.push(this.CONSUME(Comma));
          args.push(this.SUBRULE2(this.expr));
        });
      });
      const close = this.CONSUME(RParen);
      if (this.live) {
        this.depth--;
        const name = first.image as FunctionName;
        const [min, max] = FUNCTION_ARITY[name];
        if (args.length > max) {
          // At the first argument too many: the comma before it, or the argument itself for now().
          const at = max === 0 ? firstArg.startOffset : commas[max - 1].startOffset;
          throw this.fail('InvalidArguments', at, `${name}() takes ${arity(min, max)}, found ${args.length}`);
        }
        if (args.length < min) {
          throw this.fail('InvalidArguments', close.startOffset, `${name}() takes ${arity(min, max)}, found ${args.length}`);
        }
        call = this.node({ kind: 'call' as const, name, args }, start);
      }
    });
    this.MANY2(() => {
      const prev = this.LA(0);
      const slash = this.CONSUME(Slash);
      const seg = this.CONSUME2(Identifier);
      if (this.live) {
        if (call !== undefined) throw this.fail('UnsupportedSyntax', slash.startOffset, 'a path after a function call is not supported');
        if (lambda !== undefined) throw this.fail('InvalidSyntax', slash.startOffset, "expected an operator after the lambda, found '/'");
        this.adjacent(prev, slash);
        this.adjacent(slash, seg);
        path.push(seg.image);
      }
      this.OPTION3(() => {
        const open = this.CONSUME2(LParen);
        if (this.live) {
          this.adjacent(seg, open);
          if (seg.image !== 'any' && seg.image !== 'all') {
            throw this.fail(
              'UnsupportedSyntax',
              open.startOffset,
              `'${seg.image}(' is not supported: only the lambdas any(...) and all(...) may follow a path`,
            );
          }
          this.enter(open);
        }
        let variable: string | null = null;
        let predicate: Expr | null = null;
        this.OPTION4(() => {
          const v = this.CONSUME3(Identifier);
          this.CONSUME(Colon);
          if (this.live) variable = this.simpleName(v, 'a lambda variable');
          predicate = this.SUBRULE3(this.expr);
        });
        const close = this.CONSUME2(RParen);
        if (this.live) {
          this.depth--;
          if (seg.image === 'all' && variable === null) {
            throw this.fail('InvalidSyntax', close.startOffset, 'expected a lambda variable and predicate in all(...), e.g. all(x: x eq 1)');
          }
          path.pop();
          const collection = this.checkedMember(path, start, seg.startOffset - 1);
          lambda = this.node({ kind: 'lambda' as const, operator: seg.image as 'any' | 'all', collection, variable, predicate }, start);
        }
      });
    });
    if (!this.live) return RECORDING;
    if (call !== undefined) return call;
    if (lambda !== undefined) return lambda;
    const next = this.LA(1);
    if (next.tokenType === StringLit && next.startOffset === this.prevEnd()) {
      throw this.fail('UnsupportedSyntax', start, `typed literals such as ${this.text.slice(start, after(next))} are not supported`);
    }
    return this.checkedMember(path, start, this.prevEnd());
  });

  // ------------------------------------------------------------------------------------------
  // $orderby, $select, $expand

  private orderbyList = this.RULE('orderbyList', (): OrderByItem[] => {
    const items: OrderByItem[] = [this.SUBRULE(this.orderbyItem)];
    this.MANY(() => {
      this.CONSUME(Comma);
      const at = this.LA(1).startOffset;
      items.push(this.SUBRULE2(this.orderbyItem));
      if (this.live && items.length > this.limits.maxOrderByItems) {
        throw this.fail('TooManyOrderByKeys', at, `more than ${this.limits.maxOrderByItems} keys in $orderby`);
      }
    });
    return items;
  });

  private orderbyItem = this.RULE('orderbyItem', (): OrderByItem => {
    const start = this.LA(1).startOffset;
    const expr = this.SUBRULE(this.expr);
    let direction: 'asc' | 'desc' = 'asc';
    this.OPTION(() => {
      const d = this.CONSUME(SortDirection);
      if (this.live) {
        this.spaceBefore(d);
        direction = d.image as 'asc' | 'desc';
      }
    });
    return this.live ? this.node({ kind: 'orderby' as const, expr, direction }, start) : RECORDING;
  });

  private selectList = this.RULE('selectList', (): SelectItem[] => {
    const items: SelectItem[] = [this.SUBRULE(this.selectItem)];
    this.MANY(() => {
      this.CONSUME(Comma);
      items.push(this.SUBRULE2(this.selectItem));
    });
    return items;
  });

  private selectItem = this.RULE('selectItem', (): SelectItem => this.OR(this.selectItemAlts));

  private readonly selectItemAlts: IOrAlt<SelectItem>[] = [
    {
      ALT: (): SelectItem => {
        const t = this.CONSUME(Star);
        return this.live ? this.mark({ kind: 'star' }, t.startOffset, after(t)) : RECORDING;
      },
    },
    {
      ALT: (): SelectItem => {
        const t = this.CONSUME(Identifier);
        if (!this.live) return RECORDING;
        return this.mark({ kind: 'property', name: this.simpleName(t, 'a property name') }, t.startOffset, after(t));
      },
    },
  ];

  private expandList = this.RULE('expandList', (): ExpandItem[] => {
    const items: ExpandItem[] = [this.SUBRULE(this.expandItem)];
    this.MANY(() => {
      this.CONSUME(Comma);
      items.push(this.SUBRULE2(this.expandItem));
    });
    return items;
  });

  private expandItem = this.RULE('expandItem', (): ExpandItem => {
    const nameTok = this.CONSUME(Identifier);
    const options: { -readonly [K in keyof ExpandOptions]: ExpandOptions[K] } = {};
    this.OPTION(() => {
      const open = this.CONSUME(LParen);
      if (this.live) {
        this.adjacent(nameTok, open);
        this.enter(open);
      }
      const first = this.SUBRULE(this.expandOption);
      if (this.live) this.addExpandOption(options, first, nameTok);
      this.MANY(() => {
        this.CONSUME(Semi);
        const next = this.SUBRULE2(this.expandOption);
        if (this.live) this.addExpandOption(options, next, nameTok);
      });
      this.CONSUME(RParen);
      if (this.live) this.depth--;
    });
    if (!this.live) return RECORDING;
    const name = this.simpleName(nameTok, 'a navigation property');
    return this.node({ kind: 'expand' as const, name, options: canonicalOptions(options) }, nameTok.startOffset);
  });

  private addExpandOption(options: { -readonly [K in keyof ExpandOptions]: ExpandOptions[K] }, entry: ExpandOptionEntry, item: IToken): void {
    const [tok, key, value] = entry;
    if (options[key] !== undefined) {
      throw this.fail('RepeatedQueryOption', tok.startOffset, `'${tok.image}' appears twice in the options of ${item.image}`);
    }
    (options as Record<string, unknown>)[key] = value;
  }

  private expandOption = this.RULE('expandOption', (): ExpandOptionEntry => this.OR(this.expandOptionAlts));

  private readonly expandOptionAlts: IOrAlt<ExpandOptionEntry>[] = [
    {
      ALT: (): ExpandOptionEntry => {
        const t = this.CONSUME(DollarSelect);
        this.optionEquals(t, 1);
        return [t, 'select', this.SUBRULE(this.selectList)];
      },
    },
    {
      ALT: (): ExpandOptionEntry => {
        const t = this.CONSUME(DollarFilter);
        this.optionEquals(t, 2);
        return [t, 'filter', this.SUBRULE(this.expr)];
      },
    },
    {
      ALT: (): ExpandOptionEntry => {
        const t = this.CONSUME(DollarOrderby);
        this.optionEquals(t, 3);
        return [t, 'orderby', this.SUBRULE(this.orderbyList)];
      },
    },
    {
      ALT: (): ExpandOptionEntry => {
        const t = this.CONSUME(DollarTop);
        this.optionEquals(t, 4);
        const n = this.CONSUME(NumberLit);
        return [t, 'top', this.live ? this.nonNegativeInteger(n) : 0];
      },
    },
    {
      ALT: (): ExpandOptionEntry => {
        const t = this.CONSUME(DollarSkip);
        this.optionEquals(t, 5);
        const n = this.CONSUME2(NumberLit);
        return [t, 'skip', this.live ? this.nonNegativeInteger(n) : 0];
      },
    },
    { ALT: () => this.notInExpand(this.CONSUME(DollarName)) },
    { ALT: () => this.notInExpand(this.CONSUME(DollarCount)) },
  ];

  private notInExpand(t: IToken): never {
    if (this.live) {
      throw this.fail('UnknownQueryOption', t.startOffset, `'${t.image}' is not allowed inside $expand (allowed: $select, $filter, $orderby, $top, $skip)`);
    }
    return RECORDING;
  }

  /** The `=` of a nested option: no whitespace on either side. */
  private optionEquals(name: IToken, idx: number): void {
    const eq = this.consume(idx, Equals);
    if (this.live) {
      this.adjacent(name, eq);
      if (isSpace(this.text[after(eq)])) {
        throw this.fail('InvalidSyntax', after(eq), `unexpected whitespace after '${name.image}='`);
      }
    }
  }

  /** `$top`/`$skip` values inside `$expand`: digits only. */
  private nonNegativeInteger(t: IToken): number {
    const r = nonNegativeInteger(t.image);
    if (typeof r !== 'number') throw this.fail(r.code, t.startOffset + r.offset, r.what);
    return r;
  }

  // ------------------------------------------------------------------------------------------
  // $apply

  private applyChain = this.RULE('applyChain', (): ApplyTransformation[] => {
    const trafos: ApplyTransformation[] = [this.SUBRULE(this.trafo)];
    this.MANY(() => {
      const prev = this.LA(0);
      const slash = this.CONSUME(Slash);
      if (this.live) {
        this.adjacent(prev, slash);
        this.adjacent(slash, this.LA(1));
      }
      trafos.push(this.SUBRULE2(this.trafo));
    });
    return trafos;
  });

  private trafo = this.RULE('trafo', (): ApplyTransformation => {
    const name = this.CONSUME(Identifier);
    if (this.live) {
      const n = name.image;
      if (n !== 'filter' && n !== 'groupby' && n !== 'aggregate') {
        throw UNSUPPORTED_TRANSFORMATIONS.has(n)
          ? this.fail('UnsupportedSyntax', name.startOffset, `the transformation '${n}' is not supported (supported: filter, groupby, aggregate)`)
          : this.fail('InvalidSyntax', name.startOffset, `expected filter(...), groupby(...) or aggregate(...), found '${n}'`);
      }
    }
    const open = this.CONSUME(LParen);
    if (this.live) {
      this.adjacent(name, open);
      this.enter(open);
      this.trafoName = name.image;
    }
    const result = this.OR(this.trafoAlts);
    this.CONSUME(RParen);
    if (!this.live) return RECORDING;
    this.depth--;
    return this.node(result, name.startOffset);
  });

  private readonly trafoAlts: OrMethodOpts<ApplyTransformation> = {
    IGNORE_AMBIGUITIES: true,
    DEF: [
      {
        GATE: () => this.trafoName === 'filter',
        ALT: (): ApplyTransformation => ({ kind: 'filter', predicate: this.SUBRULE(this.expr) }),
      },
      { GATE: () => this.trafoName === 'groupby', ALT: () => this.SUBRULE(this.groupbyBody) },
      { GATE: () => this.trafoName === 'aggregate', ALT: () => this.SUBRULE(this.aggregateBody) },
    ],
  };

  private groupbyBody = this.RULE('groupbyBody', (): ApplyTransformation => {
    const open = this.CONSUME(LParen);
    if (this.live) this.enter(open);
    const properties: MemberExpr[] = [this.SUBRULE(this.groupingProperty)];
    this.MANY(() => {
      this.CONSUME(Comma);
      properties.push(this.SUBRULE2(this.groupingProperty));
    });
    this.CONSUME(RParen);
    if (this.live) this.depth--;
    let aggregate: AggregateTransformation | null = null;
    this.OPTION(() => {
      this.CONSUME2(Comma);
      const name = this.CONSUME(Identifier);
      if (this.live && name.image !== 'aggregate') {
        throw this.fail('UnsupportedSyntax', name.startOffset, `groupby takes only aggregate(...) after its properties, found '${name.image}'`);
      }
      const inner = this.CONSUME2(LParen);
      if (this.live) {
        this.adjacent(name, inner);
        this.enter(inner);
      }
      aggregate = this.SUBRULE(this.aggregateBody);
      this.CONSUME2(RParen);
      if (this.live) {
        this.depth--;
        this.mark(aggregate, name.startOffset, this.prevEnd());
      }
    });
    return { kind: 'groupby', properties, aggregate };
  });

  private groupingProperty = this.RULE('groupingProperty', (): MemberExpr => {
    const first = this.CONSUME(Identifier);
    const path = [first.image];
    this.MANY(() => {
      const prev = this.LA(0);
      const slash = this.CONSUME(Slash);
      const seg = this.CONSUME2(Identifier);
      if (this.live) {
        this.adjacent(prev, slash);
        this.adjacent(slash, seg);
        path.push(seg.image);
      }
    });
    return this.live ? this.checkedMember(path, first.startOffset, this.prevEnd()) : RECORDING;
  });

  private aggregateBody = this.RULE('aggregateBody', (): AggregateTransformation => {
    const items: AggregateItem[] = [this.SUBRULE(this.aggregateItem)];
    this.MANY(() => {
      this.CONSUME(Comma);
      items.push(this.SUBRULE2(this.aggregateItem));
    });
    return { kind: 'aggregate', items };
  });

  private aggregateItem = this.RULE('aggregateItem', (): AggregateItem => this.OR(this.aggregateItemAlts));

  private readonly aggregateItemAlts: IOrAlt<AggregateItem>[] = [
    {
      ALT: (): AggregateItem => {
        const count = this.CONSUME(DollarCount);
        const as = this.CONSUME(As);
        const alias = this.CONSUME(Identifier);
        if (!this.live) return RECORDING;
        this.spaceBefore(as);
        this.spaceAfter(as);
        return this.node({ kind: 'aggregateCount', alias: this.simpleName(alias, 'an alias') }, count.startOffset);
      },
    },
    {
      ALT: (): AggregateItem => {
        const start = this.LA(1).startOffset;
        const expr = this.SUBRULE(this.expr);
        const w = this.CONSUME(With);
        const method = this.CONSUME2(Identifier);
        if (this.live) {
          this.spaceBefore(w);
          this.spaceAfter(w);
          if (!isAggregateMethod(method.image)) {
            throw this.fail(
              'UnknownAggregateMethod',
              method.startOffset,
              `unknown aggregation method '${method.image}' (expected sum, min, max, average, avg, countdistinct, median, p10, p25, p50, p75, p90 or p95)`,
            );
          }
        }
        let alias: string | null = null;
        this.OPTION(() => {
          const as = this.CONSUME2(As);
          const a = this.CONSUME3(Identifier);
          if (this.live) {
            this.spaceBefore(as);
            this.spaceAfter(as);
            alias = this.simpleName(a, 'an alias');
          }
        });
        if (!this.live) return RECORDING;
        return this.node({ kind: 'aggregateWith', expr, method: method.image as AggregateMethod, alias }, start);
      },
    },
  ];

  // ------------------------------------------------------------------------------------------

  /** Runs one entry rule over `text`; returns its AST or throws the first error as a QueryError. */
  run<T>(entry: Entry, text: string, option: string, limits: ParseLimits, spans?: SpanRecorder): T {
    this.text = text;
    this.optionName = option;
    const lexed = lexer.tokenize(text);
    checkIdentifiers(this, lexed.tokens);
    if (lexed.errors.length > 0) {
      // Report the earliest error: the tokens before the bad character may hold a syntax error
      // of their own (`a eq 'it's'` fails at the `s`, not at the last, unterminated quote).
      const at = lexed.errors[0].offset;
      try {
        this.parseTokens(entry, lexed.tokens, limits, spans);
      } catch (e) {
        if (!(e instanceof QueryError) || e.position === undefined || e.position >= at) throw this.fail(...lexerFailure(text, at));
        throw e;
      }
      throw this.fail(...lexerFailure(text, at));
    }
    return this.parseTokens(entry, lexed.tokens, limits, spans);
  }

  private parseTokens<T>(entry: Entry, tokens: IToken[], limits: ParseLimits, spans: SpanRecorder | undefined): T {
    this.input = tokens;
    this.spans = spans;
    this.limits = limits;
    this.depth = 0;
    let result: T;
    try {
      result = (this[entry] as () => T)();
    } catch (e) {
      // Only a configured maxDepth far above the default can get here.
      if (e instanceof RangeError) throw this.fail('NestingTooDeep', 0, 'the value nests too deeply to parse');
      throw e;
    }
    if (this.errors.length > 0) throw this.fromRecognition(this.errors[0], entry);
    return result;
  }

  private fromRecognition(e: IRecognitionException, entry: Entry): QueryError {
    const t = e.token;
    const position = t.tokenType === EOF || Number.isNaN(t.startOffset) ? this.text.length : t.startOffset;
    if (e.name === 'NotAllInputParsedException') {
      if (t.tokenType === Identifier && (t.image === 'has' || t.image === 'divby')) {
        return this.fail('UnsupportedSyntax', position, `the '${t.image}' operator is not supported`);
      }
      return this.fail('InvalidSyntax', position, `expected ${ENTRY_FOLLOW[entry]}, found ${describeToken(t)}`);
    }
    return this.fail('InvalidSyntax', position, e.message);
  }
}

/** Binding strength, loosest first: or < and < comparison/in < add/sub < mul/div/mod. */
function precedenceOf(op: IToken): number {
  if (tokenMatcher(op, CompareOp) || op.tokenType === In) return 3;
  if (tokenMatcher(op, AddOp)) return 4;
  if (tokenMatcher(op, MulOp)) return 5;
  return op.tokenType === And ? 2 : 1;
}

function binaryNode(op: IToken, left: Expr, right: Expr | ListExpr): Expr {
  if (op.tokenType === In) return { kind: 'in', left, right };
  // Only `in` takes a list; the grammar never puts one elsewhere.
  const r = right as Expr;
  if (op.tokenType === And) return { kind: 'and', left, right: r };
  if (op.tokenType === Or) return { kind: 'or', left, right: r };
  if (tokenMatcher(op, CompareOp)) return { kind: 'compare', operator: op.image as CompareOperator, left, right: r };
  return { kind: 'arithmetic', operator: op.image as ArithmeticOperator, left, right: r };
}

/** Options in a fixed key order, so that equal options deep-equal whatever order they came in. */
function canonicalOptions(o: ExpandOptions): ExpandOptions {
  const out: { -readonly [K in keyof ExpandOptions]: ExpandOptions[K] } = {};
  if (o.select !== undefined) out.select = o.select;
  if (o.filter !== undefined) out.filter = o.filter;
  if (o.orderby !== undefined) out.orderby = o.orderby;
  if (o.top !== undefined) out.top = o.top;
  if (o.skip !== undefined) out.skip = o.skip;
  return out;
}

function arity(min: number, max: number): string {
  const n = (k: number): string => `${k} argument${k === 1 ? '' : 's'}`;
  return min === max ? n(min) : `${min} to ${n(max)}`;
}

function lexerFailure(text: string, at: number): [ParseErrorCode, number, string] {
  const c = text[at];
  if (c === "'") return ['InvalidLiteral', at, 'unterminated string literal (a quote inside a string is written as two quotes)'];
  if (c === '%') return ['InvalidSyntax', at, "unexpected '%' (query option values must be percent-decoded before parsing)"];
  return ['InvalidSyntax', at, `unexpected character ${describeFound(c ?? '')}`];
}

function checkIdentifiers(p: ODataParser, tokens: readonly IToken[]): void {
  for (const t of tokens) {
    if (t.tokenType !== Identifier || t.image.length <= MAX_IDENTIFIER) continue;
    let at = 0;
    for (const part of t.image.split('.')) {
      if (part.length > MAX_IDENTIFIER) {
        throw p.fail('InvalidSyntax', t.startOffset + at + MAX_IDENTIFIER, `names are at most ${MAX_IDENTIFIER} characters long`);
      }
      at += part.length + 1;
    }
  }
}

export interface NonNegativeIntegerFailure {
  readonly code: ParseErrorCode;
  readonly offset: number;
  readonly what: string;
}

/** `$top`/`$skip`: one or more digits, at most 2^53 - 1. */
export function nonNegativeInteger(text: string): number | NonNegativeIntegerFailure {
  let i = 0;
  while (i < text.length && text[i] >= '0' && text[i] <= '9') i++;
  if (i === 0 || i < text.length) {
    return { code: 'InvalidSyntax', offset: i, what: `expected a non-negative integer, found ${describeFound(text)}` };
  }
  const value = Number(text);
  if (!Number.isSafeInteger(value)) {
    return { code: 'InvalidLiteral', offset: 0, what: `${text} is too large (at most ${Number.MAX_SAFE_INTEGER})` };
  }
  return value;
}

/** The one parser instance (Chevrotain's self-analysis is the expensive part, done once). */
export const parser = new ODataParser();

export type { Entry };
