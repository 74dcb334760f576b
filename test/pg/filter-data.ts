/**
 * A small loader for the filter suite: an in-memory engine's tables written into a PostgreSQL
 * database with the layout of src/pg/layout.ts (createStatements), values encoded by its rules
 * (numbers as JavaScript writes them, timestamps at millisecond precision with the feed's text
 * beside them, points as EWKT, absent collections as `{}`), in batches through
 * jsonb_populate_recordset. Enough for comparing filters; the real bulk load is src/pg/load.ts.
 */
import pg from 'pg';
import type { Engine } from '../../src/engine.js';
import { column, createStatements, isStored, Layout, textColumn } from '../../src/pg/layout.js';
import { SEARCH_FIELDS } from '../../src/schema/search-fields.js';
import type { TableSchema } from '../../src/schema/table-schema.js';
import { RESOURCE_NAMES, type ResourceName } from '../../src/schema/types.js';
import type { Table } from '../../src/store/table.js';

/** One row as the JSON object jsonb_populate_recordset reads into the table's columns. */
function rowJson(table: Table, row: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of table.schema.fields) {
    if (!isStored(f)) continue;
    const name = JSON.parse(column(f)) as string;
    const c = table.column(f.name);
    if (c === undefined) continue;
    switch (c.kind) {
      case 'timestamp': {
        const ms = c.get(row);
        out[name] = ms === null ? null : new Date(ms).toISOString();
        const text = c.text(row);
        if (text !== null && ms !== null && text !== new Date(ms).toISOString()) out[JSON.parse(textColumn(f)) as string] = text;
        break;
      }
      case 'point': {
        const p = c.get(row);
        out[name] = p === null ? null : `SRID=4326;POINT(${String(p.coordinates[0])} ${String(p.coordinates[1])})`;
        break;
      }
      case 'collection':
        out[name] = c.get(row) ?? [];
        break;
      case 'daysOnMarket':
        break;
      default:
        out[name] = c.json(row);
    }
  }
  // the search columns are not filtered on here (search.text is src/pg/search.ts's)
  if (table.resource === 'Property') for (const s of SEARCH_FIELDS) Object.assign(out, { [`${s}#tokens`]: [], [`${s}#length`]: 0 });
  return out;
}

export interface LoadedDatabase {
  readonly pool: pg.Pool;
  readonly layout: Layout;
  schema(resource: ResourceName): TableSchema;
}

/** Creates the layout in a fresh database and copies the engine's rows of `resources` into it. */
export async function loadEngine(url: string, engine: Engine, resources: readonly ResourceName[]): Promise<LoadedDatabase> {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const layout = new Layout('reso');
  const schemas = Object.fromEntries(RESOURCE_NAMES.map((r) => [r, engine.store.table(r).schema])) as Record<ResourceName, TableSchema>;
  for (const statement of createStatements(layout, schemas)) await pool.query(statement);
  for (const r of resources) {
    const table = engine.store.table(r);
    const batch: Array<Record<string, unknown>> = [];
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      await pool.query(`INSERT INTO ${layout.table(r)} SELECT * FROM jsonb_populate_recordset(NULL::${layout.table(r)}, $1::jsonb)`, [JSON.stringify(batch)]);
      batch.length = 0;
    };
    for (let row = 0; row < table.rowCount; row++) {
      batch.push(rowJson(table, row));
      if (batch.length === 2000) await flush();
    }
    await flush();
    await pool.query(`ANALYZE ${layout.table(r)}`);
  }
  return { pool, layout, schema: (r) => schemas[r] };
}
