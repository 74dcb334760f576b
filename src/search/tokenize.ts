/**
 * The tokenizer of SERVICE.md §4, the same for documents and queries: Unicode NFKD, combining
 * marks removed, lower case, split on anything that is not a letter or a digit. ASCII text (by far
 * the common case) takes a fast path with the same result and no normalization or regex.
 */
import { ADDRESS_NORMAL_FORM } from './usps.js';

/** Tests a text for a character outside ASCII, which sends it to the Unicode path. */
// eslint-disable-next-line no-control-regex -- the ASCII range, NUL included, on purpose
export const NON_ASCII = /[^\x00-\x7f]/;

/**
 * The ASCII rule as a table: a letter or digit maps to its lower-case form, anything else (a
 * separator) to 0. The fast path below and the index builder's byte scan (postings.ts) both read it.
 */
export const ASCII_WORD = new Uint8Array(128);
for (let c = 48; c <= 57; c++) ASCII_WORD[c] = c;
for (let c = 97; c <= 122; c++) ASCII_WORD[c] = c;
for (let c = 65; c <= 90; c++) ASCII_WORD[c] = c + 32;
const MARKS = /\p{M}+/gu;
const SEPARATORS = /[^\p{L}\p{N}]+/u;

/** Appends the tokens of `text` to `out` (allocation-light; `out` is reused by callers). */
export function tokenizeInto(text: string, out: string[]): string[] {
  if (NON_ASCII.test(text)) {
    for (const t of text.normalize('NFKD').replace(MARKS, '').toLowerCase().split(SEPARATORS)) if (t) out.push(t);
    return out;
  }
  let start = -1;
  let lower = false;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 32;
    const w = ASCII_WORD[c];
    if (w !== 0) {
      if (start < 0) {
        start = i;
        lower = false;
      }
      if (w !== c) lower = true;
    } else if (start >= 0) {
      const token = text.slice(start, i);
      out.push(lower ? token.toLowerCase() : token);
      start = -1;
    }
  }
  return out;
}

export function tokenize(text: string): string[] {
  return tokenizeInto(text, []);
}

/** Address normalization: USPS suffix and directional forms map to their group's primary name. */
export function normalizeAddressToken(token: string): string {
  return ADDRESS_NORMAL_FORM.get(token) ?? token;
}
