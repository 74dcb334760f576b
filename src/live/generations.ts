/**
 * The published generations: the newest one, which new queries read, and older ones that
 * nextLinks pinned for paging. A nextLink carries `$skiptoken=<data fingerprint>-<generation>`;
 * paging it reads the generation it started on, kept for `ttlMs` after its last page and at most
 * MAX_PINNED_GENERATIONS of them (each keeps the structures built for it: at 1M listings tens of
 * MB of key order and rank, sorted permutations, bitsets and dead rows, so the bound is a memory
 * bound). A token of another data set, or of a generation no longer kept, is a QueryError.
 */
import { crc32 } from 'node:zlib';
import type { Generation } from '../access/generation.js';
import { QueryError } from '../errors.js';
import { splitQuery } from '../odata/parse-query.js';
import { RESOURCE_NAMES } from '../schema/types.js';
import type { Store } from '../store/store.js';

/** Default time a paged generation stays readable after its last page (pageSnapshotTtlMs). */
export const PAGE_SNAPSHOT_TTL_MS = 10 * 60_000;

/** Older generations kept for paging at most; past it the least recently paged expires early. */
export const MAX_PINNED_GENERATIONS = 8;

export class Generations {
  private gen: Generation;
  /**
   * The data set's part of every $skiptoken: a checksum of the listing keys and table sizes as
   * loaded, so that the same data gives the same nextLinks (deterministic responses), and a token
   * of another data set is unknown here.
   */
  private readonly instance: string;
  /** Older generations that nextLinks pinned, with the time they were last paged. */
  private readonly pinned = new Map<number, { gen: Generation; lastUsed: number }>();
  /** When a nextLink last pinned the newest generation (null: none since it was published). */
  private pagedAt: number | null = null;
  /** The last generation id given out. */
  private lastId = 0;

  constructor(
    first: Generation,
    private readonly clock: () => number,
    private readonly ttlMs = PAGE_SNAPSHOT_TTL_MS,
  ) {
    this.gen = first;
    this.instance = fingerprint(first.store);
  }

  /** The newest generation. */
  get current(): Generation {
    return this.gen;
  }

  /** An id for the next generation to publish. */
  nextId(): number {
    return ++this.lastId;
  }

  /** Makes `next` the generation new queries read; the previous one stays readable while pinned. */
  publish(next: Generation): void {
    const previous = this.gen;
    const now = this.clock();
    if (this.pagedAt !== null) this.pinned.set(previous.id, { gen: previous, lastUsed: this.pagedAt });
    this.pagedAt = null;
    for (const [id, pin] of this.pinned) if (now - pin.lastUsed > this.ttlMs) this.pinned.delete(id);
    while (this.pinned.size > MAX_PINNED_GENERATIONS) {
      let oldest: number | null = null;
      for (const [id, pin] of this.pinned) if (oldest === null || pin.lastUsed < this.pinned.get(oldest)!.lastUsed) oldest = id;
      this.pinned.delete(oldest!);
    }
    this.gen = next;
  }

  /** The $skiptoken of a generation. */
  tokenOf(gen: Generation): string {
    return `${this.instance}-${gen.id}`;
  }

  /**
   * The generation a query reads: the one its $skiptoken pinned (a nextLink of an earlier page),
   * else the newest; with the token its nextLink carries.
   */
  forQuery(text: string): { gen: Generation; token: string } {
    const current = this.gen;
    if (!text.includes('$skiptoken=')) return { gen: current, token: this.tokenOf(current) };
    const raw = splitQuery(text).find((o) => o.name === '$skiptoken')?.value;
    if (raw === undefined) return { gen: current, token: this.tokenOf(current) };
    const m = /^([0-9a-f]{8})-([0-9]{1,15})$/.exec(raw);
    if (m === null) {
      throw new QueryError('InvalidSkipToken', `$skiptoken '${raw.slice(0, 40)}' is not one this service gave: follow the @odata.nextLink as it is.`, {
        option: '$skiptoken',
      });
    }
    const id = Number(m[2]);
    const now = this.clock();
    if (m[1] === this.instance && id === current.id) return { gen: current, token: raw };
    const pin = m[1] === this.instance ? this.pinned.get(id) : undefined;
    if (pin === undefined || now - pin.lastUsed > this.ttlMs) {
      if (pin !== undefined) this.pinned.delete(id);
      throw new QueryError(
        'SkipTokenExpired',
        `The data this nextLink was paging (generation ${id}) has changed and is no longer kept: start again from the first page.`,
        { option: '$skiptoken' },
      );
    }
    pin.lastUsed = now;
    return { gen: pin.gen, token: raw };
  }

  /** Called when a response carries a nextLink on `gen`: keeps it readable for paging once newer data is published. */
  pinForPaging(gen: Generation): void {
    const now = this.clock();
    if (gen === this.gen) this.pagedAt = now;
    else {
      const pin = this.pinned.get(gen.id);
      if (pin !== undefined) pin.lastUsed = now;
    }
  }
}

/** 8 hex digits: CRC-32 of the table sizes and the listing keys. */
function fingerprint(store: Store): string {
  let crc = crc32(RESOURCE_NAMES.map((r) => store.table(r).rowCount).join(','));
  const keys = store.Property.keyColumn;
  crc = crc32(keys.bytes.subarray(0, keys.offsets[store.Property.rowCount]), crc);
  return crc.toString(16).padStart(8, '0');
}
