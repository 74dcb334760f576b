/**
 * One field of a JSON object read from its UTF-8 bytes without building the object: what a writer
 * needs of a JSON Lines record before it reads the record whole (its key, to keep the last version
 * of each). A `JSON.parse` of each line for its key was a tenth of a 100-listing change's time and
 * made most of its garbage (BENCHMARKS.md "Live: a change's garbage").
 *
 * The whole text is checked against JSON's grammar (RFC 8259) as it is scanned, so the answer is
 * exactly `JSON.parse(text)[name]` when that is a string, and undefined otherwise: text that is not
 * JSON, JSON that is not an object, no such top-level field, or one whose value is not a string (the
 * last of a name given twice wins, as in `JSON.parse`). The scan keeps no state but a small stack of
 * the open containers, so nesting has no limit but memory.
 */
import { decodeUtf8 } from './bytes.js';

const TAB = 9;
const LF = 10;
const CR = 13;
const SPACE = 32;
const QUOTE = 34;
const PLUS = 43;
const COMMA = 44;
const MINUS = 45;
const DOT = 46;
const ZERO = 48;
const NINE = 57;
const COLON = 58;
const LBRACKET = 91;
const BACKSLASH = 92;
const RBRACKET = 93;
const LBRACE = 123;
const RBRACE = 125;

/** The containers open at each depth (LBRACE or LBRACKET); grown on demand, shared by every scan (a scan never yields). */
let open = new Uint8Array(64);
/** Whether the string stringEnd last scanned had an escape. */
let escaped = false;

/**
 * `JSON.parse(text)[name]` of the text bytes[s, e) when it is JSON, an object, and that top-level
 * field's value is a string; otherwise undefined. `name` is ASCII (a field name of the catalog).
 */
export function topLevelString(bytes: Buffer, s: number, e: number, name: string): string | undefined {
  let i = skipSpace(bytes, s, e);
  if (i >= e || bytes[i] !== LBRACE) return undefined;
  let depth = 0;
  let expectName = false;
  let named = false; // the value about to be read is the named top-level field's
  let vs = -1; // the named field's string value, bytes[vs, ve): -1 while there is none
  let ve = -1;
  let valueEscaped = false;
  for (;;) {
    if (i >= e) return undefined;
    if (expectName) {
      if (bytes[i] !== QUOTE) return undefined;
      const end = stringEnd(bytes, i + 1, e);
      if (end < 0) return undefined;
      named = depth === 1 && nameIs(bytes, i + 1, end, name);
      i = skipSpace(bytes, end + 1, e);
      if (i >= e || bytes[i] !== COLON) return undefined;
      i = skipSpace(bytes, i + 1, e);
      expectName = false;
      continue;
    }
    // a value
    const c = bytes[i];
    if (named) vs = -1;
    if (c === LBRACE || c === LBRACKET) {
      if (depth === open.length) {
        const grown = new Uint8Array(open.length * 2);
        grown.set(open);
        open = grown;
      }
      open[depth++] = c;
      named = false;
      i = skipSpace(bytes, i + 1, e);
      if (i < e && bytes[i] === (c === LBRACE ? RBRACE : RBRACKET)) {
        i++;
        depth--;
      } else {
        expectName = c === LBRACE;
        continue;
      }
    } else if (c === QUOTE) {
      const end = stringEnd(bytes, i + 1, e);
      if (end < 0) return undefined;
      if (named) {
        vs = i + 1;
        ve = end;
        valueEscaped = escaped;
      }
      i = end + 1;
    } else {
      i = scalarEnd(bytes, i, e);
      if (i < 0) return undefined;
    }
    named = false;
    // after a value: the containers it closes, then the next member or element
    for (;;) {
      i = skipSpace(bytes, i, e);
      if (depth === 0) {
        if (i !== e || vs < 0) return undefined;
        return valueEscaped ? (JSON.parse(decodeUtf8(bytes, vs - 1, ve + 1)) as string) : decodeUtf8(bytes, vs, ve);
      }
      if (i >= e) return undefined;
      const container = open[depth - 1];
      const d = bytes[i];
      if (d === COMMA) {
        i = skipSpace(bytes, i + 1, e);
        expectName = container === LBRACE;
        break;
      }
      if (d !== (container === LBRACE ? RBRACE : RBRACKET)) return undefined;
      i++;
      depth--;
    }
  }
}

function skipSpace(b: Uint8Array, i: number, e: number): number {
  let c: number;
  while (i < e && ((c = b[i]) === SPACE || c === LF || c === CR || c === TAB)) i++;
  return i;
}

/** The closing quote of the string whose text starts at i, or -1 when it is not a JSON string; sets `escaped`. */
function stringEnd(b: Uint8Array, i: number, e: number): number {
  escaped = false;
  while (i < e) {
    const c = b[i];
    if (c === QUOTE) return i;
    if (c < SPACE) return -1;
    if (c !== BACKSLASH) {
      i++;
      continue;
    }
    escaped = true;
    if (i + 1 >= e) return -1;
    const x = b[i + 1];
    if (x === 117 /* u */) {
      if (i + 6 > e) return -1;
      for (let k = i + 2; k < i + 6; k++) if (!isHex(b[k])) return -1;
      i += 6;
    } else if (x === QUOTE || x === BACKSLASH || x === 47 /* / */ || x === 98 || x === 102 || x === 110 || x === 114 || x === 116 /* b f n r t */) {
      i += 2;
    } else return -1;
  }
  return -1;
}

function isHex(c: number): boolean {
  return (c >= ZERO && c <= NINE) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
}

/** Whether the member name bytes[s, e) (a string's text, checked) is `name`. */
function nameIs(b: Buffer, s: number, e: number, name: string): boolean {
  if (escaped) return (JSON.parse(decodeUtf8(b, s - 1, e + 1)) as string) === name;
  if (e - s !== name.length) return false;
  for (let k = 0; k < name.length; k++) if (b[s + k] !== name.charCodeAt(k)) return false;
  return true;
}

/** The end of the number or literal (true, false, null) at i, or -1 when there is none. */
function scalarEnd(b: Uint8Array, i: number, e: number): number {
  const c = b[i];
  if (c === 116) return literalEnd(b, i, e, 'true');
  if (c === 102) return literalEnd(b, i, e, 'false');
  if (c === 110) return literalEnd(b, i, e, 'null');
  if (c === MINUS) i++;
  if (i >= e) return -1;
  if (b[i] === ZERO) i++;
  else if (b[i] > ZERO && b[i] <= NINE) i = digitsEnd(b, i, e);
  else return -1;
  if (i < e && b[i] === DOT) {
    const at = i + 1;
    i = digitsEnd(b, at, e);
    if (i === at) return -1;
  }
  if (i < e && (b[i] === 101 || b[i] === 69) /* e E */) {
    i++;
    if (i < e && (b[i] === PLUS || b[i] === MINUS)) i++;
    const at = i;
    i = digitsEnd(b, at, e);
    if (i === at) return -1;
  }
  return i;
}

function digitsEnd(b: Uint8Array, i: number, e: number): number {
  while (i < e && b[i] >= ZERO && b[i] <= NINE) i++;
  return i;
}

function literalEnd(b: Uint8Array, i: number, e: number, word: string): number {
  if (i + word.length > e) return -1;
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word.charCodeAt(k)) return -1;
  return i + word.length;
}
