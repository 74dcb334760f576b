/**
 * Building Responses: every one carries `OData-Version: 4.01` (the handler sets the version it
 * negotiated, 4.0 or 4.01, on the way out); small bodies are one byte array
 * with a Content-Length, large data pages a ReadableStream written in batches of records.
 */
import type { JsonValue } from '../store/columns.js';
import { errorObject, headersOf, statusOf } from './errors.js';
import type { QueryError } from '../errors.js';

export const ODATA_VERSION = '4.01';
export const JSON_TYPE = 'application/json; charset=utf-8';
export const ODATA_JSON_TYPE = 'application/json; odata.metadata=minimal; charset=utf-8';
export const XML_TYPE = 'application/xml; charset=utf-8';
export const TEXT_TYPE = 'text/plain; charset=utf-8';

const encoder = new TextEncoder();

/** Records serialized per stream chunk; pages above STREAM_THRESHOLD records are streamed. */
export const STREAM_BATCH = 256;
export const STREAM_THRESHOLD = 512;

export function textResponse(status: number, body: string, contentType: string, headers: Record<string, string> = {}): Response {
  const bytes = encoder.encode(body);
  return new Response(bytes, {
    status,
    headers: { 'OData-Version': ODATA_VERSION, 'Content-Type': contentType, 'Content-Length': String(bytes.byteLength), ...headers },
  });
}

export function jsonResponse(status: number, value: unknown, headers: Record<string, string> = {}, contentType = JSON_TYPE): Response {
  return textResponse(status, JSON.stringify(value), contentType, headers);
}

/** The error response of a QueryError or ServiceError, its status from the one table, its headers from the error. */
export function errorResponse(error: QueryError): Response {
  return jsonResponse(statusOf(error), { error: errorObject(error) }, { ...headersOf(error) });
}

/**
 * A JSON body `head + records joined by commas + tail`. Up to STREAM_THRESHOLD records it is one
 * string; above, a stream that serializes STREAM_BATCH records per chunk as the reader pulls, so a
 * 50,000-row page never exists as one string (records already written are dropped from the
 * array). The bytes are the same either way.
 */
export function recordsBody(
  head: string,
  records: Array<Record<string, JsonValue> | null>,
  tail: string,
): { body: Uint8Array | ReadableStream<Uint8Array>; chunked: boolean } {
  if (records.length <= STREAM_THRESHOLD) {
    return { body: encoder.encode(head + records.map((r) => JSON.stringify(r)).join(',') + tail), chunked: false };
  }
  let next = 0;
  let headSent = false;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (!headSent) {
          headSent = true;
          controller.enqueue(encoder.encode(head));
          return;
        }
        if (next >= records.length) {
          controller.enqueue(encoder.encode(tail));
          controller.close();
          return;
        }
        const end = Math.min(records.length, next + STREAM_BATCH);
        let text = next === 0 ? '' : ',';
        for (let i = next; i < end; i++) {
          text += (i === next ? '' : ',') + JSON.stringify(records[i]);
          records[i] = null; // written: let the collector have it while the rest streams
        }
        next = end;
        controller.enqueue(encoder.encode(text));
      },
    },
    { highWaterMark: 0 },
  );
  return { body: stream, chunked: true };
}
