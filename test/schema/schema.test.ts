import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateListings } from '../../src/generate/dataset.js';
import { CATALOG, DERIVED_PROPERTY_FIELDS, ENTITY_EVENT_KEY, ENTITY_EVENT_TIME } from '../../src/schema/catalog.js';
import { isHiddenField, RESOURCE_NAMES, typeName, type FieldDef } from '../../src/schema/types.js';
import { SEARCH_FIELDS, sourceFieldsOf } from '../../src/schema/search-fields.js';
import { annotationOf, dd, ddLookupTableText, ddTableText, type DdField } from './dd-reference.js';
import { STANDARD_LOOKUPS } from '../../src/schema/lookups.js';

const ddByName = new Map(dd.fields.map((f) => [`${f.resourceName}.${f.fieldName}`, f]));

/** Is our field's type compatible with the Data Dictionary's? */
function compatible(field: FieldDef, ref: DdField): string | null {
  const collection = ref.isCollection === true;
  if (field.collection !== collection) return `collection ${field.collection} vs DD ${collection}`;
  if (ref.type.startsWith('org.reso.metadata.enums.')) {
    if (field.type !== 'Edm.String') return `${field.type} for DD lookup ${ref.type}`;
    if (field.lookup !== ref.type) return `lookup ${field.lookup} vs DD ${ref.type}`;
    return null;
  }
  if (field.lookup !== null) return `lookup ${field.lookup} on DD type ${ref.type}`;
  if (field.type === ref.type) return null;
  // A scale-0 decimal holds integers: Int64 is compatible with it.
  if (field.type === 'Edm.Int64' && ref.type === 'Edm.Decimal' && ref.scale === 0) return null;
  return `${field.type} vs DD ${ref.type}${ref.scale !== undefined ? ` scale ${ref.scale}` : ''}`;
}

describe('schema against the RESO Data Dictionary 2.0', () => {
  it('the committed DD table is what the reference metadata generates', () => {
    const committed = readFileSync(path.resolve(import.meta.dirname, '../../src/schema/dd-2.0.ts'), 'utf8');
    expect(committed).toBe(ddTableText());
  });

  it('the committed DD lookup table is what the reference metadata generates, and reads back as every standard value', () => {
    const committed = readFileSync(path.resolve(import.meta.dirname, '../../src/schema/dd-lookups.ts'), 'utf8');
    expect(committed).toBe(ddLookupTableText());
    const read = [...STANDARD_LOOKUPS].flatMap(([name, values]) => [...values.values()].map((v) => `${name} ${v.legacy} ${v.value}`));
    const reference = dd.lookups.map(
      (l) =>
        `${l.lookupName.replace('org.reso.metadata.enums.', '')} ${annotationOf(l, 'RESO.OData.Metadata.LegacyODataValue')} ${annotationOf(l, 'RESO.OData.Metadata.StandardName')}`,
    );
    expect(read.sort()).toEqual(reference.sort());
    expect(read).toHaveLength(3683);
  });

  it('every RESO field we declare has the DD name and a compatible type', () => {
    let checked = 0;
    const problems: string[] = [];
    for (const resource of RESOURCE_NAMES) {
      for (const field of CATALOG[resource].fields) {
        const ref = ddByName.get(`${resource}.${field.name}`);
        if (field.origin === 'reso') {
          if (!ref) problems.push(`${resource}.${field.name} is not in the DD`);
          else {
            const why = compatible(field, ref);
            if (why) problems.push(`${resource}.${field.name}: ${why}`);
            checked++;
          }
        } else if (ref) {
          // Derived fields that reuse a RESO name (DaysOnMarket) keep a compatible type too.
          const why = compatible(field, ref);
          if (why) problems.push(`${resource}.${field.name} (${field.origin}): ${why}`);
          checked++;
        }
      }
    }
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThan(650);
  });

  it('declares every field of the DD EntityEvent resource (RCP-27), with EntityEventSequence its key for clients', () => {
    const ddNames = dd.fields.filter((f) => f.resourceName === 'EntityEvent').map((f) => f.fieldName);
    expect(ddNames.sort()).toEqual(['EntityEventSequence', 'ResourceName', 'ResourceRecordKey', 'ResourceRecordUrl']);
    for (const name of ddNames) expect(CATALOG.EntityEvent.field(name)?.origin, name).toBe('reso');
  });

  it('declares every scalar and lookup field of Property, Media and OpenHouse in the DD', () => {
    for (const resource of ['Property', 'Media', 'OpenHouse'] as const) {
      const ours = new Set(CATALOG[resource].fields.map((f) => f.name));
      const missing = dd.fields
        .filter(
          (f) =>
            f.resourceName === resource &&
            !f.type.startsWith('Collection(') &&
            !(f.type.startsWith('org.reso.metadata.') && !f.type.startsWith('org.reso.metadata.enums.')),
        )
        .filter((f) => !ours.has(f.fieldName));
      expect(missing.map((f) => f.fieldName)).toEqual([]);
    }
  });

  it('types the fields SERVICE.md §2 names as it says', () => {
    const p = CATALOG.Property;
    expect(typeName(p.field('ListPrice')!)).toBe('Edm.Decimal');
    expect(typeName(p.field('BedroomsTotal')!)).toBe('Edm.Int64');
    expect(typeName(p.field('ModificationTimestamp')!)).toBe('Edm.DateTimeOffset');
    expect(typeName(p.field('ListingContractDate')!)).toBe('Edm.Date');
    expect(p.field('StandardStatus')).toMatchObject({ type: 'Edm.String', lookup: 'org.reso.metadata.enums.StandardStatus', collection: false });
    expect(typeName(p.field('Appliances')!)).toBe('Collection(Edm.String)');
    expect(p.field('Appliances')!.lookup).toBe('org.reso.metadata.enums.Appliances');
    for (const name of ['BathroomsTotalInteger', 'YearBuilt', 'Stories', 'PhotosCount', 'DaysOnMarket']) expect(p.field(name)!.type).toBe('Edm.Int64');
    for (const name of ['Order', 'ImageWidth', 'ImageHeight']) expect(CATALOG.Media.field(name)!.type).toBe('Edm.Int64');
    expect(typeName(p.field('Location')!)).toBe('Edm.GeographyPoint');
    expect(typeName(p.field('RawLocation')!)).toBe('Edm.GeographyPoint');
    expect(p.field('service_OriginalEntryTimestamp')!.type).toBe('Edm.DateTimeOffset');
    expect(p.field('service_DaysOnMarketReferenceTimestamp')!.type).toBe('Edm.DateTimeOffset');
  });
});

