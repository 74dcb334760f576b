/**
 * Entry points of the store: `loadDataDirectory` (the data directory of SERVICE.md §6, streamed)
 * and `loadRecords` (in-memory records). Property is loaded first, so that each child record is
 * linked to its listing (or rejected) as it arrives.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { QueryError } from '../errors.js';
import { CATALOG } from '../schema/catalog.js';
import { CHILD_RESOURCES, RESOURCE_NAMES, isResourceName, type ChildResourceName, type ResourceName } from '../schema/types.js';
import { buildChildIndex, type ChildIndex } from './children.js';
import { DataError } from './errors.js';
import { SkipLog, TableBuilder, type LocalFieldInfo } from './ingest.js';
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
}

export interface LoadDirectoryOptions extends LoadOptions {
  /** Called after each chunk read (about every MiB). */
  readonly onProgress?: (progress: LoadProgress) => void;
}

export interface RecordsInput {
  readonly Property?: readonly unknown[];
  readonly Media?: readonly unknown[];
  readonly OpenHouse?: readonly unknown[];
  readonly PropertyChange?: readonly unknown[];
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
function findDataFile(dir: string, resource: ResourceName, names: ReadonlySet<string>): { file: string; format: FileFormat; gzip: boolean } | null {
  const found = EXTENSIONS.filter(([ext]) => names.has(resource + ext));
  if (found.length > 1) {
    throw new DataError({
      code: 'AmbiguousDataFile', file: found.map(([ext]) => resource + ext).join(', '), line: 0, field: null,
      reason: `${resource} has ${found.length} data files; keep one`,
    });
  }
  if (found.length === 0) return null;
  const [ext, format, gzip] = found[0];
  return { file: path.join(dir, resource + ext), format, gzip };
}

class Loader {
  readonly skipLog = new SkipLog();
  readonly tables = {} as Record<ResourceName, Table>;
  readonly reports = {} as Record<ResourceName, ResourceLoadReport>;
  readonly localFields: LocalFieldInfo[] = [];
  readonly now: () => number;
  bytesRead = 0;

  constructor(private readonly options: LoadOptions) {
    this.now = clockOf(options.now);
  }

  builder(resource: ResourceName, file: string | null): TableBuilder {
    const b = new TableBuilder(resource, {
      skipBadRecords: this.options.skipBadRecords === true,
      skipLog: this.skipLog,
      now: this.now,
      parent: resource === 'Property' ? undefined : this.tables.Property,
      fastPath: this.options.fastPath,
    });
    if (file !== null) b.file = file;
    return b;
  }

  finish(b: TableBuilder, file: string | null): void {
    const table = b.finish();
    this.tables[b.resource] = table;
    this.reports[b.resource] = { file, records: table.rowCount, skipped: b.skipped, ignoredFields: b.ignoredFields() };
    this.localFields.push(...b.localFields());
  }

  store(accounts: unknown, profiles: unknown): Store {
    const parentCount = this.tables.Property.rowCount;
    const children = {} as Record<ChildResourceName, ChildIndex>;
    for (const r of CHILD_RESOURCES) {
      const def = CATALOG[r];
      children[r] = buildChildIndex(this.tables[r], parentCount, def.parent!.field, def.childOrder);
    }
    const report = {
      resources: this.reports,
      skipped: { total: this.skipLog.total, byCode: this.skipLog.byCode, samples: this.skipLog.samples },
      localFields: this.localFields,
      bytesRead: this.bytesRead,
    };
    return new Store(this.tables, children, report, accounts, profiles, this.now);
  }
}

/**
 * Loads a data directory: Property, Media, OpenHouse and PropertyChange records (.jsonl,
 * .jsonl.gz, .json or .json.gz; only Property is required), accounts.json and mls_profiles.json
 * (optional). Files are streamed, never read whole.
 */
export async function loadDataDirectory(dir: string, options: LoadDirectoryOptions = {}): Promise<Store> {
  let names: Set<string>;
  try {
    names = new Set(readdirSync(dir));
  } catch (err) {
    throw new DataError({ code: 'MissingDataFile', file: dir, line: 0, field: null, reason: `cannot read the data directory (${(err as Error).message})` });
  }
  const loader = new Loader(options);
  const files = RESOURCE_NAMES.map((r) => [r, findDataFile(dir, r, names)] as const);
  if (files[0][1] === null) {
    throw new DataError({ code: 'MissingDataFile', file: dir, line: 0, field: null, reason: 'the data directory has no Property.jsonl (or .jsonl.gz, .json, .json.gz)' });
  }
  for (const [resource, found] of files) {
    const label = found ? path.basename(found.file) : null;
    const b = loader.builder(resource, label);
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
            options.onProgress?.({ resource, file: label!, bytesRead: n, bytesTotal, records: b.rowCount });
          },
        },
        (src, s, e, line) => b.addBytes(src, s, e, line),
      );
      loader.bytesRead += bytesRead;
    }
    loader.finish(b, label);
  }
  const accounts = readConfig(dir, 'accounts.json', checkAccounts);
  const profiles = readConfig(dir, 'mls_profiles.json', checkProfiles);
  return loader.store(accounts, profiles);
}

/** Loads in-memory records (tests, `Engine.open({ data: records })`). */
export function loadRecords(records: RecordsInput, options: LoadRecordsOptions = {}): Store {
  for (const name of Object.keys(records)) {
    if (!isResourceName(name)) {
      throw new QueryError('UnknownResource', `Unknown resource '${name}'; records can be given for ${RESOURCE_NAMES.join(', ')}.`);
    }
  }
  const loader = new Loader(options);
  for (const resource of RESOURCE_NAMES) {
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

/** accounts.json: `{"accounts": [{"username", "password_hash", "sources": [...]}]}`. */
function checkAccounts(value: unknown, file: string): unknown {
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

/** mls_profiles.json: `{"<code>": {"originating_system_name", ...}}`. */
function checkProfiles(value: unknown, file: string): unknown {
  if (!isObject(value)) bad(file, '', 'expected an object of profiles by source code');
  for (const [code, p] of Object.entries(value)) {
    if (!isObject(p)) bad(file, code, 'expected an object');
    if (typeof p.originating_system_name !== 'string') bad(file, `${code}.originating_system_name`, 'expected a string');
  }
  return value;
}
