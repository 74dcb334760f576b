/**
 * The JSON text of whole records, kept so that the HTTP service does not build and stringify the
 * same row again for every page it appears in. A text is kept per table lineage (table.ts
 * `TableLineage`: the table segments a live change makes by appending rows, which read every older
 * row the same, so a text can never be stale and serves every generation) and per field list (the
 * plan's `$select`), for the records `Table.record` builds: no `$ignorenulls`, navigation links
 * or expansions (page.ts hands only such pages here). DaysOnMarket depends on the clock: its
 * value is cut out of the text and written afresh per request. Texts are kept as UTF-8 bytes, so
 * a page's body is copied together (`pageBytes`) rather than joined and encoded again: measured
 * on a page of 25 whole listings, 24 µs against 55-83 µs.
 *
 * A text is kept the second time its row is written (a bitmap per table and field list remembers
 * the first), and a page none of whose rows was written before is left to the caller, which
 * stringifies its records as one array: measured on pages of 25 whole listings, keeping every
 * text at once made a first page 38% dearer, against 7x cheaper for a page written again.
 *
 * The texts are bounded in all (about 32 MB: bytes counted, plus a fixed charge per row;
 * src/util/kept-rows.ts); past the bound the oldest texts go first, whatever table they belong to.
 */
import type { Table, TableLineage } from '../store/table.js';
import { getBit, newBitmap, resizeBitmap, setBit } from '../util/bits.js';
import { KeptRows } from '../util/kept-rows.js';

/** One row's text as UTF-8: `head + DaysOnMarket's value + tail`, or all of it in `head` (tail null). */
interface Entry {
  readonly head: Buffer;
  readonly tail: Buffer | null;
  readonly size: number;
}

/** What a page of records needs to be written from cached texts. */
export interface RecordSource {
  readonly table: Table;
  /** The plan's `$select` (undefined: every field). */
  readonly fields: readonly string[] | undefined;
  readonly nowMs: number;
  /** The page's rows, in order. */
  readonly rows: Uint32Array;
}

/** Texts of one table lineage and field list, and where DaysOnMarket sits in them. */
interface Texts {
  readonly rows: Map<number, Entry>;
  /** Rows written at least once (bitmap, grown with the lineage's tables): a text is kept from the second time on. */
  seen: Uint32Array;
  /** The DaysOnMarket column's index when the field list has it, else -1. */
  readonly dom: number;
  /** `"DaysOnMarket":` as the records write it. */
  readonly domKey: string;
}

/** Field lists kept per table beyond which the lists start afresh (each has a bitmap of the table's rows). */
const MAX_FIELD_LISTS = 64;

/** Bytes charged per row beyond its text (map entry, entry and Buffer objects, queue slot). */
const ROW_CHARGE = 160;

/** A page's bytes as `pageBytes` last wrote them, and what they were written from. */
interface PageEntry {
  readonly texts: Texts;
  readonly rows: Uint32Array;
  /** DaysOnMarket per row as written (NO_DAYS when the field list has none). */
  readonly days: readonly (number | null)[];
  readonly bytes: Buffer;
}

/** Pages whose bytes are kept for writing them again, by count and by bytes in all. */
const PAGES_KEPT = 256;
const PAGE_BYTES_KEPT = 8 * 1024 * 1024;

const NO_DAYS: readonly (number | null)[] = [];

