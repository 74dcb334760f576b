/**
 * `replicate(options)`: pulls Property, Media, OpenHouse, Member and Office from an upstream RESO
 * Web API into a sink (a data directory by default), incrementally by ModificationTimestamp, and
 * removes what the upstream no longer lists. An upstream without Member or Office (not in its
 * `$metadata`, or a 404 for the collection) replicates the rest; those are then skipped. One run:
 *
 * 1. `$metadata`: each resource's key and the timestamp field its changes are ordered by.
 * 2. Changes, per resource, listings first: keyset pages `$filter=T ge t and (T gt t or Key gt 'k')`,
 *    `$orderby=T asc,Key asc`, `$top=N` from the saved cursor (t, k), each page applied and the
 *    cursor committed with it. A page is followed by another while it is full or carries
 *    `@odata.nextLink`; the nextLink itself is never followed (reso-engine's is `$skip`-based,
 *    which skips rows when a record moves behind the cursor).
 * 3. Reconciliation, per resource: every upstream key (`$select=Key`, keyset-paged by key);
 *    local keys it lacks are removed (a listing's children with it), upstream keys the sink lacks
 *    are fetched by key (`Key in (...)`): records that never came through the changes (visibility
 *    widened, a timestamp behind the cursor, a child whose listing was removed and came back).
 * 4. Changes again, from where step 2 stopped: what changed while steps 2 and 3 ran (usually one
 *    empty page per resource). A change made during this last step waits for the next run.
 *
 * An upstream with an EntityEvent log (declared in `$metadata`, and reso-engine's
 * `/v1/account/resources` beside the root) makes later runs incremental: a complete run records the
 * log's newest sequence read before its keys were listed, the record that event names and the
 * account's sources; the next run, if the event at that sequence still names that record and the
 * sources are the same, does step 2 and then fetches by key the records named by the events after
 * it (upserting those returned, removing those not), with no key listing. Otherwise it is a full
 * run as above.
 *
 * A child whose listing the sink lacks gets its listing fetched by key first; a child whose
 * listing the upstream does not show either cannot be held (the loader would reject it) and is
 * counted as an orphan.
 */
import type { JsonRecord } from '../generate/listing.js';
import { CATALOG, compareOrdinal, DERIVED_PROPERTY_FIELDS } from '../schema/catalog.js';
import { DirectorySink } from './directory-sink.js';
import { ReplicationError } from './errors.js';
import {
  isReplicatedChild,
  keyOf,
  OPTIONAL_RESOURCES,
  parentKeyOf,
  REPLICATED_RESOURCES,
  TIMESTAMP,
  type Cursor,
  type ReplicatedResource,
  type ReplicationSink,
  type EventsState,
  type RemovedCounts,
  type ReplicationState,
  type ResourceState,
} from './sink.js';
import { entityTypes, serviceRoot, stringLiteral, Upstream, type FetchLike, type Page, type RetryInfo } from './upstream.js';

export interface ReplicateOptions {
  /** The upstream: a RESO Web API base URL (`http://host:8080` for reso-engine) or its data service root. */
  readonly from: string;
  /** The bearer token sent with every request. */
  readonly token: string;
  /** A data directory to replicate into (created if absent); or give `sink`. */
  readonly to?: string;
  /** Where records go instead of a data directory (left open: the caller closes it). */
  readonly sink?: ReplicationSink;
  /** Rows per page of changes (default 1,000); key listing pages ask for ten times as many. */
  readonly pageSize?: number;
  /** Default: the global fetch. */
  readonly fetch?: FetchLike;
  /** Waits between retries (default setTimeout). */
  readonly sleep?: (ms: number) => Promise<void>;
  /** The clock of the state's timestamps and of Retry-After dates (default Date.now). */
  readonly now?: () => Date | number;
  /** Retries of one request after 429, 502, 503, 504 or a network failure (default 5). */
  readonly maxRetries?: number;
  /** The longest Retry-After honoured, ms (default 120,000); a longer one fails the run. */
  readonly maxRetryDelayMs?: number;
  /** Data directory: rewrite the files once this many changes are pending (default 20,000; see DESIGN.md). */
  readonly flushRecords?: number;
  readonly onProgress?: (progress: ReplicationProgress) => void;
}

