/**
 * Content-coding of responses (RFC 9110 §12.5.3 `Accept-Encoding`): gzip, br or deflate with
 * node:zlib for successful responses of at least COMPRESS_THRESHOLD bytes (and every streamed
 * page), always marked `Vary: Accept-Encoding`. A coding is used only when the client accepts it
 * with a q-value above 0; errors are never compressed, so any client can read them.
 */
import { promisify } from 'node:util';
import { pipeline } from 'node:stream';
import zlib from 'node:zlib';
import type { ServiceResponse } from './respond.js';

export type Coding = 'gzip' | 'br' | 'deflate';

/** Bodies below this many bytes go out as they are: a smaller body gains little, and compressing costs a fixed ~20 µs. */
export const COMPRESS_THRESHOLD = 1024;

/** Preference among codings a client accepts with the same q-value: the smallest output first. */
const PREFERENCE: readonly Coding[] = ['br', 'gzip', 'deflate'];

/**
 * Levels for dynamic responses: gzip and deflate at 1 (nginx's default; level 6 makes a 73 KB
 * search page 23% smaller for twice the time), brotli at quality 4 (smaller than gzip 6 in about
 * the time of gzip 4; its default of 11 takes tens of milliseconds).
 */
const GZIP_OPTIONS: zlib.ZlibOptions = { level: 1 };
const brotliOptions = (size: number): zlib.BrotliOptions => ({
  params: {
    [zlib.constants.BROTLI_PARAM_QUALITY]: 4,
    [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
    [zlib.constants.BROTLI_PARAM_SIZE_HINT]: size,
  },
});

const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);
const brotli = promisify(zlib.brotliCompress);

/**
 * Bodies up to this size are compressed on the event loop, larger ones on libuv's thread pool.
 * Handing a body to the pool and back costs 25-40 µs of CPU more than compressing it in place
 * (measured with gzip level 1 on the HTTP bench's bodies: 3.3 KB 29 µs in place against 66 µs
 * through the pool, 29 KB 113 against 153 µs), which is more than compressing a small body
 * takes; up to 32 KiB the event loop is held for at most about 120 µs, less than building such a
 * page takes. A larger body (a page of 100 full listings, 300 KB: 1.3 ms) goes to the pool so
 * the event loop keeps serving while it is compressed.
 */
export const INLINE_COMPRESS_LIMIT = 32 * 1024;

/**
 * The coding to answer with for an Accept-Encoding header, or null for none (identity). Codings
 * are matched case-insensitively, `x-gzip` is gzip, `*` stands for every coding not named, q
 * defaults to 1 and q=0 refuses; among the best q-value the PREFERENCE order decides. A header
 * that cannot be parsed counts as absent (identity is always acceptable to send, RFC 9110).
 */
export function chooseCoding(header: string | null): Coding | null {
  if (header === null || header === '') return null;
  const q = new Map<string, number>();
  for (const item of header.split(',')) {
    const parts = item.split(';');
    let name = parts[0].trim().toLowerCase();
    if (name === '') continue;
    if (name === 'x-gzip') name = 'gzip';
    let weight = 1;
    for (let i = 1; i < parts.length; i++) {
      const m = /^\s*q\s*=\s*([01](?:\.\d{0,3})?)\s*$/i.exec(parts[i]);
      if (m) weight = Math.min(1, Number(m[1]));
    }
    // a coding named twice keeps its lowest weight: a refusal is never overridden
    q.set(name, Math.min(weight, q.get(name) ?? 1));
  }
  const star = q.get('*');
  let best: Coding | null = null;
  let bestQ = 0;
  for (const coding of PREFERENCE) {
    const w = q.get(coding) ?? star ?? 0;
    if (w > bestQ) {
      best = coding;
      bestQ = w;
    }
  }
  return best;
}

/** A compressing stream for a coding. */
function compressor(coding: Coding, size: number): zlib.Gzip | zlib.Deflate | zlib.BrotliCompress {
  if (coding === 'gzip') return zlib.createGzip(GZIP_OPTIONS);
  if (coding === 'deflate') return zlib.createDeflate(GZIP_OPTIONS);
  return zlib.createBrotliCompress(brotliOptions(size));
}

/**
 * Compressed bytes made per body and coding: a page written again as it was is the same buffer
 * (src/exec/record-json.ts `pageBytes`), and is not compressed again. Bodies are never changed once
 * made; what is kept here goes with its body.
 */
const compressedByBody = new WeakMap<Uint8Array, Partial<Record<Coding, Buffer>>>();

async function compressed(coding: Coding, body: Uint8Array): Promise<Buffer> {
  let made = compressedByBody.get(body);
  if (made === undefined) compressedByBody.set(body, (made = {}));
  return (made[coding] ??= await compress(coding, body));
}

function compress(coding: Coding, body: Uint8Array): Buffer | Promise<Buffer> {
  if (body.byteLength <= INLINE_COMPRESS_LIMIT) {
    if (coding === 'gzip') return zlib.gzipSync(body, GZIP_OPTIONS);
    if (coding === 'deflate') return zlib.deflateSync(body, GZIP_OPTIONS);
    return zlib.brotliCompressSync(body, brotliOptions(body.byteLength));
  }
  if (coding === 'gzip') return gzip(body, GZIP_OPTIONS);
  if (coding === 'deflate') return deflate(body, GZIP_OPTIONS);
  return brotli(body, brotliOptions(body.byteLength));
}

/**
 * The response as it goes out for a request with this Accept-Encoding header and method: a
 * successful body of at least COMPRESS_THRESHOLD bytes (or a streamed one) in the chosen coding,
 * `Vary: Accept-Encoding` on every successful response with a body, and no body for HEAD (its
 * headers, Content-Length included, are those the GET would have). A whole body above
 * INLINE_COMPRESS_LIMIT is compressed on libuv's thread pool, so the event loop keeps serving
 * while it runs; a smaller one in place, which costs less than the trip to the pool.
 */
export async function encodeResponse(response: ServiceResponse, acceptEncoding: string | null, method: string): Promise<ServiceResponse> {
  const { status, body } = response;
  if (body === null) return response;
  const head = method === 'HEAD';
  if (status < 200 || status >= 300) return head ? dropBody(response) : response;
  const headers: Record<string, string> = { ...response.headers, Vary: 'Accept-Encoding' };
  const coding = chooseCoding(acceptEncoding);
  if (coding === null) return head ? dropBody({ status, headers, body }) : { status, headers, body };
  if (body instanceof Uint8Array) {
    if (body.byteLength < COMPRESS_THRESHOLD) return head ? { status, headers, body: null } : { status, headers, body };
    const bytes = await compressed(coding, body);
    return {
      status,
      headers: { ...headers, 'Content-Encoding': coding, 'Content-Length': String(bytes.byteLength) },
      body: head ? null : bytes,
    };
  }
  headers['Content-Encoding'] = coding;
  if (head) return dropBody({ status, headers, body });
  const out = compressor(coding, 0);
  // the pipeline destroys the page's stream when the compressor is destroyed (a client gone) or fails
  pipeline(body, out, () => undefined);
  return { status, headers, body: out };
}

function dropBody(response: ServiceResponse): ServiceResponse {
  if (response.body !== null && !(response.body instanceof Uint8Array)) response.body.destroy();
  return { status: response.status, headers: response.headers, body: null };
}
