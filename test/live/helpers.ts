/**
 * Shared fixtures of the live-change tests (test/live): a seeded generated data set, the records
 * the engine should hold after each change kept in plain maps (LiveModel, written from the change
 * API's contract, not from the engine's code), the naive reference of test/exec/oracle.ts run over
 * exactly those records with the first-version rule of service_OriginalEntryTimestamp
 * (LiveOracle), and small readers of engine answers.
 */
import { expect } from 'vitest';
import { Engine, type QueryOptions, type QueryResult } from '../../src/engine.js';
import { QueryError } from '../../src/errors.js';
import { generateListings } from '../../src/generate/dataset.js';
import type { ChangeOperation, ChangeSummary, Generation } from '../../src/live/change.js';
import { parseQuery } from '../../src/odata/parse-query.js';
import type { SearchFieldName } from '../../src/schema/search-fields.js';
import type { SearchView } from '../../src/search/live.js';
import { NaiveEngine } from '../exec/oracle.js';
import { NaiveSearch } from '../search/oracle.js';

export type Rec = Record<string, unknown>;
/** The resources the live model follows (the listing sets these tests change). */
export type QueryResource = 'Property' | 'Media' | 'OpenHouse';
export type ChildResource = 'Media' | 'OpenHouse';
export interface DataSet {
  Property: Rec[];
  Media: Rec[];
  OpenHouse: Rec[];
}

export const NOW = Date.parse('2025-06-01T00:00:00Z');
export const KEY: Readonly<Record<QueryResource, string>> = { Property: 'ListingKey', Media: 'MediaKey', OpenHouse: 'OpenHouseKey' };
export const CHILDREN: readonly ChildResource[] = ['Media', 'OpenHouse'];
/** The listing key a child record names. */
export const parentOf = (resource: ChildResource, r: Rec): string => (resource === 'Media' ? r.ResourceRecordKey : r.ListingKey) as string;

/** One generated listing with its children. */
export interface Listing {
  property: Rec;
  media: Rec[];
  openHouses: Rec[];
}

/**
 * Listings `from`..`from + count - 1` of the generated data set `seed` (keys P000000001...), at
 * most `mediaPerListing` Media each (a small Media table keeps each change cheap). Plain copies.
 */
export function generated(count: number, seed: string, options: { from?: number; mediaPerListing?: number } = {}): Listing[] {
  const from = options.from ?? 0;
  const out: Listing[] = [];
  let i = 0;
  for (const l of generateListings({ listings: from + count, seed })) {
    if (i++ < from) continue;
    out.push({
      property: { ...l.property },
      media: l.media.slice(0, options.mediaPerListing ?? Infinity).map((m) => ({ ...m })),
      openHouses: l.openHouses.map((o) => ({ ...o })),
    });
  }
  return out;
}

export const dataSetOf = (listings: readonly Listing[]): DataSet => ({
  Property: listings.map((l) => l.property),
  Media: listings.flatMap((l) => l.media),
  OpenHouse: listings.flatMap((l) => l.openHouses),
});

export const cloneData = (d: DataSet): DataSet => structuredClone(d);

/** A generated listing under another key, its children renamed after it. */
export function renamed(l: Listing, key: string): Listing {
  return {
    property: { ...l.property, ListingKey: key },
    media: l.media.map((m, i) => ({ ...m, MediaKey: `${key}-M${i + 1}`, ResourceRecordKey: key })),
    openHouses: l.openHouses.map((o, i) => ({ ...o, OpenHouseKey: `${key}-OH${i + 1}`, ListingKey: key })),
  };
}

/** A copy of the record without some fields. */
export function without(r: Rec, ...fields: string[]): Rec {
  const out = { ...r };
  for (const f of fields) delete out[f];
  return out;
}

/** UTF-16 code unit order, the engine's key order. */
export const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Nulls lowest, then `<`. */
function compareNullable(a: number | null, b: number | null): number {
  if (a === b) return 0;
  if (a === null) return -1;
  if (b === null) return 1;
  return a < b ? -1 : 1;
}

const instant = (v: unknown): number | null => (typeof v === 'string' ? Date.parse(v) : null);

/** The default order of a listing's children (Media by Order, OpenHouse by OpenHouseStartTime; nulls lowest; ties by key). */
export function childOrder(resource: ChildResource): (a: Rec, b: Rec) => number {
  const read = resource === 'Media' ? (r: Rec) => (typeof r.Order === 'number' ? r.Order : null) : (r: Rec) => instant(r.OpenHouseStartTime);
  const key = KEY[resource];
  return (a, b) => compareNullable(read(a), read(b)) || byCodeUnits(a[key] as string, b[key] as string);
}

