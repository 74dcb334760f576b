/**
 * UTF-8 byte helpers. Text lives in the store as UTF-8 bytes (Node Buffers, so that encoding,
 * decoding and copying run natively), never as one heap string per row; keys and dictionary
 * values are hashed and compared as bytes, so the loader can match them straight from the input
 * buffer without building a string.
 */

/** A growable byte buffer. */
export function allocBytes(size: number): Buffer {
  return Buffer.allocUnsafeSlow(Math.max(16, size));
}

/** A copy of bytes[s, e) in a buffer of its own (natively copied). */
export function copyBytes(bytes: Buffer, s: number, e: number): Buffer {
  const out = Buffer.allocUnsafeSlow(e - s);
  bytes.copy(out, 0, s, e);
  return out;
}

/** A copy of `bytes` (first `used` bytes kept) with room for at least `size` bytes. */
export function growBytes(bytes: Buffer, used: number, size: number): Buffer {
  const next = allocBytes(Math.max(size, Math.ceil(bytes.length * 1.5)));
  bytes.copy(next, 0, 0, used);
  return next;
}

/** 32-bit FNV-1a over bytes[s, e), with a final avalanche so the low bits spread well. */
export function hashBytes(bytes: Uint8Array, s: number, e: number): number {
  let h = 0x811c9dc5;
  for (let i = s; i < e; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h >>> 0;
}

export function bytesEqual(a: Uint8Array, as: number, ae: number, b: Uint8Array, bs: number, be: number): boolean {
  const n = ae - as;
  if (n !== be - bs) return false;
  for (let i = 0; i < n; i++) if (a[as + i] !== b[bs + i]) return false;
  return true;
}

/** Compares bytes[s, e) with the ASCII text `ascii`. */
export function bytesEqualAscii(bytes: Uint8Array, s: number, e: number, ascii: string): boolean {
  if (e - s !== ascii.length) return false;
  for (let i = 0; i < ascii.length; i++) if (bytes[s + i] !== ascii.charCodeAt(i)) return false;
  return true;
}

/**
 * Writes `text` as UTF-8 into `out` at `pos` and returns the end position. `out` must have room
 * for 3 bytes per UTF-16 unit. Lone surrogates become U+FFFD, as TextEncoder does.
 */
export function encodeUtf8Into(text: string, out: Uint8Array, pos: number): number {
  const n = text.length;
  for (let i = 0; i < n; i++) {
    let c = text.charCodeAt(i);
    if (c < 0x80) {
      out[pos++] = c;
    } else if (c < 0x800) {
      out[pos++] = 0xc0 | (c >> 6);
      out[pos++] = 0x80 | (c & 63);
    } else if (c >= 0xd800 && c <= 0xdfff) {
      const d = i + 1 < n ? text.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
        out[pos++] = 0xf0 | (c >> 18);
        out[pos++] = 0x80 | ((c >> 12) & 63);
        out[pos++] = 0x80 | ((c >> 6) & 63);
        out[pos++] = 0x80 | (c & 63);
      } else {
        out[pos++] = 0xef;
        out[pos++] = 0xbf;
        out[pos++] = 0xbd;
      }
    } else {
      out[pos++] = 0xe0 | (c >> 12);
      out[pos++] = 0x80 | ((c >> 6) & 63);
      out[pos++] = 0x80 | (c & 63);
    }
  }
  return pos;
}

/** Writes `text` into `out` at `pos` (native for long strings) and returns the end position. */
export function writeUtf8(text: string, out: Buffer, pos: number): number {
  return text.length < 32 ? encodeUtf8Into(text, out, pos) : pos + out.write(text, pos, 'utf8');
}

/** Decodes bytes[s, e) of a Buffer. */
export function decodeUtf8(bytes: Buffer, s: number, e: number): string {
  return s === e ? '' : bytes.toString('utf8', s, e);
}

/** Ordinal (UTF-16 code unit) comparison of two UTF-8 byte ranges, as JavaScript compares strings. */
export function compareUtf8(a: Buffer, as: number, ae: number, b: Buffer, bs: number, be: number): number {
  const n = Math.min(ae - as, be - bs);
  for (let i = 0; i < n; i++) {
    const x = a[as + i];
    const y = b[bs + i];
    if (x !== y) {
      // UTF-8 byte order is code point order; it differs from UTF-16 order only when a
      // supplementary character meets U+E000..U+FFFF, so decode in that rare case.
      if (x >= 0xee || y >= 0xee) {
        const sa = decodeUtf8(a, as, ae);
        const sb = decodeUtf8(b, bs, be);
        return sa < sb ? -1 : sa > sb ? 1 : 0;
      }
      return x < y ? -1 : 1;
    }
  }
  return ae - as - (be - bs) < 0 ? -1 : ae - as - (be - bs) > 0 ? 1 : 0;
}
