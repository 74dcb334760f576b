/**
 * Entity tags, conditional GETs and Cache-Control (RFC 9110 §8.8.3, §13.1.2; RFC 9111 §5.2).
 * A successful GET or HEAD under /v1 whose body is one byte array (everything but a streamed
 * page of more than 512 records) gets a strong ETag: a hash of the exact bytes the body will
 * have, so two equal tags always mean equal representations. The tag is taken of the body, not
 * derived from the engine's generation: records carry DaysOnMarket, which the clock moves within
 * one generation, and `now()` in a filter does the same, so a generation-derived tag would claim
 * equal bytes that are not. The content-coding the response will go out in (and the OData version,
 * which sets headers and context URLs) is part of the tag, as RFC 9110 asks of strong validators.
 * `If-None-Match` (a list, `*`, weak comparison as GET takes) matching it is a 304 with the tag
 * and no body, before any compression. A malformed header is ignored (a 200), never an error.
 */
import { createHash } from 'node:crypto';
import { chooseCoding, COMPRESS_THRESHOLD } from './encoding.js';
import type { ServiceRequest } from './request.js';
import type { ServiceResponse } from './respond.js';

/** A longer If-None-Match is not read (it would only cost hashing time): the request is answered in full. */
const MAX_IF_NONE_MATCH = 8_192;

/** `private, no-cache` on account-scoped answers: a shared cache must not keep them, a browser must revalidate. */
export const PRIVATE_REVALIDATE = 'private, no-cache';

/** The Cache-Control of a response, chosen per route: set by the route itself when it has one (the token's no-store). */
export function cacheControlOf(path: string, status: number): string {
  if (path === '/v1/token' || status >= 400) return 'no-store';
  if (path === '/health' || path === '/ready' || path === '/metrics') return 'no-store';
  if (path === '/v1/openapi.json') return 'public, no-cache';
  return PRIVATE_REVALIDATE;
}

/**
 * Tags made per body (by version and coding): a page written again as it was is the same buffer
 * (src/exec/record-json.ts `pageBytes`), and hashing a body was, after building the page, the
 * largest cost of a repeated page (about 50 µs for a 73 KB search page). Bodies are never changed
 * once made, so a tag kept for one stays true.
 */
const tagsByBody = new WeakMap<Uint8Array, Map<string, string>>();

/** The strong entity tag of a body as it goes out in `coding` (null: identity) for OData version `version`. */
export function entityTag(body: Uint8Array, version: string, coding: string | null): string {
  let tags = tagsByBody.get(body);
  if (tags === undefined) tagsByBody.set(body, (tags = new Map<string, string>()));
  const key = coding === null ? version : `${version}-${coding}`;
  let tag = tags.get(key);
  if (tag === undefined) {
    const hash = createHash('sha256').update(body).update(`\0${version}`).digest('base64url').slice(0, 27);
    tags.set(key, (tag = `"${hash}${coding === null ? '' : `-${coding}`}"`));
  }
  return tag;
}

/**
 * The opaque tags of an If-None-Match header (W/ dropped: GET compares weakly), `*` for any, or
 * null when the header is not the grammar of RFC 9110 (`"*" / #entity-tag`).
 */
export function parseIfNoneMatch(header: string): '*' | string[] | null {
  if (header.length > MAX_IF_NONE_MATCH) return null;
  const text = header.trim();
  if (text === '*') return '*';
  const tags: string[] = [];
  // entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E / obs-text; list items split by commas
  const item = /\s*(?:W\/)?("[\x21\x23-\x7e\x80-\xff]*")\s*(?:,|$)/y;
  let at = 0;
  while (at < text.length) {
    item.lastIndex = at;
    const m = item.exec(text);
    if (m === null) return null;
    tags.push(m[1]);
    at = item.lastIndex;
  }
  return tags.length === 0 ? null : tags;
}

/**
 * The response with its ETag and Cache-Control, or the 304 that replaces it when the request's
 * If-None-Match matches. Only GET and HEAD of a 200 whose body is one byte array get a tag.
 */
export function withValidators(request: ServiceRequest, response: ServiceResponse, version: string): ServiceResponse {
  const headers = response.headers;
  headers['Cache-Control'] ??= cacheControlOf(request.path, response.status);
  const body = response.body;
  if (response.status !== 200 || !(body instanceof Uint8Array) || (request.method !== 'GET' && request.method !== 'HEAD')) return response;
  if (request.path === '/v1/token' || request.path === '/health' || request.path === '/ready' || request.path === '/metrics') return response;
  // a route that knows its tag already (the explorer's files: one weak tag for every coding) keeps it;
  // else the tag of the body as the coding encodeResponse will choose sends it (2xx byte bodies of at least the threshold)
  const coding = headers.ETag === undefined && body.byteLength >= COMPRESS_THRESHOLD ? chooseCoding(request.header('accept-encoding')) : null;
  const tag = headers.ETag ?? entityTag(body, version, coding);
  headers.ETag = tag;
  const header = request.header('if-none-match');
  if (header === null) return response;
  const tags = parseIfNoneMatch(header);
  const opaque = tag.startsWith('W/') ? tag.slice(2) : tag;
  if (tags === null || (tags !== '*' && !tags.some((t) => t === opaque))) return response;
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (name !== 'Content-Type' && name !== 'Content-Length') kept[name] = value;
  // a 304 carries the Vary the 200 would have (encodeResponse adds it only to bodies)
  kept.Vary = 'Accept-Encoding';
  return { status: 304, headers: kept, body: null };
}