/**
 * The naive reference (test/exec/oracle.ts) over live records. For listings,
 * service_OriginalEntryTimestamp follows SERVICE.md §2 across versions: without an
 * OriginalEntryTimestamp it is the earliest of ListingContractDate and the ModificationTimestamp of
 * the FIRST version the engine loaded (`firstModified`). For Media and OpenHouse, the records are
 * handed to NaiveEngine under their own key as `ListingKey` (the key its query() returns and breaks
 * ties with), while every field read goes to the original record.
 */
export class LiveOracle extends NaiveEngine {
  private constructor(
    records: Rec[],
    nowMs: number,
    private readonly originals: WeakMap<Rec, Rec>,
    private readonly firstModified: ReadonlyMap<string, string | null>,
  ) {
    super(records, nowMs);
  }

  static of(resource: QueryResource, live: Iterable<Rec>, nowMs: number, firstModified: ReadonlyMap<string, string | null>): LiveOracle {
    const originals = new WeakMap<Rec, Rec>();
    const records: Rec[] = [];
    for (const r of live) {
      if (resource === 'Property') records.push(r);
      else {
        const handed = { ...r, ListingKey: r[KEY[resource]] };
        originals.set(handed, r);
        records.push(handed);
      }
    }
    return new LiveOracle(records, nowMs, originals, resource === 'Property' ? firstModified : new Map());
  }

  private readonly fieldSearches = new Map<SearchFieldName, NaiveSearch>();
  private readonly searchResults = new Map<string, Map<number, number>>();

  /** Textbook BM25 over these records for one search field (built once, shared by every query of this oracle). */
  searcher(field: SearchFieldName): NaiveSearch {
    let s = this.fieldSearches.get(field);
    if (!s) this.fieldSearches.set(field, (s = new NaiveSearch(this.records, field)));
    return s;
  }

  override search(field: SearchFieldName, text: string, min?: number): Map<number, number> {
    const key = `${field}|${text}|${min}`;
    let res = this.searchResults.get(key);
    if (!res) this.searchResults.set(key, (res = this.searcher(field).search(text, min)));
    return res;
  }

  /** The record as the engine holds it (for children: not the one handed to NaiveEngine). */
  original(r: Rec): Rec {
    return this.originals.get(r) ?? r;
  }

  override field(r: Rec, name: string): ReturnType<NaiveEngine['field']> {
    const rec = this.original(r);
    if (name === 'service_OriginalEntryTimestamp' && typeof rec.OriginalEntryTimestamp !== 'string' && this.firstModified.has(rec.ListingKey as string)) {
      const first = this.firstModified.get(rec.ListingKey as string);
      const version: Rec = { ...rec, ModificationTimestamp: first ?? undefined };
      return super.field(version, name);
    }
    return super.field(rec, name);
  }

  /** An instant field as the engine writes it (canonical UTC), or null. */
  timestamp(r: Rec, name: string): string | null {
    const v = this.field(r, name);
    return v === null ? null : new Date(v as number).toISOString();
  }

  /** RawLocation / Location as GeoJSON, or null. */
  geoJson(r: Rec, name: 'Location' | 'RawLocation'): { type: 'Point'; coordinates: [number, number] } | null {
    const p = this.point(r, name);
    return p === null ? null : { type: 'Point', coordinates: p };
  }
}

/**
 * The live records a change API client expects the engine to hold, applied by the rules of the
 * change API: an upsert replaces the whole record with the same key (a replaced listing keeps its
 * children), a removal takes a listing's children with it, unknown keys are counted, a child
 * needs a live listing (else the whole change fails and nothing applies), operations apply in
 * order, and a change that neither upserts nor removes anything publishes no generation.
 */
export class LiveModel {
  readonly Property: Map<string, Rec>;
  readonly Media: Map<string, Rec>;
  readonly OpenHouse: Map<string, Rec>;
  /** ModificationTimestamp of the first version of each listing the engine loaded (null: it had none); never forgotten. */
  readonly firstModified: Map<string, string | null>;
  /** Listings removed so far, last version (to fetch them back, or re-add them). */
  readonly removed: Map<string, Rec>;
  generation = 0;
  /** The generation compacted last (0: as loaded); a compaction publishes a generation only when there were changes since. */
  compactedAt = 0;

