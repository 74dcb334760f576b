/**
 * What the binder, planner and serializer know about a field: its Edm type, whether it is a lookup
 * or a collection, what queries may do with it and which search fields it feeds.
 */
import type { SearchFieldName } from './search-fields.js';

export const RESOURCE_NAMES = ['Property', 'Media', 'OpenHouse', 'PropertyChange', 'Member', 'Office', 'Lookup', 'EntityEvent'] as const;
export type ResourceName = (typeof RESOURCE_NAMES)[number];
/**
 * The resources whose records a data set holds and changes write: every table but the two the
 * engine writes itself, Lookup (the lookup values the records carry, src/store/lookups.ts) and
 * EntityEvent (one event per record loaded, upserted or removed).
 */
export type RecordResourceName = Exclude<ResourceName, 'Lookup' | 'EntityEvent'>;
export const RECORD_RESOURCES: readonly RecordResourceName[] = ['Property', 'Media', 'OpenHouse', 'PropertyChange', 'Member', 'Office'];
/**
 * The resources EntityEvent logs (DESIGN.md, "EntityEvent"): the ones with an entity set, whose
 * records a consumer can fetch by the event's ResourceRecordUrl. PropertyChange (contained in its
 * listing, no entity set) is not.
 */
export type EventSourcedName = 'Property' | 'Media' | 'OpenHouse' | 'Member' | 'Office';
export const EVENT_SOURCED: readonly EventSourcedName[] = ['Property', 'Media', 'OpenHouse', 'Member', 'Office'];
/** Resources whose records belong to one listing (grouped by it, removed with it). */
export type ChildResourceName = 'Media' | 'OpenHouse' | 'PropertyChange';
export const CHILD_RESOURCES: readonly ChildResourceName[] = ['Media', 'OpenHouse', 'PropertyChange'];
/**
 * The roster resources: top-level like Property (no parent, visible by their own
 * OriginatingSystemName), which listings name by key (ListAgentKey, ListOfficeKey, ...).
 */
export type RosterResourceName = 'Member' | 'Office';
export const ROSTER_RESOURCES: readonly RosterResourceName[] = ['Member', 'Office'];

export function isResourceName(name: string): name is ResourceName {
  return (RESOURCE_NAMES as readonly string[]).includes(name);
}

/** Whether records of this name can be given to a load or a change (every resource but EntityEvent). */
export function isRecordResource(name: string): name is RecordResourceName {
  return (RECORD_RESOURCES as readonly string[]).includes(name);
}

/**
 * A field only the storage sees (EntityEvent's text key): not selectable, filterable or sortable,
 * left out of records, $metadata and binding (a query naming it meets UnknownField).
 */
export function isHiddenField(f: Pick<FieldDef, 'selectable' | 'filterable' | 'sortable'>): boolean {
  return !f.selectable && !f.filterable && !f.sortable;
}

/** Element types a field can have (a collection's type is its element type plus `collection`). */
export type EdmType =
  | 'Edm.String'
  | 'Edm.Boolean'
  | 'Edm.Int16'
  | 'Edm.Int32'
  | 'Edm.Int64'
  | 'Edm.Decimal'
  | 'Edm.Double'
  | 'Edm.Date'
  | 'Edm.DateTimeOffset'
  | 'Edm.GeographyPoint';

/**
 * Where a field comes from: the RESO Data Dictionary, the service's own declared resource
 * (PropertyChange), a value the service derives (SERVICE.md §2), or a local field a data set
 * carries that nothing declares (type inferred at load).
 */
export type FieldOrigin = 'reso' | 'service' | 'derived' | 'local';

export interface FieldDef {
  readonly name: string;
  /** The Edm type; for a collection, the type of its elements. */
  readonly type: EdmType;
  readonly collection: boolean;
  /** The RESO lookup (enumeration) name for lookup fields, e.g. `org.reso.metadata.enums.StandardStatus`. */
  readonly lookup: string | null;
  readonly origin: FieldOrigin;
  /** The resource's key field. */
  readonly key: boolean;
  readonly selectable: boolean;
  readonly filterable: boolean;
  /** Collections and points cannot be ordered by. */
  readonly sortable: boolean;
  /** The search fields (SERVICE.md §2) whose text this field contributes to. */
  readonly searchFields: readonly SearchFieldName[];
  /**
   * Known free text or identifiers (keys, remarks, URLs): stored as text from the first row,
   * without trying a dictionary first. A storage hint only; it changes no query semantics.
   */
  readonly freeText: boolean;
}

/** The OData type name of a field, e.g. `Edm.Decimal` or `Collection(Edm.String)`. */
export function typeName(field: Pick<FieldDef, 'type' | 'collection'>): string {
  return field.collection ? `Collection(${field.type})` : field.type;
}

export function isNumericType(type: EdmType): boolean {
  return type === 'Edm.Int16' || type === 'Edm.Int32' || type === 'Edm.Int64' || type === 'Edm.Decimal' || type === 'Edm.Double';
}

export function isIntegerType(type: EdmType): boolean {
  return type === 'Edm.Int16' || type === 'Edm.Int32' || type === 'Edm.Int64';
}

/** One key of a resource's default child order (SERVICE.md §3, $expand). */
export interface OrderKey {
  readonly field: string;
  readonly descending: boolean;
}

/** How a child resource links to Property. */
export interface ParentLink {
  /** The child field holding the parent's ListingKey. */
  readonly field: string;
  /** The link holds only when this field has this value (Media: ResourceName 'Property'). */
  readonly when: { readonly field: string; readonly equals: string } | null;
}

/** Everything the engine knows about a resource before it sees data. */
export interface ResourceDef {
  readonly name: ResourceName;
  readonly key: string;
  readonly parent: ParentLink | null;
  /** Order of this resource's rows inside an expansion when the request names none (ties by key). */
  readonly childOrder: readonly OrderKey[];
  /** Every declared field (RESO, service and derived), ordered by name. */
  readonly fields: readonly FieldDef[];
  field(name: string): FieldDef | undefined;
}
