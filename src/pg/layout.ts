/**
 * How a data set is laid out in PostgreSQL (DESIGN.md, "PostgreSQL backend"): one table per
 * resource in the engine's schema (namespace, default `reso`), one column per schema field with
 * the Data Dictionary type mapped exactly, the companion columns the engine needs, the search
 * tokens, the term statistics and the metadata. Every identifier in SQL comes from here: table
 * names from the fixed resource names, column names from the loaded schema's field names (checked
 * to be plain identifiers), never from a query's text.
 *
 * | Edm type                  | column                       | companion                            |
 * |---------------------------|------------------------------|--------------------------------------|
 * | Edm.String                | text COLLATE "C"             |                                      |
 * | Edm.Boolean               | boolean                      |                                      |
 * | Edm.Int16 / Int32         | integer                      |                                      |
 * | Edm.Int64                 | bigint                       |                                      |
 * | Edm.Decimal               | numeric                      |                                      |
 * | Edm.Double                | double precision             |                                      |
 * | Edm.Date                  | date                         |                                      |
 * | Edm.DateTimeOffset        | timestamptz (ms precision)   | `F#text`: the feed's text when it is not the canonical `YYYY-MM-DDTHH:MM:SS.sssZ` |
 * | Edm.GeographyPoint        | geography(Point,4326)        |                                      |
 * | Collection(Edm.String)    | text[] COLLATE "C" (never null: `{}`) |                             |
 * | DaysOnMarket (derived)    | none: computed from service_DaysOnMarketReferenceTimestamp and the clock |  |
 *
 * Property also has, per search field S, `S#tokens` (text[]: the tokens our tokenizer makes of the
 * row's text, address normalization applied, in order, repeats kept) and `S#length` (integer: their
 * count). `#terms` holds per search field and term the number of live listings holding it (with an
 * index on (field, reverse(term)) besides its key, for one-edit look-ups), and
 * `#search` per search field the live listing count N and the total token length, both kept exact
 * by every write in its transaction. `#meta` (json values) holds the layout version, the table schemas, accounts,
 * profiles and the load report.
 */
import { CATALOG } from '../schema/catalog.js';
import { SEARCH_FIELDS, type SearchFieldName } from '../schema/search-fields.js';
import { TableSchema } from '../schema/table-schema.js';
import { makeField } from '../schema/catalog.js';
import { RESOURCE_NAMES, isIntegerType, type EdmType, type FieldDef, type ResourceName } from '../schema/types.js';

/** The layout this build writes and reads. A database with another version is upgraded (src/pg/migrate.ts) or refused. */
export const LAYOUT_VERSION = 1;

export const DEFAULT_PG_SCHEMA = 'reso';

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A field name the layout can use as a column (plain identifier, at most 56 bytes so `#tokens` etc. fit in 63). */
export function isColumnName(name: string): boolean {
  return IDENTIFIER.test(name) && name.length <= 56;
}

