/**
 * The query text of the page: OData options as a person writes them (`$filter=City eq 'Seattle'`),
 * one a line or joined with `&`, turned into a percent-encoded query string, and the builder's
 * edits of it (one option set, replaced or removed; a condition added to `$filter`).
 */

/** `[name, value]` pairs of the text; an option starts a line or follows `&` before a `$`. */
export function splitOptions(text) {
  const pairs = [];
  for (const line of text.split('\n')) {
    for (const part of line.split(/&(?=\s*\$)/)) {
      const option = part.trim();
      if (option === '') continue;
      const eq = option.indexOf('=');
      pairs.push(eq < 0 ? [option, ''] : [option.slice(0, eq).trim(), option.slice(eq + 1).trim()]);
    }
  }
  return pairs;
}

/** The percent-encoded query string of the text (no leading `?`). */
export function queryString(text) {
  return splitOptions(text)
    .map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(value)}`)
    .join('&');
}

/** The text with one option set to a value (or removed, for '' or null), one option a line. */
export function setOption(text, name, value) {
  const pairs = splitOptions(text);
  const i = pairs.findIndex(([n]) => n === name);
  if (value === null || value === '') {
    if (i >= 0) pairs.splice(i, 1);
  } else if (i >= 0) {
    pairs[i] = [name, value];
  } else {
    pairs.push([name, value]);
  }
  return pairs.map(([n, v]) => `${n}=${v}`).join('\n');
}

/** The value of an option in the text, or ''. */
export function optionOf(text, name) {
  return splitOptions(text).find(([n]) => n === name)?.[1] ?? '';
}

/** Operators the builder offers for a field kind (metadata.js `kindOf`). */
export const OPERATORS = {
  string: ['eq', 'ne', 'contains', 'startswith', 'endswith'],
  number: ['eq', 'ne', 'gt', 'ge', 'lt', 'le'],
  time: ['eq', 'ne', 'gt', 'ge', 'lt', 'le'],
  boolean: ['eq', 'ne'],
  collection: ['has'],
  geo: ['within'],
  other: ['eq', 'ne'],
};

/** What the value box expects for an operator. */
export function placeholderOf(kind, op) {
  if (kind === 'geo') return 'longitude latitude meters, e.g. -122.3321 47.6062 3000';
  if (kind === 'string' || kind === 'collection') return 'text (quoted for you)';
  if (kind === 'time') return 'e.g. 2025-05-01 or 2025-05-01T00:00:00Z';
  if (kind === 'boolean') return 'true or false';
  return op === 'eq' ? 'a value' : 'a number';
}

const quote = (s) => `'${s.replace(/'/g, "''")}'`;

/** One `$filter` condition for a field, an operator and the value typed, or an Error saying what is wrong with the value. */
export function condition(field, kind, op, raw) {
  const value = raw.trim();
  if (kind === 'geo') {
    const m = /^(-?\d+(?:\.\d+)?)[\s,]+(-?\d+(?:\.\d+)?)[\s,]+(\d+(?:\.\d+)?)$/.exec(value);
    if (!m) return new Error('Give the longitude, latitude and a distance in meters, e.g. -122.3321 47.6062 3000.');
    return `geo.distance(${field}, geography'POINT(${m[1]} ${m[2]})') le ${m[3]}`;
  }
  if (kind === 'collection') return `${field}/any(v: v eq ${quote(value)})`;
  if (kind === 'string') return ['contains', 'startswith', 'endswith'].includes(op) ? `${op}(${field}, ${quote(value)})` : `${field} ${op} ${quote(value)}`;
  if (value === '') return new Error('Type a value first.');
  if (kind === 'boolean' && value !== 'true' && value !== 'false') return new Error('A Boolean field compares with true or false.');
  return `${field} ${op} ${value}`;
}

/** The text with a condition joined to its `$filter` by `and`. */
export function addCondition(text, cond) {
  const current = optionOf(text, '$filter');
  const joined = current === '' ? cond : `${/\bor\b/.test(current) ? `(${current})` : current} and ${cond}`;
  return setOption(text, '$filter', joined);
}

/** A few queries to start from, by resource. */
export const EXAMPLES = [
  {
    label: 'Active Seattle homes, cheapest first',
    resource: 'Property',
    text: "$filter=City eq 'Seattle' and StandardStatus eq 'Active'\n$select=ListingKey,UnparsedAddress,ListPrice,BedroomsTotal,Location\n$orderby=ListPrice asc\n$count=true",
  },
  {
    label: 'Within 3 km of downtown Seattle (map)',
    resource: 'Property',
    text: "$filter=geo.distance(Location, geography'POINT(-122.3321 47.6062)') le 3000\n$select=ListingKey,UnparsedAddress,ListPrice,Location\n$top=50\n$count=true",
  },
  {
    label: 'Text search: granite pool',
    resource: 'Property',
    text: "$filter=search.text(KeywordSearchText,'granite pool')\n$orderby=relevance desc\n$select=ListingKey,City,ListPrice,PublicRemarks\n$count=true",
  },
  {
    label: 'Median list price per city',
    resource: 'Property',
    text: "$filter=PropertyType eq 'Residential'\n$apply=groupby((City),aggregate($count as Listings,ListPrice with median as MedianListPrice))",
  },
  {
    label: 'Active agents by last name',
    resource: 'Member',
    text: "$filter=MemberStatus eq 'Active'\n$orderby=MemberLastName,MemberFirstName\n$select=MemberFullName,MemberMlsId,OfficeName,OriginatingSystemName\n$count=true",
  },
];
