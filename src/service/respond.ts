/**
 * The service's answers before any runtime sees them: a `ServiceResponse` is a status, headers
 * and a body that is either one byte array (with a Content-Length) or, for large data pages, a
 * byte stream written in batches of records. Every one carries `OData-Version: 4.01` (the handler
 * sets the version it negotiated, 4.0 or 4.01, on the way out). The node:http adapter writes a
 * ServiceResponse straight to the socket; `toResponse` makes a WHATWG Response of it for every
 * other runtime. Content-coding (`Accept-Encoding`) is applied here too, so both see the same
 * bytes.
 */
import { pipeline, Readable, Transform } from 'node:stream';
import { pageBytes, type RecordSource } from '../exec/page.js';
import type { JsonValue } from '../store/columns.js';
import { errorObject, headersOf, statusOf } from './errors.js';
import type { QueryError } from '../errors.js';

export const ODATA_VERSION = '4.01';
export const JSON_TYPE = 'application/json; charset=utf-8';
export const ODATA_JSON_TYPE = 'application/json; odata.metadata=minimal; charset=utf-8';
export const XML_TYPE = 'application/xml; charset=utf-8';
export const TEXT_TYPE = 'text/plain; charset=utf-8';

/** Records serialized per stream chunk; pages above STREAM_THRESHOLD records are streamed. */
export const STREAM_BATCH = 256;
export const STREAM_THRESHOLD = 512;

export interface ServiceResponse {
  readonly status: number;
  /** Header names as sent (`Content-Type`); one value each. */
  readonly headers: Record<string, string>;
  /** null: no body (204, or a HEAD once the adapter has it); a Readable: a streamed body without a Content-Length. */
  readonly body: Uint8Array | Readable | null;
}

export function textResponse(status: number, body: string, contentType: string, headers: Record<string, string> = {}): ServiceResponse {
  const bytes = Buffer.from(body, 'utf8');
  return {
    status,
    headers: { 'OData-Version': ODATA_VERSION, 'Content-Type': contentType, 'Content-Length': String(bytes.byteLength), ...headers },
    body: bytes,
  };
}

export function jsonResponse(status: number, value: unknown, headers: Record<string, string> = {}, contentType = JSON_TYPE): ServiceResponse {
  return textResponse(status, JSON.stringify(value), contentType, headers);
}

/** A response without a body (204 No Content). */
export function emptyResponse(status: number): ServiceResponse {
  return { status, headers: { 'OData-Version': ODATA_VERSION }, body: null };
}

/** The error response of a QueryError or ServiceError, its status from the one table, its headers from the error. */
export function errorResponse(error: QueryError): ServiceResponse {
  return jsonResponse(statusOf(error), { error: errorObject(error) }, { ...headersOf(error) });
}

/**
 * A JSON body `head + records joined by commas + tail`, of the records themselves or of a page's
 * rows (QueryOptions `onPage` with `plainPagesAsRows`: the engine built no records). Up to
 * STREAM_THRESHOLD records it is one byte array, a page of rows written from the records' cached
 * texts (src/exec/record-json.ts) or, for rows none of which was written before, from the table's
 * records stringified as one array; above, a stream that serializes STREAM_BATCH records per
 * chunk as the reader pulls, so a 50,000-row page never exists as one string (records already
 * written are dropped from the array; rows are built into records a batch at a time). The bytes
 * are the same either way.
 */
export function recordsBody(head: string, records: Array<Record<string, JsonValue> | null> | RecordSource, tail: string): Uint8Array | Readable {
  const page = Array.isArray(records) ? null : records;
  const length = page === null ? (records as unknown[]).length : page.rows.length;
  const recordAt =
    page === null
      ? (i: number): Record<string, JsonValue> | null => {
          const list = records as Array<Record<string, JsonValue> | null>;
          const record = list[i];
          list[i] = null; // written: let the collector have it while the rest streams
          return record;
        }
      : (i: number): Record<string, JsonValue> => page.table.record(page.rows[i], page.fields, page.nowMs);
  if (length <= STREAM_THRESHOLD) {
    if (page === null) {
      // one stringify of the array (its brackets cut off) is 15% faster than one per record joined by commas, with the same text
      return Buffer.from(head + JSON.stringify(records).slice(1, -1) + tail, 'utf8');
    }
    const cached = pageBytes(page, head, tail);
    if (cached !== null) return cached;
    const built = new Array<Record<string, JsonValue>>(length);
    for (let i = 0; i < length; i++) built[i] = recordAt(i)!;
    return Buffer.from(head + JSON.stringify(built).slice(1, -1) + tail, 'utf8');
  }
  function* chunks(): Generator<Buffer> {
    yield Buffer.from(head, 'utf8');
    for (let next = 0; next < length;) {
      const end = Math.min(length, next + STREAM_BATCH);
      let text = next === 0 ? '' : ',';
      for (let i = next; i < end; i++) text += (i === next ? '' : ',') + JSON.stringify(recordAt(i));
      next = end;
      yield Buffer.from(text, 'utf8');
    }
    yield Buffer.from(tail, 'utf8');
  }
  // highWaterMark 0: a batch is serialized only when the consumer asks for it
  return Readable.from(chunks(), { objectMode: false, highWaterMark: 0 });
}

/** A WHATWG Response of a ServiceResponse, for runtimes other than node:http. */
export function toResponse(response: ServiceResponse): Response {
  const { status, headers, body } = response;
  if (body === null) return new Response(null, { status, headers });
  if (body instanceof Uint8Array) return new Response(body, { status, headers });
  return new Response(Readable.toWeb(body) as ReadableStream<Uint8Array>, { status, headers });
}

/**
 * The response with `done(bytes)` called once its body has been handed on: at once for a byte
 * array (or no body), and for a stream when its last chunk has been read or it was cut short
 * (bytes so far). A stream is counted through a pass-through, which keeps its backpressure.
 */
export function whenSent(response: ServiceResponse, done: (bytes: number) => void): ServiceResponse {
  const { body } = response;
  if (!(body instanceof Readable)) {
    done(body === null ? 0 : body.byteLength);
    return response;
  }
  let bytes = 0;
  let reported = false;
  const report = (): void => {
    if (!reported) {
      reported = true;
      done(bytes);
    }
  };
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.byteLength;
      callback(null, chunk);
    },
  });
  counter.once('end', report);
  counter.once('close', report);
  pipeline(body, counter, () => undefined);
  return { status: response.status, headers: response.headers, body: counter };
}
