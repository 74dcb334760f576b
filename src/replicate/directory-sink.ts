/**
 * The data directory sink: Property.jsonl, Media.jsonl, OpenHouse.jsonl, Member.jsonl and Office.jsonl (what
 * `Engine.open({ data: dir })` and `reso-engine serve --data` read) plus `.replication.json`, the
 * replication state. accounts.json and mls_profiles.json are optional for the loader: replication
 * neither writes nor touches them.
 *
 * - **In memory**: every record as its JSON line, by key (a Map per resource, in file order;
 *   a replaced record keeps its place, a new one goes to the end), and each child's listing key.
 * - **Flush**: once `flushRecords` changes (default 20,000) or a quarter of the records are
 *   pending, and whenever the replicator says `final`, the changed files are rewritten whole:
 *   written into `.replication-staging/` beside links to the unchanged ones, loaded there with
 *   the engine's own loader (so a record the engine would reject is a BadRecord and nothing is
 *   replaced), then renamed over the old files, then the state is saved. The state on disk is
 *   never ahead of the data: a crash re-fetches at most what was pending.
 * - **Order of renames**: every intermediate directory loads. Listings go first (children never
 *   point at a listing that is not there yet); when listings are removed, a superset file (the
 *   new listings plus the removed ones) goes first, then the children, then the final listings.
 * - A lock file (`.replication.lock`, the owner's pid) keeps two runs out of one directory; a
 *   lock whose process is gone is taken over.
 */
import {
  closeSync,
  fsyncSync,
  linkSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  writeSync,
  createReadStream,
} from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { JsonRecord } from '../generate/listing.js';
import { syncDirectory } from '../snapshot/file.js';
import { DataError } from '../store/errors.js';
import { loadDataDirectory } from '../store/load.js';
import { RECORD_RESOURCES } from '../schema/types.js';
import { ReplicationError } from './errors.js';
import {
  keyOf,
  parentKeyOf,
  REPLICATED_RESOURCES,
  isReplicatedChild,
  TIMESTAMP,
  type RemovedCounts,
  type ReplicatedChild,
  type ReplicatedResource,
  type ReplicationSink,
  type ReplicationState,
  eventsStateOk,
} from './sink.js';

export interface DirectorySinkOptions {
  /** Rewrite the files once this many changes are pending (or a quarter of the records); default 20,000. */
  readonly flushRecords?: number;
  /** Called after each flush with the files rewritten and the records they now hold in all. */
  readonly onFlush?: (files: string[], records: number) => void;
}

export const STATE_FILE = '.replication.json';
const LOCK_FILE = '.replication.lock';
const STAGING_DIR = '.replication-staging';
const CHILDREN: readonly ReplicatedChild[] = ['Media', 'OpenHouse'];
const WRITE_CHUNK = 1 << 20;

const fileOf = (resource: ReplicatedResource): string => `${resource}.jsonl`;

export class DirectorySink implements ReplicationSink {
  private readonly lines = Object.fromEntries(REPLICATED_RESOURCES.map((r) => [r, new Map<string, string>()])) as Record<
    ReplicatedResource,
    Map<string, string>
  >;
  /** Child key → its listing's key (linked children only). */
  private readonly parents = { Media: new Map(), OpenHouse: new Map() } as Record<ReplicatedChild, Map<string, string>>;
  private readonly dirty = new Set<ReplicatedResource>();
  private pending = 0;
  /** Listings changed since the last flush: their lines as last written (for the superset file). */
  private readonly previous = new Map<string, string>();
  /** Listings whose current line has not been written yet. */
  private readonly fresh = new Set<string>();
  /** `resource \t key` → the upstream URL of a pending record, for a BadRecord's message. */
  private readonly sources = new Map<string, string>();
  private saved: ReplicationState | null = null;
  private latest: ReplicationState | null = null;
  private broken = false;
  private locked = false;
  private readonly flushRecords: number;

  private constructor(
    readonly dir: string,
    private readonly options: DirectorySinkOptions,
  ) {
    this.flushRecords = options.flushRecords ?? 20_000;
    if (!Number.isInteger(this.flushRecords) || this.flushRecords < 1)
      throw new ReplicationError('InvalidArgument', `flushRecords takes a positive integer, got ${String(options.flushRecords)}`);
  }