export interface ResourceCounts {
  /** Records inserted or replaced (a record changed twice during the run counts twice). */
  upserted: number;
  /** Records removed: gone from the upstream, or children of a removed listing. */
  removed: number;
  /** Pages of records fetched (changes, backfill and listings fetched for their children). */
  pages: number;
  /** Pages of the key listing. */
  keyPages: number;
  /** Records fetched by key because the changes did not bring them (part of `upserted`). */
  backfilled: number;
  /** Children left out because the upstream does not show their listing. */
  orphans: number;
}

export interface ReplicationResult {
  /** The upstream's data service root. */
  readonly from: string;
  /** Whether this run continued one that had stopped before completing. */
  readonly resumed: boolean;
  /** Whether this run read the upstream's EntityEvent log instead of listing every key. */
  readonly incremental: boolean;
  /** HTTP requests sent, retries included. */
  readonly requests: number;
  readonly resources: Readonly<Record<ReplicatedResource, Readonly<ResourceCounts>>>;
}

export interface ReplicationProgress {
  readonly phase: 'changes' | 'keys' | 'removed' | 'backfill' | 'orphans' | 'retry' | 'flush' | 'done' | 'skipped';
  readonly resource?: ReplicatedResource;
  /** One line for a person. */
  readonly message: string;
}

const DEFAULT_PAGE_SIZE = 1000;
const MAX_PAGE_SIZE = 50_000;
/** Keys per `Key in (...)` request, and their encoded length at most. */
const KEY_BATCH = 100;
const KEY_BATCH_CHARS = 4000;
const DERIVED = new Set(DERIVED_PROPERTY_FIELDS.map((f) => f.name));

/** Replicates `from` into `to` (or `sink`) and returns what it did per resource. */
export async function replicate(options: ReplicateOptions): Promise<ReplicationResult> {
  const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
    throw new ReplicationError('InvalidArgument', `pageSize takes an integer from 1 to ${MAX_PAGE_SIZE}, got ${String(options.pageSize)}`);
  }
  if (typeof options.token !== 'string' || !/^[\x21-\x7e]+$/.test(options.token)) {
    throw new ReplicationError('InvalidArgument', 'the token must be a non-empty string of printable ASCII without spaces');
  }
  if ((options.to === undefined) === (options.sink === undefined))
    throw new ReplicationError('InvalidArgument', 'give either a target directory (to) or a sink');
  const maxRetries = options.maxRetries ?? 5;
  if (!Number.isInteger(maxRetries) || maxRetries < 0)
    throw new ReplicationError('InvalidArgument', `maxRetries takes a non-negative integer, got ${String(options.maxRetries)}`);
  const root = serviceRoot(options.from);
  const clock = options.now ?? Date.now;
  const now = (): number => {
    const t = clock();
    return typeof t === 'number' ? t : t.getTime();
  };
  const progress = options.onProgress ?? ((): void => undefined);
  const upstream = new Upstream({
    root,
    token: options.token,
    fetch: options.fetch ?? ((url, init) => fetch(url, init)),
    sleep: options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
    now,
    maxRetries,
    maxRetryDelayMs: options.maxRetryDelayMs ?? 120_000,
    onRetry: (r: RetryInfo) =>
      progress({
        phase: 'retry',
        message: `${r.status === null ? 'network failure' : `upstream answered ${r.status}`}; retry ${r.attempt} in ${(r.delayMs / 1000).toFixed(1)} s: ${r.url}`,
      }),
  });
  const owned =
    options.sink !== undefined
      ? null
      : await DirectorySink.open(options.to!, {
          flushRecords: options.flushRecords,
          onFlush: (files, records) => progress({ phase: 'flush', message: `wrote ${files.join(', ')} (${records.toLocaleString('en-US')} records in all)` }),
        });
  try {
    return await new Replicator(upstream, options.sink ?? owned!, pageSize, now, progress).run();
  } finally {
    owned?.close();
  }
}

interface WorkingState {
  field: string | null;
  cursor: Cursor | null;
}

/** A row's place in the changes order: timestamp (epoch ms, null lowest), then key. */
interface Position {
  readonly ms: number | null;
  readonly cursor: Cursor;
}