/** A double-quoted identifier. Only names checked by isColumnName / checkSchemaName, or fixed names, reach it. */
export function quote(name: string): string {
  if (!/^[A-Za-z_#][A-Za-z0-9_#]*$/.test(name)) throw new Error(`not a layout identifier: ${JSON.stringify(name)}`);
  return `"${name}"`;
}

/** Checks the PostgreSQL schema (namespace) name a caller gives; throws a TypeError for anything but a plain identifier. */
export function checkSchemaName(name: string): string {
  if (!IDENTIFIER.test(name) || name.length > 63)
    throw new TypeError(`postgres.schema must be a plain identifier (letters, digits, _), got ${JSON.stringify(name)}`);
  return name;
}

/** Qualified names of one layout (one PostgreSQL schema). */
export class Layout {
  constructor(readonly schema: string) {
    checkSchemaName(schema);
  }
  /** `"reso"."Property"` */
  table(resource: ResourceName): string {
    return `${quote(this.schema)}.${quote(resource)}`;
  }
  get meta(): string {
    return `${quote(this.schema)}.${quote('#meta')}`;
  }
  get terms(): string {
    return `${quote(this.schema)}.${quote('#terms')}`;
  }
  get search(): string {
    return `${quote(this.schema)}.${quote('#search')}`;
  }
  /**
   * `#first`: per listing replaced or removed since the load, the ModificationTimestamp of its
   * first version (SERVICE.md §2: a replacing version's service_OriginalEntryTimestamp is derived
   * from it), as the in-memory change writer remembers it (src/pg/write.ts).
   */
  get first(): string {
    return `${quote(this.schema)}.${quote('#first')}`;
  }
}

/** The column of a field. */
export function column(field: Pick<FieldDef, 'name'>): string {
  return quote(field.name);
}

/** The companion text column of a DateTimeOffset field. */
export function textColumn(field: Pick<FieldDef, 'name'>): string {
  return quote(`${field.name}#text`);
}

export function tokensColumn(field: SearchFieldName): string {
  return quote(`${field}#tokens`);
}

export function lengthColumn(field: SearchFieldName): string {
  return quote(`${field}#length`);
}

/**
 * A text expression rewritten so that `COLLATE "C"` (code point) order on the result is the
 * UTF-16 code unit order of JavaScript on the original: U+10FFFF becomes U+10FFFF U+0001, and
 * each character of U+E000..U+FFFF is preceded by U+10FFFF, so they sort after every
 * supplementary character as their UTF-16 units do. The rewrite is injective and keeps every other
 * comparison as it was.
 */
export function utf16Order(text: string): string {
  return `(regexp_replace(regexp_replace(${text}, U&'\\+10FFFF', U&'\\+10FFFF\\0001', 'g'), '([\\uE000-\\uFFFF])', U&'\\+10FFFF' || '\\1', 'g') COLLATE "C")`;
}

/** Whether the field is stored (DaysOnMarket is computed). */
export function isStored(field: FieldDef): boolean {
  return !(field.origin === 'derived' && field.name === 'DaysOnMarket');
}

/** The SQL type of a stored field (text columns in the "C" collation: ordinal comparison). */
export function sqlType(field: Pick<FieldDef, 'type' | 'collection'>): string {
  const type = castType(field);
  return field.collection || field.type === 'Edm.String' ? `${type} COLLATE "C"` : type;
}

/** The type of a stored field without collation: the cast of a bind parameter holding its text (`$n::<castType>`). */
export function castType(field: Pick<FieldDef, 'type' | 'collection'>): string {
  if (field.collection) {
    // the loader makes collections of strings only (declared ones and local ones alike)
    if (field.type !== 'Edm.String') throw new Error(`no SQL type for Collection(${field.type})`);
    return 'text[]';
  }
  switch (field.type) {
    case 'Edm.String':
      return 'text';
    case 'Edm.Boolean':
      return 'boolean';
    case 'Edm.Int64':
      return 'bigint';
    case 'Edm.Decimal':
      return 'numeric';
    case 'Edm.Double':
      return 'double precision';
    case 'Edm.Date':
      return 'date';
    case 'Edm.DateTimeOffset':
      return 'timestamptz';
    case 'Edm.GeographyPoint':
      return 'geography(Point,4326)';
    default:
      if (isIntegerType(field.type)) return 'integer';
      throw new Error(`no SQL type for ${String(field.type)}`);
  }
}

/** The columns of one field, as `name type` definitions (none for a computed field): a table's, or those ALTER TABLE adds when a change brings a new field. */
export function fieldColumnDefinitions(resource: ResourceName, f: FieldDef): string[] {
  if (!isStored(f)) return [];
  if (!isColumnName(f.name)) throw new Error(`${resource}.${f.name}: not a column name`);
  const notNull = f.key ? ' NOT NULL' : f.collection ? " NOT NULL DEFAULT '{}'" : '';
  const out = [`${column(f)} ${sqlType(f)}${notNull}`];
  if (!f.collection && f.type === 'Edm.DateTimeOffset') out.push(`${textColumn(f)} text`);
  return out;
}

/**
 * How a table is spread (src/pg/distribution.ts): `local` on one server (single node, or a Citus
 * reference table), `citus` hash-distributed on its listing key (the primary key must hold the
 * distribution column there), `partitioned` hash-partitioned on its listing key into foreign tables
 * (no primary key on the parent: foreign partitions cannot have one), `partition` one worker's
 * partition of such a table (keyed by its own key).
 */
export type TableSpread = 'local' | 'citus' | 'partitioned' | 'partition';

/** The resources spread by listing: Property on its key, its children on their link to it, so a listing and its children share a shard. */
export const SHARDED_RESOURCES: readonly ResourceName[] = RESOURCE_NAMES.filter((r) => r === 'Property' || CATALOG[r].parent !== null);

/** The listing key column a sharded resource is spread on (Property: ListingKey; a child: its link field). */
export function shardColumn(resource: ResourceName): string {
  if (!SHARDED_RESOURCES.includes(resource)) throw new Error(`${resource} is not spread by listing`);
  return CATALOG[resource].parent?.field ?? CATALOG[resource].key;
}

/** The table's columns in order, as `name type` definitions, with the primary key its spread allows. */
export function columnDefinitions(schema: TableSchema, spread: TableSpread = 'local'): string[] {
  const out: string[] = [];
  for (const f of schema.fields) out.push(...fieldColumnDefinitions(schema.resource, f));
  if (schema.resource === 'Property') {
    for (const s of SEARCH_FIELDS) out.push(`${tokensColumn(s)} text[] COLLATE "C" NOT NULL DEFAULT '{}'`, `${lengthColumn(s)} integer NOT NULL DEFAULT 0`);
  }
  const key = column({ name: schema.key });
  if (spread === 'local') {
    out.push(`PRIMARY KEY (${key})`);
    return out;
  }
  // a child table whose data never had its link field still needs the column to be spread on (it stays null: such rows link nothing)
  const link = shardColumn(schema.resource);
  if (schema.field(link) === undefined) out.push(`${column({ name: link })} text COLLATE "C"`);
  if (spread === 'citus') {
    const shard = column({ name: link });
    out.push(`PRIMARY KEY (${shard === key ? key : `${shard}, ${key}`})`);
  }
  if (spread === 'partition') out.push(`PRIMARY KEY (${key})`);
  return out;
}

/**
 * CREATE statements of the whole layout (tables first; indexes come after the load:
 * indexStatements). `spread` says how the sharded resources are spread (the others are always
 * made local; Citus makes them reference tables afterwards, src/pg/distribution.ts).
 */
export function createStatements(layout: Layout, schemas: Readonly<Record<ResourceName, TableSchema>>, spread: TableSpread = 'local'): string[] {
  const out = [
    // geography columns need PostGIS in the database (a no-op where it is there already)
    'CREATE EXTENSION IF NOT EXISTS postgis',
    `CREATE SCHEMA IF NOT EXISTS ${quote(layout.schema)}`,
    // json, not jsonb: the value's text is kept as written (jsonb reorders object keys, and
    // accounts and profiles come back in the order of their files)
    `CREATE TABLE ${layout.meta} (key text PRIMARY KEY, value json NOT NULL)`,
    `CREATE TABLE ${layout.terms} (field text NOT NULL, term text COLLATE "C" NOT NULL, df integer NOT NULL CHECK (df > 0), PRIMARY KEY (field, term))`,
    `CREATE TABLE ${layout.search} (field text PRIMARY KEY, n bigint NOT NULL, total_length bigint NOT NULL)`,
  ];
  for (const r of RESOURCE_NAMES) {
    const s = SHARDED_RESOURCES.includes(r) ? spread : 'local';
    const partitioned = s === 'partitioned' ? ` PARTITION BY HASH (${column({ name: shardColumn(r) })})` : '';
    out.push(`CREATE TABLE ${layout.table(r)} (${columnDefinitions(schemas[r], s).join(', ')})${partitioned}`);
  }
  // epoch ms, NULL when the first version had no ModificationTimestamp (src/pg/write.ts)
  out.push(`CREATE TABLE ${layout.first} (key text COLLATE "C" PRIMARY KEY, modified double precision)`);
  return out;
}

/** Index name: short, fixed-form, unique per table and field. */
function indexName(resource: ResourceName, what: string): string {
  return quote(`${resource}#${what}`.slice(0, 63));
}

/**
 * The indexes, made after the bulk load: B-tree on every sortable scalar field of the top-level
 * resources (hash on free text) and on each child's link and default order, GiST on geography,
 * GIN on the search tokens and on collections, and the reversed terms of `#terms`. A partitioned
 * layout's sharded resources get theirs on each worker's partitions instead (tableIndexStatements).
 */
export function indexStatements(layout: Layout, schemas: Readonly<Record<ResourceName, TableSchema>>, spread: TableSpread = 'local'): string[] {
  const out: string[] = [];
  for (const r of RESOURCE_NAMES) {
    if (spread === 'partitioned' && SHARDED_RESOURCES.includes(r)) continue;
    out.push(...tableIndexStatements(schemas[r], layout.table(r), (what) => indexName(r, what)));
    // on Citus a child's primary key leads with its listing key: a read or delete by the child's own key needs an index of its own
    if (spread === 'citus' && CATALOG[r].parent !== null)
      out.push(`CREATE INDEX ${indexName(r, '#own')} ON ${layout.table(r)} (${column({ name: schemas[r].key })})`);
  }
  // One-edit look-ups find the terms ending like a query word by a range of reversed terms (src/pg/search.ts).
  out.push(`CREATE INDEX ${quote('#terms#reverse')} ON ${layout.terms} (field, reverse(term))`);
  return out;
}

/**
 * The indexes of one resource's table (`table`: its qualified name; `name`: the index name of an
 * indexed thing, or null to let PostgreSQL choose one, as a partition's indexes do).
 */
export function tableIndexStatements(schema: TableSchema, table: string, name: ((what: string) => string) | null): string[] {
  const r = schema.resource;
  const out: string[] = [];
  const index = (what: string): string => `CREATE INDEX ${name === null ? '' : `${name(what)} `}ON ${table}`;
  const parent = CATALOG[r].parent;
  for (const f of schema.fields) {
    if (f.key || !isStored(f)) continue;
    if (f.type === 'Edm.GeographyPoint') {
      out.push(`${index(f.name)} USING gist (${column(f)})`);
    } else if (f.collection) {
      if (r === 'Property') out.push(`${index(f.name)} USING gin (${column(f)})`);
    } else if (parent !== null && f.name === parent.field) {
      const order = CATALOG[r].childOrder.filter((k) => schema.field(k.field) !== undefined);
      // nulls lowest, as the in-memory ChildIndex orders children (src/pg/expand.ts reads them in this order)
      const keys = [
        column(f),
        ...order.map((k) => `${column({ name: k.field })} ${k.descending ? 'DESC NULLS LAST' : 'ASC NULLS FIRST'}`),
        column({ name: schema.key }),
      ];
      out.push(`${index(f.name)} (${keys.join(', ')})`);
    } else if (f.sortable && f.filterable && (r === 'Property' || r === 'Member' || r === 'Office' || r === 'EntityEvent')) {
      // free text (remarks, bios, URLs, identifiers) may be longer than a B-tree entry can be
      // (about 2.7 kB after compression), which would fail the load: a hash index holds only
      // hashes and still serves equality. B-trees keep nulls first, the order's nulls-lowest rule:
      // read forward they give `ASC NULLS FIRST`, backward `DESC NULLS LAST`, both directions of $orderby
      if (f.type === 'Edm.String' && f.freeText) out.push(`${index(f.name)} USING hash (${column(f)})`);
      else out.push(`${index(f.name)} (${column(f)} ASC NULLS FIRST)`);
    }
  }
  // the key in JavaScript's UTF-16 order: what top-level orders end with and keyset pages continue after (src/pg/query.ts)
  if (parent === null) out.push(`${index('#key')} (${utf16Order(column({ name: schema.key }))})`);
  if (r === 'Property') for (const s of SEARCH_FIELDS) out.push(`${index(s)} USING gin (${tokensColumn(s)})`);
  return out;
}

/** A table schema as JSON for `#meta` (declared fields by name, local fields whole). */
export interface SchemaJson {
  readonly resource: ResourceName;
  readonly fields: ReadonlyArray<{ readonly name: string; readonly origin: string; readonly type?: string; readonly collection?: boolean }>;
}

export function schemaToJson(schema: TableSchema): SchemaJson {
  return {
    resource: schema.resource,
    fields: schema.fields.map((f) =>
      f.origin === 'local' ? { name: f.name, origin: f.origin, type: f.type, collection: f.collection } : { name: f.name, origin: f.origin },
    ),
  };
}

/** A table schema back from `#meta`; throws an Error naming what does not fit this build's catalog. */
export function schemaFromJson(resource: ResourceName, value: unknown): TableSchema {
  const json = value as SchemaJson | null;
  if (json === null || typeof json !== 'object' || !Array.isArray(json.fields)) throw new Error(`${resource}: no schema`);
  const declared: FieldDef[] = [];
  const local: FieldDef[] = [];
  for (const f of json.fields as SchemaJson['fields']) {
    if (f.origin === 'local') {
      if (!isColumnName(f.name)) throw new Error(`${resource}.${f.name}: not a column name`);
      const def = makeField({ name: f.name, type: f.type as EdmType, collection: f.collection === true, origin: 'local' });
      castType(def); // throws for a type no column holds
      local.push(def);
    } else {
      const def = CATALOG[resource].field(f.name);
      if (def === undefined || def.origin !== f.origin) throw new Error(`${resource}.${f.name} is not declared by this build of reso-engine`);
      declared.push(def);
    }
  }
  return new TableSchema(resource, CATALOG[resource].key, declared, local);
}