  /** Opens (creating it if absent) and locks a target directory, and reads what it holds. */
  static async open(dir: string, options: DirectorySinkOptions = {}): Promise<DirectorySink> {
    const sink = new DirectorySink(dir, options);
    try {
      mkdirSync(dir, { recursive: true });
    } catch (err) {
      throw new ReplicationError('WriteFailed', `cannot create the target directory ${dir}: ${(err as Error).message}`, { cause: err });
    }
    sink.lock();
    try {
      await sink.read();
    } catch (err) {
      sink.unlock();
      throw err;
    }
    return sink;
  }

  readState(): ReplicationState | null {
    return this.saved;
  }

  has(resource: ReplicatedResource, key: string): boolean {
    return this.lines[resource].has(key);
  }

  keys(resource: ReplicatedResource): string[] {
    return [...this.lines[resource].keys()];
  }

  /** Records held now, per resource (pending changes included). */
  count(resource: ReplicatedResource): number {
    return this.lines[resource].size;
  }

  upsert(resource: ReplicatedResource, records: readonly JsonRecord[], source: string): void {
    const lines = this.lines[resource];
    const field = keyOf(resource);
    for (const record of records) {
      const key = record[field] as string;
      if (resource === 'Property') {
        this.remember(key);
        this.fresh.add(key);
      } else if (isReplicatedChild(resource)) {
        const parent = parentKeyOf(resource, record);
        if (typeof parent === 'string') this.parents[resource].set(key, parent);
        else this.parents[resource].delete(key);
      }
      lines.set(key, JSON.stringify(record));
      this.sources.set(`${resource}\t${key}`, source);
    }
    if (records.length > 0) this.dirty.add(resource);
    this.pending += records.length;
  }

  remove(resource: ReplicatedResource, keys: readonly string[]): RemovedCounts {
    const counts: RemovedCounts = {};
    const drop = (r: ReplicatedResource, key: string): void => {
      if (!this.lines[r].delete(key)) return;
      if (isReplicatedChild(r)) this.parents[r].delete(key);
      this.sources.delete(`${r}\t${key}`);
      counts[r] = (counts[r] ?? 0) + 1;
      this.dirty.add(r);
      this.pending++;
    };
    if (resource !== 'Property') {
      for (const k of keys) drop(resource, k);
      return counts;
    }
    const gone = new Set<string>();
    for (const k of keys) {
      if (!this.lines.Property.has(k)) continue;
      this.remember(k);
      this.fresh.delete(k);
      drop('Property', k);
      gone.add(k);
    }
    // a listing's children go with it
    for (const child of CHILDREN) {
      for (const [ck, pk] of [...this.parents[child]]) if (gone.has(pk)) drop(child, ck);
    }
    return counts;
  }

  async commit(state: ReplicationState, final: boolean): Promise<void> {
    if (this.broken) return;
    this.latest = state;
    const total = REPLICATED_RESOURCES.reduce((n, r) => n + this.lines[r].size, 0);
    if (final || this.pending >= Math.max(this.flushRecords, total / 4)) await this.flush();
    else if (this.dirty.size === 0) this.writeState(state);
  }

  close(): void {
    rmSync(path.join(this.dir, STAGING_DIR), { recursive: true, force: true });
    this.unlock();
  }

  /** Keeps the written line of a listing about to change, once per flush (see the superset file). */
  private remember(key: string): void {
    const line = this.lines.Property.get(key);
    if (line !== undefined && !this.fresh.has(key) && !this.previous.has(key)) this.previous.set(key, line);
  }

