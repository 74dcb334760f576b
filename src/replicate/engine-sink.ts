/**
 * The engine sink: replication into a running Engine through its change API, so a served engine
 * follows an upstream while it answers queries (`reso-engine serve --replicate-from`).
 *
 * - **Changes**: each `upsert` and `remove` call is one atomic change (`engine.upsert` /
 *   `engine.remove`): a query sees a page of the upstream all applied or not at all. A record the
 *   engine rejects is a BadRecord naming its key and the page's URL, and nothing of the page is
 *   applied. A field the engine lacks is added by the change; a value of a type its field cannot
 *   hold is a SchemaMismatch.
 * - **Removals**: `remove('Property', keys)` takes the listings' Media and OpenHouse with them
 *   (the engine does); the children are counted exactly: the live children of each listing,
 *   before the change, that are no longer live after it.
 * - **What becomes of the engine**: a replica of what the token sees upstream. Records the
 *   upstream does not list are removed at the end of the first run (the key listing), whatever the
 *   engine was loaded with; accounts, profiles and PropertyChange are left as they are.
 * - **State and resume**: the state of the last commit is kept in memory, so one sink replicating
 *   run after run (the `serve` loop) is incremental and a failed run resumes from its cursors.
 *   The engine's data lives in memory only, and the state is only valid together with the data it
 *   describes: resuming after a restart needs data at least as new as the state (a state behind
 *   its data is harmless: upserts are by key). Two ways to keep both:
 *   - `save(snapshot)` writes a snapshot of the engine, then the state of the last commit beside
 *     it (`<snapshot>.replication.json`); `EngineSink.openSnapshot(snapshot)` opens the engine
 *     from it and resumes from that state. The pair is never ahead of the snapshot, even after a
 *     crash between the two writes. This is the way to survive a crash.
 *   - `stateFile`: the state is also written (temp file + rename) at every commit, after the
 *     engine applied the changes it covers, and read when the sink starts. It describes the
 *     engine of this process: reuse it only with data that is at least as new, e.g. a snapshot
 *     saved after the last commit (`engine.save` once replication has stopped). A snapshot saved
 *     earlier (a crash during a later run) is older than this file: resuming from the pair
 *     would miss the changes in between, so use `save`/`openSnapshot` for that.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { Engine, type EngineOpenOptions } from '../engine.js';
import type { JsonRecord } from '../generate/listing.js';
import { syncDirectory } from '../snapshot/file.js';
import { DataError } from '../store/errors.js';
import { ReplicationError } from './errors.js';
import {
  keyOf,
  REPLICATED_RESOURCES,
  TIMESTAMP,
  type RemovedCounts,
  type ReplicatedChild,
  type ReplicatedResource,
  type ReplicationSink,
  type ReplicationState,
  eventsStateOk,
} from './sink.js';

export interface EngineSinkOptions {
  /**
   * A file the replication state is written to at every commit and read from when the sink
   * starts. Valid only with engine data at least as new as it (see the file comment); without
   * it the state lives in memory (and in the files `save` writes).
   */
  readonly stateFile?: string;
}

const CHILDREN: readonly ReplicatedChild[] = ['Media', 'OpenHouse'];

export class EngineSink implements ReplicationSink {
  /** The state of the last commit; undefined until read from `stateFile` (or set by openSnapshot). */
  private committed: ReplicationState | null | undefined;
  /** The change being applied, if any (`save` waits for it). */
  private applying: Promise<unknown> | null = null;
  private readonly stateFile: string | null;

  constructor(
    readonly engine: Engine,
    options: EngineSinkOptions = {},
  ) {
    this.stateFile = options.stateFile ?? null;
    if (this.stateFile === null) this.committed = null;
  }

  /** The file `save(snapshot)` writes the state to: `<snapshot>.replication.json`. */
  static stateFileOf(snapshot: string): string {
    return `${snapshot}.replication.json`;
  }

  /**
   * Opens an engine from a snapshot written by `save` and a sink that resumes from the state
   * saved with it (none: the next run starts afresh, and removes what the upstream lacks).
   */
  static async openSnapshot(snapshot: string, options: Omit<EngineOpenOptions, 'data' | 'snapshot'> = {}): Promise<EngineSink> {
    const engine = await Engine.open({ ...options, snapshot });
    const sink = new EngineSink(engine);
    const file = EngineSink.stateFileOf(snapshot);
    sink.committed = existsSync(file) ? readStateFile(file) : null;
    return sink;
  }

  readState(): ReplicationState | null {
    if (this.committed === undefined) this.committed = existsSync(this.stateFile!) ? readStateFile(this.stateFile!) : null;
    return this.committed;
  }

  has(resource: ReplicatedResource, key: string): boolean {
    return this.engine.has(resource, key);
  }

  keys(resource: ReplicatedResource): string[] {
    return this.engine.keys(resource);
  }

  async upsert(resource: ReplicatedResource, records: readonly JsonRecord[], source: string): Promise<void> {
    try {
      await this.track(this.engine.upsert(resource, records));
    } catch (err) {
      if (err instanceof DataError) throw badRecord(resource, records, err, source);
      throw err;
    }
  }

