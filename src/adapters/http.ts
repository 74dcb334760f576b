/**
 * `serve(handler, { port, host })`: mounts a `(Request) => Promise<Response>` handler on
 * node:http. A handler made by `createHandler` is not called with WHATWG objects at all: its
 * service core reads node's request (method, raw target, raw headers, body stream) and its
 * answer is written straight to the socket, a whole body in one write, so a request costs no
 * Request, Headers, AbortSignal, Response or web stream. Any other handler gets a Request and
 * its Response is copied out. Bodies are written with backpressure (a streamed page is never
 * joined); `close()` is graceful: the listener stops, idle keep-alive connections close, requests
 * in flight finish (their connections close after them), and only after `shutdownGraceMs` are
 * the remaining connections cut.
 *
 * The header limit is raised to 64 KiB (Node's default is 16 KiB) so a request line with a query
 * string over the service's 16,384-byte limit reaches the handler, which answers 414 itself;
 * beyond 64 KiB Node's parser stops and the client gets a 431 with the service's error object.
 */
import { createServer, STATUS_CODES, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { pipeline, Readable } from 'node:stream';
import { errorObject, ServiceError, statusOf } from '../service/errors.js';
import { serviceHandlerOf, type ServiceHandler } from '../service/handler.js';
import { RAW_TARGET, rawQueryOf, tooLarge, type ServiceRequest } from '../service/request.js';
import { errorResponse, ODATA_VERSION, JSON_TYPE, type ServiceResponse } from '../service/respond.js';

export type RequestHandler = (request: Request) => Promise<Response>;

export interface ServeOptions {
  /** Default 8080; 0 picks a free port (see `Server.port`). */
  readonly port?: number;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Largest request line plus headers Node accepts, bytes (default 65,536). */
  readonly maxHeaderSize?: number;
  /** How long `close()` lets requests in flight run before cutting connections, ms (default 10,000). */
  readonly shutdownGraceMs?: number;
}

export interface Server {
  /** `http://host:port` as listening (IPv6 hosts in brackets). */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly server: HttpServer;
  /** Stops accepting connections and resolves once every request in flight has finished. */
  close(): Promise<void>;
}

const HOST_HEADER = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/** The base URL a request is read against: its Host header when that is a plain host[:port], else the server's own origin. */
function baseOf(req: IncomingMessage, origin: string): string {
  const host = req.headers.host;
  return host !== undefined && HOST_HEADER.test(host) ? `http://${host}` : origin;
}

function requestOf(req: IncomingMessage, origin: string, signal: AbortSignal): Request {
  const base = baseOf(req, origin);
  const target = req.url ?? '/';
  // an origin-form target is appended to the base (so `//x` cannot change the host); absolute-form is parsed
  const url = target.startsWith('/') ? base + target : new URL(target, base).href;
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    try {
      headers.append(raw[i], raw[i + 1]);
    } catch {
      // a header the Fetch API refuses is dropped, as a proxy would
    }
  }
  const method = req.method ?? 'GET';
  const hasBody = method !== 'GET' && method !== 'HEAD';
  const request = new Request(url, {
    method,
    headers,
    signal,
    ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: 'half' } : {}),
  });
  Object.defineProperty(request, RAW_TARGET, { value: target });
  return request;
}

async function writeResponse(response: Response, req: IncomingMessage, res: ServerResponse, closing: boolean): Promise<void> {
  res.statusCode = response.status;
  response.headers.forEach((value, name) => res.setHeader(name, value));
  // close rather than keep alive a connection with an unread request body, or one being shut down
  if (closing || !req.complete) res.setHeader('Connection', 'close');
  if (response.body === null || req.method === 'HEAD') {
    res.end();
    return;
  }
  const reader: ReadableStreamDefaultReader<Uint8Array> = response.body.getReader();
  let gone = false;
  const onClose = (): void => {
    gone = true;
    void reader.cancel().catch(() => undefined);
  };
  res.once('close', onClose);
  let wrote = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || gone) break;
      wrote = true;
      if (!res.write(value)) {
        await new Promise<void>((resolve) => {
          const go = (): void => {
            res.off('drain', go);
            res.off('close', go);
            resolve();
          };
          res.on('drain', go);
          res.on('close', go);
        });
      }
    }
    if (!gone) res.end();
  } catch (error) {
    // a body that fails midway arrives truncated: what was written goes out before the connection
    // is cut (one that fails before its first byte closes the connection with no response at all)
    if (wrote && !gone) await new Promise<void>((resolve) => res.write('', () => resolve()));
    res.destroy(error instanceof Error ? error : new Error(String(error)));
  } finally {
    res.off('close', onClose);
  }
}