  private async flush(): Promise<void> {
    const state = this.latest!;
    // the loader needs Property.jsonl, even empty (an account that sees nothing)
    if (!existsSync(path.join(this.dir, fileOf('Property')))) this.dirty.add('Property');
    if (this.dirty.size === 0) {
      this.writeState(state);
      return;
    }
    const staging = path.join(this.dir, STAGING_DIR);
    const changed = REPLICATED_RESOURCES.filter((r) => this.dirty.has(r));
    try {
      rmSync(staging, { recursive: true, force: true });
      mkdirSync(staging);
      for (const r of REPLICATED_RESOURCES) {
        const target = path.join(staging, fileOf(r));
        if (this.dirty.has(r)) writeLines(target, this.lines[r].values());
        else if (existsSync(path.join(this.dir, fileOf(r)))) linkOrCopy(path.join(this.dir, fileOf(r)), target);
      }
      try {
        await loadDataDirectory(staging, { parallel: false });
      } catch (err) {
        if (err instanceof DataError) throw this.badRecord(err);
        throw err;
      }
      const removedListings = [...this.previous].filter(([k]) => !this.lines.Property.has(k));
      const superset = this.dirty.has('Property') && removedListings.length > 0 && CHILDREN.some((c) => this.dirty.has(c));
      const install = (r: ReplicatedResource): void => renameSync(path.join(staging, fileOf(r)), path.join(this.dir, fileOf(r)));
      if (superset) {
        const tmp = path.join(this.dir, `.Property.jsonl.${process.pid}.tmp`);
        writeLines(
          tmp,
          concat(
            this.lines.Property.values(),
            removedListings.map(([, line]) => line),
          ),
        );
        renameSync(tmp, path.join(this.dir, fileOf('Property')));
      } else if (this.dirty.has('Property')) {
        install('Property');
      }
      for (const c of CHILDREN) if (this.dirty.has(c)) install(c);
      if (superset) install('Property');
      for (const r of REPLICATED_RESOURCES) if (r !== 'Property' && !isReplicatedChild(r) && this.dirty.has(r)) install(r);
      syncDirectory(this.dir);
      this.writeState(state);
    } catch (err) {
      this.broken = true;
      if (err instanceof ReplicationError) throw err;
      throw new ReplicationError('WriteFailed', `cannot write the data files in ${this.dir}: ${(err as Error).message}; the previous files are unchanged`, {
        cause: err,
      });
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
    this.dirty.clear();
    this.pending = 0;
    this.previous.clear();
    this.fresh.clear();
    this.sources.clear();
    this.options.onFlush?.(
      changed.map(fileOf),
      REPLICATED_RESOURCES.reduce((n, r) => n + this.lines[r].size, 0),
    );
  }

  /** The loader's complaint about a staged file, as the record and the URL it came from. */
  private badRecord(err: DataError): ReplicationError {
    const resource = REPLICATED_RESOURCES.find((r) => err.file === fileOf(r));
    let key: string | undefined;
    if (resource !== undefined && err.line > 0) {
      let n = 0;
      for (const k of this.lines[resource].keys()) {
        if (++n === err.line) {
          key = k;
          break;
        }
      }
    }
    const url = resource === undefined || key === undefined ? undefined : this.sources.get(`${resource}\t${key}`);
    const what = key === undefined ? err.file : `${resource} '${key}'`;
    return new ReplicationError('BadRecord', `${what} cannot be stored: ${err.reason}${err.field ? ` (field ${err.field})` : ''}; nothing was written`, {
      url,
      cause: err,
    });
  }

  private writeState(state: ReplicationState): void {
    const file = path.join(this.dir, STATE_FILE);
    const tmp = `${file}.${process.pid}.tmp`;
    try {
      writeLines(tmp, [JSON.stringify(state, null, 2)]);
      renameSync(tmp, file);
      syncDirectory(this.dir);
    } catch (err) {
      rmSync(tmp, { force: true });
      throw new ReplicationError('WriteFailed', `cannot write ${file}: ${(err as Error).message}`, { cause: err });
    }
    this.saved = state;
  }

  private async read(): Promise<void> {
    rmSync(path.join(this.dir, STAGING_DIR), { recursive: true, force: true });
    const names = readdirSync(this.dir);
    for (const name of names) if (/^\..+\.\d+\.tmp$/.test(name)) rmSync(path.join(this.dir, name), { force: true });
    let data = false;
    for (const name of names) {
      const m = /^(\w+)\.(jsonl|json)(\.gz)?$/.exec(name);
      if (m === null || !(RECORD_RESOURCES as readonly string[]).includes(m[1])) continue;
      if (!(REPLICATED_RESOURCES as readonly string[]).includes(m[1]) || m[2] !== 'jsonl' || m[3] !== undefined) {
        throw new ReplicationError(
          'TargetNotReplica',
          `the target ${this.dir} holds ${name}; a replica holds only ${REPLICATED_RESOURCES.map(fileOf).join(', ')}`,
        );
      }
      data = true;
    }
    const stateFile = path.join(this.dir, STATE_FILE);
    if (!existsSync(stateFile)) {
      if (data)
        throw new ReplicationError(
          'TargetNotReplica',
          `the target ${this.dir} holds data files but no ${STATE_FILE}: replicate into an empty or new directory`,
        );
      return;
    }
    this.saved = readState(stateFile);
    for (const r of REPLICATED_RESOURCES) {
      const file = path.join(this.dir, fileOf(r));
      if (existsSync(file)) await this.readFile(r, file);
    }
  }

  private async readFile(resource: ReplicatedResource, file: string): Promise<void> {
    const field = keyOf(resource);
    const input = createReadStream(file, { encoding: 'utf8' });
    let n = 0;
    try {
      for await (const line of createInterface({ input, crlfDelay: Infinity })) {
        n++;
        if (line.trim() === '') continue;
        let record: JsonRecord;
        try {
          record = JSON.parse(line) as JsonRecord;
        } catch (err) {
          throw new ReplicationError('BadState', `${file} line ${n} is not JSON (${(err as Error).message}); the replica was changed by hand`);
        }
        const key = record?.[field];
        if (typeof key !== 'string') throw new ReplicationError('BadState', `${file} line ${n} has no ${field}; the replica was changed by hand`);
        this.lines[resource].set(key, line);
        if (isReplicatedChild(resource)) {
          const parent = parentKeyOf(resource, record);
          if (typeof parent === 'string') this.parents[resource].set(key, parent);
        }
      }
    } finally {
      input.destroy();
    }
  }

  private lock(): void {
    const file = path.join(this.dir, LOCK_FILE);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const fd = openSync(file, 'wx');
        writeSync(fd, String(process.pid));
        closeSync(fd);
        this.locked = true;
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
          throw new ReplicationError('WriteFailed', `cannot create ${file}: ${(err as Error).message}`, { cause: err });
        }
      }
      const owner = Number(readFileSync(file, 'utf8').trim());
      if (Number.isInteger(owner) && owner > 0 && alive(owner)) {
        throw new ReplicationError('TargetLocked', `another replication (process ${owner}) is writing ${this.dir}; if it is not running, delete ${file}`);
      }
      rmSync(file, { force: true });
    }
    throw new ReplicationError('TargetLocked', `cannot lock ${this.dir}: ${file} keeps coming back`);
  }

  private unlock(): void {
    if (!this.locked) return;
    rmSync(path.join(this.dir, LOCK_FILE), { force: true });
    this.locked = false;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readState(file: string): ReplicationState {
  const bad = (why: string): never => {
    throw new ReplicationError('BadState', `${file}: ${why}; delete the directory and replicate again`);
  };
  let state: unknown;
  try {
    state = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    return bad(`unreadable (${(err as Error).message})`);
  }
  const s = state as Partial<Record<keyof ReplicationState, unknown>>;
  if (typeof s !== 'object' || s === null || s.version !== 1) return bad('not a version 1 replication state');
  if (typeof s.from !== 'string' || (s.status !== 'running' && s.status !== 'complete') || typeof s.resources !== 'object' || s.resources === null) {
    return bad('missing from, status or resources');
  }
  if (!eventsStateOk(s.events)) return bad('bad events entry');
  for (const [name, rs] of Object.entries(s.resources as Record<string, unknown>)) {
    const r = rs as { field?: unknown; cursor?: { timestamp?: unknown; key?: unknown } | null };
    const c = r?.cursor;
    const cursorOk =
      c === null ||
      (typeof c === 'object' && typeof c.key === 'string' && (c.timestamp === null || (typeof c.timestamp === 'string' && TIMESTAMP.test(c.timestamp))));
    if (!(REPLICATED_RESOURCES as readonly string[]).includes(name) || (r.field !== null && typeof r.field !== 'string') || !cursorOk)
      return bad(`bad entry for ${name}`);
  }
  return state as ReplicationState;
}

function* concat<T>(a: Iterable<T>, b: Iterable<T>): Generator<T> {
  yield* a;
  yield* b;
}

/** Writes lines (each followed by a newline) in 1 MiB chunks and fsyncs the file. */
function writeLines(file: string, lines: Iterable<string>): void {
  const fd = openSync(file, 'w');
  try {
    let chunk: string[] = [];
    let size = 0;
    for (const line of lines) {
      chunk.push(line, '\n');
      size += line.length + 1;
      if (size >= WRITE_CHUNK) {
        writeAll(fd, Buffer.from(chunk.join('')));
        chunk = [];
        size = 0;
      }
    }
    if (size > 0) writeAll(fd, Buffer.from(chunk.join('')));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function writeAll(fd: number, bytes: Buffer): void {
  for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at, bytes.length - at);
}

function linkOrCopy(from: string, to: string): void {
  try {
    linkSync(from, to);
  } catch {
    copyFileSync(from, to);
  }
}