class Replicator {
  private readonly resources = {} as Record<ReplicatedResource, WorkingState>;
  private readonly counts = {} as Record<ReplicatedResource, ResourceCounts>;
  /** Optional resources this upstream does not offer (skipped in this run). */
  private readonly absent = new Set<ReplicatedResource>();
  private startedAt = '';
  private finishedAt: string | null = null;
  private status: ReplicationState['status'] = 'running';
  /** The log position the state records: null until a run completes with one. */
  private events: EventsState | null = null;

  constructor(
    private readonly upstream: Upstream,
    private readonly sink: ReplicationSink,
    private readonly pageSize: number,
    private readonly now: () => number,
    private readonly progress: (p: ReplicationProgress) => void,
  ) {
    for (const r of REPLICATED_RESOURCES) this.counts[r] = { upserted: 0, removed: 0, pages: 0, keyPages: 0, backfilled: 0, orphans: 0 };
  }

  async run(): Promise<ReplicationResult> {
    const saved = await this.sink.readState();
    if (saved !== null && saved.from !== this.upstream.root) {
      throw new ReplicationError('TargetMismatch', `the target was replicated from ${saved.from}, not ${this.upstream.root}; replicate into another directory`);
    }
    const resumed = saved?.status === 'running';
    const types = entityTypes(await this.upstream.metadata());
    for (const r of REPLICATED_RESOURCES) {
      const info = types.get(r);
      if (info === undefined && OPTIONAL_RESOURCES.includes(r)) {
        this.skip(r, 'its $metadata declares no such entity type');
        continue;
      }
      if (info === undefined || info.key !== keyOf(r)) {
        throw new ReplicationError('UnsupportedUpstream', `the upstream's $metadata declares no ${r} entity type keyed by ${keyOf(r)}`, {
          url: `${this.upstream.root}/$metadata`,
        });
      }
      const field = ['ModificationTimestamp', `${r}ModificationTimestamp`].find((f) => info.properties.get(f) === 'Edm.DateTimeOffset') ?? null;
      const before = saved?.resources[r];
      // Without a timestamp field every run is a full pass by key; only an interrupted one resumes.
      const keep = before !== undefined && before.field === field && (field !== null || resumed);
      this.resources[r] = { field, cursor: keep ? before.cursor : null };
    }
    // The upstream's change log, when it has one and the token's sources can be compared.
    const logged = ['EntityEventSequence', 'ResourceName', 'ResourceRecordKey'].every((f) => types.get('EntityEvent')?.properties.has(f));
    const account = logged ? await this.upstream.account() : null;
    this.startedAt = new Date(this.now()).toISOString();
    if (account !== null && saved !== null && saved.status === 'complete' && (await this.logContinues(saved, account))) {
      return this.incremental(saved.events!, account, resumed);
    }
    // Where the log stands before the keys are listed: what changes during this run is replayed next time.
    const newest = account === null ? null : await this.newestEvent();
    await this.sink.commit(this.state(), false);
    try {
      for (const r of this.active()) await this.changes(r);
      for (const r of this.active()) await this.reconcile(r);
      // What changed while the passes above ran (a listing modified during the Media pass).
      for (const r of this.active()) await this.changes(r);
      await this.complete(newest === null ? null : { ...newest, account: account! });
    } catch (err) {
      return this.abandon(err);
    }
    const summary = this.active()
      .map((r) => `${r} +${this.counts[r].upserted.toLocaleString('en-US')} -${this.counts[r].removed.toLocaleString('en-US')}`)
      .join(', ');
    this.progress({ phase: 'done', message: `done: ${summary} (${this.upstream.requests} requests)` });
    return { from: this.upstream.root, resumed, incremental: false, requests: this.upstream.requests, resources: this.counts };
  }

  /**
   * Whether the saved log position can be trusted: the last run completed with a position, the
   * account sees the same sources, every resource replicated then is replicated now, and the event
   * at the saved sequence still names the same record (another one, or none, means the upstream's
   * log restarted or was compacted past it).
   */
  private async logContinues(saved: ReplicationState, account: string): Promise<boolean> {
    const e = saved.events;
    if (e === undefined || e === null || e.account !== account) return false;
    const active = this.active();
    if (Object.keys(saved.resources).length !== active.length || active.some((r) => saved.resources[r] === undefined)) return false;
    const event = await this.upstream.entity(`EntityEvent(${e.sequence})`);
    return event !== null && event.ResourceName === e.resourceName && event.ResourceRecordKey === e.recordKey;
  }