/**
 * A path that a WHATWG URL keeps exactly as sent: only characters it does not percent-encode, no
 * backslash, and no `.` or `..` segment (also percent-encoded) for it to resolve. Any other path
 * is parsed by URL, so the service sees the same path as through `createHandler`.
 */
const PLAIN_PATH = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/;
const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?:\/|$)/i;

/** Origins of the Host headers seen, as URL normalizes them (bounded: a client may send any number of names). */
const ORIGINS = new Map<string, string>();

function originOf(base: string): string {
  let origin = ORIGINS.get(base);
  if (origin === undefined) {
    origin = new URL(base).origin;
    if (ORIGINS.size >= 256) ORIGINS.clear();
    ORIGINS.set(base, origin);
  }
  return origin;
}

/** The ServiceRequest of a node:http request, or null when its target is not a URL at all. */
function serviceRequestOfNode(req: IncomingMessage, serverOrigin: string): ServiceRequest | null {
  const target = req.url ?? '/';
  const base = baseOf(req, serverOrigin);
  let path: string;
  let origin: string;
  const q = target.indexOf('?');
  const h = target.indexOf('#');
  const pathEnd = q >= 0 ? q : h >= 0 ? h : target.length;
  const plain = target.slice(0, pathEnd);
  if (PLAIN_PATH.test(plain) && !DOT_SEGMENT.test(plain)) {
    path = plain;
    origin = originOf(base);
  } else {
    try {
      // an origin-form target is appended to the base (so `//x` cannot change the host); absolute-form is parsed
      const url = target.startsWith('/') ? new URL(base + target) : new URL(target, base);
      path = url.pathname;
      origin = url.origin;
    } catch {
      return null;
    }
  }
  const raw = req.rawHeaders;
  const method = req.method ?? 'GET';
  return {
    method,
    path,
    rawQuery: rawQueryOf(target),
    origin,
    header(name: string): string | null {
      let value: string | null = null;
      for (let i = 0; i + 1 < raw.length; i += 2) {
        if (raw[i].length === name.length && raw[i].toLowerCase() === name) value = value === null ? raw[i + 1] : `${value}, ${raw[i + 1]}`;
      }
      return value;
    },
    text: (limit) => (method === 'GET' || method === 'HEAD' ? Promise.resolve('') : readNodeBody(req, limit)),
  };
}

/**
 * The body of a node:http request as text, refusing more than `limit` bytes (413). Past the limit
 * it stops reading and leaves the rest unread (the response then closes the connection) rather
 * than destroying the request, which would take the socket and the 413 with it.
 */
function readNodeBody(req: IncomingMessage, limit: number): Promise<string> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onError);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.byteLength;
      if (size > limit) {
        done();
        req.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      done();
      resolve(Buffer.concat(chunks).toString('utf8'));
    };
    const onError = (): void => {
      done();
      reject(new ServiceError('InvalidHttp', 'The request body ended before its end.'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onError);
  });
}