  constructor(data: DataSet | LiveModel) {
    if (data instanceof LiveModel) {
      this.Property = new Map(data.Property);
      this.Media = new Map(data.Media);
      this.OpenHouse = new Map(data.OpenHouse);
      this.firstModified = new Map(data.firstModified);
      this.removed = new Map(data.removed);
      this.generation = data.generation;
      this.compactedAt = data.compactedAt;
      return;
    }
    this.Property = new Map();
    this.Media = new Map();
    this.OpenHouse = new Map();
    this.firstModified = new Map();
    this.removed = new Map();
    this.upsert('Property', data.Property);
    this.upsert('Media', data.Media);
    this.upsert('OpenHouse', data.OpenHouse);
  }

  table(resource: QueryResource): Map<string, Rec> {
    return this[resource];
  }

  /** Live keys in key order. */
  keys(resource: QueryResource): string[] {
    return [...this[resource].keys()].sort(byCodeUnits);
  }

  /** A listing's live children in their default order. */
  children(resource: ChildResource, listingKey: string): Rec[] {
    return this.childLists(resource).get(listingKey) ?? [];
  }

  /** Every listing's live children in their default order, by listing key (listings without children left out). */
  childLists(resource: ChildResource): Map<string, Rec[]> {
    const lists = new Map<string, Rec[]>();
    for (const c of this[resource].values()) {
      const list = lists.get(parentOf(resource, c));
      if (list) list.push(c);
      else lists.set(parentOf(resource, c), [c]);
    }
    for (const list of lists.values()) list.sort(childOrder(resource));
    return lists;
  }

  /**
   * Applies one operation in place. Returns its counts, or a reason when the engine must refuse
   * the whole change (a child whose listing is not live at that point of the change).
   */
  private upsert(resource: QueryResource, records: readonly unknown[]): string | null {
    for (const raw of records) {
      const r = { ...(raw as Rec) };
      const key = r[KEY[resource]] as string;
      if (resource === 'Property') {
        if (!this.firstModified.has(key)) this.firstModified.set(key, typeof r.ModificationTimestamp === 'string' ? r.ModificationTimestamp : null);
        this.removed.delete(key);
      } else if (!this.Property.has(parentOf(resource, r))) {
        return `${resource} ${key} names listing ${parentOf(resource, r)}, which is not live`;
      }
      this[resource].set(key, r);
    }
    return null;
  }

  private remove(resource: QueryResource, keys: readonly string[]): { removed: number; notFound: number } {
    let removed = 0;
    let notFound = 0;
    for (const key of keys) {
      const r = this[resource].get(key);
      if (r === undefined) {
        notFound++;
        continue;
      }
      removed++;
      this[resource].delete(key);
      if (resource !== 'Property') continue;
      this.removed.set(key, r);
      for (const c of CHILDREN) for (const [k, child] of this[c]) if (parentOf(c, child) === key) this[c].delete(k);
    }
    return { removed, notFound };
  }

  /**
   * The change as one whole: the next model and the summary the engine should give, or the
   * reason it must fail (this model is never modified).
   */
  after(ops: readonly ChangeOperation[]): { model: LiveModel; summary: ChangeSummary } | { failure: string } {
    const next = new LiveModel(this);
    let upserted = 0;
    let removed = 0;
    let notFound = 0;
    for (const op of ops) {
      if ('remove' in op) {
        const counts = next.remove(op.resource as QueryResource, op.remove);
        removed += counts.removed;
        notFound += counts.notFound;
        continue;
      }
      if (!('upsert' in op)) throw new Error('the model takes upserts as lists of records');
      const failure = next.upsert(op.resource as QueryResource, op.upsert);
      if (failure !== null) return { failure };
      upserted += op.upsert.length;
    }
    if (upserted + removed > 0) next.generation++;
    return { model: next, summary: { generation: next.generation, upserted, removed, notFound } };
  }

  /** After engine.compact(): the same records, under a new generation when anything changed since the last compaction. */
  compacted(): LiveModel {
    const next = new LiveModel(this);
    if (next.generation !== next.compactedAt) next.compactedAt = ++next.generation;
    return next;
  }

  oracle(resource: QueryResource, nowMs = NOW): LiveOracle {
    return LiveOracle.of(resource, this[resource].values(), nowMs, this.firstModified);
  }