  /** The newest event of the upstream's log (`$orderby=EntityEventSequence desc&$top=1`), null when it is empty. */
  private async newestEvent(): Promise<Omit<EventsState, 'account'> | null> {
    const page = await this.upstream.page('EntityEvent', { $orderby: 'EntityEventSequence desc', $top: '1', $select: EVENT_FIELDS }, 1);
    return page.value.length === 0 ? null : eventOf(page.value[0], page.url, 0);
  }

  /**
   * An incremental run by the upstream's log: the changes passes from each cursor (step 2), then
   * the events after the saved sequence (keyset-paged by sequence), their records fetched by key per resource (listings first), those returned upserted
   * and those not returned removed (gone, or no longer visible); then the last sequence recorded.
   */
  private async incremental(from: EventsState, account: string, resumed: boolean): Promise<ReplicationResult> {
    this.events = from;
    await this.sink.commit(this.state(), false);
    const named = new Map<string, Set<string>>();
    let last: Omit<EventsState, 'account'> = from;
    try {
      // The cursor passes still run (an empty page each when nothing changed): a record modified
      // behind a log that restarted in step with the old one is still found by its timestamp.
      for (const r of this.active()) await this.changes(r);
      for (;;) {
        const page = await this.upstream.page(
          'EntityEvent',
          { $filter: `EntityEventSequence gt ${last.sequence}`, $orderby: 'EntityEventSequence asc', $top: String(this.pageSize), $select: EVENT_FIELDS },
          this.pageSize,
        );
        for (let i = 0; i < page.value.length; i++) {
          const e = eventOf(page.value[i], page.url, i);
          if (e.sequence <= last.sequence) {
            throw new ReplicationError('BadResponse', `EntityEvent rows are not in the requested order: ${e.sequence} comes after ${last.sequence}`, {
              url: page.url,
            });
          }
          let keys = named.get(e.resourceName);
          if (keys === undefined) named.set(e.resourceName, (keys = new Set()));
          keys.add(e.recordKey);
          last = e;
        }
        if (page.value.length === 0 || !moreAfter(page, this.pageSize)) break;
      }
      for (const r of this.active()) {
        const keys = [...(named.get(r) ?? [])];
        if (keys.length === 0) continue;
        this.progress({ phase: 'backfill', resource: r, message: `${r}: fetching ${keys.length.toLocaleString('en-US')} changed records by key` });
        const found = new Set<string>();
        await this.fetchByKeys(r, keys, found);
        const gone = keys.filter((k) => !found.has(k) && this.sink.has(r, k));
        if (gone.length > 0) this.countRemoved(r, await this.sink.remove(r, gone));
      }
      await this.complete({ ...last, account });
    } catch (err) {
      return this.abandon(err);
    }
    this.progress({ phase: 'done', message: `done by the upstream's EntityEvent up to ${last.sequence} (${this.upstream.requests} requests)` });
    return { from: this.upstream.root, resumed, incremental: true, requests: this.upstream.requests, resources: this.counts };
  }

  /** Marks the run complete at this log position and makes everything durable. */
  private async complete(events: EventsState | null): Promise<void> {
    this.status = 'complete';
    this.finishedAt = new Date(this.now()).toISOString();
    this.events = events;
    await this.sink.commit(this.state(), true);
  }

  /** Keeps what was applied (the state says `running` and where each pass stopped) and rethrows `err`. */
  private async abandon(err: unknown): Promise<never> {
    this.status = 'running';
    this.finishedAt = null;
    try {
      await this.sink.commit(this.state(), true);
    } catch {
      // the first error is the one to report
    }
    throw err;
  }

  private countRemoved(resource: ReplicatedResource, removed: RemovedCounts): void {
    const parts: string[] = [];
    for (const r of REPLICATED_RESOURCES) {
      const n = removed[r] ?? 0;
      this.counts[r].removed += n;
      if (n > 0) parts.push(`${n.toLocaleString('en-US')} ${r}`);
    }
    this.progress({ phase: 'removed', resource, message: `${resource}: removed ${parts.join(', ')} no longer in the upstream` });
  }

