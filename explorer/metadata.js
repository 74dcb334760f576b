/**
 * $metadata (CSDL XML) read with the browser's DOMParser: the entity sets the service offers and,
 * for each, its entity type's key and properties (name and Edm type), for the query builder.
 */

const EDM = 'http://docs.oasis-open.org/odata/ns/edm';

/**
 * @typedef {{ name: string, type: string }} Field
 * @typedef {{ name: string, key: string[], fields: Field[] }} EntitySet
 */

/** The entity sets of a $metadata document, in the container's order; throws on XML that is not CSDL. */
export function parseMetadata(xml) {
  const doc = new DOMParser().parseFromString(xml, 'application/xml');
  if (doc.getElementsByTagName('parsererror').length > 0) throw new Error('$metadata is not well-formed XML');
  const types = new Map();
  for (const schema of doc.getElementsByTagNameNS(EDM, 'Schema')) {
    const namespace = schema.getAttribute('Namespace') ?? '';
    for (const type of schema.getElementsByTagNameNS(EDM, 'EntityType')) {
      const key = [...type.getElementsByTagNameNS(EDM, 'PropertyRef')].map((r) => r.getAttribute('Name') ?? '');
      const fields = [...type.getElementsByTagNameNS(EDM, 'Property')].map((p) => ({ name: p.getAttribute('Name') ?? '', type: p.getAttribute('Type') ?? '' }));
      types.set(`${namespace}.${type.getAttribute('Name')}`, { key, fields });
    }
  }
  /** @type {EntitySet[]} */
  const sets = [];
  for (const set of doc.getElementsByTagNameNS(EDM, 'EntitySet')) {
    const type = types.get(set.getAttribute('EntityType') ?? '');
    if (type !== undefined) sets.push({ name: set.getAttribute('Name') ?? '', key: type.key, fields: type.fields });
  }
  if (sets.length === 0) throw new Error('$metadata names no entity sets');
  return sets;
}

/** The kind of comparison a field takes in the builder. */
export function kindOf(type) {
  if (type.startsWith('Collection(')) return 'collection';
  if (type === 'Edm.GeographyPoint' || type === 'Edm.GeometryPoint') return 'geo';
  if (type === 'Edm.Boolean') return 'boolean';
  if (type === 'Edm.String') return 'string';
  if (/^Edm\.(Int16|Int32|Int64|Byte|SByte|Decimal|Double|Single)$/.test(type)) return 'number';
  if (/^Edm\.(Date|DateTimeOffset|TimeOfDay)$/.test(type)) return 'time';
  return 'other';
}
