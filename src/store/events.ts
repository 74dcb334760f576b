/**
 * EntityEvent records (RESO RCP-27; DESIGN.md, "EntityEvent"): one per record loaded, upserted
 * or removed, numbered by EntityEventSequence. The loader makes the initial log with
 * `loadEventRecords`; the change writer (src/live/change.ts) appends one event per record a change
 * writes, through the same `eventRecord`.
 */
import { entityEventKey, ENTITY_EVENT_KEY, ENTITY_EVENT_TIME } from '../schema/catalog.js';
import type { EventSourcedName } from '../schema/types.js';
import type { Table } from './table.js';

/** What an event says: the record (resource and key) and the source it belongs to (null: none). */
export interface EventOf {
  readonly resource: EventSourcedName;
  readonly key: string;
  readonly source: string | null;
}

/** The record's path from the service root, as a fetch by key: `Property('K')` (quotes doubled, percent-encoded). */
export function recordUrl(resource: string, key: string): string {
  return `${resource}('${encodeURIComponent(key.replace(/'/g, "''"))}')`;
}

/**
 * The EntityEvent record of an event with its sequence number, written at `atMs` (epoch ms; null
 * for the load's events, so that a data set loads to the same store whenever it is loaded: only
 * the age of a removal matters to compaction, and a load writes none).
 */
export function eventRecord(sequence: number, e: EventOf, atMs: number | null): Record<string, string | number | null> {
  return {
    [ENTITY_EVENT_KEY]: entityEventKey(sequence),
    [ENTITY_EVENT_TIME]: atMs === null ? null : new Date(atMs).toISOString(),
    EntityEventSequence: sequence,
    ResourceName: e.resource,
    ResourceRecordKey: e.key,
    ResourceRecordUrl: recordUrl(e.resource, e.key),
    OriginatingSystemName: e.source,
  };
}

/** The next sequence number after a log's events (1 for an empty log): the log is in sequence order, its newest event last. */
export function nextSequence(log: Table): number {
  if (log.rowCount === 0) return 1;
  const last = log.value(log.rowCount - 1, 'EntityEventSequence');
  return typeof last === 'number' ? last + 1 : log.rowCount + 1;
}

/**
 * The source of a record row: its own OriginatingSystemName (Property, Member, Office), or for a
 * child (Media, OpenHouse) its listing's, `listingRow` (-1: it has none, and the event no source).
 */
export function sourceOf(table: Table, row: number, property: Table, listingRow: number | null): string | null {
  const v = listingRow === null ? table.value(row, 'OriginatingSystemName') : listingRow >= 0 ? property.value(listingRow, 'OriginatingSystemName') : null;
  return typeof v === 'string' ? v : null;
}