  async remove(resource: ReplicatedResource, keys: readonly string[]): Promise<RemovedCounts> {
    const children = resource === 'Property' ? this.liveChildren(keys) : [];
    const summary = await this.track(this.engine.remove(resource, keys));
    const counts: RemovedCounts = {};
    if (summary.removed > 0) counts[resource] = summary.removed;
    for (const [child, list] of children) {
      let n = 0;
      for (const key of list) if (!this.engine.has(child, key)) n++;
      if (n > 0) counts[child] = n;
    }
    return counts;
  }

  /** The replicator calls this after the change it covers was applied (awaited): the state is never ahead of the engine. */
  commit(state: ReplicationState): void {
    if (this.stateFile !== null) writeStateFile(this.stateFile, state);
    this.committed = state;
  }

  /**
   * Writes a snapshot of the engine (`engine.save`: compacts it first after changes), then the
   * state of the last commit to `<snapshot>.replication.json` (removed when there is none): the
   * pair `openSnapshot` resumes from. Waits for a change being applied; the state is taken with
   * the snapshot, so it never covers more than the snapshot holds. Call it between runs or during
   * one; a run going on keeps going.
   */
  async save(snapshot: string): Promise<{ bytes: number }> {
    while (this.applying !== null) await this.applying.catch(() => undefined);
    const state = this.readState();
    const saved = this.engine.save(snapshot);
    const file = EngineSink.stateFileOf(snapshot);
    if (state === null) rmSync(file, { force: true });
    else writeStateFile(file, state);
    return saved;
  }

  private async track<T>(change: Promise<T>): Promise<T> {
    const done = change.finally(() => {
      if (this.applying === done) this.applying = null;
    });
    this.applying = done;
    return done;
  }

  /** The keys of the live children of these listings, per child resource. */
  private liveChildren(listings: readonly string[]): Array<[ReplicatedChild, Set<string>]> {
    const store = this.engine.store;
    const rows = listings.filter((k) => this.engine.has('Property', k)).map((k) => store.Property.rowOfKey(k));
    return CHILDREN.map((child) => {
      const table = store.table(child);
      const keys = new Set<string>();
      for (const row of rows) {
        for (const c of store.children[child].childrenOf(row)) {
          const key = table.keyOf(c);
          // the child's live version (a replaced child's older row may still be listed)
          if (table.rowOfKey(key) === c && this.engine.has(child, key)) keys.add(key);
        }
      }
      return [child, keys];
    });
  }
}

/** The engine's complaint about a page, as the record and the URL it came from. */
function badRecord(resource: ReplicatedResource, records: readonly JsonRecord[], err: DataError, source: string): ReplicationError {
  // SchemaMismatch names a field, not a record: the first record with a value for it
  const record = err.line > 0 ? records[err.line - 1] : err.field === null ? undefined : records.find((r) => r[err.field!] != null);
  const key = record?.[keyOf(resource)];
  const what = typeof key === 'string' ? `${resource} '${key}'` : `a ${resource} record`;
  const hint = err.code === 'SchemaMismatch' ? ' (a field keeps the type its data gave it)' : '';
  return new ReplicationError(
    'BadRecord',
    `${what} cannot be stored: ${err.reason}${err.field ? ` (field ${err.field})` : ''}${hint}; nothing of the page was applied`,
    { url: source, cause: err },
  );
}

/** Writes the state to a temporary file, syncs it and renames it over `file`. */
function writeStateFile(file: string, state: ReplicationState): void {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    const fd = openSync(tmp, 'w');
    try {
      const bytes = Buffer.from(`${JSON.stringify(state, null, 2)}\n`);
      for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
    syncDirectory(path.dirname(file));
  } catch (err) {
    rmSync(tmp, { force: true });
    throw new ReplicationError('WriteFailed', `cannot write ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** A state file written by this sink, checked for shape (BadState otherwise). */
function readStateFile(file: string): ReplicationState {
  let state: Partial<ReplicationState> | null;
  try {
    state = JSON.parse(readFileSync(file, 'utf8')) as Partial<ReplicationState> | null;
  } catch (err) {
    throw new ReplicationError('BadState', `${file} is unreadable (${(err as Error).message}); delete it to replicate afresh`);
  }
  const cursorOk = (c: unknown): boolean => {
    if (c === null) return true;
    const { key, timestamp } = (c ?? {}) as { key?: unknown; timestamp?: unknown };
    return typeof key === 'string' && (timestamp === null || (typeof timestamp === 'string' && TIMESTAMP.test(timestamp)));
  };
  const ok =
    state !== null &&
    typeof state === 'object' &&
    state.version === 1 &&
    typeof state.from === 'string' &&
    (state.status === 'running' || state.status === 'complete') &&
    typeof state.resources === 'object' &&
    state.resources !== null &&
    eventsStateOk(state.events) &&
    Object.entries(state.resources).every(
      ([r, s]) => (REPLICATED_RESOURCES as readonly string[]).includes(r) && (s?.field === null || typeof s?.field === 'string') && cursorOk(s?.cursor),
    );
  if (!ok) throw new ReplicationError('BadState', `${file} is not a version 1 replication state; delete it to replicate afresh`);
  return state as ReplicationState;
}
