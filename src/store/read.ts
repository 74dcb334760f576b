/**
 * Splits a data file into records without holding it in memory: JSON Lines (one object per
 * line) or a JSON array of objects, either of them gzip-compressed (`.gz`). Chunks of 1 MiB are
 * read from a stream; each record reaches the sink as a byte range of a chunk (or, when it spans
 * chunks, of a buffer joined for it), with the 1-based line it starts on.
 */
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { copyBytes } from './bytes.js';
import { DataError } from './errors.js';

export type RecordSink = (src: Buffer, s: number, e: number, line: number) => void;

export type FileFormat = 'jsonl' | 'json';

export interface ReadFileOptions {
  readonly format: FileFormat;
  readonly gzip: boolean;
  /** Label for errors, e.g. `Property.jsonl.gz`. */
  readonly label: string;
  /** Called after each chunk with the bytes of the file (compressed bytes for .gz) read so far. */
  readonly onChunk?: (bytesRead: number) => void;
}

const CHUNK = 1 << 20;

interface Source {
  readonly chunks: AsyncIterable<Buffer>;
  /** Bytes of the file read so far (compressed bytes for .gz). */
  readonly bytesRead: () => number;
}

function open(file: string, gzip: boolean): Source {
  const raw = createReadStream(file, { highWaterMark: CHUNK });
  if (!gzip) return { chunks: raw, bytesRead: () => raw.bytesRead };
  const gunzip = pipeline(raw, createGunzip({ chunkSize: 1 << 18 }), () => {
    // Errors surface through the async iteration of the gunzip stream.
  });
  return { chunks: gunzip, bytesRead: () => raw.bytesRead };
}

function isBlank(b: Buffer, s: number, e: number): boolean {
  for (let i = s; i < e; i++) {
    const c = b[i];
    if (c !== 32 && c !== 9 && c !== 13) return false;
  }
  return true;
}

export async function readRecords(file: string, options: ReadFileOptions, sink: RecordSink): Promise<void> {
  const splitter = options.format === 'jsonl' ? new LineSplitter(sink) : new ArraySplitter(sink, options.label);
  try {
    const source = open(file, options.gzip);
    for await (const chunk of source.chunks) {
      splitter.push(chunk);
      options.onChunk?.(source.bytesRead());
    }
    splitter.end();
  } catch (err) {
    if (err instanceof DataError) throw err;
    const reason = err instanceof Error ? err.message : String(err);
    throw new DataError({ code: 'BadDataFile', file: options.label, line: splitter.line, field: null, reason: `cannot read the file (${reason})` });
  }
}

interface Splitter {
  readonly line: number;
  push(chunk: Buffer): void;
  end(): void;
}

/** JSON Lines: one record per line; blank lines are skipped; a UTF-8 byte order mark is dropped. Push chunks, then `end`. */
export class LineSplitter implements Splitter {
  line = 0;
  private carry: Buffer | null = null;
  private first = true;

  constructor(private readonly sink: RecordSink) {}

  private emit(b: Buffer, s: number, e: number): void {
    this.line++;
    if (s < e && !isBlank(b, s, e)) this.sink(b, s, e, this.line);
  }

  push(chunk: Buffer): void {
    let pos = 0;
    if (this.first) {
      this.first = false;
      if (chunk.length >= 3 && chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf) pos = 3;
    }
    if (this.carry !== null) {
      const nl = chunk.indexOf(10, pos);
      if (nl < 0) {
        this.carry = Buffer.concat([this.carry, chunk.subarray(pos)]);
        return;
      }
      const joined = Buffer.concat([this.carry, chunk.subarray(pos, nl)]);
      this.carry = null;
      this.emit(joined, 0, joined.length);
      pos = nl + 1;
    }
    for (;;) {
      const nl = chunk.indexOf(10, pos);
      if (nl < 0) break;
      this.emit(chunk, pos, nl);
      pos = nl + 1;
    }
    if (pos < chunk.length) this.carry = copyBytes(chunk, pos, chunk.length);
  }

  end(): void {
    if (this.carry !== null) this.emit(this.carry, 0, this.carry.length);
    this.carry = null;
  }
}