function sameItems<T>(a: ArrayLike<T>, b: ArrayLike<T>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** DaysOnMarket of each of the page's rows as of its clock (NO_DAYS when the field list has none). */
function daysOf(texts: Texts, source: RecordSource): readonly (number | null)[] {
  if (texts.dom < 0) return NO_DAYS;
  const column = source.table.columns[texts.dom];
  const { rows, nowMs } = source;
  const days = new Array<number | null>(rows.length);
  for (let i = 0; i < rows.length; i++) days[i] = column.kind === 'daysOnMarket' ? column.get(rows[i], nowMs) : null;
  return days;
}

/** Whether the page's DaysOnMarket values are those written before (rows already compared): no array is made for the check. */
function sameDays(texts: Texts, source: RecordSource, days: readonly (number | null)[]): boolean {
  if (texts.dom < 0) return true;
  const column = source.table.columns[texts.dom];
  if (column.kind !== 'daysOnMarket') return true; // written as null for every row, as daysOf keeps it
  const { rows, nowMs } = source;
  for (let i = 0; i < rows.length; i++) if (column.get(rows[i], nowMs) !== days[i]) return false;
  return true;
}

export class RecordTexts {
  private readonly byLineage = new WeakMap<TableLineage, Map<string, Texts>>();
  /** The last bytes written per head and tail (insertion order: the oldest first). */
  private readonly pages = new Map<string, PageEntry>();
  private pageSize = 0;
  /** The kept entries, bounded in all (FIFO eviction). */
  private readonly kept: KeptRows<Entry>;

  constructor(budget: number) {
    this.kept = new KeptRows(budget);
  }

  /**
   * The JSON text of every row of the page, as `JSON.stringify(table.record(row, fields, nowMs))`
   * writes it; null when no row of the page has been written before (the caller stringifies the
   * records as one array, which is cheaper than texts one by one). A row's text is kept the second
   * time it is written: pages seen once cost what they cost without the cache.
   */
  texts(source: RecordSource): string[] | null {
    const entries = this.entriesOf(source);
    if (entries === null) return null;
    const dom = this.domOf(this.textsOf(source.table, source.fields), source);
    return entries.map((entry, i) =>
      entry.tail === null ? entry.head.toString('utf8') : `${entry.head.toString('utf8')}${dom!(i)}${entry.tail.toString('utf8')}`,
    );
  }

  /**
   * `head + the texts of the page's rows joined by commas + tail` as UTF-8 bytes, or null as
   * `texts` is: the texts copied into one buffer, DaysOnMarket's value written in as of `nowMs`.
   * A page written again as it was last written (the same table segment, field list, rows,
   * DaysOnMarket values, head and tail; the same table lineage) gets the very same buffer back: a caller may keep what it
   * derived from it (the HTTP service its entity tag and compressed forms).
   */
  pageBytes(source: RecordSource, head: string, tail: string): Buffer | null {
    const texts = this.textsOf(source.table, source.fields);
    const { rows } = source;
    // pages of one head and tail (every unselected page of a resource without count or nextLink
    // has the same) are told apart by their length and first row, so that they do not take turns
    // in one slot; the rows themselves are compared in full below
    const key = `${rows.length}\u0000${rows.length === 0 ? '' : rows[0]}\u0000${head}\u0000${tail}`;
    const last = this.pages.get(key);
    if (last !== undefined && last.texts === texts && sameItems(last.rows, rows) && sameDays(texts, source, last.days)) return last.bytes;
    const entries = this.entriesOf(source);
    if (entries === null) return null;
    const days = daysOf(texts, source);
    let size = Buffer.byteLength(head) + Buffer.byteLength(tail) + Math.max(0, entries.length - 1);
    const written = new Array<string>(entries.length);
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i];
      size += entry.head.length;
      if (entry.tail !== null) size += (written[i] = days[i] === null ? 'null' : String(days[i])).length + entry.tail.length;
    }
    const out = Buffer.allocUnsafe(size);
    let at = out.write(head, 0, 'utf8');
    for (let i = 0; i < entries.length; i++) {
      if (i > 0) out[at++] = 0x2c; // ','
      const entry = entries[i];
      at += entry.head.copy(out, at);
      if (entry.tail !== null) {
        at += out.write(written[i], at, 'latin1');
        at += entry.tail.copy(out, at);
      }
    }
    out.write(tail, at, 'utf8');
    this.rememberPage(key, { texts, rows, days, bytes: out });
    return out;
  }

  /** Keeps a page's bytes for `pageBytes`, the oldest pages dropped past PAGES_KEPT or PAGE_BYTES_KEPT. */
  private rememberPage(key: string, page: PageEntry): void {
    const old = this.pages.get(key);
    if (old !== undefined) {
      this.pages.delete(key);
      this.pageSize -= old.bytes.length;
    }
    this.pages.set(key, page);
    this.pageSize += page.bytes.length;
    for (const [k, p] of this.pages) {
      if (this.pages.size <= PAGES_KEPT && this.pageSize <= PAGE_BYTES_KEPT) break;
      this.pages.delete(k);
      this.pageSize -= p.bytes.length;
    }
  }

  /** DaysOnMarket's value of the page's i-th row as JSON (`null` or digits), for texts cut at it. */
  private domOf(texts: Texts, source: RecordSource): ((i: number) => string) | null {
    if (texts.dom < 0) return null;
    const column = source.table.columns[texts.dom];
    return (i) => {
      const days = column.kind === 'daysOnMarket' ? column.get(source.rows[i], source.nowMs) : null;
      return days === null ? 'null' : String(days);
    };
  }

  /** The entries of the page's rows (rows seen for the first time: a text made and not kept), or null when none was written before. */
  private entriesOf(source: RecordSource): Entry[] | null {
    const { table, fields, nowMs, rows } = source;
    const texts = this.textsOf(table, fields);
    if (texts.seen.length * 32 < table.rowCount) texts.seen = resizeBitmap(texts.seen, table.rowCount);
    const { seen } = texts;
    let known = false;
    for (let i = 0; i < rows.length && !known; i++) known = getBit(seen, rows[i]);
    if (!known) {
      for (let i = 0; i < rows.length; i++) setBit(seen, rows[i]);
      return null;
    }
    const out = new Array<Entry>(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i];
      let entry = texts.rows.get(row);
      if (entry === undefined) {
        if (!getBit(seen, row)) {
          setBit(seen, row);
          entry = this.entryOf(texts, table, fields, row, nowMs);
        } else {
          entry = this.entryOf(texts, table, fields, row, nowMs);
          this.kept.keep(texts.rows, row, entry, entry.size);
        }
      }
      out[i] = entry;
    }
    return out;
  }

  /** Bytes held (texts and per-row charges). */
  get heldSize(): number {
    return this.kept.heldSize;
  }

  private textsOf(table: Table, fields: readonly string[] | undefined): Texts {
    let byFields = this.byLineage.get(table.lineage);
    if (byFields === undefined) this.byLineage.set(table.lineage, (byFields = new Map<string, Texts>()));
    const key = fields === undefined ? '' : fields.join('\u0000');
    let texts = byFields.get(key);
    if (texts === undefined) {
      // texts of lists dropped here stay counted until their turn to be evicted comes
      if (byFields.size >= MAX_FIELD_LISTS) byFields.clear();
      const names = table.schema.fields;
      const dom = table.columns.findIndex((c, i) => c.kind === 'daysOnMarket' && (fields === undefined || fields.includes(names[i].name)));
      texts = { rows: new Map(), seen: newBitmap(table.rowCount), dom, domKey: dom < 0 ? '' : `${JSON.stringify(names[dom].name)}:` };
      byFields.set(key, texts);
    }
    return texts;
  }

  /** A row's entry (its text cut at DaysOnMarket's value when the field list has it). */
  private entryOf(texts: Texts, table: Table, fields: readonly string[] | undefined, row: number, nowMs: number): Entry {
    const record = table.record(row, fields, nowMs);
    if (texts.dom < 0) {
      const head = Buffer.from(JSON.stringify(record), 'utf8');
      return { head, tail: null, size: head.length + ROW_CHARGE };
    }
    // A zero in its place marks where the value goes. The key cannot occur elsewhere in the
    // text: inside a string value its quotes would be escaped, and nested values (points) do
    // not have it.
    const name = table.schema.fields[texts.dom].name;
    record[name] = 0;
    const text = JSON.stringify(record);
    const at = text.indexOf(texts.domKey) + texts.domKey.length;
    const head = Buffer.from(text.slice(0, at), 'utf8');
    const tail = Buffer.from(text.slice(at + 1), 'utf8');
    return { head, tail, size: head.length + tail.length + ROW_CHARGE };
  }
}

/** The process's texts (32 MB). */
export const recordTexts = new RecordTexts(32 * 1024 * 1024);
