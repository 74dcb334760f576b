/**
 * Entry points of the store: `loadDataDirectory` (the data directory of SERVICE.md §6, streamed)
 * and `loadRecords` (in-memory records). Property is loaded first, so that each child record is
 * linked to its listing (or rejected) as it arrives; Member and Office (not linked) last.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import type { Worker } from 'node:worker_threads';
import { startWorker } from '../util/worker.js';
import { QueryError } from '../errors.js';
import { CATALOG } from '../schema/catalog.js';
import {
  CHILD_RESOURCES,
  EVENT_SOURCED,
  RECORD_RESOURCES,
  RESOURCE_NAMES,
  ROSTER_RESOURCES,
  isRecordResource,
  type ChildResourceName,
  type RecordResourceName,
  type ResourceName,
} from '../schema/types.js';
import { eventRecord, sourceOf } from './events.js';
import { ParentKeyColumn } from './columns.js';
import { eventLogTable, eventRowsOf } from './event-log.js';
import { buildChildIndex, type ChildIndex } from './children.js';
import { DataError, type DataErrorInfo } from './errors.js';
import { TableBuilder, type LocalFieldInfo } from './ingest.js';
import { SkipLog } from './record.js';
import { linkToParent } from './link.js';
import { newLookupRecords } from './lookups.js';
import {
  PhaseClock,
  WORKER_KIND,
  type ChildDone,
  type ChildFile,
  type ChildJob,
  type ChildMessage,
  type ListingsMessage,
  type LoadPhase,
  type WorkerLinks,
} from './load-worker.js';
import { unpackTable } from './transfer.js';
import { readRecords, type FileFormat } from './read.js';
import { Store, type ResourceLoadReport } from './store.js';
import type { Table } from './table.js';

export interface LoadProgress {
  readonly resource: ResourceName;
  readonly file: string;
  /** Bytes of the file read so far (compressed bytes for .gz). */
  readonly bytesRead: number;
  readonly bytesTotal: number;
  /** Records loaded so far from this file. */
  readonly records: number;
}

export interface LoadOptions {
  /** Skip bad records (and report them) instead of failing the load at the first one. */
  readonly skipBadRecords?: boolean;
  /** The engine's clock, for DaysOnMarket; defaults to the system clock. */
  readonly now?: () => Date | number;
  /** @internal Tests: false sends every record through JSON.parse (the generic path). */
  readonly fastPath?: boolean;
  /** @internal Diagnostics (the load bench): each timed phase of the load, per thread. */
  readonly onPhase?: (phase: LoadPhase) => void;
}

export interface LoadDirectoryOptions extends LoadOptions {
  /**
   * Called after each chunk read (about every MiB). With parallel loading, Media's progress
   * arrives interleaved with the other files'.
   */
  readonly onProgress?: (progress: LoadProgress) => void;
  /**
   * Load Media in a worker thread beside Property: true forces it, false never; by default it is
   * used for Media files of 32 MiB and more (8 MiB gzip-compressed) when there is more than one CPU.
   */
  readonly parallel?: boolean;
  /**
   * Called once with the loaded Property table (final: children never change it), while Media
   * may still be parsing in the worker thread: indexes over the listings built here use this
   * thread's time that would otherwise go to waiting. Not called when the load fails first.
   */
  readonly onListings?: (property: Table) => void;
}

export interface RecordsInput {
  readonly Property?: readonly unknown[];
  readonly Media?: readonly unknown[];
  readonly OpenHouse?: readonly unknown[];
  readonly PropertyChange?: readonly unknown[];
  readonly Member?: readonly unknown[];
  readonly Office?: readonly unknown[];
}

export interface LoadRecordsOptions extends LoadOptions {
  /** accounts.json content, checked as loadDataDirectory checks the file. */
  readonly accounts?: unknown;
  /** mls_profiles.json content. */
  readonly profiles?: unknown;
}