  /** Visibility for a caller limited to `sources`, over the records of `oracle` (children: their listing's source). */
  visibleTo(resource: QueryResource, oracle: LiveOracle, sources: readonly string[]): (r: Rec) => boolean {
    return (r) => {
      const rec = oracle.original(r);
      const listing = resource === 'Property' ? rec : this.Property.get(parentOf(resource, rec));
      return listing !== undefined && sources.includes(listing.OriginatingSystemName as string);
    };
  }
}

/** The record the engine should give for `r` with every field of `fields` (absent ones null, absent collections [], derived ones computed). */
export function expectedRecord(
  resource: QueryResource,
  r: Rec,
  fields: ReadonlyArray<{ readonly name: string; readonly collection: boolean }>,
  oracle: LiveOracle,
): Rec {
  const out: Rec = {};
  for (const { name: f, collection } of fields) {
    // a collection is never null in a record: an absent one is []
    if (collection) {
      out[f] = r[f] ?? [];
      continue;
    }
    if (resource === 'Property' && (f === 'Location' || f === 'RawLocation')) out[f] = oracle.geoJson(r, f);
    else if (resource === 'Property' && (f === 'service_OriginalEntryTimestamp' || f === 'service_DaysOnMarketReferenceTimestamp'))
      out[f] = oracle.timestamp(r, f);
    else if (resource === 'Property' && f === 'DaysOnMarket') out[f] = oracle.field(r, f);
    else out[f] = r[f] ?? null;
  }
  return out;
}

/**
 * The keys the naive reference gives for a query string ($filter, $orderby, $skip, $top, $count),
 * over the oracle's records and the caller's visibility: the page and the count.
 */
export function oracleAnswer(oracle: LiveOracle, query: string, visible?: (r: Rec) => boolean): { page: string[]; count: number } {
  const parsed = parseQuery(query);
  const all = oracle.query(parsed.filter, parsed.orderby, visible);
  const skip = parsed.skip ?? 0;
  return { page: all.slice(skip, parsed.top === undefined ? undefined : skip + parsed.top), count: all.length };
}

/** `got` equals `want` (a quick comparison of their JSON first: they are large, and equal almost always). */
export function expectSame(got: unknown, want: unknown, label: string): void {
  if (JSON.stringify(got) !== JSON.stringify(want)) expect(got, label).toEqual(want);
}

/** The keys of a response's records. */
export const keysOf = (result: QueryResult, resource: QueryResource = 'Property'): string[] => result.value.map((r) => r[KEY[resource]] as string);

/** The search view the newest generation reads (BM25 statistics and scores are checked against it). */
export function searchViewOf(engine: Engine, field: SearchFieldName): SearchView {
  return (engine as unknown as { gen: Generation }).gen.access.search[field];
}

/** The query part of a relative nextLink (`Property?...`), decoded as engine.query takes it. */
export function nextQuery(link: string): string {
  return decodeURIComponent(link.slice(link.indexOf('?') + 1));
}

/** Follows nextLinks from a first page to the end, calling `between` before each following page. */
export async function pageThrough(
  engine: Engine,
  resource: QueryResource,
  query: string,
  options: QueryOptions = {},
  between: (page: number) => unknown = () => undefined,
): Promise<{ pages: QueryResult[]; keys: string[] }> {
  const pages = [engine.query(resource, query, options)];
  for (;;) {
    const link = pages[pages.length - 1]['@odata.nextLink'];
    if (link === undefined) break;
    await between(pages.length);
    pages.push(engine.query(resource, nextQuery(link), options));
  }
  return { pages, keys: pages.flatMap((p) => keysOf(p, resource)) };
}

/** The QueryError (or DataError) a promise rejects with. */
export async function rejectionOf(promise: Promise<unknown>): Promise<QueryError> {
  try {
    await promise;
  } catch (e) {
    expect(e).toBeInstanceOf(QueryError);
    return e as QueryError;
  }
  throw new Error('expected the change to fail, it succeeded');
}

/** An engine over a copy of `data` at the clock `now` (default: the fixed NOW). */
export function openEngine(data: DataSet, options: { now?: () => number; pageSnapshotTtlMs?: number; compactFraction?: number | false } = {}): Promise<Engine> {
  const now = options.now ?? (() => NOW);
  return Engine.open({
    data: cloneData(data),
    now: () => new Date(now()),
    pageSnapshotTtlMs: options.pageSnapshotTtlMs,
    compactFraction: options.compactFraction,
  });
}
