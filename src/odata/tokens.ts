/**
 * The lexer shared by every query option. Whitespace (spaces and tabs, OData's RWS/BWS) is
 * skipped; where OData requires or forbids it, the grammar checks the gap between two tokens
 * (see `spaceBefore`/`adjacent` in grammar.ts), which is cheaper and clearer than threading
 * whitespace tokens through every rule.
 *
 * Keywords are whole words: each keyword token has `longer_alt: Identifier`, so `order`,
 * `Android`, `notes` and `index` lex as identifiers, not as `or`+`der` or `not`+`es`.
 */
import { createToken, Lexer, type TokenType } from 'chevrotain';

export const Identifier = createToken({
  name: 'Identifier',
  // Dotted names are one token so that `geo.distance` and `search.text` are function names and a
  // qualified name such as `Model.Customer` can be reported as unsupported in one piece.
  pattern: /[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*/,
  label: 'a name',
});

const keyword = (word: string, categories: TokenType[] = []): TokenType =>
  createToken({ name: `Kw_${word}`, pattern: new RegExp(word), longer_alt: Identifier, categories, label: `'${word}'` });

// Operator families as token categories: the grammar consumes the family, the image says which.
/** Every infix keyword operator except `in` (whose right side is special). */
export const BinaryOp = createToken({ name: 'BinaryOp', pattern: Lexer.NA, label: 'an operator' });
export const CompareOp = createToken({ name: 'CompareOp', pattern: Lexer.NA, label: 'a comparison operator' });
export const AddOp = createToken({ name: 'AddOp', pattern: Lexer.NA, label: "'add' or 'sub'" });
export const MulOp = createToken({ name: 'MulOp', pattern: Lexer.NA, label: "'mul', 'div' or 'mod'" });
export const SortDirection = createToken({ name: 'SortDirection', pattern: Lexer.NA, label: "'asc' or 'desc'" });
export const PrefixOp = createToken({ name: 'PrefixOp', pattern: Lexer.NA, label: "'not' or '-'" });
/** Every token that is a literal on its own (the items of an `in` list). */
export const LiteralToken = createToken({ name: 'LiteralToken', pattern: Lexer.NA, label: 'a literal' });

export const Eq = keyword('eq', [CompareOp, BinaryOp]);
export const Ne = keyword('ne', [CompareOp, BinaryOp]);
export const Gt = keyword('gt', [CompareOp, BinaryOp]);
export const Ge = keyword('ge', [CompareOp, BinaryOp]);
export const Lt = keyword('lt', [CompareOp, BinaryOp]);
export const Le = keyword('le', [CompareOp, BinaryOp]);
export const Add = keyword('add', [AddOp, BinaryOp]);
export const Sub = keyword('sub', [AddOp, BinaryOp]);
export const Mul = keyword('mul', [MulOp, BinaryOp]);
export const Div = keyword('div', [MulOp, BinaryOp]);
export const Mod = keyword('mod', [MulOp, BinaryOp]);
export const And = keyword('and', [BinaryOp]);
export const Or = keyword('or', [BinaryOp]);
export const Not = keyword('not', [PrefixOp]);
export const In = keyword('in');
export const True = keyword('true', [LiteralToken]);
export const False = keyword('false', [LiteralToken]);
export const Null = keyword('null', [LiteralToken]);
export const Asc = keyword('asc', [SortDirection]);
export const Desc = keyword('desc', [SortDirection]);
export const With = keyword('with');
export const As = keyword('as');

export const DollarName = createToken({
  name: 'DollarName',
  pattern: /\$[A-Za-z_][A-Za-z0-9_]*/,
  label: "a '$' name",
});
const dollar = (name: string): TokenType =>
  createToken({
    name: `Dollar_${name}`,
    pattern: new RegExp(`\\$${name}`),
    longer_alt: DollarName,
    label: `'$${name}'`,
  });
export const DollarFilter = dollar('filter');
export const DollarSelect = dollar('select');
export const DollarOrderby = dollar('orderby');
export const DollarTop = dollar('top');
export const DollarSkip = dollar('skip');
export const DollarCount = dollar('count');

/** `'...'` with `''` for a quote inside. An unterminated string is a lexer error at its quote. */
export const StringLit = createToken({ name: 'StringLit', pattern: /'(?:[^']|'')*'/, categories: [LiteralToken], label: 'a string' });
/** Matched loosely; literals.ts validates it (see its header). */
export const DateLike = createToken({
  name: 'DateLike',
  pattern: /\d+-\d+-\d+(?:[Tt][0-9:.]*(?:[Zz]|[+-][0-9:]*)?)?/,
  categories: [LiteralToken],
  label: 'a date',
});
/** Matched loosely (`42.` and `1e` included); literals.ts validates it. */
export const NumberLit = createToken({
  name: 'NumberLit',
  pattern: /[+-]?\d+(?:\.\d*)?(?:[eE][+-]?\d*)?/,
  categories: [LiteralToken],
  label: 'a number',
});
export const Geography = createToken({
  name: 'Geography',
  pattern: /geography'[^']*'/,
  categories: [LiteralToken],
  label: 'a geography literal',
});
export const Geometry = createToken({ name: 'Geometry', pattern: /geometry'[^']*'/, label: 'a geometry literal' });
/** `@alias` or `@Namespace.Term`: parameter aliases and annotations, both unsupported. */
export const AtName = createToken({ name: 'AtName', pattern: /@[A-Za-z_][A-Za-z0-9_.]*/, label: "an '@' name" });
/** Start of an OData JSON array, object or string (`[1,2]`, `{...}`, `"x"`), unsupported. */
export const JsonStart = createToken({ name: 'JsonStart', pattern: /[[{"]/, label: 'JSON' });

export const LParen = createToken({ name: 'LParen', pattern: /\(/, label: "'('" });
export const RParen = createToken({ name: 'RParen', pattern: /\)/, label: "')'" });
export const Comma = createToken({ name: 'Comma', pattern: /,/, label: "','" });
export const Slash = createToken({ name: 'Slash', pattern: /\//, label: "'/'" });
export const Colon = createToken({ name: 'Colon', pattern: /:/, label: "':'" });
export const Semi = createToken({ name: 'Semi', pattern: /;/, label: "';'" });
export const Equals = createToken({ name: 'Equals', pattern: /=/, label: "'='" });
export const Star = createToken({ name: 'Star', pattern: /\*/, label: "'*'" });
export const Minus = createToken({ name: 'Minus', pattern: /-/, categories: [PrefixOp], label: "'-'" });

export const Whitespace = createToken({ name: 'Whitespace', pattern: /[ \t]+/, group: Lexer.SKIPPED });

const keywords = [Desc, Asc, As, With, Eq, Ne, Gt, Ge, Lt, Le, Add, Sub, Mul, Div, Mod, And, Or, Not, In, True, False, Null]
  // Longest first, so `asc` is not read as `as` + `c` (both are keywords).
  .sort((a, b) => String(b.PATTERN).length - String(a.PATTERN).length);

/** Order matters where patterns overlap: the first match wins unless a longer_alt is longer. */
export const allTokens: TokenType[] = [
  Whitespace,
  StringLit,
  Geography,
  Geometry,
  DateLike,
  NumberLit,
  Minus,
  DollarFilter,
  DollarSelect,
  DollarOrderby,
  DollarTop,
  DollarSkip,
  DollarCount,
  DollarName,
  AtName,
  ...keywords,
  Identifier,
  LParen,
  RParen,
  Comma,
  Slash,
  Colon,
  Semi,
  Equals,
  Star,
  JsonStart,
  CompareOp,
  AddOp,
  MulOp,
  SortDirection,
  BinaryOp,
  PrefixOp,
  LiteralToken,
];

export const lexer = new Lexer(allTokens, {
  positionTracking: 'onlyOffset',
  recoveryEnabled: false,
  ensureOptimizations: true,
});