const EXTENSIONS: ReadonlyArray<readonly [ext: string, format: FileFormat, gzip: boolean]> = [
  ['.jsonl', 'jsonl', false],
  ['.jsonl.gz', 'jsonl', true],
  ['.json', 'json', false],
  ['.json.gz', 'json', true],
];

function clockOf(now: LoadOptions['now']): () => number {
  if (now === undefined) return () => Date.now();
  return () => {
    const t = now();
    return typeof t === 'number' ? t : t.getTime();
  };
}

/** The data file of a resource in `dir`, or null; two candidates are an error. */
function findDataFile(dir: string, resource: ResourceName, names: ReadonlySet<string>): DataFile | null {
  const found = EXTENSIONS.filter(([ext]) => names.has(resource + ext));
  if (found.length > 1) {
    throw new DataError({
      code: 'AmbiguousDataFile',
      file: found.map(([ext]) => resource + ext).join(', '),
      line: 0,
      field: null,
      reason: `${resource} has ${found.length} data files; keep one`,
    });
  }
  if (found.length === 0) return null;
  const [ext, format, gzip] = found[0];
  return { file: path.join(dir, resource + ext), format, gzip };
}

interface DataFile {
  readonly file: string;
  readonly format: FileFormat;
  readonly gzip: boolean;
}

/** What one resource contributes to the load report. */
interface ResourcePart {
  readonly report: ResourceLoadReport;
  readonly skipLog: { readonly total: number; readonly byCode: Readonly<Record<string, number>>; readonly samples: readonly DataErrorInfo[] };
  readonly localFields: readonly LocalFieldInfo[];
}

class Loader {
  readonly tables = {} as Record<ResourceName, Table>;
  private readonly parts = {} as Record<ResourceName, ResourcePart>;
  private readonly logs = new Map<TableBuilder, SkipLog>();
  readonly now: () => number;
  bytesRead = 0;
  parallel = false;
  readonly clock: PhaseClock;

  constructor(private readonly options: LoadDirectoryOptions) {
    this.now = clockOf(options.now);
    this.clock = new PhaseClock('main', options.onPhase);
  }

  builder(resource: ResourceName, file: string | null): TableBuilder {
    const skipLog = new SkipLog();
    const b = new TableBuilder(resource, {
      skipBadRecords: this.options.skipBadRecords === true,
      skipLog,
      now: this.now,
      parent: CATALOG[resource].parent === null ? undefined : this.tables.Property,
      fastPath: this.options.fastPath,
      canonicalKeyIndex: true,
      // the log's keys are its sequence numbers, unique as written
      deferKeyIndex: resource === 'EntityEvent',
    });
    this.logs.set(b, skipLog);
    if (file !== null) b.file = file;
    return b;
  }

  finish(b: TableBuilder, file: string | null, absent = false): void {
    const table = b.finish();
    this.adopt(b.resource, table, {
      report: { file, absent, records: table.rowCount, skipped: b.skipped, ignoredFields: b.ignoredFields() },
      skipLog: this.logs.get(b)!,
      localFields: b.localFields(),
    });
  }

  /** What the worker needs to link its rows and write the event log: Property's keys, the event rows of the resources loaded here. */
  listingsForWorker(): ListingsMessage['listings'] {
    const property = this.tables.Property;
    const state = property.keyIndex.state;
    return {
      keys: { bytes: property.keyColumn.bytes, offsets: property.keyColumn.offsets },
      keyIndex: state,
      events: EVENT_SOURCED.filter((r) => this.tables[r] !== undefined).map((r) => eventRowsOf(this.tables[r], property)),
    };
  }

  /** A worker's child segment linked to Property: by the worker's links when it resolved them; null when a listing is missing. */
  linkChild(child: Table, links: WorkerLinks | null): Table | null {
    if (links === null) return linkToParent(child, this.tables.Property);
    if (links === 'failed') return null;
    if (links === 'absent') return child;
    const property = this.tables.Property;
    return child.withColumn(
      CATALOG[child.resource].parent!.field,
      new ParentKeyColumn(links.parentRow, property.keyColumn, links.unlinked === null ? null : new Map(links.unlinked)),
    );
  }

