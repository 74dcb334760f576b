/**
 * Visibility, written once: which rows of a generation a caller sees. A row is visible when it is
 * live in the generation (not replaced or removed) and, for a caller limited to some sources, its
 * OriginatingSystemName (a listing's, a Member's, an Office's, an EntityEvent's: the source of the
 * record it names, kept on the event; a child's: its listing's) is one of them. A child (Media, OpenHouse, PropertyChange) is
 * visible through its listing's live version: its link may point at a replaced version of the
 * listing, whose newest live row then decides. Lookup rows (values, no listing data) are visible to
 * every caller. Queries, changes and the service all use this.
 */
import type { Generation } from '../access/generation.js';
import { CATALOG, entityEventKey } from '../schema/catalog.js';
import type { ResourceName, RosterResourceName } from '../schema/types.js';
import { ParentKeyColumn } from '../store/columns.js';
import type { Table } from '../store/table.js';
import { getBit } from '../util/bits.js';

/** The child table's link to its listing (Property rows per child row), or null when it has none. */
export function parentLinkOf(table: Table): Int32Array | null {
  const parent = CATALOG[table.schema.resource].parent;
  const link = parent === null ? undefined : table.column(parent.field);
  return link instanceof ParentKeyColumn ? link.parentRow : null;
}

/**
 * The live row of the listing a child row links to, or -1 (no listing, or none live): the linked
 * row itself while it is live, else the listing's newest row by key when that one is live.
 */
export function liveParentRow(property: Table, parentRow: Int32Array, child: number, isDead: (row: number) => boolean): number {
  const p = parentRow[child];
  if (p < 0) return -1;
  if (!isDead(p)) return p;
  const now = property.rowOfKey(property.keyOf(p));
  return now >= 0 && !isDead(now) ? now : -1;
}

/**
 * Whether a row of a table that carries its own source (Property, Member, Office) has an
 * OriginatingSystemName among `sources`: dictionary codes when the column is one (always, but for
 * an absurd number of sources), else the value itself. A table without the column shows nothing.
 */
function ownSourceTest(table: Table, sources: readonly string[]): (row: number) => boolean {
  const osn = table.columnOf('OriginatingSystemName', 'dictionary');
  if (osn) {
    const allowed = new Uint8Array(osn.dictionary.length);
    osn.dictionary.forEach((name, code) => {
      if (name !== null && sources.includes(name)) allowed[code] = 1;
    });
    const codes = osn.codes;
    return (row) => allowed[codes[row]] === 1;
  }
  const column = table.column('OriginatingSystemName');
  if (column === undefined) return () => false;
  return (row) => {
    const v = column.json(row, 0);
    return typeof v === 'string' && sources.includes(v);
  };
}

/**
 * The visibility of a table's rows in a generation for a caller's sources (undefined: every
 * source), as a row test; null when every row is visible. Property, Member and Office rows are
 * visible by their own OriginatingSystemName; a child row by its listing's; Lookup rows to everyone.
 */
export function rowVisibility(gen: Generation, table: Table, sources: readonly string[] | undefined): ((row: number) => boolean) | null {
  const dead = gen.access.of(table).dead;
  const alive = dead === null ? null : (row: number): boolean => !getBit(dead, row);
  // Lookup holds lookup values, no record of any source: every caller sees all of it
  if (sources === undefined || table.schema.resource === 'Lookup') return alive;
  if (CATALOG[table.schema.resource].parent === null) {
    const own = ownSourceTest(table, sources);
    return alive === null ? own : (row) => alive(row) && own(row);
  }
  const property = gen.store.Property;
  const allowed = ownSourceTest(property, sources);
  const parent = parentLinkOf(table);
  if (parent === null) return () => false;
  const listings = gen.access.of(property);
  if (listings.dead === null) return (row) => (alive === null || alive(row)) && parent[row] >= 0 && allowed(parent[row]);
  const listingDead = (row: number): boolean => listings.isDead(row);
  return (row) => {
    if (alive !== null && !alive(row)) return false;
    const p = liveParentRow(property, parent, row, listingDead);
    return p >= 0 && allowed(p);
  };
}

/**
 * The live row of the record with this key, or -1. EntityEvent's key is its EntityEventSequence
 * in decimal (`'42'`), found through the table's storage key.
 */
export function liveRowOf(gen: Generation, resource: ResourceName, key: string): number {
  const table = gen.store.table(resource);
  if (resource === 'EntityEvent' && !/^[1-9][0-9]{0,15}$/.test(key)) return -1;
  const row = table.rowOfKey(resource === 'EntityEvent' ? entityEventKey(Number(key)) : key);
  return row >= 0 && !gen.access.of(table).isDead(row) ? row : -1;
}

/** Whether a live record of the resource has this key and is visible to the sources (undefined: every source). */
export function isVisible(gen: Generation, resource: ResourceName, key: string, sources: readonly string[] | undefined): boolean {
  const row = liveRowOf(gen, resource, key);
  if (row < 0) return false;
  const visible = rowVisibility(gen, gen.store.table(resource), sources);
  return visible === null || visible(row);
}

/** The caller's visibility of Member and Office rows (what ListAgent, ListOffice, ... may show), each made on first use. */
export function rosterVisibility(gen: Generation, sources: readonly string[] | undefined): (resource: RosterResourceName) => ((row: number) => boolean) | null {
  const made = new Map<RosterResourceName, ((row: number) => boolean) | null>();
  return (resource) => {
    if (!made.has(resource)) made.set(resource, rowVisibility(gen, gen.store.table(resource), sources));
    return made.get(resource)!;
  };
}