/** A ServiceResponse on the socket: headers and a whole body in one write, a streamed body piped with backpressure. */
function writeServiceResponse(response: ServiceResponse, req: IncomingMessage, res: ServerResponse, closing: boolean): void {
  const { status, body } = response;
  // close rather than keep alive a connection with an unread request body, or one being shut down
  const headers = closing || !req.complete ? { ...response.headers, Connection: 'close' } : response.headers;
  try {
    res.writeHead(status, headers);
  } catch (error) {
    // a header node refuses (a defect): the connection goes rather than the process
    if (body instanceof Readable) body.destroy();
    res.destroy(error instanceof Error ? error : new Error(String(error)));
    return;
  }
  if (body === null || req.method === 'HEAD') {
    if (body instanceof Readable) body.destroy();
    res.end();
  } else if (body instanceof Readable) {
    pipeline(body, res, (error) => {
      if (error && !res.destroyed) res.destroy(error);
    });
  } else {
    res.end(body);
  }
}

function rawError(code: string, message: string): string {
  const error = new ServiceError(code, message);
  const status = statusOf(error);
  const body = JSON.stringify({ error: errorObject(error) });
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nOData-Version: ${ODATA_VERSION}\r\nContent-Type: ${JSON_TYPE}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

export async function serve(handler: RequestHandler, options: ServeOptions = {}): Promise<Server> {
  const maxHeaderSize = options.maxHeaderSize ?? 65_536;
  const graceMs = options.shutdownGraceMs ?? 10_000;
  let closing = false;
  let origin = 'http://127.0.0.1';

  const service: ServiceHandler | undefined = serviceHandlerOf(handler);
  const afterResponse = (): void => {
    if (closing) setImmediate(() => server.closeIdleConnections());
  };

  /** The fast path: the service core on node's request, no WHATWG objects. */
  const answer = (service: ServiceHandler, req: IncomingMessage, res: ServerResponse): void => {
    res.once('close', afterResponse);
    const request = serviceRequestOfNode(req, origin);
    if (request === null) {
      writeServiceResponse(errorResponse(new ServiceError('InvalidHttp', 'The request target is not a URL.')), req, res, true);
      return;
    }
    service(request).then(
      (response) => writeServiceResponse(response, req, res, closing),
      (error: unknown) => {
        // the service answers every error itself; this is a defect in it
        process.stderr.write(`reso-engine: the service threw: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
        const body = JSON.stringify({ error: { code: 'InternalError', message: 'The service failed on this request.' } });
        writeServiceResponse(
          {
            status: 500,
            headers: { 'OData-Version': ODATA_VERSION, 'Content-Type': JSON_TYPE, 'Content-Length': String(Buffer.byteLength(body)) },
            body: Buffer.from(body),
          },
          req,
          res,
          closing,
        );
      },
    );
  };

  const server = createServer({ maxHeaderSize }, (req, res) => {
    if (service !== undefined) {
      answer(service, req, res);
      return;
    }
    const aborter = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) aborter.abort();
      if (closing) setImmediate(() => server.closeIdleConnections());
    });
    void (async () => {
      let response: Response;
      try {
        response = await handler(requestOf(req, origin, aborter.signal));
      } catch (error) {
        // the service's handler answers every error itself; this is a handler that threw
        process.stderr.write(`reso-engine: the request handler threw: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
        const body = JSON.stringify({ error: { code: 'InternalError', message: 'The service failed on this request.' } });
        response = new Response(body, { status: 500, headers: { 'OData-Version': ODATA_VERSION, 'Content-Type': JSON_TYPE } });
      }
      await writeResponse(response, req, res, closing);
    })();
  });

  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable || error.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    socket.end(
      error.code === 'HPE_HEADER_OVERFLOW'
        ? rawError('HeadersTooLarge', `The request line and headers are larger than ${maxHeaderSize} bytes.`)
        : rawError('InvalidHttp', 'The request is not valid HTTP/1.1.'),
    );
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8080, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const hostText = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  origin = `http://${hostText}:${address.port}`;

  let closed: Promise<void> | null = null;
  return {
    url: origin,
    host: address.address,
    port: address.port,
    server,
    close(): Promise<void> {
      if (closed) return closed;
      closing = true;
      closed = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => server.closeAllConnections(), graceMs);
        timer.unref();
        server.close((error) => {
          clearTimeout(timer);
          if (error) reject(error);
          else resolve();
        });
        server.closeIdleConnections();
      });
      return closed;
    },
  };
}