const BEFORE = 0;
const FIRST = 1;
const ELEMENT = 2;
const AFTER = 3;
const NEXT = 4;
const DONE = 5;

/** A JSON array of records: elements are delimited by tracking strings and nesting depth. */
class ArraySplitter implements Splitter {
  line = 1;
  private state = BEFORE;
  private depth = 0;
  private inString = false;
  private escape = false;
  /** The element is a bare scalar (ends at `,`, `]` or whitespace). */
  private scalar = false;
  private elementLine = 0;
  private parts: Buffer[] = [];
  private first = true;

  constructor(
    private readonly sink: RecordSink,
    private readonly label: string,
  ) {}

  private error(reason: string): never {
    throw new DataError({ code: 'BadDataFile', file: this.label, line: this.line, field: null, reason });
  }

  push(chunk: Buffer): void {
    let i = 0;
    if (this.first) {
      this.first = false;
      if (chunk.length >= 3 && chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf) i = 3;
    }
    let start = this.state === ELEMENT ? 0 : -1;
    const n = chunk.length;
    for (; i < n; i++) {
      const c = chunk[i];
      if (this.state === ELEMENT) {
        if (this.inString) {
          if (this.escape) this.escape = false;
          else if (c === 92) this.escape = true;
          else if (c === 34) {
            this.inString = false;
            if (this.scalar && this.depth === 0) this.finishElement(chunk, start, i + 1, AFTER);
          }
          if (c === 10) this.line++;
          continue;
        }
        if (this.scalar) {
          if (c === 44 || c === 93 || c === 32 || c === 9 || c === 10 || c === 13) {
            this.finishElement(chunk, start, i, AFTER);
            i--; // the delimiter is read again in the AFTER state
          }
          continue;
        }
        if (c === 34) this.inString = true;
        else if (c === 123 || c === 91) this.depth++;
        else if (c === 125 || c === 93) {
          if (--this.depth === 0) this.finishElement(chunk, start, i + 1, AFTER);
        } else if (c === 10) this.line++;
        continue;
      }
      if (c === 10) {
        this.line++;
        continue;
      }
      if (c === 32 || c === 9 || c === 13) continue;
      switch (this.state) {
        case BEFORE:
          if (c !== 91) this.error('expected a JSON array of records ([...]) or JSON Lines in a .jsonl file');
          this.state = FIRST;
          break;
        case FIRST:
        case NEXT:
          if (c === 93) {
            if (this.state === NEXT) this.error('a comma is followed by ] (trailing comma)');
            this.state = DONE;
            break;
          }
          start = i;
          this.elementLine = this.line;
          this.state = ELEMENT;
          this.inString = c === 34;
          this.escape = false;
          this.scalar = c !== 123 && c !== 91;
          this.depth = this.scalar ? 0 : 1;
          break;
        case AFTER:
          if (c === 44) this.state = NEXT;
          else if (c === 93) this.state = DONE;
          else this.error(`expected , or ] after the record at line ${this.elementLine}`);
          break;
        case DONE:
          this.error('unexpected text after the closing ] of the array');
      }
    }
    if (this.state === ELEMENT) this.parts.push(copyBytes(chunk, Math.max(0, start), chunk.length));
  }

  private finishElement(chunk: Buffer, start: number, end: number, next: number): void {
    this.state = next;
    if (this.parts.length > 0) {
      const whole = Buffer.concat([...this.parts, chunk.subarray(Math.max(0, start), end)]);
      this.parts = [];
      this.sink(whole, 0, whole.length, this.elementLine);
    } else {
      this.sink(chunk, start, end, this.elementLine);
    }
  }

  end(): void {
    if (this.state === ELEMENT && this.scalar && !this.inString && this.parts.length > 0) {
      const whole = Buffer.concat(this.parts);
      this.parts = [];
      this.state = AFTER;
      this.sink(whole, 0, whole.length, this.elementLine);
    }
    if (this.state === BEFORE) this.error('the file is empty; expected a JSON array of records');
    if (this.state !== DONE) this.error('unexpected end of file inside the array');
  }
}