describe('resources', () => {
  it('has the keys and parent links of SERVICE.md §2', () => {
    expect(CATALOG.Property.key).toBe('ListingKey');
    expect(CATALOG.Media.key).toBe('MediaKey');
    expect(CATALOG.OpenHouse.key).toBe('OpenHouseKey');
    expect(CATALOG.PropertyChange.key).toBe('PropertyChangeKey');
    expect(CATALOG.Media.parent).toEqual({ field: 'ResourceRecordKey', when: { field: 'ResourceName', equals: 'Property' } });
    expect(CATALOG.OpenHouse.parent).toEqual({ field: 'ListingKey', when: null });
    expect(CATALOG.PropertyChange.parent).toEqual({ field: 'ListingKey', when: null });
    expect(CATALOG.PropertyChange.fields.map((f) => f.name)).toEqual([
      'ChangeType',
      'FieldName',
      'ListingKey',
      'ModificationTimestamp',
      'NewValue',
      'PreviousValue',
      'PropertyChangeKey',
    ]);
    expect(CATALOG.PropertyChange.fields.every((f) => f.origin === 'service')).toBe(true);
  });

  it('marks what queries may do with each field', () => {
    for (const resource of RESOURCE_NAMES) {
      for (const f of CATALOG[resource].fields) {
        expect(f.key).toBe(f.name === CATALOG[resource].key);
        if (f.name === ENTITY_EVENT_KEY || f.name === ENTITY_EVENT_TIME) {
          // EntityEvent's storage key and write time: hidden (queries meet UnknownField; EntityEventSequence is the key clients see)
          expect([resource, isHiddenField(f)]).toEqual(['EntityEvent', true]);
          continue;
        }
        expect(isHiddenField(f)).toBe(false);
        expect(f.selectable).toBe(true);
        expect(f.filterable).toBe(true);
        expect(f.sortable).toBe(!f.collection && f.type !== 'Edm.GeographyPoint');
        expect(f.key).toBe(f.name === CATALOG[resource].key);
      }
    }
    expect(DERIVED_PROPERTY_FIELDS.map((f) => f.name)).toEqual([
      'DaysOnMarket',
      'Location',
      'RawLocation',
      'service_DaysOnMarketReferenceTimestamp',
      'service_OriginalEntryTimestamp',
    ]);
  });

  it('records which search fields each source field feeds', () => {
    for (const sf of SEARCH_FIELDS) {
      for (const source of sourceFieldsOf(sf)) {
        const field = CATALOG.Property.field(source);
        expect(field, source).toBeDefined();
        expect(field!.searchFields).toContain(sf);
      }
    }
    expect(CATALOG.Property.field('PublicRemarks')!.searchFields).toEqual(['KeywordSearchText']);
    expect(CATALOG.Property.field('City')!.searchFields).toEqual(['RawAddressSearchText']);
    expect(CATALOG.Property.field('ListPrice')!.searchFields).toEqual([]);
  });

  it('declares every field the generator emits, with a type its values fit', () => {
    const resources = { Property: 'property', Media: 'media', OpenHouse: 'openHouses', PropertyChange: 'changes' } as const;
    const fits = (f: FieldDef, v: unknown): boolean => {
      if (f.collection) return Array.isArray(v) && v.every((x) => typeof x === 'string');
      if (f.type === 'Edm.String' || f.type === 'Edm.Date' || f.type === 'Edm.DateTimeOffset') return typeof v === 'string';
      if (f.type === 'Edm.Boolean') return typeof v === 'boolean';
      if (f.type === 'Edm.Int64') return Number.isInteger(v);
      return typeof v === 'number';
    };
    for (const l of generateListings({ listings: 300, seed: 'schema' })) {
      for (const [resource, prop] of Object.entries(resources)) {
        const records = (Array.isArray(l[prop]) ? l[prop] : [l[prop]]) as Array<Record<string, unknown>>;
        for (const r of records) {
          for (const [name, value] of Object.entries(r)) {
            const f = CATALOG[resource as keyof typeof resources].field(name);
            expect(f, `${resource}.${name}`).toBeDefined();
            expect(f!.origin, `${resource}.${name}`).not.toBe('derived');
            expect(fits(f!, value), `${resource}.${name} = ${JSON.stringify(value)}`).toBe(true);
          }
        }
      }
    }
  });
});