  /** The resources this run replicates (the optional ones the upstream lacks left out). */
  private active(): ReplicatedResource[] {
    return REPLICATED_RESOURCES.filter((r) => !this.absent.has(r));
  }

  /** Leaves an optional resource out of this run: the upstream does not offer it. */
  private skip(resource: ReplicatedResource, why: string): void {
    this.absent.add(resource);
    this.progress({ phase: 'skipped', resource, message: `${resource}: skipped, the upstream does not offer it (${why})` });
  }

  private state(): ReplicationState {
    const resources: Partial<Record<ReplicatedResource, ResourceState>> = {};
    for (const r of this.active()) resources[r] = { field: this.resources[r].field, cursor: this.resources[r].cursor };
    return {
      version: 1,
      from: this.upstream.root,
      status: this.status,
      startedAt: this.startedAt,
      finishedAt: this.finishedAt,
      resources,
      events: this.events,
    };
  }

  /** The changes since the cursor, page by page, each committed with the cursor after it. */
  private async changes(resource: ReplicatedResource): Promise<void> {
    const st = this.resources[resource];
    const key = keyOf(resource);
    const counts = this.counts[resource];
    for (;;) {
      let page: Page;
      try {
        page = await this.upstream.page(resource, { ...changesOptions(key, st.field, st.cursor), $top: String(this.pageSize) }, this.pageSize);
      } catch (err) {
        if (!(err instanceof ReplicationError && err.code === 'HttpError' && err.status === 404 && OPTIONAL_RESOURCES.includes(resource))) throw err;
        this.skip(resource, `${err.url ?? resource} answered 404`);
        return;
      }
      let last: Position | null = st.cursor === null ? null : { ms: st.cursor.timestamp === null ? null : Date.parse(st.cursor.timestamp), cursor: st.cursor };
      for (let i = 0; i < page.value.length; i++) {
        const pos = this.positionOf(resource, st.field, page.value[i], page.url, i);
        if (last !== null && !after(pos, last)) {
          throw new ReplicationError(
            'BadResponse',
            `${resource} rows are not in the requested order: ${describe(pos.cursor)} comes after ${describe(last.cursor)}`,
            { url: page.url },
          );
        }
        last = pos;
      }
      if (last === null || page.value.length === 0) {
        if (page.more) throw new ReplicationError('BadResponse', 'a page without rows carries an @odata.nextLink', { url: page.url });
        return;
      }
      await this.place(resource, page);
      st.cursor = last.cursor;
      counts.pages++;
      await this.sink.commit(this.state(), false);
      this.progress({
        phase: 'changes',
        resource,
        message: `${resource}: page ${counts.pages}, ${counts.upserted.toLocaleString('en-US')} records (up to ${describe(st.cursor)})`,
      });
      if (!moreAfter(page, this.pageSize)) return;
    }
  }

  /** Removes what the upstream no longer lists and fetches what it lists and the sink lacks. */
  private async reconcile(resource: ReplicatedResource): Promise<void> {
    const listed = await this.keyPass(resource);
    const gone = this.sink.keys(resource).filter((k) => !listed.has(k));
    if (gone.length > 0) this.countRemoved(resource, await this.sink.remove(resource, gone));
    const missing: string[] = [];
    for (const k of listed) if (!this.sink.has(resource, k)) missing.push(k);
    listed.clear();
    if (missing.length > 0) {
      this.progress({ phase: 'backfill', resource, message: `${resource}: fetching ${missing.length.toLocaleString('en-US')} records by key` });
      const placed = await this.fetchByKeys(resource, missing);
      this.counts[resource].backfilled += placed;
    }
    await this.sink.commit(this.state(), false);
  }