  /** Hands the loaded Property table to `onListings` (see LoadDirectoryOptions). */
  listings(): void {
    const hook = this.options.onListings;
    if (hook === undefined) return;
    hook(this.tables.Property);
    this.clock.lap('onListings (indexes)');
  }

  adopt(resource: ResourceName, table: Table, part: ResourcePart): void {
    this.tables[resource] = table;
    this.parts[resource] = part;
  }

  /** Loads one resource's file (or nothing, for an absent file) on this thread. */
  async loadFile(resource: ResourceName, found: DataFile | null): Promise<void> {
    const label = found ? path.basename(found.file) : null;
    const b = this.builder(resource, label);
    if (found) {
      const bytesTotal = statSync(found.file).size;
      let bytesRead = 0;
      let reserved = found.gzip;
      await readRecords(
        found.file,
        {
          format: found.format,
          gzip: found.gzip,
          label: label!,
          onChunk: (n) => {
            bytesRead = n;
            if (!reserved && b.rowCount >= 256) {
              // Size the columns once from the first chunk's bytes per record.
              reserved = true;
              b.reserve(Math.ceil((bytesTotal / n) * b.rowCount * 1.02));
            }
            this.options.onProgress?.({ resource, file: label!, bytesRead: n, bytesTotal, records: b.rowCount });
          },
        },
        (src, s, e, line) => b.addBytes(src, s, e, line),
      );
      this.bytesRead += bytesRead;
    }
    this.clock.lap(`${resource} read`);
    this.finish(b, label, found === null);
    this.clock.lap(`${resource} finish`);
  }

  /**
   * The initial EntityEvent log: one event per record of each event-sourced resource, in
   * resource order then row (load) order, numbered from 1.
   */
  private loadEvents(): void {
    const property = this.tables.Property;
    if (this.options.fastPath !== false) {
      this.adoptEvents(
        eventLogTable(
          EVENT_SOURCED.map((r) => eventRowsOf(this.tables[r], property)),
          this.now,
        ),
        {},
      );
      return;
    }
    const b = this.builder('EntityEvent', null);
    this.eventsAsJson(b);
    this.finish(b, null);
  }

  /** The EntityEvent log written elsewhere (whole, or in the worker). */
  adoptEvents(log: Table, ignoredFields: Record<string, number>): void {
    this.adopt('EntityEvent', log, {
      report: { file: null, absent: false, records: log.rowCount, skipped: 0, ignoredFields },
      skipLog: { total: 0, byCode: {}, samples: [] },
      localFields: [],
    });
  }

  /** The events as JSON lines through the loader's byte path (the reference for eventLogTable). */
  private eventsAsJson(b: TableBuilder): void {
    let sequence = 0;
    const property = this.tables.Property;
    for (const r of EVENT_SOURCED) {
      const table = this.tables[r];
      const parent = CATALOG[r].parent;
      const link = parent === null ? null : table.column(parent.field);
      const listings = link instanceof ParentKeyColumn ? link.parentRow : null;
      for (let from = 0; from < table.rowCount; from += EVENT_SLICE) {
        const to = Math.min(table.rowCount, from + EVENT_SLICE);
        const lines: string[] = [];
        for (let row = from; row < to; row++) {
          const source = sourceOf(table, row, property, parent === null ? null : listings === null ? -1 : listings[row]);
          lines.push(JSON.stringify(eventRecord(sequence + 1 + row - from, { resource: r, key: table.keyOf(row), source }, null)));
        }
        const bytes = Buffer.from(lines.join('\n'), 'utf8');
        let s = 0;
        for (let i = 0; i < lines.length; i++) {
          const e = i + 1 < lines.length ? bytes.indexOf(10, s) : bytes.length;
          b.addBytes(bytes, s, e, ++sequence);
          s = e + 1;
        }
      }
    }
  }

