/**
 * What the replicator writes into: a sink holds the local copy of the replicated resources and
 * the replication state, and makes both durable together. `replicate` opens and closes the sinks
 * it makes (a data directory); one passed in stays the caller's to close. Two are implemented:
 * the data directory sink (`directory-sink.ts`) and the engine sink (`engine-sink.ts`: a running
 * Engine through `engine.upsert/remove`, one atomic change per call, the state in memory and
 * saved beside a snapshot).
 */
import type { JsonRecord } from '../generate/listing.js';
import { CATALOG } from '../schema/catalog.js';

/** The resources replication pulls, in the order it pulls them (listings before their children). */
export const REPLICATED_RESOURCES = ['Property', 'Media', 'OpenHouse', 'Member', 'Office'] as const;
export type ReplicatedResource = (typeof REPLICATED_RESOURCES)[number];
export type ReplicatedChild = 'Media' | 'OpenHouse';
/**
 * Resources an upstream may lack: not declared in its `$metadata`, or a 404 for the collection.
 * They are then skipped (their local records left as they are) and the rest replicates.
 */
export const OPTIONAL_RESOURCES: readonly ReplicatedResource[] = ['Member', 'Office'];

export const isReplicatedChild = (resource: ReplicatedResource): resource is ReplicatedChild => resource === 'Media' || resource === 'OpenHouse';

/** Where an incremental pass stopped: the last row applied, in (timestamp, key) order. */
export interface Cursor {
  /** The row's timestamp exactly as the upstream wrote it; null when the row had none. */
  readonly timestamp: string | null;
  readonly key: string;
}

export interface ResourceState {
  /** The field changes are ordered by; null when the upstream has none (a full pass by key each run). */
  readonly field: string | null;
  /** The last row applied; null before the first. */
  readonly cursor: Cursor | null;
}

/** `.replication.json` in a data directory; the engine sink's state (in memory, its state files). */
export interface ReplicationState {
  readonly version: 1;
  /** The upstream's data service root (e.g. `http://host:8080/v1/listings/data`). */
  readonly from: string;
  /** `running` from the start of a run until it completes; a run that finds `running` resumes. */
  readonly status: 'running' | 'complete';
  readonly startedAt: string;
  readonly finishedAt: string | null;
  readonly resources: Readonly<Partial<Record<ReplicatedResource, ResourceState>>>;
  /** Where the upstream's EntityEvent log stood when the last complete run began; absent or null without one. */
  readonly events?: EventsState | null;
}

/**
 * The upstream's EntityEvent log as of the last complete run: the last sequence applied, the
 * record its event names (re-read at the next run: another record or a 404 means the log
 * restarted or was compacted past it), and a fingerprint of the account's sources.
 */
export interface EventsState {
  readonly sequence: number;
  readonly resourceName: string;
  readonly recordKey: string;
  /** `GET /v1/account/resources` answer, as text; another answer means other sources. */
  readonly account: string;
}

/** Whether a saved state's `events` has the right shape (absent, null or an EventsState). */
export function eventsStateOk(e: unknown): boolean {
  if (e === undefined || e === null) return true;
  const v = e as Partial<Record<keyof EventsState, unknown>>;
  return (
    typeof v === 'object' &&
    Number.isSafeInteger(v.sequence) &&
    typeof v.resourceName === 'string' &&
    typeof v.recordKey === 'string' &&
    typeof v.account === 'string'
  );
}

/** Records removed by one `remove` call, per resource (a listing's children go with it). */
export type RemovedCounts = Partial<Record<ReplicatedResource, number>>;

export interface ReplicationSink {
  /** The state saved by the last durable commit, or null for a new target. */
  readState(): Promise<ReplicationState | null> | ReplicationState | null;
  has(resource: ReplicatedResource, key: string): boolean;
  /** Every local key of the resource (a snapshot: the caller may remove while it holds them). */
  keys(resource: ReplicatedResource): string[];
  /** Inserts or replaces records by key. `source` is the upstream URL they came from (for errors). */
  upsert(resource: ReplicatedResource, records: readonly JsonRecord[], source: string): Promise<void> | void;
  /** Removes records by key; removing a listing removes its children too. Absent keys are ignored. */
  remove(resource: ReplicatedResource, keys: readonly string[]): Promise<RemovedCounts> | RemovedCounts;
  /**
   * Records `state` as covering every upsert and remove so far. The sink may defer making it
   * durable (batching writes), but must never persist a state ahead of the data it covers;
   * `final` makes everything durable now.
   */
  commit(state: ReplicationState, final: boolean): Promise<void> | void;
}

/** `YYYY-MM-DDTHH:MM[:SS[.f]]` with `Z` or an offset: a timestamp the loader and the OData grammar take. */
export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,12})?)?(?:Z|[+-]\d{2}:\d{2})$/;

export const keyOf = (resource: ReplicatedResource): string => CATALOG[resource].key;

/**
 * The listing a child record belongs to (OpenHouse.ListingKey; Media.ResourceRecordKey when its
 * ResourceName is 'Property'), as the loader links them; null when the record is not linked to a
 * listing, undefined when it should be but has no key to link by.
 */
export function parentKeyOf(resource: ReplicatedResource, record: JsonRecord): string | null | undefined {
  const link = CATALOG[resource].parent;
  if (link === null) return null;
  if (link.when !== null && record[link.when.field] !== link.when.equals) return null;
  const value = record[link.field];
  return typeof value === 'string' && value !== '' ? value : undefined;
}