  /** Every key the upstream lists, keyset-paged by key. */
  private async keyPass(resource: ReplicatedResource): Promise<Set<string>> {
    const key = keyOf(resource);
    const listed = new Set<string>();
    let last: string | null = null;
    for (;;) {
      const filter: string | undefined = last === null ? undefined : `${key} gt ${stringLiteral(last)}`;
      const size = Math.min(MAX_PAGE_SIZE, this.pageSize * 10);
      const page = await this.upstream.page(resource, { $filter: filter, $select: key, $orderby: `${key} asc`, $top: String(size) }, size);
      this.counts[resource].keyPages++;
      for (let i = 0; i < page.value.length; i++) {
        const k = keyOfRow(resource, page.value[i], page.url, i);
        if (last !== null && compareOrdinal(k, last) <= 0) {
          throw new ReplicationError('BadResponse', `${resource} keys are not in ascending order: '${k}' comes after '${last}'`, { url: page.url });
        }
        listed.add(k);
        last = k;
      }
      this.progress({ phase: 'keys', resource, message: `${resource}: ${listed.size.toLocaleString('en-US')} keys listed` });
      if (!moreAfter(page, size)) return listed;
      if (page.value.length === 0) throw new ReplicationError('BadResponse', 'a page without rows carries an @odata.nextLink', { url: page.url });
    }
  }

  /** Fetches records by key (`Key in (...)`, batched) and places them; returns how many were placed. `found` collects the keys returned. */
  private async fetchByKeys(resource: ReplicatedResource, keys: readonly string[], found?: Set<string>): Promise<number> {
    const key = keyOf(resource);
    let placed = 0;
    for (let i = 0; i < keys.length;) {
      const wanted = new Set<string>();
      for (let chars = 0; i < keys.length && wanted.size < KEY_BATCH && chars < KEY_BATCH_CHARS; i++) {
        wanted.add(keys[i]);
        chars += encodeURIComponent(stringLiteral(keys[i])).length + 1;
      }
      while (wanted.size > 0) {
        const list = [...wanted].map(stringLiteral).join(',');
        const page = await this.upstream.page(resource, { $filter: `${key} in (${list})` }, wanted.size);
        page.value.forEach((row, n) => {
          const k = keyOfRow(resource, row, page.url, n);
          if (!wanted.delete(k)) throw new ReplicationError('BadResponse', `${resource} '${k}' was not asked for`, { url: page.url });
          found?.add(k);
        });
        this.counts[resource].pages++;
        placed += await this.place(resource, page);
        if (!page.more) break;
        if (page.value.length === 0) throw new ReplicationError('BadResponse', 'a page without rows carries an @odata.nextLink', { url: page.url });
      }
    }
    return placed;
  }

  /**
   * Writes a page's records to the sink. Children whose listing the sink lacks get it fetched
   * first; those whose listing the upstream does not show are left out (orphans).
   */
  private async place(resource: ReplicatedResource, page: Page): Promise<number> {
    let records = page.value.map((row) => clean(resource, row));
    if (isReplicatedChild(resource)) {
      const absent = new Set<string>();
      for (const r of records) {
        const parent = parentKeyOf(resource, r);
        if (parent === undefined) {
          throw new ReplicationError(
            'BadRecord',
            `${resource} '${String(r[keyOf(resource)])}' has no ${CATALOG[resource].parent!.field} to link it to its listing`,
            { url: page.url },
          );
        }
        if (parent !== null && !this.sink.has('Property', parent)) absent.add(parent);
      }
      if (absent.size > 0) {
        const fetched = await this.fetchByKeys('Property', [...absent]);
        this.counts.Property.backfilled += fetched;
        const kept = records.filter((r) => {
          const parent = parentKeyOf(resource, r);
          return parent === null || this.sink.has('Property', parent!);
        });
        if (kept.length < records.length) {
          this.counts[resource].orphans += records.length - kept.length;
          this.progress({
            phase: 'orphans',
            resource,
            message: `${resource}: left out ${records.length - kept.length} records whose listing the upstream does not show`,
          });
        }
        records = kept;
      }
    }
    if (records.length > 0) await this.sink.upsert(resource, records, page.url);
    this.counts[resource].upserted += records.length;
    return records.length;
  }