  /** Every resource's part of the report, merged in resource order (as a sequential load would). */
  store(accounts: unknown, profiles: unknown): Store {
    // the Lookup resource: every lookup value the loaded rows carry, and the standard ones of their lookups
    const lookups = newLookupRecords(
      (r) => this.tables[r],
      () => null,
      () => false,
    );
    const b = this.builder('Lookup', null);
    for (let i = 0; i < lookups.length; i++) b.addValue(lookups[i], i + 1);
    this.finish(b, null);
    this.clock.lap('Lookup');

    // the Media worker wrote the log when it could
    if (this.parts.EntityEvent === undefined) this.loadEvents();
    this.clock.lap('EntityEvent');
    const parentCount = this.tables.Property.rowCount;
    const children = {} as Record<ChildResourceName, ChildIndex>;
    for (const r of CHILD_RESOURCES) {
      const def = CATALOG[r];
      children[r] = buildChildIndex(this.tables[r], parentCount, def.parent!.field, def.childOrder);
      this.clock.lap(`${r} children`);
    }
    const resources = {} as Record<ResourceName, ResourceLoadReport>;
    const skipped = new SkipLog();
    const localFields: LocalFieldInfo[] = [];
    for (const r of RESOURCE_NAMES) {
      const part = this.parts[r];
      resources[r] = part.report;
      skipped.merge(part.skipLog);
      localFields.push(...part.localFields);
    }
    const report = {
      resources,
      skipped: { total: skipped.total, byCode: skipped.byCode, samples: skipped.samples },
      localFields,
      bytesRead: this.bytesRead,
      parallel: this.parallel,
    };
    return new Store(this.tables, children, report, accounts, profiles, this.now);
  }
}

/** Events the initial log writes as one slice of JSON lines. */
const EVENT_SLICE = 4096;

/** With a Media file at least this large, the child files load in a worker thread beside Property (see ChildWorker). */
const PARALLEL_BYTES = 32 << 20;

/**
 * The child files (Media, about two thirds of a data set's bytes, then OpenHouse and
 * PropertyChange) load in a worker thread while this thread loads Property, Member and Office and
 * builds the listings' indexes; their parent links are resolved when both are done. When the
 * worker meets anything but clean data in a file (a bad record in strict mode, a duplicate key, a
 * child without its listing) or cannot start, that file and the ones after it are loaded again on
 * this thread, so errors, skipped records and the resulting store are exactly those of a
 * sequential load.
 */
class ChildWorker {
  readonly result: Promise<ChildDone | null>;
  private readonly worker: Worker | null;

  constructor(job: ChildJob, onProgress: (m: { resource: ChildResourceName; bytesRead: number; records: number }) => void) {
    let worker: Worker | null = null;
    try {
      worker = startWorker(import.meta.url, 'load-worker', { workerData: job });
    } catch {
      worker = null;
    }
    this.worker = worker;
    this.result = new Promise((resolve) => {
      if (worker === null) return resolve(null);
      worker.on('message', (m: ChildMessage) => {
        if (m.type === 'progress') onProgress(m);
        else resolve(m.type === 'done' ? m : null);
      });
      worker.on('error', () => resolve(null));
      worker.on('exit', () => resolve(null));
    });
  }

  private sent = false;

  /** Sends the worker what it needs to link its segment and write the event log (once; null: nothing). */
  sendListings(listings: ListingsMessage['listings']): void {
    if (this.sent) return;
    this.sent = true;
    this.worker?.postMessage({ type: 'listings', listings } satisfies ListingsMessage);
  }

  terminate(): void {
    void this.worker?.terminate();
  }
}

/**
 * Loads a data directory: Property, Media, OpenHouse, PropertyChange, Member and Office records
 * (.jsonl, .jsonl.gz, .json or .json.gz; only Property is required: a resource without a file is
 * empty, and its report says `absent`), accounts.json and mls_profiles.json
 * (optional). Files are streamed, never read whole.
 */
