/**
 * Progress of long work on a terminal (loading a data directory, saving or opening a snapshot,
 * pg load, replicate): one line, rewritten at most five times a second, with what is done, the
 * rate and the time left. Nothing at all when the stream is not a terminal (a log file, a pipe,
 * CI), where the command's final summary line is what a reader wants.
 */

/** The part of a stream this needs (process.stderr, or a test's stand-in). */
export interface ProgressStream {
  readonly isTTY?: boolean;
  write(text: string): boolean;
}

const INTERVAL_MS = 200;
const MB = 1024 * 1024;

const n = (x: number): string => Math.round(x).toLocaleString('en-US');

/** `3 s`, `1 min 5 s`, `2 h 3 min` */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

export interface ProgressUpdate {
  /** Bytes done and in all (the rate and the time left are of bytes when given). */
  readonly bytes?: number;
  readonly bytesTotal?: number;
  /** Rows (records) done and, when known, in all. */
  readonly rows?: number;
  readonly rowsTotal?: number;
  /** What is being worked on now (a file, a table). */
  readonly what?: string;
}

export class Progress {
  private readonly started: number;
  private last = -Infinity;
  private shown = false;

  constructor(
    private readonly label: string,
    private readonly stream: ProgressStream = process.stderr,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.started = now();
  }

  get enabled(): boolean {
    return this.stream.isTTY === true;
  }

  /** The line for an update (exported for tests; `update` writes it). */
  line(u: ProgressUpdate): string {
    const seconds = Math.max(1e-3, (this.now() - this.started) / 1000);
    const parts: string[] = [];
    if (u.rows !== undefined) parts.push(`${n(u.rows)}${u.rowsTotal !== undefined ? ` of ${n(u.rowsTotal)}` : ''} rows`);
    let done: number | undefined;
    let total: number | undefined;
    if (u.bytes !== undefined) {
      parts.push(`${(u.bytes / MB).toFixed(1)}${u.bytesTotal !== undefined ? ` of ${(u.bytesTotal / MB).toFixed(1)}` : ''} MB`);
      parts.push(`${(u.bytes / MB / seconds).toFixed(1)} MB/s`);
      [done, total] = [u.bytes, u.bytesTotal];
    } else if (u.rows !== undefined) {
      parts.push(`${n(u.rows / seconds)} rows/s`);
      [done, total] = [u.rows, u.rowsTotal];
    }
    if (done !== undefined && total !== undefined && total > 0) {
      parts.push(`${Math.min(100, Math.floor((done / total) * 100))}%`);
      if (done > 0 && done < total) parts.push(`ETA ${duration(((total - done) / done) * seconds)}`);
    }
    return `${this.label}${u.what !== undefined ? ` ${u.what}` : ''}${parts.length ? `: ${parts.join(', ')}` : ''}`;
  }

  /** Rewrites the line (on a terminal, at most every 200 ms). */
  update(u: ProgressUpdate): void {
    if (!this.enabled) return;
    const t = this.now();
    if (t - this.last < INTERVAL_MS) return;
    this.last = t;
    this.shown = true;
    this.stream.write(`\r\x1b[K${this.line(u)}`);
  }

  /** A line of its own above the progress line (on a terminal only). */
  note(text: string): void {
    if (!this.enabled) return;
    this.stream.write(`\r\x1b[K${text}\n`);
    this.shown = false;
  }

  /** Clears the progress line, for the command's own summary. */
  end(): void {
    if (this.shown) this.stream.write('\r\x1b[K');
    this.shown = false;
  }
}
