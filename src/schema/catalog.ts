/**
 * The declared resources of SERVICE.md §2: every RESO Data Dictionary 2.0 field of Property, Media,
 * OpenHouse, Member and Office (so any RESO name a feed carries gets its RESO type), the service's own
 * PropertyChange resource, and the derived fields. A data set's schema (TableSchema) is the part of
 * this catalog its records carry, plus its local fields.
 */
import { SEARCH_FIELDS, sourceFieldsOf, type SearchFieldName } from './search-fields.js';
import { DD_FIELDS } from './dd-2.0.js';
import type { EdmType, FieldDef, FieldOrigin, OrderKey, ParentLink, ResourceDef, ResourceName, RosterResourceName } from './types.js';

/** Ordinal (UTF-16 code unit) comparison, the order OData string comparison uses. */
export function compareOrdinal(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const searchFieldsBySource = new Map<string, SearchFieldName[]>();
for (const sf of SEARCH_FIELDS) {
  for (const source of sourceFieldsOf(sf)) {
    const list = searchFieldsBySource.get(source) ?? [];
    if (!list.includes(sf)) list.push(sf);
    searchFieldsBySource.set(source, list);
  }
}

/** Identifiers and free text that are stored as text from the first row (see FieldDef.freeText). */
const FREE_TEXT = new Set([
  'ListingKey',
  'ListingId',
  'MediaKey',
  'OpenHouseKey',
  'PropertyChangeKey',
  'ResourceRecordKey',
  'OpenHouseId',
  'MediaObjectID',
  'UnparsedAddress',
  'OriginatingSystemKey',
  'SourceSystemKey',
  'ParcelNumber',
]);

export interface FieldInit {
  readonly name: string;
  readonly type: EdmType;
  readonly collection?: boolean;
  readonly lookup?: string | null;
  readonly origin: FieldOrigin;
  readonly key?: boolean;
  readonly freeText?: boolean;
  readonly filterable?: boolean;
  readonly sortable?: boolean;
  /** Storage only (see isHiddenField): not selectable, filterable or sortable. */
  readonly hidden?: boolean;
}

export function makeField(init: FieldInit): FieldDef {
  const collection = init.collection ?? false;
  const point = init.type === 'Edm.GeographyPoint';
  return Object.freeze({
    name: init.name,
    type: init.type,
    collection,
    lookup: init.lookup ?? null,
    origin: init.origin,
    key: init.key ?? false,
    selectable: init.hidden !== true,
    filterable: init.hidden !== true && (init.filterable ?? true),
    sortable: init.hidden !== true && (init.sortable ?? (!collection && !point)),
    searchFields: Object.freeze(searchFieldsBySource.get(init.name) ?? []),
    freeText: init.freeText ?? (init.key === true || FREE_TEXT.has(init.name)),
  });
}

const DD_TYPE: Record<string, EdmType> = {
  String: 'Edm.String',
  Boolean: 'Edm.Boolean',
  Int16: 'Edm.Int16',
  Int32: 'Edm.Int32',
  Int64: 'Edm.Int64',
  Decimal: 'Edm.Decimal',
  Double: 'Edm.Double',
  Date: 'Edm.Date',
  DateTimeOffset: 'Edm.DateTimeOffset',
  Lookup: 'Edm.String',
};

function ddFields(table: string, key: string): FieldDef[] {
  const out: FieldDef[] = [];
  for (const line of table.split('\n')) {
    if (line === '') continue;
    const [name, code, third] = line.split(' ');
    const collection = code.endsWith('*');
    const base = collection ? code.slice(0, -1) : code;
    const type = DD_TYPE[base];
    if (type === undefined) throw new Error(`bad DD table line '${line}'`);
    const lookup = base === 'Lookup' ? `org.reso.metadata.enums.${third}` : null;
    out.push(makeField({ name, type, collection, lookup, origin: 'reso', key: name === key, freeText: third === 'long' ? true : undefined }));
  }
  return out;
}

/** Fields SERVICE.md §2 derives for Property; the loader ignores (and reports) input values of these names. */
export const DERIVED_PROPERTY_FIELDS: readonly FieldDef[] = [
  makeField({ name: 'DaysOnMarket', type: 'Edm.Int64', origin: 'derived' }),
  makeField({ name: 'Location', type: 'Edm.GeographyPoint', origin: 'derived' }),
  makeField({ name: 'RawLocation', type: 'Edm.GeographyPoint', origin: 'derived' }),
  makeField({ name: 'service_DaysOnMarketReferenceTimestamp', type: 'Edm.DateTimeOffset', origin: 'derived' }),
  makeField({ name: 'service_OriginalEntryTimestamp', type: 'Edm.DateTimeOffset', origin: 'derived' }),
];

const PROPERTY_CHANGE_FIELDS: readonly FieldDef[] = [
  makeField({ name: 'ChangeType', type: 'Edm.String', origin: 'service' }),
  makeField({ name: 'FieldName', type: 'Edm.String', origin: 'service' }),
  makeField({ name: 'ListingKey', type: 'Edm.String', origin: 'service' }),
  makeField({ name: 'ModificationTimestamp', type: 'Edm.DateTimeOffset', origin: 'service' }),
  makeField({ name: 'NewValue', type: 'Edm.String', origin: 'service' }),
  makeField({ name: 'PreviousValue', type: 'Edm.String', origin: 'service' }),
  makeField({ name: 'PropertyChangeKey', type: 'Edm.String', origin: 'service', key: true }),
];

/** EntityEvent's storage key: the sequence as 16 zero-padded digits, so key order is sequence order. */
export const ENTITY_EVENT_KEY = 'service_EntityEventKey';

/** When an event was written (hidden: compaction's retention window reads it; RCP-27 has no such field). */
export const ENTITY_EVENT_TIME = 'service_EntityEventTimestamp';

/** The key text of an event sequence number (ENTITY_EVENT_KEY). */
export function entityEventKey(sequence: number): string {
  return String(sequence).padStart(16, '0');
}

/**
 * EntityEvent (RESO RCP-27; DD 2.0 names and types): the key EntityEventSequence, the record's
 * ResourceName and ResourceRecordKey, and ResourceRecordUrl (the record's path from the service
 * root). OriginatingSystemName, the source of the record named (a child's: its listing's), is
 * what visibility reads; it stays on the event when the record is gone. The table's own key is a
 * hidden text field (a Table's key is text), in the same order as the sequence; a hidden timestamp
 * says when the event was written.
 */
const ENTITY_EVENT_FIELDS: readonly FieldDef[] = [
  makeField({ name: 'EntityEventSequence', type: 'Edm.Int64', origin: 'reso' }),
  makeField({ name: 'ResourceName', type: 'Edm.String', origin: 'reso' }),
  makeField({ name: 'ResourceRecordKey', type: 'Edm.String', origin: 'reso' }),
  makeField({ name: 'ResourceRecordUrl', type: 'Edm.String', origin: 'reso', freeText: true }),
  makeField({ name: 'OriginatingSystemName', type: 'Edm.String', origin: 'service' }),
  makeField({ name: ENTITY_EVENT_KEY, type: 'Edm.String', origin: 'service', key: true, hidden: true }),
  makeField({ name: ENTITY_EVENT_TIME, type: 'Edm.DateTimeOffset', origin: 'service', hidden: true }),
];

/** The key an OData client sees (`$metadata` Key, always selected): the table's key, but EntityEvent's EntityEventSequence. */
export function odataKeyOf(resource: ResourceName): string {
  return resource === 'EntityEvent' ? 'EntityEventSequence' : CATALOG[resource].key;
}

function resource(name: ResourceName, key: string, fields: FieldDef[], parent: ParentLink | null, childOrder: OrderKey[]): ResourceDef {
  const sorted = [...fields].sort((a, b) => compareOrdinal(a.name, b.name));
  const byName = new Map(sorted.map((f) => [f.name, f]));
  if (!byName.get(key)?.key) throw new Error(`${name}: key ${key} is not declared as key`);
  return Object.freeze({
    name,
    key,
    parent,
    childOrder: Object.freeze(childOrder),
    fields: Object.freeze(sorted),
    field: (n: string) => byName.get(n),
  });
}

const propertyFields = ddFields(DD_FIELDS.Property, 'ListingKey').filter((f) => !DERIVED_PROPERTY_FIELDS.some((d) => d.name === f.name));

/** The declared resources, by name. */
export const CATALOG: Readonly<Record<ResourceName, ResourceDef>> = Object.freeze({
  Property: resource('Property', 'ListingKey', [...propertyFields, ...DERIVED_PROPERTY_FIELDS], null, []),
  Media: resource(
    'Media',
    'MediaKey',
    ddFields(DD_FIELDS.Media, 'MediaKey'),
    { field: 'ResourceRecordKey', when: { field: 'ResourceName', equals: 'Property' } },
    [{ field: 'Order', descending: false }],
  ),
  OpenHouse: resource('OpenHouse', 'OpenHouseKey', ddFields(DD_FIELDS.OpenHouse, 'OpenHouseKey'), { field: 'ListingKey', when: null }, [
    { field: 'OpenHouseStartTime', descending: false },
  ]),
  PropertyChange: resource('PropertyChange', 'PropertyChangeKey', [...PROPERTY_CHANGE_FIELDS], { field: 'ListingKey', when: null }, [
    { field: 'ModificationTimestamp', descending: true },
  ]),
  Member: resource('Member', 'MemberKey', ddFields(DD_FIELDS.Member, 'MemberKey'), null, []),
  Office: resource('Office', 'OfficeKey', ddFields(DD_FIELDS.Office, 'OfficeKey'), null, []),
  // derived by the engine from the other tables' lookup values (src/store/lookups.ts)
  Lookup: resource('Lookup', 'LookupKey', ddFields(DD_FIELDS.Lookup, 'LookupKey'), null, []),
  EntityEvent: resource('EntityEvent', ENTITY_EVENT_KEY, [...ENTITY_EVENT_FIELDS], null, []),
});

/** A single-valued navigation property of Property: the listing field holding the target's key. */
export interface ReferenceDef {
  readonly name: string;
  readonly field: string;
  readonly target: RosterResourceName;
}

/** Property's agents and offices (SERVICE.md §2), each resolved by key in the Member or Office table. */
export const PROPERTY_REFERENCES: readonly ReferenceDef[] = Object.freeze(
  (['ListAgent', 'BuyerAgent', 'CoListAgent', 'CoBuyerAgent', 'ListOffice', 'BuyerOffice', 'CoListOffice', 'CoBuyerOffice'] as const).map((name) =>
    Object.freeze({ name, field: `${name}Key`, target: name.endsWith('Agent') ? ('Member' as const) : ('Office' as const) }),
  ),
);