export async function loadDataDirectory(dir: string, options: LoadDirectoryOptions = {}): Promise<Store> {
  let names: Set<string>;
  try {
    names = new Set(readdirSync(dir));
  } catch (err) {
    throw new DataError({ code: 'MissingDataFile', file: dir, line: 0, field: null, reason: `cannot read the data directory (${(err as Error).message})` });
  }
  const files = {} as Record<RecordResourceName, DataFile | null>;
  for (const r of RECORD_RESOURCES) files[r] = findDataFile(dir, r, names);
  if (files.Property === null) {
    throw new DataError({
      code: 'MissingDataFile',
      file: dir,
      line: 0,
      field: null,
      reason: 'the data directory has no Property.jsonl (or .jsonl.gz, .json, .json.gz)',
    });
  }
  const loader = new Loader(options);
  const media = files.Media;
  const mediaBytes = media ? statSync(media.file).size : 0;
  const parallel = media !== null && (options.parallel ?? (availableParallelism() > 1 && mediaBytes >= (media.gzip ? PARALLEL_BYTES / 4 : PARALLEL_BYTES)));
  // the worker loads every child file there is, Media first
  const childFiles: ChildFile[] = [];
  for (const r of parallel ? CHILD_RESOURCES : []) {
    const f = files[r];
    if (f !== null)
      childFiles.push({ resource: r, file: f.file, label: path.basename(f.file), format: f.format, gzip: f.gzip, bytesTotal: statSync(f.file).size });
  }
  const worker = parallel
    ? new ChildWorker(
        {
          kind: WORKER_KIND,
          files: childFiles,
          skipBadRecords: options.skipBadRecords === true,
          fastPath: options.fastPath,
          timed: options.onPhase !== undefined,
          events: options.fastPath !== false,
        },
        (m) => {
          const f = childFiles.find((c) => c.resource === m.resource)!;
          options.onProgress?.({ resource: m.resource, file: f.label, bytesRead: m.bytesRead, bytesTotal: f.bytesTotal, records: m.records });
        },
      )
    : null;
  try {
    await loader.loadFile('Property', files.Property);
    if (worker === null) {
      for (const r of CHILD_RESOURCES) await loader.loadFile(r, files[r]);
      for (const r of ROSTER_RESOURCES) await loader.loadFile(r, files[r]);
      loader.listings();
    } else {
      // Absent children, Member and Office while the worker loads the child files; an error of
      // Member's or Office's is thrown only after the children's, which come first in a
      // sequential load.
      let deferred: unknown = null;
      try {
        for (const r of CHILD_RESOURCES) if (files[r] === null) await loader.loadFile(r, null);
        for (const r of ROSTER_RESOURCES) await loader.loadFile(r, files[r]);
        worker.sendListings(loader.listingsForWorker());
        loader.listings();
      } catch (err) {
        deferred = err;
      }
      worker.sendListings(null);
      const done = await worker.result;
      loader.clock.lap('wait for the worker');
      if (done !== null) for (const p of done.phases) options.onPhase?.(p);
      // In the sequential order: each child the worker loaded and linked cleanly is taken; the
      // first that it did not is loaded here (reporting its error in order), and so are the rest.
      let clean = done !== null;
      for (const f of childFiles) {
        const segment = clean ? done!.segments.find((g) => g.resource === f.resource) : undefined;
        const linked = segment === undefined ? null : loader.linkChild(unpackTable(segment.table, loader.now), segment.links);
        if (segment !== undefined && linked !== null) {
          loader.adopt(f.resource, linked, {
            report: { file: f.label, absent: false, records: linked.rowCount, skipped: segment.skipped, ignoredFields: segment.ignoredFields },
            skipLog: segment.skipLog,
            localFields: segment.localFields,
          });
          loader.bytesRead += segment.bytesRead;
          loader.parallel = true;
        } else {
          clean = false;
          await loader.loadFile(f.resource, files[f.resource]);
        }
      }
      // the worker writes the log only when every event-sourced child linked there
      if (done?.events != null) loader.adoptEvents(unpackTable(done.events.table, loader.now), done.events.ignoredFields);
      loader.clock.lap('children unpack + link');
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows the caught value as it was
      if (deferred !== null) throw deferred;
    }
  } finally {
    worker?.terminate();
  }
  const accounts = readConfig(dir, 'accounts.json', checkAccounts);
  const profiles = readConfig(dir, 'mls_profiles.json', checkProfiles);
  return loader.store(accounts, profiles);
}

