/**
 * The request journal of the test harness: the last N requests (default 1,000), oldest first,
 * each with its method, URL (as sent, query included), status, duration, the fault applied and
 * the account. Never a token or a password: the login request's body is not kept.
 */

export interface JournalEntry {
  /** 1 for the first request the harness saw, then counting up (also across `clear`). */
  readonly seq: number;
  /** When it arrived, by the harness clock (ISO 8601). */
  readonly at: string;
  readonly method: string;
  /** Path and query as the client sent them. */
  readonly url: string;
  /** The status answered; 0 when a fault dropped the connection. */
  readonly status: number;
  /** Wall-clock milliseconds the answer took (faults' latency included). */
  readonly durationMs: number;
  /** The name of the fault rule applied, or null. */
  readonly fault: string | null;
  /** The account whose token the request carried (or whose login it was), or null. */
  readonly account: string | null;
}

export class Journal {
  private entries: JournalEntry[] = [];
  private seq = 0;

  constructor(private readonly capacity = 1_000) {
    if (!(Number.isInteger(capacity) && capacity >= 1)) throw new TypeError('journal: capacity must be a whole number of at least 1');
  }

  /** The next entry's sequence number. */
  next(): number {
    return ++this.seq;
  }

  record(entry: JournalEntry): void {
    this.entries.push(entry);
    if (this.entries.length > this.capacity) this.entries.splice(0, this.entries.length - this.capacity);
  }

  /** The kept entries, oldest first (a copy). */
  list(): JournalEntry[] {
    return [...this.entries];
  }

  clear(): void {
    this.entries = [];
  }
}
