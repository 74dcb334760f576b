/**
 * `serve(handler, { port, host })`: mounts a `(Request) => Promise<Response>` handler on
 * node:http. Bodies are written chunk by chunk with backpressure (a streamed page is never
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
import { Readable } from 'node:stream';
import { errorObject, ServiceError, statusOf } from '../service/errors.js';
import { RAW_TARGET } from '../service/request.js';
import { ODATA_VERSION, JSON_TYPE } from '../service/respond.js';

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

function requestOf(req: IncomingMessage, origin: string, signal: AbortSignal): Request {
  const host = req.headers.host;
  const base = host !== undefined && HOST_HEADER.test(host) ? `http://${host}` : origin;
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

  const server = createServer({ maxHeaderSize }, (req, res) => {
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