  private positionOf(resource: ReplicatedResource, field: string | null, row: Record<string, unknown>, url: string, i: number): Position {
    const key = keyOfRow(resource, row, url, i);
    if (field === null) return { ms: null, cursor: { timestamp: null, key } };
    const value = row[field];
    if (value === undefined || value === null) return { ms: null, cursor: { timestamp: null, key } };
    if (typeof value !== 'string' || !TIMESTAMP.test(value) || Number.isNaN(Date.parse(value))) {
      throw new ReplicationError('BadRecord', `${resource} '${key}' has a malformed ${field}: ${JSON.stringify(value)?.slice(0, 80)}`, { url });
    }
    return { ms: Date.parse(value), cursor: { timestamp: value, key } };
  }
}

/**
 * Whether rows remain after a page asked for with `$top=top`: the upstream's nextLink says so when
 * it cut the page shorter (server-driven paging); a full page may be followed by more (reso-engine
 * gives no nextLink to a request whose $top it answered in full), so the next page is asked for.
 */
const moreAfter = (page: Page, top: number): boolean => page.more || page.value.length >= top;

/** The options of a changes page after `cursor`: keyset paging on (field, key). */
function changesOptions(key: string, field: string | null, cursor: Cursor | null): Record<string, string | undefined> {
  if (field === null) return { $filter: cursor === null ? undefined : `${key} gt ${stringLiteral(cursor.key)}`, $orderby: `${key} asc` };
  let filter: string | undefined;
  if (cursor !== null) {
    const k = stringLiteral(cursor.key);
    // The range conjunct first: reso-engine serves `field ge t` from the column's sorted permutation.
    filter =
      cursor.timestamp === null
        ? `(${field} eq null and ${key} gt ${k}) or ${field} ne null`
        : `${field} ge ${cursor.timestamp} and (${field} gt ${cursor.timestamp} or ${key} gt ${k})`;
  }
  return { $filter: filter, $orderby: `${field} asc,${key} asc` };
}

/**
 * Whether `a` may follow `b` in (timestamp, key) order, null timestamps lowest: a guard against
 * an upstream that ignores $filter or $orderby. Two texts of one millisecond (`.1234` and `.1235`)
 * are not compared by key, since an upstream may order them at a finer precision than ours.
 */
function after(a: Position, b: Position): boolean {
  if (a.ms !== b.ms) {
    if (a.ms === null) return false;
    if (b.ms === null) return true;
    return a.ms > b.ms;
  }
  return a.cursor.timestamp !== b.cursor.timestamp || compareOrdinal(a.cursor.key, b.cursor.key) > 0;
}

const EVENT_FIELDS = 'EntityEventSequence,ResourceName,ResourceRecordKey';

/** An EntityEvent row's sequence and the record it names, checked for shape. */
function eventOf(row: Record<string, unknown>, url: string, i: number): Omit<EventsState, 'account'> {
  const { EntityEventSequence: sequence, ResourceName: resourceName, ResourceRecordKey: recordKey } = row;
  if (!Number.isSafeInteger(sequence) || typeof resourceName !== 'string' || typeof recordKey !== 'string' || recordKey === '') {
    throw new ReplicationError('BadResponse', `EntityEvent row ${i + 1} of the page lacks a sequence, resource name or record key`, { url });
  }
  return { sequence: sequence as number, resourceName, recordKey };
}

const describe = (c: Cursor): string => (c.timestamp === null ? `'${c.key}'` : `${c.timestamp} '${c.key}'`);

function keyOfRow(resource: ReplicatedResource, row: Record<string, unknown>, url: string, i: number): string {
  const k = row[keyOf(resource)];
  if (typeof k !== 'string' || k === '') {
    throw new ReplicationError('MissingKey', `${resource} record ${i + 1} of the page has no ${keyOf(resource)}`, { url });
  }
  return k;
}

/**
 * The record as a data file holds it: no nulls (absent and null are the same to the loader), no
 * empty collections (a collection the data leaves out reads as `[]`, so `[]` and absent are the
 * same answer), no annotations (`@odata.*`), and for Property none of the fields the engine
 * derives (DaysOnMarket, Location, RawLocation, service_*), which the loader would ignore.
 */
function clean(resource: ReplicatedResource, row: Record<string, unknown>): JsonRecord {
  const out: JsonRecord = {};
  for (const [name, value] of Object.entries(row)) {
    if (value === null || (Array.isArray(value) && value.length === 0) || name.includes('@') || (resource === 'Property' && DERIVED.has(name))) continue;
    out[name] = value;
  }
  return out;
}