/** Loads in-memory records (tests, `Engine.open({ data: records })`). */
export function loadRecords(records: RecordsInput, options: LoadRecordsOptions = {}): Store {
  for (const name of Object.keys(records)) {
    if (!isRecordResource(name)) {
      throw new QueryError(
        'UnknownResource',
        `${name === 'Lookup' || name === 'EntityEvent' ? `No records can be given for '${name}' (the engine writes it itself)` : `Unknown resource '${name}'`}; records can be given for ${RECORD_RESOURCES.join(', ')}.`,
      );
    }
  }
  const loader = new Loader(options);
  for (const resource of RECORD_RESOURCES) {
    const list = records[resource];
    if (list !== undefined && !Array.isArray(list)) {
      throw new DataError({ code: 'BadDataFile', file: `${resource} records`, line: 0, field: null, reason: 'expected an array of records' });
    }
    const b = loader.builder(resource, null);
    if (list) for (let i = 0; i < list.length; i++) b.addValue(list[i], i + 1);
    loader.finish(b, null);
  }
  const accounts = options.accounts === undefined ? null : checkAccounts(options.accounts, 'accounts');
  const profiles = options.profiles === undefined ? null : checkProfiles(options.profiles, 'profiles');
  return loader.store(accounts, profiles);
}

function readConfig(dir: string, name: string, check: (value: unknown, file: string) => unknown): unknown {
  const file = path.join(dir, name);
  if (!existsSync(file)) return null;
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new DataError({ code: 'BadDataFile', file: name, line: 0, field: null, reason: `malformed JSON (${(err as Error).message})` });
  }
  return check(value, name);
}

function bad(file: string, field: string, reason: string): never {
  throw new DataError({ code: 'BadDataFile', file, line: 0, field, reason });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** accounts.json: `{"accounts": [{"username", "password_hash", "sources": [...]}]}` (also checks a snapshot's copy). */
export function checkAccounts(value: unknown, file: string): unknown {
  if (!isObject(value) || !Array.isArray(value.accounts)) bad(file, 'accounts', 'expected an object with an "accounts" array');
  value.accounts.forEach((a: unknown, i: number) => {
    const at = `accounts[${i}]`;
    if (!isObject(a)) bad(file, at, 'expected an object');
    if (typeof a.username !== 'string' || a.username === '') bad(file, `${at}.username`, 'expected a non-empty string');
    if (typeof a.password_hash !== 'string') bad(file, `${at}.password_hash`, 'expected a string');
    if (!Array.isArray(a.sources) || !a.sources.every((s) => typeof s === 'string')) bad(file, `${at}.sources`, 'expected an array of strings');
  });
  return value;
}

/** mls_profiles.json: `{"<code>": {"originating_system_name", ...}}` (also checks a snapshot's copy). */
export function checkProfiles(value: unknown, file: string): unknown {
  if (!isObject(value)) bad(file, '', 'expected an object of profiles by source code');
  for (const [code, p] of Object.entries(value)) {
    if (!isObject(p)) bad(file, code, 'expected an object');
    if (typeof p.originating_system_name !== 'string') bad(file, `${code}.originating_system_name`, 'expected a string');
  }
  return value;
}
