/**
 * `$metadata`: the loaded data set's schema as CSDL XML (OData 4.01), valid against the OASIS
 * edmx.xsd/edm.xsd. It says exactly what the store holds: each table's fields in schema order
 * (key first, `Nullable="false"`), RESO lookups annotated with their lookup name, the derived
 * and local fields, the navigation properties Property expands to (collections of children, and
 * the single-valued agents and offices with a referential constraint on their key field when the
 * data carries it), and entity sets for the top-level resources (Lookup among them). Search fields exist only inside search.text and are not declared.
 */
import type { TableSchema } from '../schema/table-schema.js';
import { CATALOG, odataKeyOf, PROPERTY_REFERENCES } from '../schema/catalog.js';
import { lookupNameOf } from '../schema/lookups.js';
import { isHiddenField, type FieldDef, type ResourceName } from '../schema/types.js';

export const NAMESPACE = 'org.reso.metadata';
/** The RESO annotation term for string lookups, declared in its own schema so the document stands alone. */
const LOOKUP_TERM_NAMESPACE = 'RESO.OData.Metadata';

const TOP_LEVEL: readonly ResourceName[] = ['Property', 'Media', 'OpenHouse', 'Member', 'Office', 'Lookup', 'EntityEvent'];
/** Property's navigation properties; `key`: a single-valued one's key field on Property (null: a collection). */
const NAVIGATION: ReadonlyArray<{ name: string; target: ResourceName; contained: boolean; key: string | null }> = [
  { name: 'Media', target: 'Media', contained: false, key: null },
  { name: 'OpenHouse', target: 'OpenHouse', contained: false, key: null },
  { name: 'PreferredMedia', target: 'Media', contained: false, key: null },
  // PropertyChange has no entity set of its own: its records are reached only through a listing
  { name: 'PropertyChange', target: 'PropertyChange', contained: true, key: null },
  ...PROPERTY_REFERENCES.map((r) => ({ name: r.name, target: r.target, contained: false, key: r.field })),
];

/** OData SimpleIdentifier (CSDL): names that are not cannot be addressed and are left out. */
const IDENTIFIER = /^[\p{L}\p{Nl}_][\p{L}\p{Nl}\p{Nd}\p{Mn}\p{Mc}\p{Pc}\p{Cf}]{0,127}$/u;

const escapeXml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => (c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '"' ? '&quot;' : '&apos;'));

function propertyXml(f: FieldDef, key: string): string {
  const type = f.collection ? `Collection(${f.type})` : f.type;
  let attrs = `Name="${escapeXml(f.name)}" Type="${type}"`;
  if (f.name === key) attrs += ' Nullable="false"';
  if (f.type === 'Edm.Decimal') attrs += ' Scale="variable"';
  if (f.type === 'Edm.GeographyPoint') attrs += ' SRID="4326"';
  // the Lookup resource lists the field's values under this same name (schema/lookups.ts)
  const name = lookupNameOf(f);
  if (name === null) return `<Property ${attrs}/>`;
  return `<Property ${attrs}><Annotation Term="${LOOKUP_TERM_NAMESPACE}.LookupName" String="${escapeXml(name)}"/></Property>`;
}

/** `version`: the Edmx Version attribute, '4.01' or, for a client that accepts only 4.0, '4.0' (the document is otherwise the same: it uses nothing 4.01 added). */
export function metadataXml(schemaOf: (resource: ResourceName) => TableSchema, version: '4.0' | '4.01' = '4.01'): string {
  const out: string[] = ['<?xml version="1.0" encoding="utf-8"?>'];
  const line = (depth: number, text: string): void => {
    out.push('  '.repeat(depth) + text);
  };
  line(0, `<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="${version}">`);
  line(1, '<edmx:DataServices>');
  line(2, `<Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="${LOOKUP_TERM_NAMESPACE}">`);
  line(3, '<Term Name="LookupName" Type="Edm.String" AppliesTo="Property"/>');
  line(2, '</Schema>');
  line(2, `<Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="${NAMESPACE}">`);
  for (const resource of ['Property', 'Media', 'OpenHouse', 'PropertyChange', 'Member', 'Office', 'Lookup', 'EntityEvent'] as const) {
    const schema = schemaOf(resource);
    // the key a client sees (EntityEvent: EntityEventSequence; its storage key is hidden), declared even before the data has a value of it
    const key = odataKeyOf(resource);
    const keyField = schema.field(key) ?? CATALOG[resource].field(key)!;
    line(3, `<EntityType Name="${resource}">`);
    line(4, `<Key><PropertyRef Name="${escapeXml(key)}"/></Key>`);
    line(4, propertyXml(keyField, key));
    for (const f of schema.fields) if (IDENTIFIER.test(f.name) && !isHiddenField(f) && f.name !== key) line(4, propertyXml(f, key));
    if (resource === 'Property') {
      for (const n of NAVIGATION) {
        if (n.key === null) {
          line(4, `<NavigationProperty Name="${n.name}" Type="Collection(${NAMESPACE}.${n.target})"${n.contained ? ' ContainsTarget="true"' : ''}/>`);
          continue;
        }
        // single-valued, null when the listing names no record (or one the caller cannot see)
        const open = `<NavigationProperty Name="${n.name}" Type="${NAMESPACE}.${n.target}" Nullable="true"`;
        if (schema.field(n.key) === undefined) line(4, `${open}/>`);
        else {
          line(4, `${open}>`);
          line(5, `<ReferentialConstraint Property="${n.key}" ReferencedProperty="${schemaOf(n.target).key}"/>`);
          line(4, '</NavigationProperty>');
        }
      }
    }
    line(3, '</EntityType>');
  }
  line(3, '<EntityContainer Name="Default">');
  for (const resource of TOP_LEVEL) {
    const bindings = resource === 'Property' ? NAVIGATION.filter((n) => !n.contained) : [];
    if (bindings.length === 0) {
      line(4, `<EntitySet Name="${resource}" EntityType="${NAMESPACE}.${resource}"/>`);
      continue;
    }
    line(4, `<EntitySet Name="${resource}" EntityType="${NAMESPACE}.${resource}">`);
    for (const n of bindings) line(5, `<NavigationPropertyBinding Path="${n.name}" Target="${n.target}"/>`);
    line(4, '</EntitySet>');
  }
  line(3, '</EntityContainer>');
  line(2, '</Schema>');
  line(1, '</edmx:DataServices>');
  line(0, '</edmx:Edmx>');
  return out.join('\n') + '\n';
}

/** The service document's entity sets. */
export function serviceDocument(base: string): { '@odata.context': string; value: Array<{ name: string; kind: 'EntitySet'; url: string }> } {
  return {
    '@odata.context': `${base}/v1/listings/data/$metadata`,
    value: TOP_LEVEL.map((name) => ({ name, kind: 'EntitySet' as const, url: name })),
  };
}
